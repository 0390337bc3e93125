// --listen in agent mode against the real kernel: `go tool pprof` (the real client) fetches a
// range of the dumps and finds what `flamebpf merge` writes for it, and a profile of the next
// seconds with the workload's known split, as scrapers ask for it too; python3-prometheus-client's
// parser reads /metrics; hostile clients (a thousand that never finish a request, a 10 MB request
// line, wrong tokens, names that climb out of the output directory) leave the dumps on time and
// the next good request answered.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "dumps/dump_files.h"
#include "harness.h"
#include "http_client.h"
#include "pprof_tool.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;

// s with every byte but the unreserved ones percent-encoded, for a URL's path or query.
std::string url_encoded(const std::string& s)
{
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

#ifdef FLAMEBPF_SANITIZED
// ASan's shadow memory and quarantine hold about four times what flamebpf itself does.
constexpr long kRequestsPeakKib = 320 * 1024;
#else
// What the heavy requests may add to flamebpf's peak memory.
constexpr long kRequestsPeakKib = 64 * 1024;
#endif

// The process's peak resident memory so far (VmHWM), in KiB.
long peak_resident_kib(pid_t pid)
{
  std::istringstream status(read_text("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:"))
      return std::stol(line.substr(6));
  return -1;
}

class ServeTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    out_ = dir_.path().string() + "/dumps";
    log_ = dir_.path().string() + "/agent.log";
  }

  // Starts the agent on the cgroup with 1 s intervals, listening on a port of the kernel's
  // choice with extra options; the port.
  uint16_t start_agent(const TempCgroup& cgroup, const std::vector<std::string>& extra = {})
  {
    std::vector<std::string> argv{FLAMEBPF_BINARY, "--cgroup", cgroup.path(), "--output-dir", out_,
                                  "--interval",    "1",        "--listen",    "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    agent_.emplace(argv, "", log_);
    EXPECT_TRUE(wait_for_text(log_, "serving the dumps", 30)) << read_text(log_);
    std::smatch match;
    std::string log = read_text(log_);
    if (!std::regex_search(log, match, std::regex("http://127\\.0\\.0\\.1:([0-9]+)/")))
      return 0;
    return static_cast<uint16_t>(std::stoi(match[1]));
  }

  // The target's dumps once it has at least count of them.
  std::vector<dumps::Dump> wait_for_dumps(const std::string& target, size_t count)
  {
    std::vector<dumps::Dump> found;
    wait_until(
        [&] {
          found = dumps::list_dumps(out_ + "/" + target);
          return found.size() >= count;
        },
        30s, "the agent's dumps");
    return found;
  }

  void TearDown() override
  {
    if (agent_) {
      agent_->signal(SIGTERM);
      EXPECT_EQ(agent_->wait(), 0) << read_text(log_);
    }
  }

  TempDir dir_;
  std::string out_;
  std::string log_;
  std::optional<Child> agent_;
};

