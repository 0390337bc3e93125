// inline_spinner.c in C++: the inlined functions live in a namespace, and one is a template, so
// their DWARF carries linkage names (DW_AT_linkage_name) to demangle.
// Usage: inline_spinner_cpp [SECONDS]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace spinner {

template <typename Word> inline __attribute__((always_inline)) Word leaf_mix(Word state)
{
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state * Word{0x9e3779b97f4a7c15ull};
}

inline __attribute__((always_inline)) uint64_t middle_step(uint64_t state, int rounds)
{
  for (int i = 0; i < rounds; ++i)
    state = leaf_mix<uint64_t>(state + static_cast<uint64_t>(i));
  return state;
}

// noinline: the real function that samples land in, with its callees inlined.
__attribute__((noinline)) uint64_t outer_work(double seconds)
{
  using Clock = std::chrono::steady_clock;
  uint64_t state = 0x1234567;
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    state = middle_step(state, 1 << 16);
  } while (Clock::now() < end);
  return state;
}

} // namespace spinner

int main(int argc, char** argv)
{
  double seconds = argc > 1 ? std::atof(argv[1]) : 5;
  std::printf("%llx\n", static_cast<unsigned long long>(spinner::outer_work(seconds)));
  return 0;
}
