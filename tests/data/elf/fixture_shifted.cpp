// ELF fixture for the symbolizer tests: a shared library linked with .text at 0x40000 in its own
// segment, so that segment's p_vaddr differs from its p_offset (and from the first segment's
// bias). Holds a C++ function in a namespace, to check demangling, and a C one.

namespace fb_fixture::shifted {

int compute(int n);

} // namespace fb_fixture::shifted

extern "C" int fb_fixture_gamma(int n);

namespace {

volatile int sink;

} // namespace

int fb_fixture::shifted::compute(int n)
{
  int acc = 7;
  for (int i = 0; i < n; ++i) {
    acc = acc * 31 + (i ^ 5);
    sink = acc;
  }
  return acc;
}

extern "C" int fb_fixture_gamma(int n)
{
  int acc = fb_fixture::shifted::compute(n);
  for (int i = 0; i < n; ++i) {
    acc -= i;
    sink = acc;
  }
  return acc;
}