TEST_F(ServeTest, GoToolPprofFetchesARangeThatEqualsMergeAndMetricsParse)
{
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go not found on PATH: install Debian's golang-go "
                              "(scripts/install-deps.sh --test)";
  TempCgroup web;
  Child burner({copy_burner(dir_.path(), "burner_serve"), "60"}, web.path());
  uint16_t port = start_agent(web);
  ASSERT_NE(port, 0) << read_text(log_);
  std::string target = dumps::target_directory(web.relative_path());
  auto dumps = wait_for_dumps(target, 3);
  ASSERT_GE(dumps.size(), 3u) << read_text(log_);

  // The second and third windows, as `flamebpf merge` sums them.
  std::string from = dumps::window_name(dumps[1].window).substr(0, 16);
  std::string to = dumps::window_name(dumps[2].window).substr(17, 16);
  std::string merged_path = dir_.path().string() + "/range.folded";
  auto merged =
      run_flamebpf({"merge", out_ + "/" + target, "--from", from, "--to", to, "-o", merged_path});
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  auto expected = folded_counts(read_folded(merged_path));
  ASSERT_GT(expected["c"].flat, 0u) << merged.output;

  std::string url = fmt::format("http://127.0.0.1:{}/pprof/{}?from={}&to={}", port,
                                url_encoded(target), from, to);
  auto fetched =
      PprofTool(go, dir_.path())
          .top({"-top", "-nodecount=50", "-nodefraction=0", "-sample_index=samples"}, url);
  EXPECT_EQ(fetched, expected) << url;

  // The same range as folded text is the merge's file.
  std::string folded = http_body(
      http_get(port, fmt::format("/folded/{}?from={}&to={}", url_encoded(target), from, to)));
  EXPECT_EQ(folded, read_text(merged_path));

  auto metrics = run_process(
      {"/usr/bin/python3", FLAMEBPF_READ_METRICS, fmt::format("http://127.0.0.1:{}/metrics", port)},
      {}, 60s);
  ASSERT_EQ(metrics.status, 0) << metrics.err << metrics.out;
  std::smatch samples;
  std::regex line("flamebpf_samples_total\t\\{\"target\": \"" + target + "\"\\}\t([0-9.]+)");
  ASSERT_TRUE(std::regex_search(metrics.out, samples, line)) << metrics.out;
  EXPECT_GT(std::stod(samples[1]), 0) << metrics.out;
  for (const char* name : {"flamebpf_cpu_seconds_total", "flamebpf_resident_memory_bytes",
                           "flamebpf_dropped_samples_total", "flamebpf_intervals_total",
                           "flamebpf_whole_samples_total", "flamebpf_target_cpu_seconds_total",
                           "flamebpf_coverage_shortfall_ratio"})
    EXPECT_NE(metrics.out.find(std::string(name) + "\t"), std::string::npos) << name;
  // The memory breakdown has every kind, the burner's symbols among them, and its total is their
  // sum; so has the stats file's last line.
  const std::set<std::string> kinds = {
      "symbols", "inlines",         "perf_maps", "jvm_records", "python_code", "unwind_tables",
      "dumps",   "container_names", "answers",   "intervals",   "other",       "heap_free"};
  std::regex kind_line("flamebpf_memory_bytes\t\\{\"kind\": \"([a-z_]+)\"\\}\t([-0-9.e+]+)");
  std::set<std::string> found;
  double sum = 0;
  for (auto it = std::sregex_iterator(metrics.out.begin(), metrics.out.end(), kind_line);
       it != std::sregex_iterator(); ++it) {
    double bytes = std::stod((*it)[2]);
    EXPECT_GE(bytes, 0) << (*it)[0];
    if ((*it)[1] == "symbols") {
      EXPECT_GT(bytes, 0) << metrics.out;
    }
    found.insert((*it)[1]);
    sum += bytes;
  }
  EXPECT_EQ(found, kinds) << metrics.out;
  std::smatch accounted;
  ASSERT_TRUE(std::regex_search(metrics.out, accounted,
                                std::regex("flamebpf_memory_accounted_bytes\t\\{\\}\t([0-9.e+]+)")))
      << metrics.out;
  EXPECT_EQ(std::stod(accounted[1]), sum) << metrics.out;
  std::string stats_lines = read_text(out_ + "/flamebpf-stats.jsonl");
  std::string last_line = stats_lines.substr(stats_lines.rfind('\n', stats_lines.size() - 2) + 1);
  auto memory = nlohmann::json::parse(last_line)["flamebpf"]["memory_bytes"];
  uint64_t stats_sum = 0;
  for (const auto& kind : kinds) {
    ASSERT_TRUE(memory.contains(kind)) << last_line;
    stats_sum += memory[kind].get<uint64_t>();
  }
  EXPECT_GT(memory["symbols"].get<uint64_t>(), 0u) << last_line;
  EXPECT_EQ(memory["total"].get<uint64_t>(), stats_sum) << last_line;
  // The last interval is a whole one of a busy burner: its samples are its CPU time.
  std::smatch coverage;
  std::regex ratio("flamebpf_coverage_ratio\t\\{\"target\": \"" + target + "\"\\}\t([0-9.]+)");
  ASSERT_TRUE(std::regex_search(metrics.out, coverage, ratio)) << metrics.out;
  std::printf("[ FIGURES  ] coverage %s\n", coverage[1].str().c_str());
  EXPECT_GE(std::stod(coverage[1]), 0.9) << metrics.out << read_text(log_);
  EXPECT_LE(std::stod(coverage[1]), 1.1) << metrics.out << read_text(log_);
}

