// A CPU-bound workload with a distinctive call chain (main;run;a;b;c) for the integration tests
// and the benchmark. Usage: burner SECONDS [spin|exit]
//   burner 5        burns CPU for 5 seconds in c(), called through run, a and b
//   burner 0.5      a short-lived process
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void c(void)
{
  for (unsigned long i = 0; i < 200000; i++)
    sink = sink * 2654435761u + i;
}

__attribute__((noinline)) void b(void)
{
  c();
  __asm__ volatile("" ::: "memory"); // keeps the call from becoming a tail call
}

__attribute__((noinline)) void a(void)
{
  b();
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) unsigned long run(double seconds)
{
  double end = now_seconds() + seconds;
  unsigned long rounds = 0;
  while (now_seconds() < end) {
    a();
    rounds++;
  }
  return rounds;
}

int main(int argc, char** argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
    return 2;
  }
  unsigned long rounds = run(atof(argv[1]));
  printf("%lu\n", rounds);
  return 0;
}
