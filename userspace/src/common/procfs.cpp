#include "common/procfs.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <iterator>
#include <span>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "common/unique_fd.h"

namespace flamebpf::procfs {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string decode_octal_escapes(std::string_view field)
{
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      auto digits = field.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out.push_back(
            static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 + (digits[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

} // namespace

std::vector<MountEntry> parse_mountinfo(std::string_view text)
{
  std::vector<MountEntry> mounts;
  for (std::string_view line : text::lines(text)) {
    auto fields = text::split_fields(line, " ");
    // id parent major:minor root mount-point options [optional...] - type source super-options
    size_t separator = 0;
    for (size_t i = 6; i < fields.size(); ++i) {
      if (fields[i] == "-") {
        separator = i;
        break;
      }
    }
    if (separator == 0 || separator + 2 >= fields.size())
      continue;
    mounts.push_back(MountEntry{decode_octal_escapes(fields[3]), decode_octal_escapes(fields[4]),
                                std::string(fields[separator + 1]),
                                decode_octal_escapes(fields[separator + 2])});
  }
  return mounts;
}

std::optional<std::string> find_cgroup2_mount(const std::vector<MountEntry>& mounts)
{
  std::optional<std::string> any;
  for (const auto& mount : mounts) {
    if (mount.fs_type != "cgroup2")
      continue;
    if (mount.root == "/")
      return mount.mount_point;
    if (!any)
      any = mount.mount_point;
  }
  return any;
}

Result<std::string> cgroup2_mount(const std::string& proc_root)
{
  auto text = read_file(proc_root + "/self/mountinfo");
  if (!text)
    return fail(text.error());
  auto mount = find_cgroup2_mount(parse_mountinfo(*text));
  if (!mount)
    return fail(error("no cgroup2 filesystem is mounted (see " + proc_root +
                      "/self/mountinfo); mount one with: mount -t cgroup2 none /sys/fs/cgroup"));
  return *mount;
}

Result<std::vector<int>> parse_cpu_list(std::string_view text)
{
  std::vector<int> cpus;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  for (std::string_view range : text::lines(text, ',')) {
    auto dash = range.find('-');
    auto first = text::parse_number<int>(range.substr(0, dash));
    auto last =
        dash == std::string_view::npos ? first : text::parse_number<int>(range.substr(dash + 1));
    if (!first || !last || *first < 0 || *last < *first || *last > 65535)
      return fail(error("malformed CPU list \"" + std::string(text) + "\""));
    for (int cpu = *first; cpu <= *last; ++cpu)
      cpus.push_back(cpu);
  }
  if (cpus.empty())
    return fail(error("empty CPU list"));
  return cpus;
}

Result<std::vector<int>> online_cpus(const std::string& sys_root)
{
  auto text = read_file(sys_root + "/devices/system/cpu/online");
  if (!text)
    return fail(text.error());
  auto online = parse_cpu_list(*text);
  if (!online)
    return fail(online.error());
  auto possible_text = read_file(sys_root + "/devices/system/cpu/possible");
  if (!possible_text)
    return online;
  auto possible = parse_cpu_list(*possible_text);
  if (!possible)
    return online;
  std::vector<int> both;
  std::set_intersection(online->begin(), online->end(), possible->begin(), possible->end(),
                        std::back_inserter(both));
  if (both.empty())
    return fail(error("no CPU is both online and possible (" + sys_root +
                      "/devices/system/cpu/online, possible)"));
  return both;
}

Result<std::string> read_file(const std::string& path, size_t max_bytes)
{
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + path));
  std::string content;
  // Files that know their size (sysfs attributes, say, unlike most of /proc) are read without
  // growing the string as they come.
  struct stat info {};
  if (::fstat(fd.get(), &info) == 0 && info.st_size > 0)
    content.reserve(std::min(static_cast<size_t>(info.st_size), max_bytes));
  char buffer[16384];
  while (content.size() < max_bytes) {
    ssize_t n = ::read(fd.get(), buffer, std::min(sizeof buffer, max_bytes - content.size()));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return fail(system_error(errno, "cannot read " + path));
    }
    if (n == 0)
      break;
    content.append(buffer, static_cast<size_t>(n));
  }
  return content;
}

std::optional<std::string> read_comm(uint32_t pid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(pid) + "/comm", 64);
  if (!text)
    return std::nullopt;
  while (!text->empty() && text->back() == '\n')
    text->pop_back();
  return *text;
}

std::optional<std::string_view> status_line(std::string_view status, std::string_view field)
{
  for (std::string_view line : text::lines(status)) {
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':')
      return line.substr(field.size() + 1);
  }
  return std::nullopt;
}

std::optional<uint32_t> status_field(std::string_view status, std::string_view field, int index)
{
  auto line = status_line(status, field);
  if (!line)
    return std::nullopt;
  std::vector<uint32_t> values;
  for (std::string_view value : text::split_fields(*line)) {
    auto number = text::parse_number<uint32_t>(value);
    if (!number)
      return std::nullopt;
    values.push_back(*number);
  }
  if (values.empty())
    return std::nullopt;
  if (index < 0)
    return values.back();
  if (static_cast<size_t>(index) >= values.size())
    return std::nullopt;
  return values[static_cast<size_t>(index)];
}

