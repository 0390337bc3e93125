#include "pprof_tool.h"

#include <filesystem>
#include <gtest/gtest.h>
#include <set>
#include <sstream>
#include <unistd.h>

#include "harness.h"

namespace flamebpf::testing {

std::ostream& operator<<(std::ostream& out, const Counts& counts)
{
  return out << "flat " << counts.flat << " cum " << counts.cum;
}

std::string find_go()
{
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / "go";
    if (::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

std::string without_kind(const std::string& frame)
{
  for (const char* suffix : {"_[k]", "_[j]", "_[i]"})
    if (frame.ends_with(suffix))
      return frame.substr(0, frame.size() - 4);
  return frame;
}

std::string without_inline_note(const std::string& name)
{
  for (const char* note : {" (inline)", " (partial-inline)"})
    if (name.ends_with(note))
      return name.substr(0, name.size() - std::string(note).size());
  return name;
}

std::vector<std::string> split_frames(const std::string& stack)
{
  std::vector<std::string> frames;
  std::stringstream in(stack);
  std::string frame;
  while (std::getline(in, frame, ';'))
    frames.push_back(frame);
  return frames;
}

std::map<std::string, Counts> folded_counts(const std::map<std::string, uint64_t>& folded)
{
  std::map<std::string, Counts> counts;
  for (const auto& [stack, count] : folded) {
    auto frames = split_frames(stack);
    std::set<std::string> names;
    for (size_t i = 0; i < frames.size(); ++i)
      names.insert(i == 0 ? frames[i] : without_kind(frames[i]));
    for (const auto& name : names)
      counts[name].cum += count;
    counts[frames.size() == 1 ? frames.back() : without_kind(frames.back())].flat += count;
  }
  return counts;
}

PprofTool::PprofTool(std::string go, std::string scratch)
    : go_(std::move(go)), scratch_(std::move(scratch))
{
}

std::string PprofTool::run(const std::vector<std::string>& args, const std::string& file)
{
  std::string home = scratch_ + "/home";
  std::filesystem::create_directories(home);
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "HOME=" + home,
                                   "GOCACHE=" + home + "/gocache",
                                   "GOPATH=" + home + "/go",
                                   "GOPROXY=off",
                                   "GOFLAGS=",
                                   "GOTOOLCHAIN=local",
                                   "GOTELEMETRY=off",
                                   "PPROF_TMPDIR=" + home,
                                   go_,
                                   "tool",
                                   "pprof",
                                   "-symbolize=none"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(file);
  std::string log = scratch_ + "/pprof.out";
  Child tool(argv, "", log);
  int code = tool.wait();
  std::string output = read_text(log);
  EXPECT_EQ(code, 0) << "go tool pprof failed:\n" << output;
  return output;
}

std::map<std::string, Counts> PprofTool::top(const std::vector<std::string>& args,
                                             const std::string& file)
{
  return top_rows(run(args, file));
}

std::map<std::string, Counts> PprofTool::top_rows(const std::string& output)
{
  std::map<std::string, Counts> rows;
  std::stringstream lines(output);
  std::string line;
  bool table = false;
  while (std::getline(lines, line)) {
    if (!table) {
      table = line.find("flat  flat%") != std::string::npos;
      continue;
    }
    std::stringstream row(line);
    std::string flat, flat_share, sum_share, cum, cum_share, name;
    row >> flat >> flat_share >> sum_share >> cum >> cum_share;
    std::getline(row >> std::ws, name);
    EXPECT_FALSE(name.empty()) << "unexpected -top row: " << line;
    Counts& counts = rows[without_inline_note(name)];
    EXPECT_EQ(counts, Counts{}) << "two rows for " << name << "\n" << output;
    counts = {std::stoull(flat), std::stoull(cum)}; // "505050500ns": the unit is ignored
  }
  EXPECT_TRUE(table) << "no -top table in\n" << output;
  return rows;
}

} // namespace flamebpf::testing
