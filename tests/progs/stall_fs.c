// A FUSE file system whose daemon stops answering on request, as a hostile or hung one does:
//
//   stall_fs MOUNTPOINT
//
// mounts (as root, in the foreground, single-threaded) a directory holding stalled.so and
// stalled.map, 64 KiB of zeros each, answered normally until the daemon gets SIGUSR1; from then on
// every request (lookup, getattr, open, read) waits for good. SIGTERM or SIGKILL end the daemon,
// which fails every waiting request. Prints "stall_fs ready" once mounted.
//
//   stall_fs MOUNTPOINT FILE OFFSET SIZE
//
// serves FILE's bytes as stalled.so instead. Once the daemon gets SIGUSR2, it stalls (as above) at
// the first read of a byte of [OFFSET, OFFSET + SIZE) that was read before since (reads reach the
// daemon as made, uncached): a profiler that reads a string table whole, then a name in it when a
// frame needs it, stalls at the name, while the program executing the file (started before, its
// code paged in with what the kernel read ahead) runs on.
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kFileBytes = 64 * 1024 };

static volatile sig_atomic_t g_stalled;
static volatile sig_atomic_t g_armed;

// stalled.so's bytes when served from a file, and the range whose pages stall when read again.
static char* g_content;
static size_t g_content_bytes = kFileBytes;
static size_t g_watched_at;
static size_t g_watched_bytes;
static unsigned char* g_byte_read; // per byte of the watched range

static void on_usr1(int signal_number)
{
  (void)signal_number;
  g_stalled = 1;
}

static void on_usr2(int signal_number)
{
  (void)signal_number;
  g_armed = 1;
}

// Waits until the daemon is killed, once stalled.
static void maybe_stall(void)
{
  while (g_stalled)
    pause();
}

static int is_file(const char* path)
{
  return strcmp(path, "/stalled.so") == 0 || strcmp(path, "/stalled.map") == 0;
}

static int fs_getattr(const char* path, struct stat* status, struct fuse_file_info* info)
{
  (void)info;
  maybe_stall();
  memset(status, 0, sizeof *status);
  if (strcmp(path, "/") == 0) {
    status->st_mode = S_IFDIR | 0755;
    status->st_nlink = 2;
    return 0;
  }
  if (!is_file(path))
    return -ENOENT;
  status->st_mode = S_IFREG | 0755;
  status->st_nlink = 1;
  status->st_size = strcmp(path, "/stalled.so") == 0 ? (off_t)g_content_bytes : kFileBytes;
  return 0;
}

static int fs_open(const char* path, struct fuse_file_info* info)
{
  (void)info;
  maybe_stall();
  return is_file(path) ? 0 : -ENOENT;
}

static int
fs_read(const char* path, char* buffer, size_t size, off_t offset, struct fuse_file_info* info)
{
  (void)info;
  maybe_stall();
  size_t file_bytes = strcmp(path, "/stalled.so") == 0 ? g_content_bytes : kFileBytes;
  if (offset < 0 || (size_t)offset >= file_bytes)
    return 0;
  size_t left = file_bytes - (size_t)offset;
  size_t n = size < left ? size : left;
  if (g_content && strcmp(path, "/stalled.so") == 0 && g_armed) {
    size_t begin = (size_t)offset, end = begin + n;
    size_t watched_end = g_watched_at + g_watched_bytes;
    size_t first = begin > g_watched_at ? begin : g_watched_at;
    size_t last = end < watched_end ? end : watched_end;
    for (size_t at = first; at < last; at++) {
      if (g_byte_read[at - g_watched_at]) {
        g_stalled = 1;
        maybe_stall();
      }
    }
    for (size_t at = first; at < last; at++)
      g_byte_read[at - g_watched_at] = 1;
  }
  if (g_content && strcmp(path, "/stalled.so") == 0) {
    memcpy(buffer, g_content + offset, n);
  } else {
    memset(buffer, 0, n);
  }
  return (int)n;
}

static int fs_readdir(const char* path,
                      void* buffer,
                      fuse_fill_dir_t fill,
                      off_t offset,
                      struct fuse_file_info* info,
                      enum fuse_readdir_flags flags)
{
  (void)offset;
  (void)info;
  (void)flags;
  maybe_stall();
  if (strcmp(path, "/") != 0)
    return -ENOENT;
  fill(buffer, ".", NULL, 0, 0);
  fill(buffer, "..", NULL, 0, 0);
  fill(buffer, "stalled.so", NULL, 0, 0);
  fill(buffer, "stalled.map", NULL, 0, 0);
  return 0;
}

static void* fs_init(struct fuse_conn_info* connection, struct fuse_config* config)
{
  (void)connection;
  // No caching: once stalled, every access reaches the daemon.
  config->entry_timeout = 0;
  config->attr_timeout = 0;
  config->negative_timeout = 0;
  config->direct_io = 1;
  printf("stall_fs ready\n");
  fflush(stdout);
  return NULL;
}

static const struct fuse_operations kOperations = {
    .getattr = fs_getattr,
    .open = fs_open,
    .read = fs_read,
    .readdir = fs_readdir,
    .init = fs_init,
};

int main(int argc, char** argv)
{
  if (argc != 2 && argc != 5) {
    fprintf(stderr, "usage: stall_fs MOUNTPOINT [FILE OFFSET SIZE]\n");
    return 2;
  }
  if (argc == 5) {
    FILE* file = fopen(argv[2], "rb");
    struct stat status;
    if (!file || fstat(fileno(file), &status) != 0 || status.st_size <= 0) {
      fprintf(stderr, "stall_fs: cannot read %s\n", argv[2]);
      return 1;
    }
    g_content_bytes = (size_t)status.st_size;
    g_content = malloc(g_content_bytes);
    if (!g_content || fread(g_content, 1, g_content_bytes, file) != g_content_bytes) {
      fprintf(stderr, "stall_fs: cannot read %s\n", argv[2]);
      return 1;
    }
    fclose(file);
    g_watched_at = strtoull(argv[3], NULL, 0);
    g_watched_bytes = strtoull(argv[4], NULL, 0);
    g_byte_read = calloc(g_watched_bytes + 1, 1);
    if (!g_byte_read || g_watched_bytes == 0)
      return 1;
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_usr1;
  sigaction(SIGUSR1, &action, NULL);
  action.sa_handler = on_usr2;
  sigaction(SIGUSR2, &action, NULL);
  char* fuse_argv[] = {argv[0], "-f", "-s", argv[1], NULL};
  return fuse_main(4, fuse_argv, &kOperations, NULL);
}
