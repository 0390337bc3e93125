// flamebpf against a container's hostile ELF files. A stripped program's debug file is looked for
// at paths its build ID and .gnu_debuglink name inside the container, and the container can put
// anything there: a FIFO (an open that never returns), a pty slave whose master it holds (a
// daemon that opens it gains a controlling terminal, and one ^C stops it), device nodes, links to
// the host's files, or debug files of another build, of 16 GiB or truncated. It can map hundreds of
// ELF files, give its program an xz bomb as MiniDebugInfo or a symbol whose demangled name is
// exponential in its length. Through all of that flamebpf must finish on time, open nothing outside
// the container, name the program's functions wherever a valid debug file is given, keep its memory
// and descriptors bounded and keep profiling.
//
// The workload is tests/progs/elf_spinner (static, bind-mounted into the burner image), whose
// functions only its symbol table or debug file names; each container gets a copy of its own, so
// that flamebpf reads each program separately.
#include <atomic>
#include <elf.h>
#include <fcntl.h>
#include <functional>
#include <gtest/gtest.h>
#include <sys/sysmacros.h>
#include <thread>

#include "hostile_harness.h"

#ifndef ELF_SPINNER_BINARY
#error "define ELF_SPINNER_BINARY and ELF_SPINNERS_DIR (tests/CMakeLists.txt)"
#endif

namespace flamebpf::testing {
namespace {

// Where the program is bind-mounted in the containers.
constexpr const char* kProgram = "/usr/bin/elf_spinner";
// A local function of elf_spinner, named only by its symbol table or its debug file.
constexpr const char* kLocalFunction = "elf_spinner_inner";

std::string spinner_variant(const std::string& name)
{
  return std::string(ELF_SPINNERS_DIR) + "/" + name;
}

// binary's build ID in hex, as readelf reads it; "" if it has none.
std::string build_id(const std::string& binary, const std::string& scratch)
{
  auto [code, notes] = run_tool({"/usr/bin/readelf", "-n", binary}, scratch);
  auto at = notes.find("Build ID: ");
  if (code != 0 || at == std::string::npos)
    return "";
  return notes.substr(at + 10, notes.find('\n', at) - at - 10);
}

// The path of binary's debug file by build ID.
std::string build_id_path(const std::string& binary, const std::string& scratch)
{
  std::string id = build_id(binary, scratch);
  if (id.size() < 2)
    return "";
  return "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
}

// --- debug files made hostile ---
//
// Each is made from elf_spinner.debug, a 64-bit ELF file of this machine's byte order.

template <class T> T load_at(const std::string& image, uint64_t offset)
{
  T value;
  std::memcpy(&value, image.data() + offset, sizeof value);
  return value;
}

template <class T> void store_at(std::string& image, uint64_t offset, const T& value)
{
  std::memcpy(image.data() + offset, &value, sizeof value);
}

// Where in image the header of section index is.
uint64_t section_header_at(const std::string& image, size_t index)
{
  return load_at<Elf64_Ehdr>(image, 0).e_shoff + index * sizeof(Elf64_Shdr);
}

// Where in image the header of the section named name is.
uint64_t section_header_at(const std::string& image, std::string_view name)
{
  auto header = load_at<Elf64_Ehdr>(image, 0);
  auto names = load_at<Elf64_Shdr>(image, section_header_at(image, header.e_shstrndx));
  for (size_t i = 0; i < header.e_shnum; ++i) {
    auto section = load_at<Elf64_Shdr>(image, section_header_at(image, i));
    if (image.c_str() + names.sh_offset + section.sh_name == name)
      return section_header_at(image, i);
  }
  throw std::runtime_error("no section " + std::string(name));
}

// Writes image to path, then each piece at its offset, and makes the file size bytes long: the
// rest are holes, so that a file of gigabytes takes no disk space.
void write_sparse(const std::string& path,
                  const std::string& image,
                  const std::map<uint64_t, std::string>& pieces,
                  uint64_t size)
{
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << path << ": " << std::strerror(errno);
  auto put = [&](uint64_t offset, const std::string& bytes) {
    ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes.size()))
        << path << ": " << std::strerror(errno);
  };
  put(0, image);
  for (const auto& [offset, bytes] : pieces)
    put(offset, bytes);
  ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0) << std::strerror(errno);
}

