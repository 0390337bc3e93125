// `go tool pprof` (Debian's golang-go) as the tests run it: offline, with a private home, and its
// -top table read back as counts per function.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace flamebpf::testing {

struct Counts {
  uint64_t flat = 0;
  uint64_t cum = 0;
  friend bool operator==(const Counts&, const Counts&) = default;
};

std::ostream& operator<<(std::ostream& out, const Counts& counts);

// The go binary on PATH, "" if there is none.
std::string find_go();

// A folded frame's name without the kind suffix ("_[k]", "_[j]", "_[i]") that pprof does not show.
std::string without_kind(const std::string& frame);

// A pprof name without the inlining note pprof adds to it.
std::string without_inline_note(const std::string& name);

// The frames of a folded stack.
std::vector<std::string> split_frames(const std::string& stack);

// Flat and cumulative samples per function name in folded lines, counting a name once per stack
// as pprof does: the process name (first field) as it is, frames without their kind suffix.
std::map<std::string, Counts> folded_counts(const std::map<std::string, uint64_t>& folded);

class PprofTool {
public:
  // go is the binary (find_go()); scratch is a directory for pprof's home and output.
  PprofTool(std::string go, std::string scratch);

  // The output of `go tool pprof -symbolize=none args... file`; fails the test on an error.
  std::string run(const std::vector<std::string>& args, const std::string& file);

  // `-top` rows by function name; values are sample counts, or nanoseconds with -unit=ns.
  std::map<std::string, Counts> top(const std::vector<std::string>& args, const std::string& file);
  // The rows of a -top table in output, as top() reads them.
  static std::map<std::string, Counts> top_rows(const std::string& output);

private:
  std::string go_;
  std::string scratch_;
};

} // namespace flamebpf::testing
