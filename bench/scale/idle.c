// The idle containers' program in the scale benchmark (bench/scale.sh): built static, so that an
// idle container maps one small file and nothing else, and it sleeps until it is stopped. As a
// container's PID 1 it would ignore SIGTERM without a handler of its own.
#include <signal.h>
#include <unistd.h>

static void stop(int signal_number)
{
  (void)signal_number;
  _exit(0);
}

int main(void)
{
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  for (;;)
    pause();
}
