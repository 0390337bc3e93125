// A process that spins in code it generated in anonymous executable memory, as a JIT does, and
// names that code (or fails to) in its perf map in the hostile ways the container tests need:
// links out of the container, special files, huge, growing or garbled maps. It can also pose as a
// HotSpot JVM (a mapped file named libjvm.so) whose attach socket never answers or answers
// garbage, and carry a forged process name.
//
//   jit_spinner [OPTION]... MODE [NAME]...
//
// Options (TEXT, PATH and TARGET take the escapes \n \t \\ \xHH; "%p" in a PATH is the pid):
//   --comm TEXT          set the process name (prctl PR_SET_NAME: at most 15 bytes)
//   --jvm                map a file libjvm.so (made in the working directory) and handle
//                        SIGQUIT, so that profilers take this for a started JVM
//   --socket KIND        listen on /tmp/.java_pid<pid> (mode 0600, as HotSpot does) and, per
//                        connection, never answer (silent), answer a garbage line and close
//                        (garbage), or send garbage without end (flood)
//   --mkdir PATH         create a directory
//   --link PATH=TARGET   replace PATH (an empty directory or a file) by a symlink to TARGET
//   --map PATH           where MODE writes the perf map (default /tmp/perf-%p.map)
//   --owner UID          once the map is written, give it to user UID (chown, as root can)
//   -X...                ignored, so that a JVM's flags can be on the command line
// Options take effect in the order given, before MODE; then "spinner ready" goes to stdout and the
// process spins for 10 minutes at most.
//
// MODE:
//   none                 no perf map
//   valid NAME...        a chain of generated functions, outermost first, each named by a line
//   fifo                 the map is a FIFO
//   device               the map is a character device (1,5: /dev/zero)
//   sparse NAME          a valid line, then a hole up to 10 GiB
//   grow NAME            a valid line, then lines appended without end (a new distinct entry
//                        each, 64 MiB/s, starting over at 512 MiB)
//   long NAME            64 lines of 1 MiB each, then a valid line
//   garbage NAME         8 MiB of random bytes, lines whose addresses overflow, then a valid line
//   heavy NAME           a valid line, then 64 MiB (sparse: names are mostly holes) of entries:
//                        one range with a 60 KiB name, 8192 small ranges splitting it, then
//                        ranges with distinct names of 16 KiB less 64 bytes
//   many NAME            a valid line, then distinct short entries, 256 Ki ranges in all (what
//                        one map may hold): a map that costs its reader ranges, not names
//   inline NAME COUNT    120 generated functions, each calling the next (as recursion does),
//                        named by one line: a chain of COUNT methods NAME, as inlining writes
//   replace NAME         four maps of 32 MiB (a valid line, then distinct short entries) made
//                        beside the map, renamed over it in turn, one every 3 ms
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { kStubBytes = 64, kMaxStubs = 128, kMaxNames = 32, kInlineStubs = 120, kReplacements = 4 };

static void die(const char* what, const char* detail)
{
  fprintf(stderr, "jit_spinner: %s %s: %s\n", what, detail, strerror(errno));
  exit(1);
}

// Decodes \n \t \\ \xHH in place.
static char* unescape(char* text)
{
  char* out = text;
  for (const char* in = text; *in;) {
    if (in[0] == '\\' && in[1] == 'n') {
      *out++ = '\n';
      in += 2;
    } else if (in[0] == '\\' && in[1] == 't') {
      *out++ = '\t';
      in += 2;
    } else if (in[0] == '\\' && in[1] == '\\') {
      *out++ = '\\';
      in += 2;
    } else if (in[0] == '\\' && in[1] == 'x' && in[2] && in[3]) {
      char hex[3] = {in[2], in[3], 0};
      *out++ = (char)strtol(hex, NULL, 16);
      in += 4;
    } else {
      *out++ = *in++;
    }
  }
  *out = 0;
  return text;
}