TEST_F(ServeTest, SecondsIsTheNextSecondsWithTheWorkloadsSplitForGoToolPprofAndScrapers)
{
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go not found on PATH: install Debian's golang-go";
  // Two processes that each burn a CPU: the profile splits evenly between them.
  TempCgroup web;
  Child left({copy_burner(dir_.path(), "burner_left"), "60"}, web.path());
  Child right({copy_burner(dir_.path(), "burner_right"), "60"}, web.path());
  uint16_t port = start_agent(web);
  ASSERT_NE(port, 0) << read_text(log_);
  std::string target = dumps::target_directory(web.relative_path());

  // As the user types it: the URL's seconds, and pprof's own wait for them.
  std::string url =
      fmt::format("http://127.0.0.1:{}/pprof/{}?seconds=3", port, url_encoded(target));
  auto burners_cpu = [&] { return cpu_seconds(left.pid()) + cpu_seconds(right.pid()); };
  double cpu_before = burners_cpu();
  auto asked = std::chrono::steady_clock::now();
  std::string output =
      PprofTool(go, dir_.path())
          .run({"-top", "-nodecount=50", "-nodefraction=0", "-sample_index=samples"}, url);
  std::chrono::duration<double> waited = std::chrono::steady_clock::now() - asked;
  // The CPUs the burners had on average while pprof ran: on a busy machine, fewer than two.
  double burning = (burners_cpu() - cpu_before) / waited.count();
  EXPECT_GE(waited, 3s) << "answered before its seconds passed";
  std::smatch duration;
  ASSERT_TRUE(std::regex_search(output, duration, std::regex("Duration: ([0-9.]+)s"))) << output;
  EXPECT_GE(std::stod(duration[1]), 2.9) << output;
  EXPECT_LE(std::stod(duration[1]), 6.0) << output;
  auto rows = PprofTool::top_rows(output);
  uint64_t left_samples = rows["burner_left"].cum;
  uint64_t right_samples = rows["burner_right"].cum;
  uint64_t total = left_samples + right_samples;
  // Each CPU second the burners had is 99 samples: 594 for 2 CPUs over 3 s on an idle machine.
  // pprof's start and its reading of the answer, which take CPU from the burners, fall outside
  // the profile's seconds but inside the average, which is the lower for them.
  double expected = 99 * burning * std::stod(duration[1]);
  std::printf("[ FIGURES  ] %llu samples in %s s, the burners on %.2f CPUs: %.0f expected\n",
              static_cast<unsigned long long>(total), duration[1].str().c_str(), burning, expected);
  EXPECT_GE(static_cast<double>(total), 0.75 * expected) << burning << " CPUs burnt on average\n"
                                                         << output;
  EXPECT_GE(left_samples, total * 3 / 10) << output;
  EXPECT_GE(right_samples, total * 3 / 10) << output;
  EXPECT_GE(rows["c"].flat, total * 9 / 10) << output;
  for (const char* frame : {"run", "a", "b"})
    EXPECT_GE(rows[frame].cum, total * 9 / 10) << frame << "\n" << output;

  // With no path, pprof asks for Go's own (/debug/pprof/profile): every target's next seconds.
  std::string bare = PprofTool(go, dir_.path())
                         .run({"-seconds=2", "-top", "-nodecount=50", "-sample_index=samples"},
                              fmt::format("http://127.0.0.1:{}", port));
  auto bare_rows = PprofTool::top_rows(bare);
  EXPECT_GT(bare_rows["burner_left"].cum + bare_rows["burner_right"].cum, 100u) << bare;

  // Two scrapers at once, as docs/agent.md configures them: Alloy's pyroscope.scrape asks for every
  // target (seconds = interval - 1), Parca for this one (seconds = interval), while the dumps go
  // on being written each second.
  size_t dumps_before = dumps::list_dumps(out_ + "/" + target).size();
  const std::vector<std::string> paths = {"/pprof?seconds=2",
                                          "/pprof/" + url_encoded(target) + "?seconds=3"};
  std::vector<std::string> answers(paths.size());
  std::vector<std::thread> scrapers;
  for (size_t i = 0; i < paths.size(); ++i)
    scrapers.emplace_back([&, i] {
      answers[i] = http_get(port, paths[i], "User-Agent: scraper\r\nAccept-Encoding: gzip\r\n");
    });
  for (auto& scraper : scrapers)
    scraper.join();
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& answer = answers[i];
    ASSERT_EQ(http_status(answer), 200) << answer.substr(0, 300);
    EXPECT_NE(answer.find("Content-Type: application/octet-stream"), std::string::npos)
        << answer.substr(0, 300);
    std::string body = http_body(answer);
    ASSERT_GE(body.size(), 2u);
    EXPECT_EQ(body.substr(0, 2), "\x1f\x8b"); // gzipped, as net/http/pprof sends it
    std::string file = fmt::format("{}/scraped{}.pb.gz", dir_.path().string(), i);
    std::ofstream(file, std::ios::binary) << body;
    auto scraped = PprofTool(go, dir_.path()).top({"-top", "-sample_index=samples"}, file);
    EXPECT_GT(scraped["burner_left"].cum, 0u) << paths[i];
    EXPECT_GT(scraped["burner_right"].cum, 0u) << paths[i];
  }
  EXPECT_GE(dumps::list_dumps(out_ + "/" + target).size(), dumps_before + 2) << read_text(log_);
}

