#include "profile/drop_report.h"

#include <string>

namespace flamebpf::profile {

std::vector<std::string> describe_drops(const DropCounters& counters)
{
  std::vector<std::string> lines;
  auto add = [&](uint64_t count, const char* what) {
    if (count > 0)
      lines.push_back(std::to_string(count) + " " + what);
  };
  add(counters[FB_COUNTER_KSTACK_COLLISION] + counters[FB_COUNTER_USTACK_COLLISION],
      "stacks lost to collisions; raise --stack-storage");
  add(counters[FB_COUNTER_STACK_MAP_FULL],
      "stacks lost to a full stack map; raise --stack-storage");
  add(counters[FB_COUNTER_COUNT_MAP_FULL],
      "samples lost to a full count map; raise --count-storage or shorten --interval");
  add(counters[FB_COUNTER_TARGET_SHARE_FULL],
      "samples lost by targets that had filled their part of the count map (--count-storage "
      "divided among the targets); raise --count-storage or shorten --interval");
  add(counters[FB_COUNTER_KSTACK_ERROR], "kernel stacks could not be read");
  add(counters[FB_COUNTER_USTACK_MISSING],
      "user stacks could not be read (the process's user memory was unavailable)");
  add(counters[FB_COUNTER_NOTICE_LOST],
      "new-process notices lost to a full ring buffer; those processes are symbolized late");
  return lines;
}

std::vector<std::string> describe_cut_stacks(const DropCounters& counters)
{
  std::vector<std::string> lines;
  auto add = [&](uint64_t count, const char* what) {
    if (count > 0)
      lines.push_back(std::to_string(count) + " " + what);
  };
  add(counters[FB_COUNTER_UNWIND_SP_BACKWARDS] + counters[FB_COUNTER_UNWIND_TOO_DEEP] +
          counters[FB_COUNTER_UNWIND_NO_RETURN] + counters[FB_COUNTER_UNWIND_BAD_ROW],
      "user stacks cut short where an unwind step went wrong (a table that does not match its "
      "code, or a corrupt stack)");
  add(counters[FB_COUNTER_UNWIND_READ_FAILED],
      "user stacks cut short where their memory could not be read (paged out)");
  add(counters[FB_COUNTER_UNWIND_TRUNCATED], "user stacks cut at their deepest frames kept");
  return lines;
}

uint64_t total_drops(const DropCounters& counters)
{
  return counters[FB_COUNTER_KSTACK_COLLISION] + counters[FB_COUNTER_USTACK_COLLISION] +
         counters[FB_COUNTER_STACK_MAP_FULL] + counters[FB_COUNTER_COUNT_MAP_FULL] +
         counters[FB_COUNTER_TARGET_SHARE_FULL] + counters[FB_COUNTER_KSTACK_ERROR] +
         counters[FB_COUNTER_USTACK_MISSING];
}

} // namespace flamebpf::profile