// A path with "%p" replaced by the pid, unescaped.
static char* expand(const char* pattern)
{
  static char buffers[8][4096];
  static int next;
  char* out = buffers[next++ % 8];
  char copy[4096];
  snprintf(copy, sizeof copy, "%s", pattern);
  unescape(copy);
  size_t used = 0;
  for (const char* in = copy; *in && used + 16 < sizeof buffers[0];) {
    if (in[0] == '%' && in[1] == 'p') {
      used += (size_t)snprintf(out + used, 16, "%d", (int)getpid());
      in += 2;
    } else {
      out[used++] = *in++;
    }
  }
  out[used] = 0;
  return out;
}

static void write_all(int fd, const char* data, size_t size)
{
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      die("cannot write", "the perf map");
    data += n;
    size -= (size_t)n;
  }
}

// --- generated code ---

static unsigned char* g_code;
static size_t g_stubs;

// Stub i calls stub i + 1 with a frame of its own (so frame-pointer unwinding walks through every
// stub); the last one spins.
static void generate(size_t count)
{
  g_code = mmap(NULL, kMaxStubs * kStubBytes, PROT_READ | PROT_WRITE | PROT_EXEC,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (g_code == MAP_FAILED)
    die("cannot map", "executable memory");
  g_stubs = count;
  for (size_t i = 0; i < count; ++i) {
    unsigned char* stub = g_code + i * kStubBytes;
    size_t at = 0;
#if defined(__x86_64__)
    const unsigned char prologue[] = {0x55, 0x48, 0x89, 0xe5}; // push %rbp; mov %rsp,%rbp
    memcpy(stub, prologue, sizeof prologue);
    at = sizeof prologue;
    if (i + 1 < count) {
      uint64_t next = (uint64_t)(uintptr_t)(g_code + (i + 1) * kStubBytes);
      stub[at++] = 0x48; // movabs $next,%rax
      stub[at++] = 0xb8;
      memcpy(stub + at, &next, sizeof next);
      at += sizeof next;
      const unsigned char call_return[] = {0xff, 0xd0, 0x5d, 0xc3}; // call *%rax; pop %rbp; ret
      memcpy(stub + at, call_return, sizeof call_return);
    } else {
      stub[at++] = 0xeb; // jmp .
      stub[at++] = 0xfe;
    }
#elif defined(__aarch64__)
    uint32_t words[8] = {0xa9bf7bfd, 0x910003fd}; // stp x29,x30,[sp,#-16]!; mov x29,sp
    if (i + 1 < count) {
      uint64_t next = (uint64_t)(uintptr_t)(g_code + (i + 1) * kStubBytes);
      words[2] = 0x58000090; // ldr x16, <the literal 16 bytes on, at word 6>
      words[3] = 0xd63f0200; // blr x16
      words[4] = 0xa8c17bfd; // ldp x29,x30,[sp],#16
      words[5] = 0xd65f03c0; // ret
      memcpy(&words[6], &next, sizeof next);
    } else {
      words[2] = 0x14000000; // b .
    }
    memcpy(stub, words, sizeof words);
    (void)at;
#else
#error "jit_spinner generates x86-64 or AArch64 code only"
#endif
  }
  __builtin___clear_cache((char*)g_code, (char*)g_code + count * kStubBytes);
}

// "<start> <size> <name>\n" for stub i.
static int stub_line(char* out, size_t size, size_t i, const char* name)
{
  return snprintf(out, size, "%llx %x %s\n",
                  (unsigned long long)(uintptr_t)(g_code + i * kStubBytes), kStubBytes, name);
}

// --- perf maps ---

static int open_map(const char* path, int flags)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0)
    die("cannot create", path);
  return fd;
}

static void write_valid(int fd, char** names, size_t count)
{
  char line[8192];
  for (size_t i = 0; i < count; ++i) {
    int n = stub_line(line, sizeof line, i, unescape(names[i]));
    write_all(fd, line, (size_t)n);
  }
}

