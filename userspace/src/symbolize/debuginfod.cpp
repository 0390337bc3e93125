#include "symbolize/debuginfod.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <elfutils/debuginfod.h>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "common/capabilities.h"
#include "common/contained_file.h"
#include "common/elf_reader.h"
#include "common/loaded_library.h"
#include "common/log.h"
#include "symbolize/debug_files.h"

namespace flamebpf::symbolize {
namespace {

using Clock = std::chrono::steady_clock;

// libdebuginfod, loaded only when fetching is asked for: it brings libcurl and a TLS library,
// which no other run of flamebpf needs mapped (or initialized at start).
struct Libdebuginfod {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_end) end = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
  decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
  decltype(&debuginfod_set_user_data) set_user_data = nullptr;
  decltype(&debuginfod_get_user_data) get_user_data = nullptr;
};
Libdebuginfod g_library;

Result<> load_library()
{
  if (g_library.begin)
    return {};
  auto loaded = LoadedLibrary::open("libdebuginfod.so.1", "debuginfod");
  if (!loaded)
    return fail(loaded.error());
  Libdebuginfod library;
  loaded->resolve(library.begin, "debuginfod_begin");
  loaded->resolve(library.end, "debuginfod_end");
  loaded->resolve(library.find_debuginfo, "debuginfod_find_debuginfo");
  loaded->resolve(library.set_progressfn, "debuginfod_set_progressfn");
  loaded->resolve(library.set_user_data, "debuginfod_set_user_data");
  loaded->resolve(library.get_user_data, "debuginfod_get_user_data");
  if (!loaded->complete())
    return fail(error("libdebuginfod lacks a function flamebpf calls"));
  g_library = library;
  return {};
}

// What fetch() returns for a fetch its limits ended, and for an answer that ended before the
// length its server announced: no errno of the system's.
constexpr int kCutOff = -1;
constexpr int kEndedEarly = -2;

// What a fetch in progress may not exceed; libdebuginfod asks, at least once a second, whether
// to go on, and after the last bytes have come.
struct FetchLimits {
  Clock::time_point deadline;
  uint64_t max_bytes = 0;
  const std::atomic<bool>* stopping = nullptr;
  bool cut_off = false; // a limit ended the fetch (libdebuginfod then says only ENOENT)
  // Once a server answers with a body of a stated length: that length and the bytes received.
  long announced = 0;
  long received = 0;
};

int keep_going(debuginfod_client* client, long done, long total)
{
  auto* limits = static_cast<FetchLimits*>(g_library.get_user_data(client));
  if (!limits)
    return 0;
  // A total is known only once a server's answer has started (refusals carry no body for
  // libdebuginfod), and then done counts its bytes.
  if (total > 0) {
    limits->announced = total;
    limits->received = done;
  }
  limits->cut_off = Clock::now() > limits->deadline || limits->stopping->load() ||
                    (done > 0 && static_cast<uint64_t>(done) > limits->max_bytes);
  return limits->cut_off ? 1 : 0;
}

// Why a directory on the way to the cache cannot be trusted; empty if it can.
std::string untrusted(const std::string& path, const struct stat& status)
{
  if (S_ISLNK(status.st_mode))
    return path + " is a symbolic link";
  if (!S_ISDIR(status.st_mode))
    return path + " is not a directory";
  if (status.st_uid != 0 && status.st_uid != ::geteuid())
    return path + " belongs to uid " + std::to_string(status.st_uid);
  if ((status.st_mode & 022) != 0 && (status.st_mode & S_ISVTX) == 0)
    return path + " may be written by other users";
  return "";
}

// Makes sure the cache directory and every directory above it are flamebpf's (or root's) alone,
// making the missing ones 0700 (the cache itself must not be in a sticky, shared directory: a
// user could make its name first).
Result<> trust_cache(const std::string& cache_dir)
{
  if (!cache_dir.starts_with('/') || cache_dir.find("/../") != std::string::npos ||
      cache_dir.ends_with("/.."))
    return fail(error("the debuginfod cache " + cache_dir + " is not an absolute, plain path"));
  std::string path;
  size_t at = 0;
  while (at != std::string::npos) {
    size_t next = cache_dir.find('/', at + 1);
    std::string component =
        cache_dir.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    at = next;
    if (component.empty() || component == ".")
      continue;
    path += "/" + component;
    struct stat status {};
    if (::lstat(path.c_str(), &status) != 0) {
      if (errno != ENOENT || ::mkdir(path.c_str(), 0700) != 0 ||
          ::lstat(path.c_str(), &status) != 0)
        return fail(system_error(errno, "cannot make the debuginfod cache " + path));
    }
    if (std::string why = untrusted(path, status); !why.empty())
      return fail(error("the debuginfod cache cannot be trusted: " + why));
    bool last = at == std::string::npos;
    if (last && (status.st_mode & 077) != 0 && ::chmod(path.c_str(), 0700) != 0)
      return fail(system_error(errno, "cannot make " + path + " private"));
  }
  return {};
}

} // namespace

