// A process whose code flamebpf names only from ELF symbol tables, for the hostile-ELF container
// tests: it spins in local functions that only .symtab (or a separate debug file) names, or in a
// function whose mangled name demangles to megabytes; it can also map hundreds of ELF files.
//
//   elf_spinner [--copies N SOURCE DIR] [exponential]
//
//   --copies N SOURCE DIR  copy the ELF file SOURCE to DIR/lib<i>.so for i < N (DIR is created)
//                          and map each whole copy executable, as a process loading N libraries
//   exponential            spin in the function with the exponential mangled name (below)
// Then "spinner ready" goes to stdout and the process spins for 10 minutes at most, in
// main -> elf_spinner_outer -> elf_spinner_inner (or -> the exponential function).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

int main(int argc, char** argv)
{
  int exponential_mode = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--copies") == 0 && i + 3 < argc) {
      map_copies(atoi(argv[i + 1]), argv[i + 2], argv[i + 3]);
      i += 3;
    } else if (strcmp(argv[i], "exponential") == 0) {
      exponential_mode = 1;
    } else {
      fprintf(stderr, "elf_spinner: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  printf("spinner ready\n");
  fflush(stdout);
  double end = now() + 600;
  while (now() < end)
    elf_spinner_outer(exponential_mode);
  return 0;
}