static uint64_t g_random = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void)
{
  g_random ^= g_random << 13;
  g_random ^= g_random >> 7;
  g_random ^= g_random << 17;
  return g_random;
}

struct Grower {
  char path[4096];
  char valid[8192];
};

// Appends a distinct entry per line at 64 MiB/s; at 512 MiB the file starts over.
static void* grow(void* arg)
{
  const struct Grower* grower = arg;
  int fd = open_map(grower->path, O_APPEND);
  static char chunk[1 << 20];
  uint64_t address = 0x100000000000ull;
  uint64_t written = 0;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (uint64_t chunks = 0;; ++chunks) {
    size_t used = 0;
    while (used + 64 < sizeof chunk) {
      address += 0x10;
      used += (size_t)snprintf(chunk + used, 64, "%llx 10 Grown.%llu\n",
                               (unsigned long long)address, (unsigned long long)(address & 0xffff));
    }
    if (written + used > (512u << 20)) {
      if (ftruncate(fd, 0) != 0)
        die("cannot truncate", grower->path);
      write_all(fd, grower->valid, strlen(grower->valid));
      written = 0;
    }
    write_all(fd, chunk, used);
    written += used;
    // Sleep until (chunks + 1) MiB / 64 MiB/s have passed since the start.
    double due = (double)(chunks + 1) / 64.0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double elapsed =
        (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
    if (due > elapsed) {
      double wait = due - elapsed;
      struct timespec pause = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
      nanosleep(&pause, NULL);
    }
  }
  return NULL;
}

// "<start> <size> <prefix>" at offset at, then a hole up to a name of name_bytes, then a newline:
// a line whose name costs no disk. Returns the offset after it.
static off_t
sparse_line(int fd, off_t at, uint64_t start, uint64_t size, const char* prefix, size_t name_bytes)
{
  char head[128];
  int n = snprintf(head, sizeof head, "%llx %llx %s", (unsigned long long)start,
                   (unsigned long long)size, prefix);
  if (pwrite(fd, head, (size_t)n, at) != n)
    die("cannot write", "the perf map");
  off_t end = at + n + (off_t)(name_bytes - strlen(prefix));
  if (pwrite(fd, "\n", 1, end) != 1)
    die("cannot write", "the perf map");
  return end + 1;
}

// Entries that cost a reader far more memory than their file's size, unless it holds each name
// once: pieces of a split range each copying its name, and many long names.
static void write_heavy(int fd, const char* name)
{
  char line[8192];
  int n = stub_line(line, sizeof line, 0, name);
  write_all(fd, line, (size_t)n);
  off_t at = n;
  const uint64_t base = 0x100000000000ull;
  at = sparse_line(fd, at, base, 1ull << 32, "Wide.name", 60 << 10);
  for (int i = 0; i < 8192; ++i) {
    n = snprintf(line, sizeof line, "%llx 10 Split.%d\n",
                 (unsigned long long)(base + (uint64_t)(i + 1) * 0x1000), i);
    if (pwrite(fd, line, (size_t)n, at) != n)
      die("cannot write", "the perf map");
    at += n;
  }
  for (int i = 0; at + (16 << 10) <= (64 << 20); ++i) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "Heavy.%d", i);
    at = sparse_line(fd, at, base + (2ull << 32) + (uint64_t)i * 0x100, 0x10, prefix,
                     (16 << 10) - 64);
  }
}

// One line naming all the generated code: count methods name, joined as an inline chain.
static void write_inline(int fd, const char* name, long count)
{
  size_t name_size = strlen(name);
  size_t size = 64 + (size_t)count * (name_size + 2);
  char* line = malloc(size);
  if (!line)
    die("cannot allocate", "the inline chain");
  size_t used = (size_t)snprintf(line, size, "%llx %x ", (unsigned long long)(uintptr_t)g_code,
                                 (unsigned)(g_stubs * kStubBytes));
  for (long i = 0; i < count; ++i) {
    if (i > 0) {
      memcpy(line + used, "->", 2);
      used += 2;
    }
    memcpy(line + used, name, name_size);
    used += name_size;
  }
  line[used++] = '\n';
  write_all(fd, line, used);
  free(line);
}