Result<std::unique_ptr<DebugFetcher>> DebugFetcher::start(DebuginfodOptions options)
{
  while (options.cache_dir.size() > 1 && options.cache_dir.ends_with('/'))
    options.cache_dir.pop_back();
  if (auto trusted = trust_cache(options.cache_dir); !trusted)
    return fail(trusted.error());
  if (auto loaded = load_library(); !loaded)
    return fail(loaded.error());
  // libdebuginfod reads its settings from the environment at each fetch; they are set once,
  // before any worker runs.
  ::setenv("DEBUGINFOD_URLS", options.urls.c_str(), 1);
  ::setenv("DEBUGINFOD_CACHE_PATH", options.cache_dir.c_str(), 1);
  // The whole fetch's deadline is flamebpf's own (keep_going); libdebuginfod's time-out is only
  // for a server that sends nothing, and is left longer so that the deadline is what ends it.
  ::setenv("DEBUGINFOD_TIMEOUT", std::to_string(options.timeout.count() + 5).c_str(), 1);
  ::setenv("DEBUGINFOD_MAXSIZE", std::to_string(options.max_file_bytes).c_str(), 1);
  ::unsetenv("DEBUGINFOD_PROGRESS");
  std::unique_ptr<DebugFetcher> fetcher(new DebugFetcher(std::move(options)));
  for (size_t i = 0; i < kWorkers; ++i)
    fetcher->workers_.push_back(caps::start_thread(caps::Role::kNone, "flamebpf-fetch",
                                                   [raw = fetcher.get()] { raw->work(); }));
  return fetcher;
}

DebugFetcher::~DebugFetcher()
{
  stopping_ = true;
  {
    std::lock_guard lock(mutex_);
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& worker : workers_)
    worker.join();
}

std::string DebugFetcher::cached_path(const std::string& build_id) const
{
  return options_.cache_dir + "/" + build_id + "/debuginfo";
}

void DebugFetcher::trim_cache(const std::string& kept_build_id)
{
  std::lock_guard trimming(trim_mutex_);
  // Each build ID's directory, with what its files take and when it was last used.
  struct Entry {
    std::string build_id;
    uint64_t bytes = 0;
    struct timespec used {};
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code error;
  for (const auto& directory : std::filesystem::directory_iterator(options_.cache_dir, error)) {
    struct stat status {};
    if (::lstat(directory.path().c_str(), &status) != 0 || !S_ISDIR(status.st_mode))
      continue;
    Entry entry{.build_id = directory.path().filename()};
    for (const auto& file : std::filesystem::directory_iterator(directory.path(), error)) {
      struct stat file_status {};
      if (::lstat(file.path().c_str(), &file_status) != 0 || !S_ISREG(file_status.st_mode))
        continue;
      entry.bytes += static_cast<uint64_t>(file_status.st_blocks) * 512;
      // Written by a fetch, or touched by a use (find).
      if (std::tie(file_status.st_mtim.tv_sec, file_status.st_mtim.tv_nsec) >
          std::tie(entry.used.tv_sec, entry.used.tv_nsec))
        entry.used = file_status.st_mtim;
    }
    total += entry.bytes;
    entries.push_back(std::move(entry));
  }
  if (total <= options_.max_cache_bytes)
    return;
  std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    // The one just fetched goes last, whatever its times say.
    bool a_kept = a.build_id == kept_build_id;
    bool b_kept = b.build_id == kept_build_id;
    if (a_kept != b_kept)
      return b_kept;
    return std::tie(a.used.tv_sec, a.used.tv_nsec) < std::tie(b.used.tv_sec, b.used.tv_nsec);
  });
  uint64_t held = total;
  size_t removed = 0;
  for (const auto& entry : entries) {
    if (held <= options_.max_cache_bytes || entry.build_id == kept_build_id)
      break;
    std::filesystem::remove_all(options_.cache_dir + "/" + entry.build_id, error);
    if (error)
      continue;
    held -= entry.bytes;
    ++removed;
  }
  spdlog::info("debuginfod: the cache held {} MiB, over its {} MiB: {} debug files used longest "
               "ago were removed ({} MiB left)",
               total >> 20, options_.max_cache_bytes >> 20, removed, held >> 20);
}