// What the impostor debug file (below) calls the spinner's functions: a frame named so was named
// from a debug file that is not the spinner's.
constexpr const char* kImpostorPrefix = "impostor_";

// debug with its functions renamed (kImpostorPrefix) and its build ID changed: a debug file of
// another build of the program, which would name every frame if its build ID were not checked.
std::string impostor_debug_file(const std::string& debug, const std::string& scratch)
{
  std::string renamed = scratch + "/renamed.debug";
  auto [code, output] =
      run_tool({"/usr/bin/objcopy", "--redefine-sym",
                std::string(kLocalFunction) + "=" + kImpostorPrefix + "inner", "--redefine-sym",
                std::string("elf_spinner_outer=") + kImpostorPrefix + "outer", debug, renamed},
               scratch);
  EXPECT_EQ(code, 0) << output;
  std::string image = read_text(renamed);
  auto notes = load_at<Elf64_Shdr>(image, section_header_at(image, ".note.gnu.build-id"));
  auto note = load_at<Elf64_Nhdr>(image, notes.sh_offset);
  // The name "GNU\0" fills its 4 bytes; the ID follows it.
  image[notes.sh_offset + sizeof note + 4 + note.n_descsz - 1] ^= 0xff;
  return image;
}

// debug, its .symtab and .strtab moved to 4 GiB and 8 GiB and each declared 4 GiB long (the rest
// of each is zeros: unnamed, undefined symbols), written to path as a 16 GiB sparse file. Each
// read of it must stop at its budget, and the real symbols at the start of both still name the
// program's functions.
constexpr uint64_t kHugeDebugFileBytes = 16ull << 30;
void write_huge_debug_file(const std::string& debug, const std::string& path)
{
  constexpr uint64_t kTableBytes = 4ull << 30;
  std::string image = read_text(debug);
  uint64_t symtab_at = section_header_at(image, ".symtab");
  uint64_t strtab_at = section_header_at(image, ".strtab");
  auto symtab = load_at<Elf64_Shdr>(image, symtab_at);
  auto strtab = load_at<Elf64_Shdr>(image, strtab_at);
  std::map<uint64_t, std::string> pieces{
      {kTableBytes, image.substr(symtab.sh_offset, symtab.sh_size)},
      {2 * kTableBytes, image.substr(strtab.sh_offset, strtab.sh_size)}};
  symtab.sh_offset = kTableBytes;
  symtab.sh_size = kTableBytes / sizeof(Elf64_Sym) * sizeof(Elf64_Sym);
  strtab.sh_offset = 2 * kTableBytes;
  strtab.sh_size = kTableBytes;
  store_at(image, symtab_at, symtab);
  store_at(image, strtab_at, strtab);
  write_sparse(path, image, pieces, kHugeDebugFileBytes);
}

// debug cut in the middle of its .symtab, its section names and headers put after the cut: its
// build ID and headers are right, and its symbol and string tables run past its end.
std::string truncated_debug_file(const std::string& debug)
{
  std::string image = read_text(debug);
  auto header = load_at<Elf64_Ehdr>(image, 0);
  auto symtab = load_at<Elf64_Shdr>(image, section_header_at(image, ".symtab"));
  auto names = load_at<Elf64_Shdr>(image, section_header_at(image, header.e_shstrndx));
  uint64_t cut = (symtab.sh_offset + symtab.sh_size / 2) / 8 * 8;
  std::string truncated = image.substr(0, cut) + image.substr(names.sh_offset, names.sh_size);
  truncated.resize((truncated.size() + 7) / 8 * 8);
  uint64_t headers_at = truncated.size();
  truncated += image.substr(header.e_shoff, header.e_shnum * sizeof(Elf64_Shdr));
  header.e_shoff = headers_at;
  store_at(truncated, 0, header);
  names.sh_offset = cut;
  store_at(truncated, section_header_at(truncated, header.e_shstrndx), names);
  EXPECT_GT(symtab.sh_offset + symtab.sh_size, truncated.size());
  return truncated;
}

