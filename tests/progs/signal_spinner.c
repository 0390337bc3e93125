// A workload built without frame pointers whose work runs inside signal handlers, reached through
// two senders at a known split: on_own_stack raises SIGUSR1, whose handler runs on the thread's
// stack, and spins 1 ms of thread CPU time; on_alternate_stack raises SIGUSR2, whose handler runs
// on a sigaltstack, and spins 3 ms. So 3/4 of the samples fall under on_alternate_stack and 1/4
// under on_own_stack, and only an unwinder that steps through the kernel's signal frame (glibc's
// __restore_rt), and for SIGUSR2 from the alternate stack back to the thread's, reaches main.
//   signal_spinner 5     works for 5 seconds
//
// Every function here is noipa and every call is followed by a compiler barrier, as in
// split_sorter.c, so that the stack is what the tests expect.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define kAlternateStackBytes (64 * 1024)

static volatile unsigned long sink;
static unsigned char alternate_stack[kAlternateStackBytes];

static double clock_seconds(clockid_t clock)
{
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noipa)) void spin_for(double seconds)
{
  double end = clock_seconds(CLOCK_THREAD_CPUTIME_ID) + seconds;
  while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 1000; i++)
      sink += i;
  }
}

__attribute__((noipa)) void handle_on_own_stack(int signal_number)
{
  (void)signal_number;
  spin_for(0.001);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) void handle_on_alternate_stack(int signal_number)
{
  (void)signal_number;
  spin_for(0.003);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) void on_own_stack(void)
{
  raise(SIGUSR1);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) void on_alternate_stack(void)
{
  raise(SIGUSR2);
  __asm__ volatile("" ::: "memory");
}

__attribute__((noipa)) void run(double seconds)
{
  double end = clock_seconds(CLOCK_MONOTONIC) + seconds;
  while (clock_seconds(CLOCK_MONOTONIC) < end) {
    on_own_stack();
    on_alternate_stack();
  }
}

static void install(int signal_number, void (*handler)(int), int flags)
{
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = handler;
  action.sa_flags = flags;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, NULL) != 0) {
    perror("sigaction");
    exit(1);
  }
}

int main(int argc, char** argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: %s SECONDS\n", argv[0]);
    return 2;
  }
  stack_t stack = {.ss_sp = alternate_stack, .ss_size = sizeof alternate_stack};
  if (sigaltstack(&stack, NULL) != 0) {
    perror("sigaltstack");
    return 1;
  }
  install(SIGUSR1, handle_on_own_stack, 0);
  install(SIGUSR2, handle_on_alternate_stack, SA_ONSTACK);
  run(atof(argv[1]));
  return 0;
}
