// Maps a file as executable code and burns CPU in code of its own, so that a profiler that
// samples it opens the mapped file to name its frames:
//
//   maps_file PATH SECONDS
//
// Prints "maps_file ready" once the file is mapped.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void burn(void)
{
  for (unsigned long i = 0; i < 100000; i++)
    sink = sink * 2654435761u + i;
}

int main(int argc, char** argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: maps_file PATH SECONDS\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat status;
  if (fd < 0 || fstat(fd, &status) != 0 || status.st_size == 0) {
    perror(argv[1]);
    return 1;
  }
  void* code = mmap(NULL, (size_t)status.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (code == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  close(fd);
  printf("maps_file ready\n");
  fflush(stdout);
  time_t end = time(NULL) + atol(argv[2]);
  while (time(NULL) < end)
    burn();
  return 0;
}