bool catches_signal(std::string_view status, int signal)
{
  // A missing mask is empty; a malformed one makes the answer false.
  auto mask = [&](std::string_view field) -> std::optional<uint64_t> {
    auto line = status_line(status, field);
    if (!line)
      return 0;
    auto values = text::split_fields(*line);
    return values.size() == 1 ? text::parse_number<uint64_t>(values[0], 16) : std::nullopt;
  };
  auto caught = mask("SigCgt");
  auto ignored = mask("SigIgn");
  if (!caught || !ignored || signal < 1 || signal > 64)
    return false;
  uint64_t bit = uint64_t{1} << (signal - 1);
  return (*caught & bit) != 0 && (*ignored & bit) == 0;
}

std::optional<uint32_t> read_tgid(uint32_t tid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(tid) + "/status", 1 << 16);
  if (!text)
    return std::nullopt;
  auto tgid = status_field(*text, "Tgid");
  if (!tgid || *tgid == 0)
    return std::nullopt;
  return tgid;
}

std::vector<uint32_t> thread_ids(uint32_t pid, const std::string& proc_root)
{
  std::vector<uint32_t> threads;
  std::error_code failed;
  // increment(failed) rather than ++: a process exiting mid-listing is not an exception.
  for (std::filesystem::directory_iterator it(proc_root + "/" + std::to_string(pid) + "/task",
                                              failed);
       !failed && it != std::filesystem::directory_iterator(); it.increment(failed)) {
    auto tid = text::parse_number<uint32_t>(it->path().filename().string());
    if (tid && *tid != 0)
      threads.push_back(*tid);
  }
  return threads;
}

std::optional<std::string> parse_cgroup2_path(std::string_view cgroup)
{
  for (std::string_view line : text::lines(cgroup)) {
    if (line.starts_with("0::/"))
      return std::string(line.substr(3));
  }
  return std::nullopt;
}

std::optional<std::string> read_cgroup2_path(uint32_t pid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(pid) + "/cgroup", 1 << 16);
  if (!text)
    return std::nullopt;
  return parse_cgroup2_path(*text);
}

std::optional<uint32_t> read_ns_pid(uint32_t pid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(pid) + "/status", 1 << 16);
  if (!text)
    return std::nullopt;
  // Kernels before 4.1 have no NSpid line: the process then shares flamebpf's namespace.
  if (auto ns_pid = status_field(*text, "NSpid", -1))
    return ns_pid;
  return status_field(*text, "Pid");
}

namespace {

// Fields 3 (state) onwards of /proc/<pid>/stat text, as many as fields holds; false if there are
// fewer. "<pid> (<comm>) <state> <ppid> ...": comm may hold spaces and parentheses, so the fields
// start after the last ')'.
bool stat_fields(std::string_view stat, std::span<std::string_view> fields)
{
  size_t close = stat.rfind(')');
  if (close == std::string_view::npos)
    return false;
  std::string_view rest = stat.substr(close + 1);
  for (auto& field : fields) {
    if (rest.empty() || rest.front() != ' ')
      return false;
    rest.remove_prefix(1);
    size_t end = rest.find_first_of(" \n");
    field = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  }
  return true;
}

} // namespace

std::optional<uint64_t> live_start_time_in_stat(std::string_view stat)
{
  // Fields 3 (state) to 22 (starttime).
  std::string_view fields[20];
  if (!stat_fields(stat, fields))
    return std::nullopt;
  if (fields[0] == "Z" || fields[0] == "X")
    return std::nullopt;
  return text::parse_number<uint64_t>(fields[19]);
}

std::optional<uint64_t> cpu_ticks_in_stat(std::string_view stat)
{
  // Fields 3 (state) to 15 (stime); 14 is utime.
  std::string_view fields[13];
  if (!stat_fields(stat, fields))
    return std::nullopt;
  auto user = text::parse_number<uint64_t>(fields[11]);
  auto system = text::parse_number<uint64_t>(fields[12]);
  if (!user || !system || *user > UINT64_MAX - *system)
    return std::nullopt;
  return *user + *system;
}

std::optional<uint64_t> cgroup_cpu_usage_usec(std::string_view cpu_stat)
{
  // A line without its newline may have been cut by the read's budget.
  while (!cpu_stat.empty()) {
    size_t end = cpu_stat.find('\n');
    if (end == std::string_view::npos)
      break;
    std::string_view line = cpu_stat.substr(0, end);
    cpu_stat.remove_prefix(end + 1);
    auto fields = text::split_fields(line);
    if (fields.size() == 2 && fields[0] == "usage_usec")
      return text::parse_number<uint64_t>(fields[1]);
  }
  return std::nullopt;
}

std::optional<uint64_t> live_start_time(uint32_t pid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(pid) + "/stat", 1 << 12);
  if (!text)
    return std::nullopt;
  return live_start_time_in_stat(*text);
}

} // namespace flamebpf::procfs
