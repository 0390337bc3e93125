// perf as an oracle for flamebpf's stacks: perf record --call-graph dwarf copies each sample's
// user stack and unwinds it afterwards from the ELF files' CFI, an implementation independent of
// ours. These helpers run it on a process, collapse what `perf script` prints into folded stacks,
// and reduce both tools' stacks to a form in which they can be compared.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace flamebpf::testing {

// Folded stacks: "comm;root;...;leaf" -> samples.
using FoldedStacks = std::map<std::string, uint64_t>;

// Collapses the text of `perf script -F comm,ip,sym,dso` into folded stacks, root first, without
// kernel frames (those of [kernel.kallsyms] and other bracketed kernel objects): user frames are
// what the comparison is about, and the two tools name kernel frames differently. A frame perf
// cannot name is "[unknown]".
FoldedStacks collapse_perf_script(std::string_view script);

// What one perf record run gave and cost.
struct PerfRecording {
  FoldedStacks stacks;     // as collapse_perf_script() folds them
  uint64_t samples = 0;    // samples in stacks
  uint64_t data_bytes = 0; // the size of perf.data
  double cpu_seconds = 0;  // user plus system CPU time of perf record itself
};

// How perf record unwinds.
enum class PerfCallGraph { kDwarf, kFramePointer };

// Runs `perf record -e cpu-clock -F hz --call-graph <call_graph> -p pid` for seconds, writing
// into dir, then `perf script --no-inline` (inlined frames would be perf's own addition; flamebpf's
// are dropped by comparable_stacks()). Fails the test (and returns what it has) if perf fails.
PerfRecording
perf_record(pid_t pid, double seconds, int hz, PerfCallGraph call_graph, const std::string& dir);

// The stacks of process comm reduced to what both tools must agree on: the part from `main` up
// (what lies below main, _start and __libc_start_call_main, depends on how each tool ends an
// unwind), with each frame name put in a common form: no kernel ("_[k]") or inlined ("_[i]")
// frames; a compiler's clone suffix (".part.0", ".constprop.1", ".cold") cut; a symbol version
// ("@@GLIBC_2.34") cut; glibc's internal alias prefix "__GI_" and leading underscores cut
// (flamebpf and perf pick different aliases of one address, as they do between glibc's memcpy and
// memmove variants, which are made one); a C++ parameter list cut; runs of one
// frame (recursion, as in glibc's merge sort, whose depth varies from sample to sample) made one
// frame. Stacks without main are counted under kNoMain.
FoldedStacks comparable_stacks(const FoldedStacks& stacks, const std::string& comm);

// The key under which comparable_stacks() counts the samples whose stack does not reach main.
inline constexpr const char* kNoMain = "[no main]";

// Samples in stacks.
uint64_t sample_count(const FoldedStacks& stacks);

// The share of samples in comparable stacks (as comparable_stacks() returns them) that reach main;
// 0 if there are none.
double share_reaching_main(const FoldedStacks& comparable);

// Samples of comparable stacks that start with prefix ("main;run;heavy_caller").
uint64_t samples_under(const FoldedStacks& comparable, const std::string& prefix);

// The total variation distance between the distributions of samples over the main-rooted stacks
// of two comparable sets (those under kNoMain left out): half the sum, over every stack, of the
// difference between its shares. 0 when they agree exactly, 1 when they share no stack.
double distribution_distance(const FoldedStacks& left, const FoldedStacks& right);

// The stacks whose shares differ most between the two comparable sets, one a line with both
// shares, for failure messages.
std::string
largest_differences(const FoldedStacks& left, const FoldedStacks& right, size_t how_many = 10);

} // namespace flamebpf::testing
