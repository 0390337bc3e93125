// Native frames named from separate debug files: glibc's own local functions, which its stripped
// libc.so.6 leaves out of .dynsym, come from libc6-dbg, found by build ID; a stripped program's
// come from a real debuginfod server (Debian's, started by the test), in the background. Servers
// that stall, trickle, answer with another file, far more than a debug file may be, or less than
// they announced, and a cache that is not flamebpf's alone, each cost one line and no interval.
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "dumps/dump_files.h"
#include "harness.h"
#include "pprof_tool.h"
#include "process.h"
#include "symbolize/debuginfod.h"
#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

// The libc.so.6 that the burner runs with, and the path of its debug file by build ID.
constexpr const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

std::string build_id_debug_path(const std::string& binary)
{
  auto notes = run_process({"/usr/bin/readelf", "-n", binary}, {}, std::chrono::seconds(30));
  auto at = notes.out.find("Build ID: ");
  if (notes.status != 0 || at == std::string::npos)
    return "";
  std::string id = notes.out.substr(at + 10, notes.out.find('\n', at) - at - 10);
  return "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
}

TEST(DebugFiles, GlibcsLocalFunctionsAreNamedFromItsDebugPackage)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  // What makes this a test of the debug file: libc.so.6 itself cannot name start_thread, and
  // libc6-dbg (scripts/install-deps.sh --test) holds its debug file.
  auto symbols = run_process({"/usr/bin/readelf", "-sW", kLibc}, {}, std::chrono::seconds(30));
  ASSERT_EQ(symbols.status, 0) << symbols.err;
  ASSERT_EQ(symbols.out.find(" start_thread\n"), std::string::npos)
      << kLibc << " has a symbol table of its own";
  std::string debug_file = build_id_debug_path(kLibc);
  ASSERT_EQ(::access(debug_file.c_str(), R_OK), 0)
      << "no debug file " << debug_file << " for " << kLibc << ": install libc6-dbg";

  TempDir dir;
  auto burner = copy_burner(dir.path(), "burner_dbg");
  Child workload({burner, "--late-thread", "0.2", "4"});
  wait_until_started(workload.pid(), "burner_dbg");
  std::string out = dir.path().string() + "/out.folded";
  auto run = run_flamebpf({"--pid", std::to_string(workload.pid()), "-d", "3", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  auto roots = late_thread_roots(folded);
  ASSERT_GT(roots.thread, 100u) << hottest_stacks(folded);
  EXPECT_GE(roots.start_thread * 100, roots.thread * 95) << hottest_stacks(folded);
  std::printf("[ FIGURES  ] %llu of %llu samples of the thread reach start_thread, named from %s\n",
              static_cast<unsigned long long>(roots.start_thread),
              static_cast<unsigned long long>(roots.thread), debug_file.c_str());
}

namespace fs = std::filesystem;

// The stripped spinner whose local function only its debug file names.
constexpr const char* kLocalFunction = "elf_spinner_inner";

std::string spinner_variant(const std::string& name)
{
  return std::string(ELF_SPINNERS_DIR) + "/" + name;
}

// A TCP listener on 127.0.0.1 whose every connection is handed to answer, on a thread of its own,
// once the request's headers are in; answer(-1) is never called.
class FakeServer {
public:
  explicit FakeServer(std::function<void(int)> answer) : answer_(std::move(answer))
  {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener_, 16) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      throw std::runtime_error("cannot listen");
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int connection = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0 || stopping_)
          return;
        connections_.push_back(connection);
        std::string request;
        char buffer[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = ::read(connection, buffer, sizeof buffer);
          if (n <= 0)
            break;
          request.append(buffer, static_cast<size_t>(n));
        }
        requests_++;
        answer_(connection);
      }
    });
  }
  ~FakeServer()
  {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
    for (int connection : connections_)
      ::close(connection);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }

private:
  std::function<void(int)> answer_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> requests_{0};
  std::vector<int> connections_;
  std::thread thread_;
};