std::optional<UniqueFd> DebugFetcher::find(std::string_view build_id, const std::string& shown)
{
  if (build_id.size() < 2 || build_id.size() > kMaxBuildIdBytes)
    return std::nullopt;
  std::string id = hex(build_id);
  // The cache is flamebpf's own (see trust_cache): a regular file there is what a fetch wrote.
  // An empty one is libdebuginfod's note that no server had it.
  auto file = open_contained(options_.cache_dir, "/" + id + "/debuginfo");
  if (file) {
    struct stat status {};
    if (::fstat(file->get(), &status) == 0 && status.st_size > 0) {
      auto elf = ElfReader::open(ElfBytes::file(file->get(), static_cast<uint64_t>(status.st_size)),
                                 cached_path(id));
      if (elf && elf->build_id() == build_id) {
        // Used now: the cache's trim removes the files used longest ago first.
        const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
        ::futimens(file->get(), now);
        return std::move(*file);
      }
      // A server's wrong answer is not kept: it would be refused at every start.
      spdlog::warn("debuginfod: the file a server gave for {} ({}) is not its debug file ({}); "
                   "removed from the cache",
                   shown, id,
                   elf ? "build ID " + hex(elf->build_id()) : std::string(elf.error().message));
      ::unlink(cached_path(id).c_str());
      std::lock_guard lock(mutex_);
      asked_.insert(id); // not fetched again in this run
      return std::nullopt;
    }
  }
  std::lock_guard lock(mutex_);
  if (stopping_ || !asked_.insert(id).second)
    return std::nullopt;
  if (queue_.size() >= kMaxQueued) {
    ++counts_.dropped;
    asked_.erase(id);
    return std::nullopt;
  }
  queue_.emplace_back(id, shown);
  wake_.notify_one();
  return std::nullopt;
}

std::vector<std::string> DebugFetcher::take_arrived()
{
  std::lock_guard lock(mutex_);
  return std::exchange(arrived_, {});
}

DebugFetcher::Counts DebugFetcher::counts() const
{
  std::lock_guard lock(mutex_);
  return counts_;
}

void DebugFetcher::work()
{
  for (;;) {
    std::pair<std::string, std::string> wanted;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_)
        return;
      wanted = std::move(queue_.front());
      queue_.pop_front();
    }
    auto started = Clock::now();
    int failure = fetch(wanted.first);
    std::chrono::duration<double> took = Clock::now() - started;
    if (failure == 0)
      trim_cache(wanted.first);
    std::lock_guard lock(mutex_);
    if (failure == 0) {
      ++counts_.fetched;
      arrived_.push_back(wanted.first);
      spdlog::info("debuginfod: fetched the debug file of {} ({}) in {:.2f} s", wanted.second,
                   wanted.first, took.count());
      continue;
    }
    ++counts_.failed;
    if (stopping_)
      continue;
    // A server that has no such file is no trouble; each other kind is said once.
    std::string why;
    if (failure == kCutOff)
      why = "no whole answer within " + std::to_string(options_.timeout.count()) +
            " s (or larger than " + std::to_string(options_.max_file_bytes >> 20) + " MiB)";
    else if (failure == kEndedEarly)
      why = "the answer ended before the length the server announced";
    else
      why = std::strerror(failure);
    if (failure != ENOENT && errors_said_.insert(failure).second)
      spdlog::warn("debuginfod: cannot fetch the debug file of {} ({}) from {}: {}; its frames "
                   "stay as they are, and later failures of this kind are only counted",
                   wanted.second, wanted.first, options_.urls, why);
    else
      spdlog::debug("debuginfod: no debug file of {} ({}): {}", wanted.second, wanted.first, why);
  }
}

int DebugFetcher::fetch(const std::string& build_id)
{
  debuginfod_client* client = g_library.begin();
  if (!client)
    return ENOMEM;
  FetchLimits limits{Clock::now() + options_.timeout, options_.max_file_bytes, &stopping_};
  g_library.set_user_data(client, &limits);
  g_library.set_progressfn(client, keep_going);
  char* path = nullptr;
  // A build ID may be given as hex text (length 0).
  int fd = g_library.find_debuginfo(client, reinterpret_cast<const unsigned char*>(build_id.data()),
                                    0, &path);
  g_library.end(client);
  std::free(path);
  if (fd < 0 && limits.cut_off)
    return kCutOff;
  // libdebuginfod reports an answer cut short as it does a server without the file (ENOENT);
  // only the second is no trouble.
  if (fd < 0 && -fd == ENOENT && limits.announced > 0 && limits.received < limits.announced)
    return kEndedEarly;
  if (fd < 0)
    return -fd;
  ::close(fd);
  return 0;
}

} // namespace flamebpf::symbolize