TEST_F(ServeTest, HostileClientsLeaveTheDumpsOnTimeAndTheNextRequestAnswered)
{
  std::string token_file = dir_.path().string() + "/token";
  std::ofstream(token_file) << "s3cret-token\n";
  TempCgroup web;
  Child burner({copy_burner(dir_.path(), "burner_hostile"), "60"}, web.path());
  uint16_t port = start_agent(web, {"--listen-token-file", token_file});
  ASSERT_NE(port, 0) << read_text(log_);
  std::string target = dumps::target_directory(web.relative_path());
  ASSERT_GE(wait_for_dumps(target, 1).size(), 1u) << read_text(log_);
  const std::string token = "Authorization: Bearer s3cret-token\r\n";

  // A thousand clients that never finish their request, held open through the rest.
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 1000; ++i) {
    UniqueFd fd = connect_loopback(port, "127.0.0.2");
    ASSERT_TRUE(fd.valid()) << "client " << i;
    send_all(fd.get(), "GET /metrics HTTP/1.1\r\nHost: ");
    slow.push_back(std::move(fd));
  }
  size_t before = dumps::list_dumps(out_ + "/" + target).size();
  auto started = std::chrono::steady_clock::now();
  std::string huge = "GET /" + std::string(10 << 20, 'a') + " HTTP/1.1\r\n\r\n";
  int status = http_status(http_exchange(port, huge));
  EXPECT_TRUE(status == 414 || status == 0) << status;
  EXPECT_EQ(http_status(http_get(port, "/metrics")), 401);
  EXPECT_EQ(http_status(http_get(port, "/metrics", "Authorization: Bearer s3cret-tokeN\r\n")), 401);
  for (const char* traversal : {"/pprof/..%2F..%2F..%2Fetc%2Fpasswd", "/folded/../../etc/passwd",
                                "/svg/%2e%2e", "/pprof/flamebpf-stats.jsonl"})
    EXPECT_EQ(http_status(http_get(port, traversal, token)), 404) << traversal;
  std::string good = http_get(port, "/folded/" + url_encoded(target), token);
  EXPECT_EQ(http_status(good), 200) << good;
  EXPECT_NE(http_body(good).find("burner_hostile;"), std::string::npos) << good;

  // The dumps went on being written, one a second, while all of that was served.
  std::this_thread::sleep_until(started + 4s);
  size_t after = dumps::list_dumps(out_ + "/" + target).size();
  EXPECT_GE(after, before + 3) << read_text(log_);
  EXPECT_EQ(http_status(http_get(port, "/metrics", token)), 200);
  // No request wrote a file: the output directory holds the target's directory and the stats.
  for (const auto& entry : std::filesystem::directory_iterator(out_))
    EXPECT_TRUE(entry.path().filename() == target ||
                entry.path().filename() == "flamebpf-stats.jsonl")
        << entry.path();
}

