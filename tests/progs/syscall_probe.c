// Makes the system calls it is named, each with arguments that change nothing, and prints the
// errno each failed with, one line a call ("mount EPERM"; "mount 0" if it succeeded):
//
//   syscall_probe NAME...
//
// NAME is one of mount (of a tmpfs on a path that does not exist), init_module (of no bytes),
// kexec_load (with a flag that does not exist), reboot (with a wrong magic number), which flamebpf
// never makes, and bpf (with a command that does not exist), which it does. Linked as flamebpf is
// (dynamically, with glibc), so that what it calls before them flamebpf calls too. Exits 2 for an
// unknown NAME.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// 0 if the call succeeded, its errno if it failed, -1 for a name it does not know.
static int call(const char* name)
{
  long result;
  if (strcmp(name, "mount") == 0)
    result = syscall(SYS_mount, "none", "/nonexistent/flamebpf-syscall-probe", "tmpfs", 0L, NULL);
  else if (strcmp(name, "init_module") == 0)
    result = syscall(SYS_init_module, NULL, 0L, "");
  else if (strcmp(name, "kexec_load") == 0)
    result = syscall(SYS_kexec_load, 0L, 0L, NULL, 0x8000L);
  else if (strcmp(name, "reboot") == 0)
    result = syscall(SYS_reboot, 0L, 0L, 0L, NULL);
  else if (strcmp(name, "bpf") == 0)
    result = syscall(SYS_bpf, 0xffffL, NULL, 0L);
  else
    return -1;
  return result == -1 ? errno : 0;
}

int main(int argc, char** argv)
{
  for (int i = 1; i < argc; ++i) {
    int error_number = call(argv[i]);
    if (error_number < 0) {
      fprintf(stderr, "syscall_probe: unknown call %s\n", argv[i]);
      return 2;
    }
    printf("%s %s\n", argv[i], error_number == 0 ? "0" : strerrorname_np(error_number));
    fflush(stdout);
  }
  return 0;
}
