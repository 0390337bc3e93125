// Burns CPU inside functions the compiler inlines, for the tests of naming inlined frames from
// DWARF (dwarf_inlines_test.cpp) and of profiling them: leaf_mix is inlined into middle_step,
// which is inlined into outer_work, a real function that spins for argv[1] seconds (default 5).
// Usage: inline_spinner [SECONDS]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline __attribute__((always_inline)) uint64_t leaf_mix(uint64_t state)
{
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state * 0x9e3779b97f4a7c15ull;
}

static inline __attribute__((always_inline)) uint64_t middle_step(uint64_t state, int rounds)
{
  for (int i = 0; i < rounds; ++i)
    state = leaf_mix(state + (uint64_t)i);
  return state;
}

static double seconds_now(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

// noinline: the real function that samples land in, with its callees inlined.
__attribute__((noinline)) uint64_t outer_work(double seconds)
{
  uint64_t state = 0x1234567;
  double end = seconds_now() + seconds;
  do {
    state = middle_step(state, 1 << 16);
  } while (seconds_now() < end);
  return state;
}

int main(int argc, char** argv)
{
  double seconds = argc > 1 ? atof(argv[1]) : 5;
  printf("%llx\n", (unsigned long long)outer_work(seconds));
  return 0;
}