struct Replacer {
  char path[4096];
  char maps[kReplacements][4096];
  char link[4096];
};

// Renames the prepared maps over the map in turn: another file (inode) every 3 ms.
static void* replace(void* arg)
{
  const struct Replacer* replacer = arg;
  for (unsigned turn = 0;; ++turn) {
    unlink(replacer->link);
    const char* next = replacer->maps[turn % kReplacements];
    if (link(next, replacer->link) != 0)
      die("cannot link", next);
    if (rename(replacer->link, replacer->path) != 0)
      die("cannot rename", replacer->link);
    struct timespec pause = {0, 3 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return NULL;
}

// A valid line, then 32 MiB of distinct short entries.
static void write_replacement(const char* path, const char* name)
{
  int fd = open_map(path, O_TRUNC);
  static char chunk[1 << 20];
  size_t used = (size_t)stub_line(chunk, sizeof chunk, 0, name);
  uint64_t address = 0x200000000000ull;
  for (size_t written = 0; written < (32u << 20);) {
    while (used + 64 < sizeof chunk) {
      address += 0x10;
      used += (size_t)snprintf(chunk + used, 64, "%llx 10 R%llx\n", (unsigned long long)address,
                               (unsigned long long)(address >> 4));
    }
    write_all(fd, chunk, used);
    written += used;
    used = 0;
  }
  close(fd);
}

static void write_many(int fd, const char* name)
{
  static char chunk[1 << 20];
  size_t used = (size_t)stub_line(chunk, sizeof chunk, 0, name);
  uint64_t address = 0x300000000000ull;
  for (int i = 1; i < 256 * 1024; ++i) {
    if (used + 64 >= sizeof chunk) {
      write_all(fd, chunk, used);
      used = 0;
    }
    address += 0x100;
    used += (size_t)snprintf(chunk + used, 64, "%llx 10 Many.%d\n", (unsigned long long)address, i);
  }
  write_all(fd, chunk, used);
}

static void make_map(const char* mode, const char* path, char** names, size_t count)
{
  if (strcmp(mode, "none") == 0)
    return;
  if (strcmp(mode, "fifo") == 0) {
    if (mkfifo(path, 0644) != 0)
      die("cannot make FIFO", path);
    return;
  }
  if (strcmp(mode, "device") == 0) {
    if (mknod(path, S_IFCHR | 0644, makedev(1, 5)) != 0)
      die("cannot make device", path);
    return;
  }
  if (count == 0) {
    fprintf(stderr, "jit_spinner: %s needs a NAME\n", mode);
    exit(2);
  }
  if (strcmp(mode, "valid") == 0) {
    int fd = open_map(path, O_TRUNC);
    write_valid(fd, names, count);
    close(fd);
    return;
  }
  if (strcmp(mode, "inline") == 0) {
    long methods = count == 2 ? strtol(names[1], NULL, 10) : 0;
    if (methods <= 0) {
      fprintf(stderr, "jit_spinner: inline takes a NAME and a COUNT\n");
      exit(2);
    }
    int fd = open_map(path, O_TRUNC);
    write_inline(fd, unescape(names[0]), methods);
    close(fd);
    return;
  }
  if (count != 1) {
    fprintf(stderr, "jit_spinner: %s takes one NAME\n", mode);
    exit(2);
  }
  int fd = open_map(path, O_TRUNC);
  if (strcmp(mode, "sparse") == 0) {
    write_valid(fd, names, 1);
    if (ftruncate(fd, (off_t)10 << 30) != 0)
      die("cannot extend", path);
  } else if (strcmp(mode, "grow") == 0) {
    static struct Grower grower;
    snprintf(grower.path, sizeof grower.path, "%s", path);
    stub_line(grower.valid, sizeof grower.valid, 0, unescape(names[0]));
    write_all(fd, grower.valid, strlen(grower.valid));
    pthread_t thread;
    if (pthread_create(&thread, NULL, grow, &grower) != 0)
      die("cannot start", "the writer");
  } else if (strcmp(mode, "long") == 0) {
    static char line[1 << 20];
    memset(line, 'A', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (int i = 0; i < 64; ++i)
      write_all(fd, line, sizeof line);
    write_valid(fd, names, 1);
  } else if (strcmp(mode, "heavy") == 0) {
    write_heavy(fd, unescape(names[0]));
  } else if (strcmp(mode, "many") == 0) {
    write_many(fd, unescape(names[0]));
  } else if (strcmp(mode, "replace") == 0) {
    static struct Replacer replacer;
    snprintf(replacer.path, sizeof replacer.path, "%s", path);
    for (int i = 0; i < kReplacements; ++i) {
      snprintf(replacer.maps[i], sizeof replacer.maps[i], "%s.%d", path, i);
      write_replacement(replacer.maps[i], unescape(names[0]));
    }
    snprintf(replacer.link, sizeof replacer.link, "%s.new", path);
    // The map is the first one until the replacing starts.
    if (link(replacer.maps[0], replacer.link) != 0 || rename(replacer.link, path) != 0)
      die("cannot replace", path);
    pthread_t thread;
    if (pthread_create(&thread, NULL, replace, &replacer) != 0)
      die("cannot start", "the replacer");
  } else if (strcmp(mode, "garbage") == 0) {
    static char noise[8 << 20];
    for (size_t i = 0; i < sizeof noise; i += 8) {
      uint64_t value = next_random();
      memcpy(noise + i, &value, 8);
    }
    write_all(fd, noise, sizeof noise);
    const char overflow[] = "\n"
                            "ffffffffffffff00 200 Overflow.wraps\n"
                            "1 ffffffffffffffff Overflow.size\n"
                            "10000000000000000 10 Overflow.start\n"
                            "fffffffffffffffffffffffffffff 10 Overflow.huge\n"
                            "0 0 Overflow.empty\n"
                            "-10 10 Overflow.negative\n"
                            "0x 10 Overflow.nodigits\n"
                            "7f00 zz Overflow.badsize\n"
                            "7f00 10\n";
    write_all(fd, overflow, sizeof overflow - 1);
    write_valid(fd, names, 1);
  } else {
    fprintf(stderr, "jit_spinner: unknown mode %s\n", mode);
    exit(2);
  }
  close(fd);
}

// --- a fake JVM ---

static void on_sigquit(int signal_number)
{
  (void)signal_number;
}

// In the working directory: "/" in a container, a scratch directory on the host. A started
// HotSpot handles SIGQUIT (its thread dumps and attach trigger), and profilers check for that.
static void pose_as_jvm(void)
{
  int fd = open("libjvm.so", O_RDWR | O_CREAT | O_CLOEXEC, 0755);
  if (fd < 0 || ftruncate(fd, 4096) != 0)
    die("cannot create", "libjvm.so");
  if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED)
    die("cannot map", "libjvm.so");
  close(fd);
  signal(SIGQUIT, on_sigquit);
}

static const char* g_socket_kind;

static void* serve(void* arg)
{
  int listener = (int)(intptr_t)arg;
  static const char garbage[] = "\xde\xad\xbe\xef is no status\n<script>alert(1)</script>\n";
  for (;;) {
    int connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (connection < 0)
      continue;
    if (strcmp(g_socket_kind, "silent") == 0)
      continue; // held open, never read, never answered
    char request[4096];
    ssize_t ignored = read(connection, request, sizeof request);
    (void)ignored;
    if (strcmp(g_socket_kind, "garbage") == 0) {
      ignored = send(connection, garbage, sizeof garbage - 1, MSG_NOSIGNAL);
    } else {
      char noise[65536];
      for (size_t i = 0; i < sizeof noise; ++i)
        noise[i] = (char)('a' + i % 26);
      while (send(connection, noise, sizeof noise, MSG_NOSIGNAL) > 0) {
      }
    }
    close(connection);
  }
  return NULL;
}

static void listen_for_attach(const char* kind)
{
  g_socket_kind = kind;
  if (strcmp(kind, "silent") != 0 && strcmp(kind, "garbage") != 0 && strcmp(kind, "flood") != 0) {
    fprintf(stderr, "jit_spinner: unknown socket kind %s\n", kind);
    exit(2);
  }
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = {.sun_family = AF_UNIX};
  snprintf(address.sun_path, sizeof address.sun_path, "/tmp/.java_pid%d", (int)getpid());
  mode_t previous = umask(077);
  if (listener < 0 || bind(listener, (struct sockaddr*)&address, sizeof address) != 0 ||
      listen(listener, 8) != 0)
    die("cannot listen on", address.sun_path);
  umask(previous);
  pthread_t thread;
  if (pthread_create(&thread, NULL, serve, (void*)(intptr_t)listener) != 0)
    die("cannot start", "the attach listener");
}

// --- setup ---

static void plant_link(char* spec)
{
  char* equals = strchr(spec, '=');
  if (!equals) {
    fprintf(stderr, "jit_spinner: --link needs PATH=TARGET\n");
    exit(2);
  }
  *equals = 0;
  const char* path = expand(spec);
  const char* target = expand(equals + 1);
  if (rmdir(path) != 0 && errno != ENOENT && errno != ENOTDIR)
    die("cannot remove", path);
  if (unlink(path) != 0 && errno != ENOENT && errno != EISDIR)
    die("cannot remove", path);
  if (symlink(target, path) != 0)
    die("cannot link", path);
}

int main(int argc, char** argv)
{
  signal(SIGPIPE, SIG_IGN);
  alarm(600);
  const char* map = "/tmp/perf-%p.map";
  long owner = -1;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const char* option = argv[i];
    if (strncmp(option, "-X", 2) == 0)
      continue;
    if (strcmp(option, "--jvm") == 0) {
      pose_as_jvm();
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "jit_spinner: %s needs an argument\n", option);
      return 2;
    }
    char* value = argv[++i];
    if (strcmp(option, "--comm") == 0) {
      if (prctl(PR_SET_NAME, unescape(value), 0, 0, 0) != 0)
        die("cannot set", "the process name");
    } else if (strcmp(option, "--socket") == 0) {
      listen_for_attach(value);
    } else if (strcmp(option, "--mkdir") == 0) {
      if (mkdir(expand(value), 0755) != 0)
        die("cannot create", expand(value));
    } else if (strcmp(option, "--link") == 0) {
      plant_link(value);
    } else if (strcmp(option, "--map") == 0) {
      map = value;
    } else if (strcmp(option, "--owner") == 0) {
      owner = strtol(value, NULL, 10);
    } else {
      fprintf(stderr, "jit_spinner: unknown option %s\n", option);
      return 2;
    }
  }
  if (i >= argc) {
    fprintf(stderr, "usage: jit_spinner [OPTION]... MODE [NAME]...\n");
    return 2;
  }
  const char* mode = argv[i++];
  size_t names = (size_t)(argc - i);
  if (names > kMaxNames) {
    fprintf(stderr, "jit_spinner: at most %d names\n", kMaxNames);
    return 2;
  }
  size_t stubs = 1;
  if (strcmp(mode, "valid") == 0 && names > 0)
    stubs = names;
  else if (strcmp(mode, "inline") == 0)
    stubs = kInlineStubs;
  generate(stubs);
  const char* path = expand(map);
  make_map(mode, path, argv + i, names);
  if (owner >= 0 && chown(path, (uid_t)owner, (gid_t)owner) != 0)
    die("cannot give away", path);
  printf("spinner ready\n");
  fflush(stdout);
  ((void (*)(void))g_code)();
  return 0;
}