// On loopback without a token, another local user is refused (the dumps' modes refuse them the
// files); with the token, anyone who has it is answered, and root always is.
TEST_F(ServeTest, AnotherLocalUserOnLoopbackNeedsTheToken)
{
  TempCgroup web;
  Child burner({copy_burner(dir_.path(), "burner_users"), "60"}, web.path());
  uint16_t port = start_agent(web);
  ASSERT_NE(port, 0) << read_text(log_);
  // The status another user's request gets: the client runs as nobody (65534).
  auto as_nobody = [](uint16_t to, const std::string& headers) {
    int answer[2];
    if (::pipe(answer) != 0)
      return -1;
    pid_t child = ::fork();
    if (child == 0) {
      ::close(answer[0]);
      int status = -1;
      if (::setgid(65534) == 0 && ::setuid(65534) == 0)
        status = http_status(http_get(to, "/metrics", headers));
      (void)!::write(answer[1], &status, sizeof status);
      ::_exit(0);
    }
    ::close(answer[1]);
    int status = -1;
    (void)!::read(answer[0], &status, sizeof status);
    ::close(answer[0]);
    ::waitpid(child, nullptr, 0);
    return status;
  };
  EXPECT_EQ(as_nobody(port, ""), 403);
  EXPECT_EQ(http_status(http_get(port, "/metrics")), 200); // root
  agent_->signal(SIGTERM);
  EXPECT_EQ(agent_->wait(), 0) << read_text(log_);
  agent_.reset();

  std::string token_file = dir_.path().string() + "/token";
  std::ofstream(token_file) << "s3cret-token\n";
  port = start_agent(web, {"--listen-token-file", token_file});
  ASSERT_NE(port, 0) << read_text(log_);
  EXPECT_EQ(as_nobody(port, ""), 401);
  EXPECT_EQ(as_nobody(port, "Authorization: Bearer s3cret-token\r\n"), 200);
}

// A range of dumps too large to sum is refused from their sizes, at once and holding nothing,
// and a long answer being made leaves /metrics answered.
TEST_F(ServeTest, RangeTooLargeIsRefusedAtOnceAndMetricsAreAnsweredMeanwhile)
{
  TempCgroup web;
  Child burner({copy_burner(dir_.path(), "burner_range"), "60"}, web.path());
  uint16_t port = start_agent(web);
  ASSERT_NE(port, 0) << read_text(log_);
  std::string target = dumps::target_directory(web.relative_path());
  ASSERT_GE(wait_for_dumps(target, 1).size(), 1u) << read_text(log_);
  // Most of a week of minutes at 64 KiB each, 625 MiB of folded dumps (sparse: only their sizes are
  // read); before them 50 hours of real ones, 190 MiB of distinct stacks (what read whole took
  // 1.6 GB); and before those ten minutes, 640 KiB.
  std::string directory = out_ + "/" + target;
  auto week_ago = std::chrono::floor<std::chrono::minutes>(dumps::Clock::now()) - 24h * 7;
  auto minute_file = [&](int minute) {
    dumps::Window window{week_ago + std::chrono::minutes(minute),
                         week_ago + std::chrono::minutes(minute + 1)};
    return directory + "/" + dumps::window_name(window) + ".folded";
  };
  for (int minute = 0; minute < 10000; ++minute) {
    std::string file = minute_file(minute);
    std::ofstream(file) << "sparse;minute_" << minute << " 1\n";
    std::filesystem::resize_file(file, 64 << 10);
  }
  for (int minute = -3010; minute < 0; ++minute) {
    std::ofstream out(minute_file(minute));
    for (int line = 0; out.tellp() < (64 << 10); ++line)
      out << "java;main;handle;parse;leaf_" << minute << "_" << line << " 1\n";
  }
  std::string fifty_hours = dumps::window_name({week_ago - 3010min, week_ago - 10min});
  std::string ten_minutes = dumps::window_name({week_ago - 10min, week_ago});
  long peak_before = peak_resident_kib(agent_->pid());
  std::atomic<bool> asking = true;
  std::vector<double> metrics_seconds;
  std::thread prober([&] {
    while (asking) {
      auto started = std::chrono::steady_clock::now();
      EXPECT_EQ(http_status(http_get(port, "/metrics")), 200);
      metrics_seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      std::this_thread::sleep_for(50ms);
    }
  });
  auto started = std::chrono::steady_clock::now();
  std::string refused = http_get(port, "/svg/" + url_encoded(target) + "?from=-9d&to=-1m");
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(http_status(refused), 400) << refused.substr(0, 300);
  EXPECT_NE(http_body(refused).find("shorter range"), std::string::npos) << refused;
  EXPECT_LT(took, 2s);
  // Within what may be read, but more distinct stacks than an answer may hold: refused once they
  // are, not once all are read.
  started = std::chrono::steady_clock::now();
  refused = http_get(port, "/svg/" + url_encoded(target) + "?from=" + fifty_hours.substr(0, 16) +
                               "&to=" + fifty_hours.substr(17, 16));
  took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(http_status(refused), 400) << refused.substr(0, 300);
  EXPECT_NE(http_body(refused).find("distinct stacks"), std::string::npos) << refused;
  EXPECT_LT(took, 5s);
  // Within the budgets, a range is summed and drawn while /metrics goes on being answered.
  std::string drawn =
      http_get(port, "/svg/" + url_encoded(target) + "?from=" + ten_minutes.substr(0, 16) +
                         "&to=" + ten_minutes.substr(17, 16));
  EXPECT_EQ(http_status(drawn), 200) << drawn.substr(0, 300);
  asking = false;
  prober.join();
  // The requests cost their answers, not the dumps they were refused: their peak is under 64 MiB
  // (unsanitized).
  long peak_after = peak_resident_kib(agent_->pid());

  EXPECT_LT(peak_after - peak_before, kRequestsPeakKib)
      << peak_before << " KiB before, " << peak_after;
  ASSERT_FALSE(metrics_seconds.empty());
  double slowest = *std::max_element(metrics_seconds.begin(), metrics_seconds.end());
  std::printf("[ FIGURES  ] peak RSS %ld KiB before the requests, %ld after; %zu /metrics, the "
              "slowest %.3f s\n",
              peak_before, peak_after, metrics_seconds.size(), slowest);
  EXPECT_LT(slowest, 1.0);
}

