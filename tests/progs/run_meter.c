// Runs a program as its child and reports what the child cost: the peak resident set, CPU time and
// bytes read of that program alone. A process's peak RSS (ru_maxrss, VmHWM) starts at that of the
// process it was forked from, so a program started by a long-lived test process would report the
// test's own memory as its peak; started by this small process, it reports its own.
//
//   run_meter [--new-session] REPORT PROGRAM [ARG]...
//
// --new-session makes PROGRAM the leader of a session of its own, without a controlling terminal,
// as a service manager starts a daemon.
// REPORT is a file (created or truncated) that gets, as soon as PROGRAM runs, its pid on a line;
// then, when it has exited, a line "<wait status> <peak RSS in KiB> <user µs> <system µs>
// <bytes read (rchar)>" (a PROGRAM that cannot be run exits 127, one that cannot have its
// session 126). Everything else the child gets
// unchanged: standard streams, environment, session, limits, signal dispositions.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static long long micros(struct timeval time)
{
  return (long long)time.tv_sec * 1000000 + time.tv_usec;
}

// rchar of /proc/<pid>/io: read while the exited child is not yet reaped.
static unsigned long long bytes_read(pid_t pid)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
  FILE* io = fopen(path, "re");
  unsigned long long rchar = 0;
  if (io == NULL)
    return 0;
  char line[128];
  while (fgets(line, sizeof line, io) != NULL) {
    if (strncmp(line, "rchar: ", 7) == 0)
      rchar = strtoull(line + 7, NULL, 10);
  }
  fclose(io);
  return rchar;
}

int main(int argc, char** argv)
{
  int new_session = argc > 1 && strcmp(argv[1], "--new-session") == 0;
  argv += new_session;
  argc -= new_session;
  if (argc < 3) {
    fprintf(stderr, "usage: run_meter [--new-session] REPORT PROGRAM [ARG]...\n");
    return 2;
  }
  int report = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (report < 0) {
    perror(argv[1]);
    return 2;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 2;
  }
  if (child == 0) {
    if (new_session && setsid() < 0)
      _exit(126);
    execv(argv[2], argv + 2);
    _exit(127);
  }
  dprintf(report, "%d\n", (int)child);
  siginfo_t exited;
  memset(&exited, 0, sizeof exited);
  while (waitid(P_PID, (id_t)child, &exited, WEXITED | WNOWAIT) != 0) {
  }
  unsigned long long rchar = bytes_read(child);
  int status = 0;
  struct rusage usage;
  memset(&usage, 0, sizeof usage);
  while (wait4(child, &status, 0, &usage) != child) {
  }
  dprintf(report, "%d %ld %lld %lld %llu\n", status, usage.ru_maxrss, micros(usage.ru_utime),
          micros(usage.ru_stime), rchar);
  close(report);
  return 0;
}
