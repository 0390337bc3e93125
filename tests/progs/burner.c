// A CPU-bound workload with a distinctive call chain (main;run;a;b;c) for the integration tests
// and the benchmark.
//   burner 5              burns CPU for 5 seconds in c(), called through run, a and b
//   burner 0.5            a short-lived process
//   burner --rounds N     does N rounds of fixed work and prints the seconds they took, so that
//                         elapsed time grows with whatever a profiler takes from it
//   burner --late-thread D S
//                         sleeps D seconds, then burns S seconds in a thread it starts then
//                         (late_thread;run;a;b;c), for a profiler attached before the thread was
//   burner --clock S      reads the clock for S seconds (main;read_clock;clock_gettime), in the
//                         vDSO's code
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

// Stops after `seconds`, or after `rounds` rounds when rounds > 0.
__attribute__((noinline)) unsigned long run(double seconds, unsigned long rounds)
{
  double end = now_seconds() + seconds;
  unsigned long done = 0;
  while (rounds > 0 ? done < rounds : now_seconds() < end) {
    a();
    done++;
  }
  return done;
}

__attribute__((noinline)) static void read_clock(double seconds)
{
  double end = now_seconds() + seconds;
  while (now_seconds() < end) {
  }
}

static double late_thread_seconds;

__attribute__((noinline)) static void* late_thread(void* unused)
{
  (void)unused;
  run(late_thread_seconds, 0);
  return NULL;
}

int main(int argc, char** argv)
{
  if (argc == 4 && strcmp(argv[1], "--late-thread") == 0) {
    double delay = atof(argv[2]);
    late_thread_seconds = atof(argv[3]);
    struct timespec pause = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
    nanosleep(&pause, NULL);
    pthread_t thread;
    if (pthread_create(&thread, NULL, late_thread, NULL) != 0)
      return 1;
    pthread_join(thread, NULL);
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "--clock") == 0) {
    read_clock(atof(argv[2]));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "--rounds") == 0) {
    double start = now_seconds();
    run(0, strtoul(argv[2], NULL, 10));
    printf("%.6f\n", now_seconds() - start);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr,
            "usage: %s SECONDS | --rounds N | --late-thread DELAY SECONDS | --clock SECONDS\n",
            argv[0]);
    return 2;
  }
  unsigned long rounds = run(atof(argv[1]), 0);
  printf("%lu\n", rounds);
  return 0;
}