// The threads that answer clients hold no capability (docs/security.md); the
// pipeline's keep what sampling needs.
TEST_F(ServeTest, ServingThreadsHoldNoCapability)
{
  TempCgroup web;
  Child burner({copy_burner(dir_.path(), "burner_caps"), "60"}, web.path());
  uint16_t port = start_agent(web);
  ASSERT_NE(port, 0) << read_text(log_);
  std::string target = dumps::target_directory(web.relative_path());
  ASSERT_GE(wait_for_dumps(target, 1).size(), 1u) << read_text(log_);
  // Each of the server's two threads answers one at least, and a range is drawn.
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(http_status(http_get(port, "/metrics")), 200);
  ASSERT_EQ(http_status(http_get(port, "/svg/" + url_encoded(target))), 200);
  auto capabilities = [](const std::string& status, const char* set) {
    std::smatch match;
    std::regex line(std::string(set) + ":\\s*([0-9a-f]+)");
    return std::regex_search(status, match, line) ? std::stoull(match[1], nullptr, 16) : ~0ull;
  };
  size_t serving = 0;
  std::string tasks = "/proc/" + std::to_string(agent_->pid()) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::string comm = read_text(task.path().string() + "/comm");
    std::string status = read_text(task.path().string() + "/status");
    if (comm == "flamebpf-http\n") {
      ++serving;
      EXPECT_EQ(capabilities(status, "CapEff"), 0u) << task.path();
      EXPECT_EQ(capabilities(status, "CapPrm"), 0u) << task.path();
    } else if (task.path().filename() == std::to_string(agent_->pid())) {
      constexpr int kCapBpf = 39;
      EXPECT_NE(capabilities(status, "CapEff") & (1ull << kCapBpf), 0u) << status;
    }
  }
  // The watcher, the one making ranges, and the server's threads that answered.
  EXPECT_GE(serving, 3u);
}

TEST_F(ServeTest, BeyondLoopbackNeedsATokenOrSayingSo)
{
  TempCgroup web;
  auto refused = run_flamebpf(
      {"--cgroup", web.path(), "--output-dir", out_, "--listen", "0.0.0.0:0", "-d", "1"});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--listen-token-file, or --listen-insecure"), std::string::npos)
      << refused.output;
  auto without_dumps = run_flamebpf({"--cgroup", web.path(), "--listen", "0", "-d", "1"});
  EXPECT_EQ(without_dumps.exit_code, 2) << without_dumps.output;
  auto insecure = run_flamebpf({"--cgroup", web.path(), "--output-dir", out_, "--listen",
                                "0.0.0.0:0", "--listen-insecure", "-d", "1"});
  EXPECT_EQ(insecure.exit_code, 0) << insecure.output;
  EXPECT_NE(insecure.output.find("serving the dumps"), std::string::npos) << insecure.output;
}

} // namespace
} // namespace flamebpf::testing