// A pseudo-terminal whose master the test holds, as an attacker in a container would.
class Pty {
public:
  Pty() : master_(::posix_openpt(O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC))
  {
    if (master_ < 0 || ::grantpt(master_) != 0 || ::unlockpt(master_) != 0)
      throw std::runtime_error("cannot make a pty");
    slave_ = ::ptsname(master_);
  }
  ~Pty()
  {
    stop();
    ::close(master_);
  }
  Pty(const Pty&) = delete;
  Pty& operator=(const Pty&) = delete;

  const std::string& slave() const { return slave_; }

  // Types ^C every 20 ms until stop(), reading away whatever the terminal echoes.
  void type_interrupts()
  {
    typist_ = std::thread([this] {
      char echoed[256];
      while (!stopped_.load()) {
        [[maybe_unused]] auto written = ::write(master_, "\x03", 1);
        while (::read(master_, echoed, sizeof echoed) > 0) {
        }
        // Kept: the typing rate is the scenario.
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  void stop()
  {
    stopped_.store(true);
    if (typist_.joinable())
      typist_.join();
  }

private:
  int master_;
  std::string slave_;
  std::atomic<bool> stopped_{false};
  std::thread typist_;
};

class HostileElfTest : public HostileContainerTest {
protected:
  // Runs `elf_spinner args...` from a copy of program of its own as the main process of
  // container name, and waits until it spins.
  DockerDaemon::Container run_spinner(const std::string& name,
                                      const std::string& program,
                                      const std::vector<std::string>& args,
                                      std::vector<std::string> options = {})
  {
    std::string copy = dir_.path().string() + "/" + name + ".elf_spinner";
    fs::copy_file(program, copy, fs::copy_options::overwrite_existing);
    options.insert(options.begin(), {"-v", copy + ":" + kProgram + ":ro"});
    std::vector<std::string> command{kProgram};
    command.insert(command.end(), args.begin(), args.end());
    auto container = docker_.run(name, options, image_, command);
    docker_.wait_for_output(name, "spinner ready", 30s);
    return container;
  }

  // The host path of path inside the container whose main process is pid, its directories made.
  static std::string plant_path(pid_t pid, const std::string& path)
  {
    std::string host = "/proc/" + std::to_string(pid) + "/root" + path;
    fs::create_directories(fs::path(host).parent_path());
    return host;
  }

  // Samples of the folded file whose stacks contain text, and all of them.
  std::pair<uint64_t, uint64_t> samples_with(const std::string& folded, const std::string& text)
  {
    auto stacks = parse_folded(read_text(folded));
    return {count_containing(stacks, text), total_count(stacks)};
  }
};

// --- the debug-file lookup ---

TEST_F(HostileElfTest, DebugFileLookupOpensOnlyRegularFilesInsideTheContainer)
{
  HostSecrets host;
  std::string stripped = spinner_variant("elf_spinner.stripped");
  std::string debug = spinner_variant("elf_spinner.debug");
  std::string by_id = build_id_path(stripped, dir_.path());
  ASSERT_FALSE(by_id.empty());
  // The paths the stripped program's .gnu_debuglink names, after the build ID's.
  const std::string beside = "/usr/bin/elf_spinner.debug";
  const std::string dot_debug = "/usr/bin/.debug/elf_spinner.debug";
  const std::string usr_debug = "/usr/lib/debug/usr/bin/elf_spinner.debug";
  // On the host, the program's valid debug file: a link that escaped would name the functions.
  std::string host_debug = host.dir() + "/elf_spinner.debug";
  fs::copy_file(debug, host_debug);
  std::string up = "../../../../../../../.."; // more ".." than any candidate has parents
  Pty pty;

  struct Case {
    std::string name;
    std::vector<std::string> options; // docker run's
    std::function<void(pid_t)> plant; // what the container puts where
    bool named;                       // a valid debug file is among them
  };
  auto copy_debug = [&](pid_t pid, const std::string& path) {
    fs::copy_file(debug, plant_path(pid, path));
  };
  auto fifo = [&](pid_t pid, const std::string& path) {
    ASSERT_EQ(::mkfifo(plant_path(pid, path).c_str(), 0644), 0) << std::strerror(errno);
  };
  auto device = [&](pid_t pid, const std::string& path, unsigned major, unsigned minor) {
    ASSERT_EQ(::mknod(plant_path(pid, path).c_str(), S_IFCHR | 0644, makedev(major, minor)), 0)
        << std::strerror(errno);
  };
  auto link = [&](pid_t pid, const std::string& path, const std::string& target) {
    fs::create_symlink(target, plant_path(pid, path));
  };
  const std::vector<Case> cases{
      {"he-valid", {}, [&](pid_t pid) { copy_debug(pid, by_id); }, true},
      // FIFOs first in the order, the valid file after them.
      {"he-fifo",
       {},
       [&](pid_t pid) {
         fifo(pid, by_id);
         fifo(pid, beside);
         copy_debug(pid, dot_debug);
       },
       true},
      // A pty slave whose master the test holds, first in the order (bind-mounted as a container
      // could: it makes its own ptys).
      {"he-pty",
       {"-v", pty.slave() + ":" + by_id},
       [&](pid_t pid) { copy_debug(pid, usr_debug); },
       true},
      // /dev/zero, /dev/ptmx, /dev/tty and /dev/null.
      {"he-device",
       {},
       [&](pid_t pid) {
         device(pid, by_id, 1, 5);
         device(pid, beside, 5, 2);
         device(pid, dot_debug, 5, 0);
         device(pid, usr_debug, 1, 3);
       },
       false},
      // Every candidate a link to the host's valid debug file: absolute, relative, through
      // /proc/self/root.
      {"he-links",
       {},
       [&](pid_t pid) {
         link(pid, by_id, host_debug);
         link(pid, beside, up + host_debug);
         link(pid, dot_debug, "/proc/self/root" + host_debug);
         link(pid, usr_debug, host_debug);
       },
       false},
  };
  std::vector<std::string> args;
  std::map<std::string, pid_t> pids;
  for (const auto& c : cases) {
    auto container = run_spinner(c.name, stripped, {}, c.options);
    c.plant(container.pid);
    pids[c.name] = container.pid;
    args.insert(args.end(), {"--cgroup", c.name});
  }

  AccessWatch watch({host.dir()});
  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  args.insert(args.end(), {"-d", "3", "-o", out + "/elf.folded"});
  pty.type_interrupts();
  auto run = run_measured(args, dir_.path(), 60, RunAs::kDaemon);
  pty.stop();
  auto accesses = watch.events();
  print_figures("stripped programs with hostile debug files", run);
  expect_prompt(run, 3);
  // A ^C on a terminal flamebpf made its own would have stopped it early, with exit code 0.
  EXPECT_GE(run.seconds, 3.0) << describe(run);
  EXPECT_TRUE(accesses.empty()) << "flamebpf touched the host's files:\n"
                                << ::testing::PrintToString(accesses);
  host.expect_untouched({"elf_spinner.debug"});

  for (const auto& c : cases) {
    std::string folded = out + "/elf." + c.name + ".folded";
    EXPECT_EQ(folded_problems(read_text(folded)), "") << c.name;
    auto [named, samples] = samples_with(folded, kLocalFunction);
    EXPECT_GT(samples, 10u) << c.name << " was hardly sampled\n" << describe(run);
    if (c.named) {
      EXPECT_GT(named * 2, samples) << c.name << ": the valid debug file was not read\n"
                                    << read_text(folded);
    } else {
      EXPECT_EQ(named, 0u) << c.name << ": named from a debug file it does not have\n"
                           << read_text(folded);
    }
  }
  // Each special file refused is said, in one line per program; links that lead nowhere inside
  // the container are as if absent.
  for (const auto& [name, refused] : std::map<std::string, size_t>{
           {"he-valid", 0}, {"he-fifo", 2}, {"he-pty", 1}, {"he-device", 4}, {"he-links", 0}}) {
    auto lines =
        lines_with(run.log, "/proc/" + std::to_string(pids[name]) + "/root" + kProgram + ": ");
    ASSERT_EQ(lines.size(), refused > 0 ? 1u : 0u) << name << "\n" << run.log;
    if (refused > 0) {
      EXPECT_EQ(occurrences(lines[0], "not a regular file"), refused) << lines[0];
    }
  }
}

// Debug files that are hostile by their content, where the container's stripped program looks for
// them: of another build, 16 GiB, truncated. Each is refused or read within its budgets and said
// in one line, memory stays far below the files' size, the program stays profiled, and it is
// named from what is valid: the debug file further down the lookup, or its MiniDebugInfo.
TEST_F(HostileElfTest, HostileDebugFilesCostOneLineAndNameNothingOfTheirs)
{
  std::string stripped = spinner_variant("elf_spinner.stripped");
  std::string debug = spinner_variant("elf_spinner.debug");
  std::string by_id = build_id_path(stripped, dir_.path());
  ASSERT_FALSE(by_id.empty());
  // The first and last paths the stripped program's .gnu_debuglink names.
  const std::string beside = "/usr/bin/elf_spinner.debug";
  const std::string usr_debug = "/usr/lib/debug/usr/bin/elf_spinner.debug";
  std::string impostor = impostor_debug_file(debug, dir_.path());
  std::string truncated = truncated_debug_file(debug);
  std::string impostor_path = dir_.path().string() + "/impostor.debug";
  std::ofstream(impostor_path, std::ios::binary) << impostor;
  std::string impostor_id = build_id(impostor_path, dir_.path());
  std::string spinner_id = build_id(stripped, dir_.path());
  ASSERT_FALSE(impostor_id.empty());
  ASSERT_NE(impostor_id, spinner_id);

  struct Case {
    std::string name;
    std::string program;              // the variant of elf_spinner it runs
    std::function<void(pid_t)> plant; // what the container puts where
    std::string said;                 // in the one line about its program
  };
  auto write = [&](pid_t pid, const std::string& path, const std::string& bytes) {
    std::ofstream file(plant_path(pid, path), std::ios::binary);
    EXPECT_TRUE(file << bytes) << path;
  };
  auto copy_debug = [&](pid_t pid, const std::string& path) {
    fs::copy_file(debug, plant_path(pid, path));
  };
  const std::vector<Case> cases{
      // Another build's debug file where the build ID and the link lead, the valid one last.
      {"hd-other-build", stripped,
       [&](pid_t pid) {
         write(pid, by_id, impostor);
         write(pid, beside, impostor);
         copy_debug(pid, usr_debug);
       },
       "CRC does not match .gnu_debuglink"},
      // 16 GiB with the right build ID, its symbol and string tables 4 GiB each.
      {"hd-huge", stripped,
       [&](pid_t pid) { write_huge_debug_file(debug, plant_path(pid, by_id)); },
       "larger than 64 MiB"},
      // 16 GiB where the link leads: its CRC would mean reading it whole. The valid one last.
      {"hd-huge-link", stripped,
       [&](pid_t pid) {
         write_sparse(plant_path(pid, beside), impostor, {}, kHugeDebugFileBytes);
         copy_debug(pid, usr_debug);
       },
       "larger than 268435456 bytes"},
      // Truncated, with the right build ID; the program's MiniDebugInfo names it.
      {"hd-truncated", spinner_variant("elf_spinner.minidebug"),
       [&](pid_t pid) { write(pid, by_id, truncated); }, "past the end"},
  };
  std::vector<std::string> args;
  std::map<std::string, pid_t> pids;
  for (const auto& c : cases) {
    auto container = run_spinner(c.name, c.program, {});
    c.plant(container.pid);
    pids[c.name] = container.pid;
    args.insert(args.end(), {"--cgroup", c.name});
  }

  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  args.insert(args.end(), {"-d", "3", "-o", out + "/elf.folded"});
  auto run = run_measured(args, dir_.path(), 60, RunAs::kDaemon);
  print_figures("hostile debug files", run);
  std::printf("[ FIGURES  ] hostile debug files: peak RSS %.1f MB and %.1f MB read, with two debug "
              "files of %llu GiB each\n",
              static_cast<double>(run.max_rss_kb) / 1024.0,
              static_cast<double>(run.read_bytes) / (1 << 20),
              static_cast<unsigned long long>(kHugeDebugFileBytes >> 30));
  expect_prompt(run, 3);
  // Most of it is the string table's budget (64 MiB), read whole.
  EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
  // What the budgets allow (two tables of 64 MiB, a CRC over 256 MiB) and the rest of the run,
  // not the files.
  EXPECT_LT(run.read_bytes, 1ull << 30) << describe(run);

  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string folded = out + "/elf." + c.name + ".folded";
    std::string text = read_text(folded);
    EXPECT_EQ(folded_problems(text), "");
    auto [named, samples] = samples_with(folded, kLocalFunction);
    EXPECT_GT(samples, 10u) << "hardly sampled\n" << describe(run);
    EXPECT_GT(named * 2, samples) << text;
    EXPECT_EQ(text.find(kImpostorPrefix), std::string::npos) << text;
    auto lines =
        lines_with(run.log, "/proc/" + std::to_string(pids[c.name]) + "/root" + kProgram + ": ");
    ASSERT_EQ(lines.size(), 1u) << run.log;
    EXPECT_NE(lines[0].find(c.said), std::string::npos) << lines[0];
    std::printf("[ FIGURES  ] %s: %llu of %llu samples name %s; said: %s\n", c.name.c_str(),
                static_cast<unsigned long long>(named), static_cast<unsigned long long>(samples),
                kLocalFunction, lines[0].c_str());
  }
  // The build ID is checked, not only the link's CRC.
  std::string other_build = "/proc/" + std::to_string(pids["hd-other-build"]) + "/root";
  EXPECT_EQ(lines_with(run.log,
                       other_build + by_id + ": build ID " + impostor_id + " is not " + spinner_id)
                .size(),
            1u)
      << run.log;
}

// --- the file behind a mapping ---

// Each child process of the container maps a copy of its program, deletes it, makes the name its
// mapping now shows ("<path> (deleted)") a link to a host file, and splits and merges the mapping
// without end, so that the range flamebpf read from /proc/<pid>/maps is gone from map_files when
// it opens it. A deleted file is opened through map_files or not at all.
TEST_F(HostileElfTest, DeletedMappingsNameIsNeverFollowed)
{
  HostSecrets host;
  constexpr int kChildren = 4;
  auto container =
      run_spinner("he-deleted", ELF_SPINNER_BINARY,
                  {"--deleted", std::to_string(kChildren), kProgram, "/churn", host.victim()});
  std::vector<pid_t> children;
  wait_until(
      [&] {
        children.clear();
        std::istringstream procs(read_text(container.cgroup2_path + "/cgroup.procs"));
        for (pid_t pid; procs >> pid;) {
          if (pid != container.pid &&
              read_text("/proc/" + std::to_string(pid) + "/maps").find(" (deleted)") !=
                  std::string::npos)
            children.push_back(pid);
        }
        return children.size() >= static_cast<size_t>(kChildren);
      },
      5s, "the spinner's children to map their deleted files", 25ms);
  ASSERT_EQ(children.size(), static_cast<size_t>(kChildren));
  std::string link = "/proc/" + std::to_string(children[0]) + "/root/churn/lib0.bin (deleted)";
  ASSERT_TRUE(fs::is_symlink(link)) << link;

  AccessWatch watch({host.dir()});
  std::string folded = dir_.path().string() + "/deleted.folded";
  auto run = run_measured({"--cgroup", "he-deleted", "-d", "3", "-o", folded}, dir_.path(), 60,
                          RunAs::kDaemon);
  auto accesses = watch.events();
  print_figures("deleted mappings split and merged", run);
  expect_prompt(run, 3);
  EXPECT_TRUE(accesses.empty()) << "flamebpf opened the host's file through a deleted name:\n"
                                << ::testing::PrintToString(accesses);
  host.expect_untouched();
  expect_no_secret(run, dir_.path());
  // The children were sampled (they are busy), so their mappings were looked at.
  EXPECT_GE(total_count(parse_folded(read_text(folded))), 10u) << describe(run);
}

// --- descriptors ---

TEST_F(HostileElfTest, ProcessMappingSixHundredElfFilesCostsNoDescriptorEach)
{
  constexpr int kFiles = 600;
  // Stripped libraries, each with the debug file its .gnu_debuglink names beside it: each
  // library's symbols come from two files.
  std::string fixtures = std::string(FLAMEBPF_ELF_DEBUG_FIXTURES) + "/debuglink";
  auto container =
      run_spinner("he-many", ELF_SPINNER_BINARY,
                  {"--copies", std::to_string(kFiles), "/usr/lib/libfixture.so", "/elfs"},
                  {"-v", fixtures + "/libfixture.so:/usr/lib/libfixture.so:ro", "-v",
                   fixtures + "/libfixture.so.debug:/elfs/libfixture.so.debug:ro"});
  EXPECT_GE(occurrences(read_text("/proc/" + std::to_string(container.pid) + "/maps"), "/elfs/lib"),
            static_cast<size_t>(kFiles));
  // Agent mode, a dump every 2 s: the last one shows the process still profiled.
  std::string dumps = dir_.path().string() + "/dumps";
  auto run = run_measured(
      {"--pid", std::to_string(container.pid), "--output-dir", dumps, "--interval", "2", "-d", "6"},
      dir_.path(), 60, RunAs::kDaemon);
  print_figures(std::to_string(kFiles) + " mapped ELF files", run);
  std::printf("[ FIGURES  ] %d mapped ELF files: at most %zu descriptors open\n", kFiles,
              run.max_fds);
  expect_prompt(run, 6);
  // Its BPF maps (each held twice for the 0.1 s the unwinding program takes to load beside the
  // program that samples meanwhile), perf events and logs; nothing per ELF file.
  EXPECT_LT(run.max_fds, 96u) << describe(run);
  // The target was profiled to the end, not dropped.
  EXPECT_TRUE(lines_with(run.log, "exited; dropped").empty()) << run.log;
  std::vector<std::string> folded;
  for (const auto& file : files_below(dumps)) {
    if (file.ends_with(".folded"))
      folded.push_back(file);
  }
  ASSERT_GE(folded.size(), 3u) << ::testing::PrintToString(files_below(dumps)) << describe(run);
  // Named by their UTC start: every interval has the process's samples, to the last. The first
  // and the last are cut short (windows are aligned to the clock: the first ends at the next
  // boundary, once 86 ms after the start), so only the ones between must hold a full window's.
  std::sort(folded.begin(), folded.end());
  for (size_t i = 0; i < folded.size(); ++i) {
    auto [named, samples] = samples_with(dumps + "/" + folded[i], kLocalFunction);
    bool whole = i > 0 && i + 1 < folded.size();
    EXPECT_GT(samples, whole ? 10u : 0u) << folded[i] << "\n" << describe(run);
    EXPECT_GT(named * 2, samples) << read_text(dumps + "/" + folded[i]);
  }
}

// A stripped program whose only symbols are its MiniDebugInfo, with no debug file anywhere: its
// local function is named from the decompressed symbol table.
TEST_F(HostileElfTest, MiniDebugInfoAloneNamesTheLocalFunction)
{
  run_spinner("he-minidebug", spinner_variant("elf_spinner.minidebug"), {});
  std::string folded = dir_.path().string() + "/minidebug.folded";
  auto run = run_measured({"--cgroup", "he-minidebug", "-d", "3", "-o", folded}, dir_.path(), 60,
                          RunAs::kDaemon);
  expect_prompt(run, 3);
  auto [named, samples] = samples_with(folded, kLocalFunction);
  EXPECT_GT(samples, 100u) << describe(run);
  EXPECT_GE(named * 100, samples * 95) << read_text(folded);
  std::printf("[ FIGURES  ] MiniDebugInfo only: %llu of %llu samples name %s\n",
              static_cast<unsigned long long>(named), static_cast<unsigned long long>(samples),
              kLocalFunction);
}

// --- memory ---

TEST_F(HostileElfTest, XzBombInMiniDebugInfoKeepsMemoryBounded)
{
  run_spinner("he-xzbomb", spinner_variant("elf_spinner.xzbomb"), {});
  std::string folded = dir_.path().string() + "/xzbomb.folded";
  auto run = run_measured({"--cgroup", "he-xzbomb", "-d", "3", "-o", folded}, dir_.path(), 60,
                          RunAs::kDaemon);
  print_figures("xz bomb as MiniDebugInfo", run);
  expect_prompt(run, 3);
  EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
  // Refused, and said once; the stripped program's frames stay unnamed.
  auto said = lines_with(run.log, ".gnu_debugdata ignored: cannot decompress: more than");
  EXPECT_EQ(said.size(), 1u) << run.log;
  auto [named, samples] = samples_with(folded, kLocalFunction);
  EXPECT_GT(samples, 10u) << describe(run);
  EXPECT_EQ(named, 0u);
}

// DWARF that would cost the inline reader without bound: a million nested DIEs, and 256 MiB of
// units compressed into a few hundred KB. Each is read on the indexer's thread within its budgets:
// the run ends on time, memory stays bounded, one line says what was cut, and the program's own
// symbols still name its frames.
TEST_F(HostileElfTest, HostileDwarfIsReadWithinItsBudgetsInTheBackground)
{
  struct Case {
    const char* name;
    const char* variant;
    const char* said;
  };
  for (const Case& hostile :
       {Case{"he-dwarfnest", "elf_spinner.dwarfnest", "DIEs nested deeper than 256"},
        Case{"he-dwarfbomb", "elf_spinner.dwarfbomb", "DWARF units larger than"}}) {
    SCOPED_TRACE(hostile.variant);
    run_spinner(hostile.name, spinner_variant(hostile.variant), {});
    std::string folded = dir_.path().string() + "/" + hostile.name + ".folded";
    auto run = run_measured({"--cgroup", hostile.name, "-d", "3", "-o", folded}, dir_.path(), 60,
                            RunAs::kDaemon);
    print_figures(hostile.variant, run);
    expect_prompt(run, 3);
    EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
    EXPECT_EQ(lines_with(run.log, hostile.said).size(), 1u) << run.log;
    auto [named, samples] = samples_with(folded, kLocalFunction);
    EXPECT_GT(samples, 10u) << describe(run);
    EXPECT_GE(named * 100, samples * 90) << describe(run);
    EXPECT_EQ(folded_problems(read_text(folded)), "");
  }
}

TEST_F(HostileElfTest, ExponentialMangledNameIsCutVisibly)
{
  run_spinner("he-mangled", ELF_SPINNER_BINARY, {"exponential"});
  std::string folded = dir_.path().string() + "/mangled.folded";
  auto run = run_measured({"--cgroup", "he-mangled", "-d", "3", "-o", folded}, dir_.path(), 60,
                          RunAs::kDaemon);
  print_figures("exponential mangled name", run);
  expect_prompt(run, 3);
  EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
  std::string text = read_text(folded);
  EXPECT_EQ(folded_problems(text), "");
  uint64_t cut = 0;
  uint64_t samples = 0;
  for (const auto& [stack, count] : parse_folded(text)) {
    samples += count;
    // The frame is the demangled name's start and the mark, 4096 bytes.
    EXPECT_LT(stack.size(), 8192u) << stack.substr(0, 200);
    for (const auto& frame : split(stack, ';')) {
      if (frame.starts_with("f(X, A<X, X>, A<A<X, X>, A<X, X> >")) {
        EXPECT_TRUE(frame.ends_with("[truncated]")) << frame.substr(frame.size() - 100);
        EXPECT_EQ(frame.size(), 4096u);
        cut += count;
      }
    }
  }
  EXPECT_GT(samples, 10u) << describe(run);
  EXPECT_GT(cut * 2, samples) << text.substr(0, 2000);
  // Said once for the process, and counted with the other cut names.
  EXPECT_EQ(
      lines_with(run.log, "a symbol name longer than its budget; [truncated] marks the cut").size(),
      1u)
      << run.log;
}

} // namespace
} // namespace flamebpf::testing
