// A FUSE file system whose daemon stops answering on request, as a hostile or hung one does:
//
//   stall_fs MOUNTPOINT
//
// mounts (as root, in the foreground, single-threaded) a directory holding stalled.so and
// stalled.map, 64 KiB of zeros each, answered normally until the daemon gets SIGUSR1; from then on
// every request (lookup, getattr, open, read) waits for good. SIGTERM or SIGKILL end the daemon,
// which fails every waiting request. Prints "stall_fs ready" once mounted.
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kFileBytes = 64 * 1024 };

static volatile sig_atomic_t g_stalled;

static void on_usr1(int signal_number)
{
  (void)signal_number;
  g_stalled = 1;
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
  status->st_size = kFileBytes;
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
  (void)path;
  (void)info;
  maybe_stall();
  if (offset >= kFileBytes)
    return 0;
  size_t left = (size_t)(kFileBytes - offset);
  size_t n = size < left ? size : left;
  memset(buffer, 0, n);
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
  if (argc != 2) {
    fprintf(stderr, "usage: stall_fs MOUNTPOINT\n");
    return 2;
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_usr1;
  sigaction(SIGUSR1, &action, NULL);
  char* fuse_argv[] = {argv[0], "-f", "-s", argv[1], NULL};
  return fuse_main(4, fuse_argv, &kOperations, NULL);
}
