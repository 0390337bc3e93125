#include "common/procfs.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <filesystem>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

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

std::vector<std::string_view> split_fields(std::string_view line)
{
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (start < line.size()) {
    size_t end = line.find(' ', start);
    if (end == std::string_view::npos)
      end = line.size();
    if (end > start)
      fields.push_back(line.substr(start, end - start));
    start = end + 1;
  }
  return fields;
}

} // namespace

std::vector<MountEntry> parse_mountinfo(std::string_view text)
{
  std::vector<MountEntry> mounts;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos)
      end = text.size();
    auto fields = split_fields(text.substr(start, end - start));
    start = end + 1;
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
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos)
      end = text.size();
    auto range = text.substr(start, end - start);
    start = end + 1;
    int first = 0;
    int last = 0;
    auto dash = range.find('-');
    auto parse = [](std::string_view number, int& out) {
      auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), out);
      return ec == std::errc() && ptr == number.data() + number.size() && out >= 0;
    };
    bool ok = dash == std::string_view::npos
                  ? parse(range, first) && (last = first, true)
                  : parse(range.substr(0, dash), first) && parse(range.substr(dash + 1), last);
    if (!ok || last < first || last > 65535)
      return fail(error("malformed CPU list \"" + std::string(text) + "\""));
    for (int cpu = first; cpu <= last; ++cpu)
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

std::optional<uint32_t> status_field(std::string_view status, std::string_view field, int index)
{
  size_t at = 0;
  for (;;) {
    at = status.find(field, at);
    if (at == std::string_view::npos)
      return std::nullopt;
    bool line_start = at == 0 || status[at - 1] == '\n';
    if (line_start && status.substr(at + field.size()).starts_with(":"))
      break;
    at += field.size();
  }
  std::string_view rest = status.substr(at + field.size() + 1);
  rest = rest.substr(0, rest.find('\n'));
  std::vector<uint32_t> values;
  while (!rest.empty()) {
    size_t skip = rest.find_first_not_of(" \t");
    if (skip == std::string_view::npos)
      break;
    rest.remove_prefix(skip);
    uint32_t value = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc())
      return std::nullopt;
    values.push_back(value);
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
  }
  if (values.empty())
    return std::nullopt;
  if (index < 0)
    return values.back();
  if (static_cast<size_t>(index) >= values.size())
    return std::nullopt;
  return values[static_cast<size_t>(index)];
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
    std::string name = it->path().filename().string();
    uint32_t tid = 0;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), tid);
    if (ec == std::errc() && end == name.data() + name.size() && tid != 0)
      threads.push_back(tid);
  }
  return threads;
}

std::optional<std::string> read_cgroup2_path(uint32_t pid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(pid) + "/cgroup", 1 << 16);
  if (!text)
    return std::nullopt;
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (line.starts_with("0::/"))
      return std::string(line.substr(3));
  }
  return std::nullopt;
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

std::optional<uint64_t> live_start_time_in_stat(std::string_view stat)
{
  // "<pid> (<comm>) <state> <ppid> ...": comm may hold spaces and parentheses, so the fields
  // start after the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string_view::npos)
    return std::nullopt;
  std::string_view rest = stat.substr(close + 1);
  // Fields 3 (state) to 22 (starttime) follow, one space before each.
  std::string_view fields[20];
  for (auto& field : fields) {
    if (rest.empty() || rest.front() != ' ')
      return std::nullopt;
    rest.remove_prefix(1);
    size_t end = rest.find_first_of(" \n");
    field = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  }
  if (fields[0] == "Z" || fields[0] == "X")
    return std::nullopt;
  uint64_t start = 0;
  auto [ptr, ec] = std::from_chars(fields[19].data(), fields[19].data() + fields[19].size(), start);
  if (ec != std::errc() || ptr != fields[19].data() + fields[19].size() || fields[19].empty())
    return std::nullopt;
  return start;
}

std::optional<uint64_t> live_start_time(uint32_t pid, const std::string& proc_root)
{
  auto text = read_file(proc_root + "/" + std::to_string(pid) + "/stat", 1 << 12);
  if (!text)
    return std::nullopt;
  return live_start_time_in_stat(*text);
}

} // namespace flamebpf::procfs
