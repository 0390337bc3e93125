// A process whose code flamebpf names only from ELF symbol tables, for the hostile-ELF container
// tests: it spins in local functions that only .symtab (or a separate debug file) names, or in a
// function whose mangled name demangles to megabytes; it can also map hundreds of ELF files.
//
//   elf_spinner [--copies N SOURCE DIR] [--deleted N SOURCE DIR TARGET] [exponential]
//
//   --copies N SOURCE DIR  copy the ELF file SOURCE to DIR/lib<i>.so for i < N (DIR is created)
//                          and map each whole copy executable, as a process loading N libraries
//   --deleted N SOURCE DIR TARGET
//                          start N child processes that each copy SOURCE to DIR/lib<i>.bin, map
//                          it executable, delete it, make "DIR/lib<i>.bin (deleted)" (the name
//                          the mapping now shows) a symlink to TARGET, and then split and merge
//                          the mapping without end (changing its last page's protection), so
//                          that the range /proc/<pid>/maps shows is gone from map_files by the
//                          time a profiler opens it
//   exponential            spin in the function with the exponential mangled name (below)
// Then "spinner ready" goes to stdout and the process spins for 10 minutes at most, in
// main -> elf_spinner_outer -> elf_spinner_inner (or -> the exponential function).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static void die(const char* what, const char* detail)
{
  fprintf(stderr, "elf_spinner: %s %s: %s\n", what, detail, strerror(errno));
  exit(1);
}

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) void burn(void)
{
  for (unsigned long i = 0; i < 100000; ++i)
    sink += i * i;
}

// Local (static) functions: only .symtab names them, and the stripped copies have none.
__attribute__((noinline)) static void elf_spinner_inner(void)
{
  burn();
}

// A 234-byte mangled name whose demangling doubles with each of its 20 template arguments: 27 MB
// of "f(X, A<X, X>, A<A<X, X>, A<X, X> >, ...".
__attribute__((noinline)) static void exponential(void) __asm__(
    "_Z1f1X1AIS_S_ES0_IS1_S1_ES0_IS2_S2_ES0_IS3_S3_ES0_IS4_S4_ES0_IS5_S5_ES0_IS6_S6_ES0_IS7_S7_"
    "ES0_IS8_S8_ES0_IS9_S9_ES0_ISA_SA_ES0_ISB_SB_ES0_ISC_SC_ES0_ISD_SD_ES0_ISE_SE_ES0_ISF_SF_ES0_"
    "ISG_SG_ES0_ISH_SH_ES0_ISI_SI_ES0_ISJ_SJ_ES0_ISK_SK_E");
static void exponential(void)
{
  burn();
}

__attribute__((noinline)) static void elf_spinner_outer(int exponential_mode)
{
  if (exponential_mode)
    exponential();
  else
    elf_spinner_inner();
}

static void map_copies(int count, const char* source, const char* dir)
{
  int in = open(source, O_RDONLY);
  struct stat status;
  if (in < 0 || fstat(in, &status) != 0)
    die("cannot open", source);
  char* bytes = malloc((size_t)status.st_size);
  if (!bytes || read(in, bytes, (size_t)status.st_size) != status.st_size)
    die("cannot read", source);
  close(in);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    die("cannot create", dir);
  for (int i = 0; i < count; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lib%d.so", dir, i);
    int out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0755);
    if (out < 0 || write(out, bytes, (size_t)status.st_size) != status.st_size)
      die("cannot write", path);
    // The mapping keeps the file; the descriptor is not needed.
    if (mmap(NULL, (size_t)status.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, out, 0) ==
        MAP_FAILED)
      die("cannot map", path);
    close(out);
  }
  free(bytes);
}

static void* split_and_merge(void* mapping)
{
  for (;;) {
    mprotect((char*)mapping + 3 * 4096, 4096, PROT_READ);
    mprotect((char*)mapping + 3 * 4096, 4096, PROT_READ | PROT_EXEC);
  }
  return NULL;
}

static void spin(int exponential_mode)
{
  double end = now() + 600;
  while (now() < end)
    elf_spinner_outer(exponential_mode);
}

static void start_deleted(int count, const char* source, const char* dir, const char* target)
{
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    die("cannot create", dir);
  for (int i = 0; i < count; ++i) {
    char path[4096];
    char deleted[4200];
    snprintf(path, sizeof path, "%s/lib%d.bin", dir, i);
    snprintf(deleted, sizeof deleted, "%s (deleted)", path);
    pid_t child = fork();
    if (child < 0)
      die("cannot fork for", path);
    if (child > 0)
      continue;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int in = open(source, O_RDONLY);
    int out = open(path, O_RDWR | O_CREAT | O_TRUNC, 0755);
    char buffer[65536];
    ssize_t n;
    while (in >= 0 && out >= 0 && (n = read(in, buffer, sizeof buffer)) > 0)
      if (write(out, buffer, (size_t)n) != n)
        die("cannot write", path);
    struct stat status;
    if (out < 0 || fstat(out, &status) != 0 || status.st_size < 4 * 4096)
      die("cannot copy to", path);
    void* mapping = mmap(NULL, 4 * 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, out, 0);
    if (mapping == MAP_FAILED)
      die("cannot map", path);
    close(in);
    close(out);
    if (unlink(path) != 0 || symlink(target, deleted) != 0)
      die("cannot replace", path);
    // The churning thread alone keeps the child busy, and sampled.
    split_and_merge(mapping);
    exit(0);
  }
}

int main(int argc, char** argv)
{
  int exponential_mode = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--copies") == 0 && i + 3 < argc) {
      map_copies(atoi(argv[i + 1]), argv[i + 2], argv[i + 3]);
      i += 3;
    } else if (strcmp(argv[i], "--deleted") == 0 && i + 4 < argc) {
      start_deleted(atoi(argv[i + 1]), argv[i + 2], argv[i + 3], argv[i + 4]);
      i += 4;
    } else if (strcmp(argv[i], "exponential") == 0) {
      exponential_mode = 1;
    } else {
      fprintf(stderr, "elf_spinner: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  printf("spinner ready\n");
  fflush(stdout);
  spin(exponential_mode);
  return 0;
}
