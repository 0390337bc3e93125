// A native workload of the scale benchmark (bench/scale.sh), built once per variant: bench/scale.sh
// replaces the word VARIANT_TAG by the variant's number, so that every build is a file of its own
// with its own build ID and names, as the distinct programs of a node are.
//   spinner-<n> PERCENT   burns PERCENT % of one CPU (100: all of it) until it is stopped
// It works in slices of a 100 ms period through spin_VARIANT_TAG;tally;hash_words, with
// libstdc++'s containers in the stacks (linked in statically, so each variant carries its own
// copy of their symbols, as a C++ program built with -static-libstdc++ does).
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>

namespace variant_VARIANT_TAG {

volatile unsigned long sink;

__attribute__((noinline)) unsigned long hash_words(const std::string& text)
{
  unsigned long hash = 1469598103934665603ul;
  for (char c : text)
    hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ul;
  return hash;
}

__attribute__((noinline)) void tally(std::map<std::string, unsigned long>& counts, int round)
{
  std::string word = "word-" + std::to_string(round % 97) + "-VARIANT_TAG";
  counts[word] += hash_words(word);
}

__attribute__((noinline)) void spin_VARIANT_TAG(std::chrono::steady_clock::time_point until)
{
  std::map<std::string, unsigned long> counts;
  for (int round = 0; std::chrono::steady_clock::now() < until; ++round)
    tally(counts, round);
  sink = sink + counts.size();
}

} // namespace variant_VARIANT_TAG

int main(int argc, char** argv)
{
  // As a container's PID 1 it would ignore SIGTERM without a handler of its own.
  std::signal(SIGTERM, [](int) { _exit(0); });
  int percent = argc == 2 ? std::atoi(argv[1]) : 100;
  if (percent < 1 || percent > 100)
    return 2;
  const auto period = std::chrono::milliseconds(100);
  for (;;) {
    auto start = std::chrono::steady_clock::now();
    variant_VARIANT_TAG::spin_VARIANT_TAG(start + period * percent / 100);
    if (percent < 100)
      std::this_thread::sleep_until(start + period);
  }
}
