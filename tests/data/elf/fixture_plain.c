// ELF fixture for the symbolizer tests: a shared library with ordinary layout (the executable
// segment's p_vaddr equals its p_offset). Built with -O1 -fno-inline so each function keeps its
// own symbol and body.

int fb_fixture_alpha(int n);
int fb_fixture_beta(int n);

static volatile int fb_fixture_sink;

// Not exported: only .symtab (or a separate debug file) names it, never .dynsym.
__attribute__((noinline)) static int fb_fixture_hidden(int n)
{
  int acc = 7;
  for (int i = 0; i < n; ++i) {
    acc = acc * 5 + i;
    fb_fixture_sink = acc;
  }
  return acc;
}

int fb_fixture_alpha(int n)
{
  int acc = 0;
  for (int i = 0; i < n; ++i) {
    acc += i * 3;
    fb_fixture_sink = acc;
  }
  return acc;
}

int fb_fixture_beta(int n)
{
  int acc = 1;
  for (int i = 1; i < n; ++i) {
    acc ^= i << 2;
    fb_fixture_sink = acc;
  }
  return acc + fb_fixture_alpha(n) + fb_fixture_hidden(n);
}
