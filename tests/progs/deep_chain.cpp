// A C++ workload built without frame pointers whose samples all have about 30 frames:
//   main;run;descend_a;descend_b;descend_c;descend_a;...;descend_c;spin
// main and run, 27 levels of descend_* and the leaf spin: 30 frames. The three descend_*
// functions recurse through each other and lay out their frames in three ways: descend_a keeps
// a small frame, descend_b a larger one on the stack pointer, and descend_c memory from alloca,
// for which the compiler addresses its frame from rbp even without frame pointers. No
// exceptions are thrown. It serves the integration tests (a CFI unwinder must reach main) and the
// benchmark (the cost of unwinding 30 frames).
//   deep_chain 5            works for 5 seconds
//   deep_chain --rounds N   does N rounds of fixed work and prints the seconds they took
//
// Every function here is noipa (no inlining, cloning or other interprocedural changes), and each
// call is followed by a compiler barrier, so that it is not turned into a tail call.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

// Levels of descend_*: with main, run and spin, each sample has this plus 3 frames.
constexpr int kLevels = 27;

volatile unsigned long sink;

double now_seconds()
{
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

} // namespace

__attribute__((noipa)) void spin()
{
  for (unsigned long i = 0; i < 20000; i++)
    sink = sink * 2654435761u + i;
}

__attribute__((noipa)) void descend_a(int level);

__attribute__((noipa)) void descend_c(int level)
{
  // Stack memory whose size is known only at run time.
  auto* scratch = static_cast<volatile char*>(__builtin_alloca(static_cast<unsigned>(level) + 16));
  scratch[0] = static_cast<char>(level);
  if (level > 1)
    descend_a(level - 1);
  else
    spin();
  sink = sink + scratch[0];
}

__attribute__((noipa)) void descend_b(int level)
{
  volatile unsigned long scratch[24];
  scratch[level % 24] = static_cast<unsigned long>(level);
  if (level > 1)
    descend_c(level - 1);
  else
    spin();
  sink = sink + scratch[level % 24];
}

__attribute__((noipa)) void descend_a(int level)
{
  if (level > 1)
    descend_b(level - 1);
  else
    spin();
  __asm__ volatile("" ::: "memory"); // keeps the call from becoming a tail call
}

// Stops after `seconds`, or after `rounds` rounds when rounds > 0.
__attribute__((noipa)) unsigned long run(double seconds, unsigned long rounds)
{
  double end = now_seconds() + seconds;
  unsigned long done = 0;
  while (rounds > 0 ? done < rounds : now_seconds() < end) {
    descend_a(kLevels);
    done++;
  }
  return done;
}

int main(int argc, char** argv)
{
  if (argc == 3 && std::strcmp(argv[1], "--rounds") == 0) {
    double start = now_seconds();
    run(0, std::strtoul(argv[2], nullptr, 10));
    std::printf("%.6f\n", now_seconds() - start);
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SECONDS | --rounds N\n", argv[0]);
    return 2;
  }
  std::printf("%lu\n", run(std::atof(argv[1]), 0));
  return 0;
}
