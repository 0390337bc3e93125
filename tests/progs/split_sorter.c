// A workload built without frame pointers whose work runs through glibc's qsort (with a
// comparison function of its own) and memcpy, reached through two callers at a known split:
// heavy_caller runs sort_and_copy three times for each time light_caller runs it once, so 3/4
// of the samples fall under heavy_caller and 1/4 under light_caller. Only a profiler that
// unwinds through glibc (which has no frame pointers) and through these functions (built
// -fomit-frame-pointer) from their CFI sees main;run;heavy_caller;sort_and_copy;qsort;...
//   split_sorter 5            works for 5 seconds
//   split_sorter --rounds N   does N rounds of fixed work and prints the seconds they took
//
// Every function here is noipa (no inlining, cloning or other interprocedural changes), so its
// symbol stays what the tests expect, and every call is followed by a compiler barrier, so that
// it stays a call instead of becoming a jump (a tail call would drop the caller from the stack).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define kRecords 2048
#define kCopyBytes (256 * 1024)

struct record {
  unsigned key;
  unsigned payload[3];
};

static struct record unsorted[kRecords];
static struct record sorted[kRecords];
static unsigned char copy_source[kCopyBytes];
static unsigned char copy_target[kCopyBytes];
static volatile unsigned long sink;

static double now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noipa)) int compare_records(const void* left, const void* right)
{
  unsigned a = ((const struct record*)left)->key;
  unsigned b = ((const struct record*)right)->key;
  return (a > b) - (a < b);
}

// The same work on every call: the records are sorted from the same unsorted copy, and the
// copy moves the same bytes.
__attribute__((noipa)) void sort_and_copy(void)
{
  memcpy(sorted, unsorted, sizeof sorted);
  qsort(sorted, kRecords, sizeof sorted[0], compare_records);
  for (int i = 0; i < 8; i++) {
    memcpy(copy_target, copy_source, sizeof copy_target);
    __asm__ volatile("" ::: "memory"); // keeps every copy
  }
  sink += sorted[kRecords / 2].key + copy_target[kCopyBytes / 2];
}

__attribute__((noipa)) void heavy_caller(void)
{
  for (int i = 0; i < 3; i++) {
    sort_and_copy();
    __asm__ volatile("" ::: "memory"); // keeps the call from becoming a tail call
  }
}

__attribute__((noipa)) void light_caller(void)
{
  sort_and_copy();
  __asm__ volatile("" ::: "memory");
}

// Stops after `seconds`, or after `rounds` calls of each caller when rounds > 0. The callers
// take turns in a fixed pseudo-random order, half the calls each: a sampler whose period is
// close to a multiple of a fixed heavy-then-light round would land on the same caller again and
// again (aliasing), so one second's split could read 84:16; in a random order, a sample lands in
// heavy_caller's work 3 times in 4 whatever its phase.
__attribute__((noipa)) unsigned long run(double seconds, unsigned long rounds)
{
  double end = now_seconds() + seconds;
  unsigned long heavy_calls = 0;
  unsigned long light_calls = 0;
  unsigned state = 2463534242u;
  while (rounds > 0 ? heavy_calls < rounds || light_calls < rounds : now_seconds() < end) {
    state ^= state << 13; // xorshift32
    state ^= state >> 17;
    state ^= state << 5;
    int heavy = rounds > 0 && heavy_calls == rounds   ? 0
                : rounds > 0 && light_calls == rounds ? 1
                                                      : (int)(state & 1);
    if (heavy) {
      heavy_caller();
      heavy_calls++;
    } else {
      light_caller();
      light_calls++;
    }
    __asm__ volatile("" ::: "memory");
  }
  return heavy_calls < light_calls ? heavy_calls : light_calls;
}

int main(int argc, char** argv)
{
  // Keys from a fixed linear congruential sequence: the same shuffle in every run.
  unsigned state = 12345;
  for (int i = 0; i < kRecords; i++) {
    state = state * 1103515245u + 12345u;
    unsorted[i].key = state >> 8;
  }
  memset(copy_source, 0x5a, sizeof copy_source);
  if (argc == 3 && strcmp(argv[1], "--rounds") == 0) {
    double start = now_seconds();
    run(0, strtoul(argv[2], NULL, 10));
    printf("%.6f\n", now_seconds() - start);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s SECONDS | --rounds N\n", argv[0]);
    return 2;
  }
  printf("%lu\n", run(atof(argv[1]), 0));
  return 0;
}