// Sends text, false once the client has gone (no SIGPIPE).
bool write_all(int fd, const std::string& text)
{
  return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// The value of field (e.g. "VmHWM") in a /proc/<pid>/status text; -1 if it is not there.
long status_field(const std::string& status, const std::string& field)
{
  auto at = status.find("\n" + field + ":");
  return at == std::string::npos ? -1
                                 : std::strtol(status.c_str() + at + field.size() + 2, nullptr, 10);
}

// The peak resident set (VmHWM, in kB) of this process's children running flamebpf, watched
// from a thread of its own: run_process() tells nothing about the child it ran.
class PeakRssWatch {
public:
  PeakRssWatch() : thread_([this] { watch(); }) {}
  ~PeakRssWatch() { stop(); }
  PeakRssWatch(const PeakRssWatch&) = delete;
  PeakRssWatch& operator=(const PeakRssWatch&) = delete;

  // Stops watching; the peak seen.
  long stop()
  {
    stopping_ = true;
    if (thread_.joinable())
      thread_.join();
    return peak_kb_;
  }

private:
  void watch()
  {
    long parent = ::getpid();
    while (!stopping_) {
      std::error_code ignored;
      for (auto it = fs::directory_iterator("/proc", ignored); it != fs::directory_iterator();
           it.increment(ignored)) {
        std::string proc = it->path().string();
        if (read_text(proc + "/comm") != "flamebpf\n")
          continue;
        // A peak only grows: the last one read before the process ends is within a step of its
        // own.
        std::string status = read_text(proc + "/status");
        if (status_field(status, "PPid") == parent)
          peak_kb_ = std::max(peak_kb_, status_field(status, "VmHWM"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::atomic<bool> stopping_{false};
  long peak_kb_ = 0;
  std::thread thread_;
};

// What a failed fetch may leave in a debuginfod cache: libdebuginfod's settings, and its empty
// "debuginfo" that notes a miss. Anything else below cache (a part of an answer above all) is
// returned, one path each.
std::vector<std::string> leftovers(const std::string& cache)
{
  static const std::set<std::string> kSettings = {"cache_clean_interval_s", "max_unused_age_s",
                                                  "cache_miss_s"};
  std::vector<std::string> found;
  std::error_code ignored;
  for (auto it = fs::recursive_directory_iterator(cache, ignored);
       it != fs::recursive_directory_iterator(); it.increment(ignored)) {
    if (it->is_directory())
      continue;
    std::string name = it->path().filename();
    if (kSettings.contains(name) ||
        (name == "debuginfo" && it->is_regular_file() && fs::file_size(it->path()) == 0))
      continue;
    found.push_back(it->path().string());
  }
  return found;
}

class DebuginfodTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    // A copy of its own, with nothing beside it: no local debug file names it.
    program_ = dir_.path().string() + "/spinner";
    fs::copy_file(spinner_variant("elf_spinner.stripped"), program_);
    cache_ = dir_.path().string() + "/cache";
  }

  struct Run {
    ProcessOutput output;
    std::vector<std::map<std::string, uint64_t>> windows; // each interval's folded stacks
    long peak_rss_kb = 0;                                 // flamebpf's
    std::string log() const { return output.out + output.err; }
  };

  // Profiles the spinner for seconds in windows of 1 s, with environment added to the test's.
  Run profile(const std::vector<std::string>& args,
              int seconds,
              const std::vector<std::string>& environment = {})
  {
    Child spinner({program_});
    wait_until_busy(spinner.pid(), "spinner");
    std::string out = dir_.path().string() + "/out-" + std::to_string(++runs_);
    std::vector<std::string> argv{FLAMEBPF_BINARY,
                                  "--pid",
                                  std::to_string(spinner.pid()),
                                  "-d",
                                  std::to_string(seconds),
                                  "--output-dir",
                                  out,
                                  "--interval",
                                  "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    SpawnOptions options;
    std::vector<std::string> env;
    for (char** variable = environ; *variable; ++variable) {
      if (!std::string(*variable).starts_with("DEBUGINFOD_"))
        env.emplace_back(*variable);
    }
    env.insert(env.end(), environment.begin(), environment.end());
    options.environment = env;
    Run run;
    PeakRssWatch peak;
    run.output = run_process(argv, options, std::chrono::seconds(seconds + 30));
    run.peak_rss_kb = peak.stop();
    std::string target =
        out + "/" + dumps::target_directory("spinner-" + std::to_string(spinner.pid()));
    for (const auto& window : dumps::list_dumps(target))
      run.windows.push_back(read_folded(target + "/" + window.files[0]));
    return run;
  }

  // Samples naming the local function, and all, in windows [first, end).
  static std::pair<uint64_t, uint64_t> named(const Run& run, size_t first)
  {
    uint64_t named = 0;
    uint64_t all = 0;
    for (size_t i = first; i < run.windows.size(); ++i) {
      named += count_containing(run.windows[i], kLocalFunction);
      all += total_count(run.windows[i]);
    }
    return {named, all};
  }

  TempDir dir_{"/var/tmp"};
  std::string program_;
  std::string cache_;
  int runs_ = 0;
};

// Debian's debuginfod, serving the spinner's debug file. DEBUGINFOD_URLS in flamebpf's environment
// fetches nothing (it would send every container's build IDs to a server unasked); with
// --debuginfod the frames of the intervals after it arrived are named, the next run finds it in
// the cache, and a cache past its size loses the files used longest ago.
TEST_F(DebuginfodTest, RealServerNamesAStrippedProgram)
{
  std::string served = dir_.path().string() + "/served";
  fs::create_directories(served);
  fs::copy_file(spinner_variant("elf_spinner.debug"), served + "/elf_spinner.debug");
  // A port no one holds now, for the server to take.
  int port = 0;
  {
    FakeServer probe([](int) {});
    port = std::stoi(probe.url().substr(probe.url().rfind(':') + 1));
  }
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  Child server({"/usr/bin/debuginfod", "-F", served, "-d", dir_.path().string() + "/db.sqlite",
                "-p", std::to_string(port)},
               "", dir_.path().string() + "/server.log");
  // Until the server has indexed the file and answers for it.
  auto id = run_process({"/usr/bin/readelf", "-n", program_}, {}, std::chrono::seconds(30));
  std::string build_id = id.out.substr(id.out.find("Build ID: ") + 10, 40);
  SpawnOptions client;
  client.environment = std::vector<std::string>{
      "DEBUGINFOD_URLS=" + url, "DEBUGINFOD_CACHE_PATH=" + dir_.path().string() + "/probe-cache"};
  // Each try with a cache of its own: libdebuginfod remembers a miss for ten minutes.
  int tries = 0;
  wait_until(
      [&] {
        client.environment->back() = "DEBUGINFOD_CACHE_PATH=" + dir_.path().string() +
                                     "/probe-cache-" + std::to_string(++tries);
        return run_process({"/usr/bin/debuginfod-find", "debuginfo", build_id}, client,
                           std::chrono::seconds(10))
                   .status == 0;
      },
      std::chrono::seconds(60), "debuginfod to serve the debug file",
      std::chrono::milliseconds(500));

  auto unasked = profile({"--debuginfod-cache", cache_}, 2, {"DEBUGINFOD_URLS=" + url});
  ASSERT_EQ(unasked.output.status, 0) << unasked.log();
  EXPECT_NE(unasked.log().find("DEBUGINFOD_URLS is set, but debug files are fetched only"),
            std::string::npos)
      << unasked.log();
  EXPECT_FALSE(fs::exists(cache_)) << unasked.log();

  // Three files fetched before, used longest ago, 600 KiB each: with the new one the cache passes
  // its 1 MiB, and the old ones go first.
  std::vector<std::string> old_ids;
  for (char digit : std::string("abc")) {
    old_ids.push_back(std::string(40, digit));
    std::string old = cache_ + "/" + old_ids.back();
    fs::create_directories(old);
    std::ofstream(old + "/debuginfo") << std::string(600 << 10, 'x');
    fs::last_write_time(old + "/debuginfo", fs::file_time_type::clock::now() -
                                                std::chrono::hours(24 * (4 - (digit - 'a'))));
  }
  fs::permissions(cache_, fs::perms::owner_all);
  auto run = profile(
      {"--debuginfod", url, "--debuginfod-cache", cache_, "--debuginfod-cache-size", "1"}, 4);
  ASSERT_EQ(run.output.status, 0) << run.log();
  EXPECT_NE(run.log().find("debug files used longest ago were removed"), std::string::npos)
      << run.log();
  uint64_t held = 0;
  for (const auto& file : fs::recursive_directory_iterator(cache_))
    if (file.is_regular_file())
      held += fs::file_size(file.path());
  EXPECT_LE(held, 1u << 20) << run.log();
  EXPECT_FALSE(fs::exists(cache_ + "/" + old_ids[0])) << "the oldest was kept";
  ASSERT_GE(run.windows.size(), 3u) << run.log();
  EXPECT_NE(run.log().find("debuginfod: fetched the debug file of"), std::string::npos)
      << run.log();
  // The first window's frames ask for the file; it arrives during the second, whose frames are
  // named again at its end, and the windows after it are named as they are symbolized.
  auto [later, all] = named(run, 1);
  EXPECT_GT(all, 100u) << run.log();
  EXPECT_GE(later * 100, all * 95) << run.log();
  EXPECT_TRUE(fs::exists(cache_ + "/" + build_id + "/debuginfo"));

  // A recording is written at its end: its first interval, symbolized before the fetch ended, is
  // named from the debug file that arrived after it.
  {
    Child spinner({program_});
    wait_until_busy(spinner.pid(), "spinner");
    std::string folded = dir_.path().string() + "/recording.folded";
    auto recording = run_process({FLAMEBPF_BINARY, "--pid", std::to_string(spinner.pid()), "-d",
                                  "5", "--interval", "1", "-o", folded, "--debuginfod", url,
                                  "--debuginfod-cache", dir_.path().string() + "/cache-recording"},
                                 {}, std::chrono::seconds(40));
    ASSERT_EQ(recording.status, 0) << recording.out << recording.err;
    EXPECT_NE(recording.err.find("debuginfod: fetched the debug file of"), std::string::npos)
        << recording.err;
    auto stacks = read_folded(folded);
    uint64_t recorded_named = count_containing(stacks, kLocalFunction);
    uint64_t recorded = total_count(stacks);
    EXPECT_GT(recorded, 300u) << recording.err;
    EXPECT_GE(recorded_named * 100, recorded * 95)
        << recorded_named << " of " << recorded << " named\n"
        << recording.err;
    std::printf("[ FIGURES  ] debuginfod, a 5 s recording: %llu of %llu samples named\n",
                static_cast<unsigned long long>(recorded_named),
                static_cast<unsigned long long>(recorded));
  }

  // The server gone, the cache names every window of the next run.
  server.signal(SIGTERM);
  server.wait();
  auto cached = profile({"--debuginfod", url, "--debuginfod-cache", cache_}, 2);
  auto [named_now, all_now] = named(cached, 0);
  EXPECT_GE(named_now * 100, all_now * 95) << cached.log();
  std::printf("[ FIGURES  ] debuginfod: %llu of %llu samples named after the fetch; %llu of %llu "
              "from the cache\n",
              static_cast<unsigned long long>(later), static_cast<unsigned long long>(all),
              static_cast<unsigned long long>(named_now), static_cast<unsigned long long>(all_now));
}

// What flamebpf cannot name, pprof's readers may: a stripped program's frames are addresses
// (offsets in the file) in a mapping with the file's build ID, as `go tool pprof -raw` shows them.
TEST_F(DebuginfodTest, UnnamedFramesAreAddressesInAMappingWithTheBuildId)
{
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go is not on PATH: install golang-go";
  Child spinner({program_});
  wait_until_busy(spinner.pid(), "spinner");
  std::string pprof = dir_.path().string() + "/spinner.pb.gz";
  auto run =
      run_process({FLAMEBPF_BINARY, "--pid", std::to_string(spinner.pid()), "-d", "1", "-o", pprof},
                  {}, std::chrono::seconds(30));
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  auto id = run_process({"/usr/bin/readelf", "-n", program_}, {}, std::chrono::seconds(30));
  std::string build_id = id.out.substr(id.out.find("Build ID: ") + 10, 40);
  PprofTool tool(go, dir_.path().string());
  std::string raw = tool.run({"-raw"}, pprof);
  // "Mappings" lines: id: start/limit/offset file build-ID [flags]; the program's names none.
  std::string mapping_line;
  std::istringstream lines(raw.substr(raw.find("Mappings")));
  for (std::string line; std::getline(lines, line);)
    if (line.find(program_) != std::string::npos)
      mapping_line = line;
  ASSERT_FALSE(mapping_line.empty()) << raw;
  EXPECT_NE(mapping_line.find(build_id), std::string::npos) << mapping_line;
  EXPECT_EQ(mapping_line.find("[FN]"), std::string::npos) << "its functions are not all named";
  std::string mapping_id = mapping_line.substr(0, mapping_line.find(':'));
  mapping_id.erase(0, mapping_id.find_first_not_of(' '));
  // "Locations" lines: "id: 0xaddress M=mapping [function file:line s=0]..."; the program's have
  // an address and no function.
  size_t unnamed = 0;
  std::istringstream locations(
      raw.substr(raw.find("Locations"), raw.find("Mappings") - raw.find("Locations")));
  for (std::string line; std::getline(locations, line);) {
    line.erase(line.find_last_not_of(' ') + 1);
    if (!line.ends_with(" M=" + mapping_id))
      continue;
    EXPECT_EQ(line.find(": 0x0 "), std::string::npos) << line;
    ++unnamed;
  }
  EXPECT_GT(unnamed, 2u) << raw;
}

// A server that never answers, and one that answers a byte at a time: each costs one warning, the
// run ends on time with every interval, and nothing is left in the cache.
TEST_F(DebuginfodTest, StalledAndTricklingServersCostOneLineAndNoInterval)
{
  FakeServer silent([](int) {});
  std::atomic<bool> done{false};
  FakeServer trickle([&](int connection) {
    write_all(connection, "HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n");
    for (int i = 0; i < 200 && !done; ++i) {
      if (!write_all(connection, "x"))
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (const FakeServer* server : {&silent, &trickle}) {
    auto started = std::chrono::steady_clock::now();
    // A cache each: libdebuginfod remembers a failed fetch for ten minutes.
    std::string cache = cache_ + (server == &silent ? "-silent" : "-trickle");
    auto run = profile(
        {"--debuginfod", server->url(), "--debuginfod-cache", cache, "--debuginfod-timeout", "2"},
        4);
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    ASSERT_EQ(run.output.status, 0) << run.log();
    EXPECT_GE(server->requests(), 1) << run.log();
    EXPECT_GE(run.windows.size(), 4u) << run.log();
    auto warnings = lines_with(run.log(), "debuginfod: cannot fetch");
    EXPECT_EQ(warnings.size(), 1u) << run.log();
    EXPECT_EQ(count_containing(run.windows.back(), kLocalFunction), 0u);
    // The whole run: its 4 s, starting and stopping, not a fetch's time-out more.
    EXPECT_LT(took.count(), 4 + 8) << run.log();
    std::printf("[ FIGURES  ] %s server: run of 4 s took %.2f s; %s\n",
                server == &silent ? "silent" : "trickling", took.count(),
                warnings.empty() ? "" : warnings[0].c_str());
  }
  done = true;
  for (const auto& entry : fs::recursive_directory_iterator(dir_.path()))
    EXPECT_FALSE(entry.is_regular_file() && entry.path().filename() == "debuginfo" &&
                 fs::file_size(entry.path()) > 0)
        << entry.path();
}

// A server that answers with another ELF file: its build ID is not the program's, so it names
// nothing, and that is said.
TEST_F(DebuginfodTest, AnswerWithAnotherBuildIdIsRefused)
{
  std::string other;
  {
    std::ifstream in(FLAMEBPF_UNWIND_FIXTURE_FP, std::ios::binary);
    other.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  FakeServer wrong([&](int connection) {
    write_all(connection, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(other.size()) +
                              "\r\nConnection: close\r\n\r\n" + other);
    ::shutdown(connection, SHUT_WR);
  });
  auto run = profile({"--debuginfod", wrong.url(), "--debuginfod-cache", cache_}, 4);
  ASSERT_EQ(run.output.status, 0) << run.log();
  auto said = lines_with(run.log(), "is not its debug file");
  ASSERT_EQ(said.size(), 1u) << run.log();
  EXPECT_NE(said[0].find("removed from the cache"), std::string::npos) << said[0];
  auto [named_samples, all] = named(run, 0);
  EXPECT_GT(all, 100u);
  EXPECT_EQ(named_samples, 0u) << run.log();
  // Not kept: nothing of it is in the cache for the next run.
  for (const auto& entry : fs::recursive_directory_iterator(cache_))
    EXPECT_FALSE(entry.path().filename() == "debuginfo" && fs::file_size(entry.path()) > 0)
        << entry.path();
}

// A cache below a directory another user may write, or reached through a link: no fetch at all,
// one line, and nothing written where the link points.
TEST_F(DebuginfodTest, CacheThatIsNotFlamebpfsAloneIsRefused)
{
  std::string elsewhere = dir_.path().string() + "/elsewhere";
  fs::create_directories(elsewhere);
  std::string link = dir_.path().string() + "/link";
  fs::create_symlink(elsewhere, link);
  std::string shared = dir_.path().string() + "/shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms(0777));
  FakeServer server([](int) {});
  for (const std::string& cache : {link + "/cache", shared + "/cache"}) {
    auto run = profile({"--debuginfod", server.url(), "--debuginfod-cache", cache}, 2);
    ASSERT_EQ(run.output.status, 0) << run.log();
    auto said = lines_with(run.log(), "debuginfod: no debug files are fetched");
    ASSERT_EQ(said.size(), 1u) << run.log();
    EXPECT_NE(said[0].find("cannot be trusted"), std::string::npos) << said[0];
    EXPECT_GE(run.windows.size(), 2u) << run.log();
  }
  EXPECT_TRUE(fs::is_empty(elsewhere));
  EXPECT_FALSE(fs::exists(shared + "/cache"));
  EXPECT_EQ(server.requests(), 0);
}

// Servers whose answer is far larger than flamebpf takes a debug file to be: one that announces
// 100 GB (refused on its headers) and one that streams without end (cut at the limit). Each costs
// one warning, flamebpf's memory stays far below the answer, every interval is written, and
// nothing of the answer is kept: not in the cache, not beside it.
TEST_F(DebuginfodTest, HugeAnswersCostOneLineAndBoundedMemory)
{
  const uint64_t limit = symbolize::DebuginfodOptions{}.max_file_bytes;
  const std::string block(1 << 20, 'x');
  // Bytes each server sent before the client went away; it gives up at twice the limit.
  auto stream = [&](int connection, const std::string& headers, std::atomic<uint64_t>& sent) {
    if (!write_all(connection, headers))
      return;
    while (sent < 2 * limit && write_all(connection, block))
      sent += block.size();
  };
  std::atomic<uint64_t> announced_sent{0};
  FakeServer announced([&](int connection) {
    stream(connection, "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n", announced_sent);
  });
  std::atomic<uint64_t> endless_sent{0};
  FakeServer endless([&](int connection) {
    stream(connection, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", endless_sent);
  });

  for (const FakeServer* server : {&announced, &endless}) {
    bool is_endless = server == &endless;
    std::string cache = cache_ + (is_endless ? "-endless" : "-announced");
    // Long enough for the endless answer to reach the limit (2 s here), which must cut it well
    // before the fetch's deadline, 30 s, or the run's end would.
    int seconds = is_endless ? 6 : 3;
    auto run = profile({"--debuginfod", server->url(), "--debuginfod-cache", cache}, seconds);
    ASSERT_EQ(run.output.status, 0) << run.log();
    EXPECT_EQ(server->requests(), 1) << run.log();
    EXPECT_GE(run.windows.size(), static_cast<size_t>(seconds)) << run.log();
    auto warnings = lines_with(run.log(), "debuginfod: cannot fetch");
    EXPECT_EQ(warnings.size(), 1u) << run.log();
    EXPECT_EQ(named(run, 0).first, 0u) << run.log();
    EXPECT_LT(run.peak_rss_kb * 1024, static_cast<long>(limit / 4)) << run.log();
    EXPECT_GT(run.peak_rss_kb, 0) << "flamebpf's peak RSS was not seen";
    EXPECT_EQ(leftovers(cache), std::vector<std::string>{});
    uint64_t sent = is_endless ? endless_sent.load() : announced_sent.load();
    if (is_endless) {
      // The limit cut it, and soon: what the socket buffers hold is all it overran.
      EXPECT_GE(sent, limit);
      EXPECT_LT(sent, limit + (64 << 20));
    }
    std::printf("[ FIGURES  ] %s answer: %llu MiB sent, flamebpf peak RSS %ld MB; %s\n",
                is_endless ? "endless" : "100 GB", static_cast<unsigned long long>(sent >> 20),
                run.peak_rss_kb >> 10, warnings.empty() ? "" : warnings[0].c_str());
  }
  // Nothing written outside the caches but flamebpf's windows.
  for (const auto& entry : fs::recursive_directory_iterator(dir_.path())) {
    std::string path = entry.path().string();
    EXPECT_TRUE(entry.is_directory() || path == program_ || path.starts_with(cache_ + "-") ||
                path.starts_with(dir_.path().string() + "/out-"))
        << path;
  }
}

// A server that announces the whole debug file and sends half of it before it closes the
// connection: one warning, nothing named from it, nothing of it kept, and sampling goes on.
TEST_F(DebuginfodTest, TruncatedAnswerCostsOneLineAndNamesNothing)
{
  std::string debug_file;
  {
    std::ifstream in(spinner_variant("elf_spinner.debug"), std::ios::binary);
    debug_file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(debug_file.size(), 4096u);
  FakeServer truncating([&](int connection) {
    write_all(connection,
              "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(debug_file.size()) +
                  "\r\n\r\n" + debug_file.substr(0, debug_file.size() / 2));
    ::shutdown(connection, SHUT_RDWR);
  });
  auto run = profile({"--debuginfod", truncating.url(), "--debuginfod-cache", cache_}, 4);
  ASSERT_EQ(run.output.status, 0) << run.log();
  EXPECT_EQ(truncating.requests(), 1) << run.log();
  EXPECT_GE(run.windows.size(), 4u) << run.log();
  auto warnings = lines_with(run.log(), "debuginfod: cannot fetch");
  ASSERT_EQ(warnings.size(), 1u) << run.log();
  EXPECT_NE(warnings[0].find("ended before the length the server announced"), std::string::npos)
      << warnings[0];
  auto [named_samples, all] = named(run, 0);
  EXPECT_GT(all, 100u) << run.log();
  EXPECT_EQ(named_samples, 0u) << run.log();
  EXPECT_EQ(leftovers(cache_), std::vector<std::string>{});
}

} // namespace
} // namespace flamebpf::testing
