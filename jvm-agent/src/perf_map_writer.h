// Keeps /tmp/perf-<pid>.map current for the JVM the agent runs in: one whole line
// "<hex start> <hex size> <name>" per piece of code, appended as it appears, and a compacted
// rewrite (written beside, renamed into place) once code that was unloaded makes up most of the
// file. The map is always a file the agent created itself: /tmp is shared with other users, and
// whatever they left at the map's name is replaced, never appended to, followed or read. Knows
// nothing of JVMTI, so it is testable on its own. Thread-safe: JVMTI posts events from many
// threads.
#pragma once

#include <cstdint>
#include <map>
#include <pthread.h>
#include <string>
#include <string_view>
#include <vector>

namespace flamebpf::agent {

class PerfMapWriter {
public:
  PerfMapWriter();
  ~PerfMapWriter();
  PerfMapWriter(const PerfMapWriter&) = delete;
  PerfMapWriter& operator=(const PerfMapWriter&) = delete;

  // Creates <directory>/perf-<pid>.map as a file of its own (O_CREAT|O_EXCL|O_NOFOLLOW). If
  // something has that name already (an earlier process's map, another user's file, a symlink,
  // a FIFO), a new file is created under a name no one can guess and renamed over it: atomic for
  // readers, and nothing that was there is opened or trusted. Never blocks. False if it cannot
  // be done (e.g. another user's file in a sticky /tmp); open_error() says why.
  bool open(const std::string& directory, int pid);
  // The same for a file of another name beside the map (the agent's unwind records).
  bool open_named(const std::string& directory, const std::string& file_name);
  // Whether open succeeded.
  bool is_open() const;
  // Why open failed, as "<path>: <reason>".
  std::string open_error() const;

  // One line of the map.
  struct Line {
    uint64_t start = 0;
    uint64_t size = 0;
    std::string name;
  };
  // Code (a method or blob) appeared at [start, start + size): appends its lines, one for the
  // whole or one per stretch of inlined code, replacing what was there before.
  void add(uint64_t start, uint64_t size, const std::vector<Line>& lines);
  // The same for code described by one line.
  void add(uint64_t start, uint64_t size, std::string_view name);

  // Appends whole lines that describe no code of their own (records of another kind, in a file
  // opened with open_named): one write, never dropped by a rewrite. False if not written.
  bool append_lines(std::string_view lines);

  // The code (method or blob) starting at owner was unloaded: its lines are dead. Rewrites the
  // file when dead lines make up most of it.
  void remove(uint64_t owner);

  // The map's path, and the bytes it holds now.
  const std::string& path() const { return path_; }
  uint64_t file_bytes() const { return file_bytes_; }
  // Lines that could not be written (a full disk); the map lacks them.
  uint64_t lost_lines() const { return lost_lines_; }
  // Times the file was rewritten.
  uint64_t compactions() const { return compactions_; }

  // A rewrite happens only above this size, so small maps are never rewritten.
  static constexpr uint64_t kMinCompactBytes = 64 * 1024;
  // A rewrite drops a line longer than this (it counts as lost): it holds at most one line in
  // memory besides what it reads and writes in pieces.
  static constexpr size_t kMaxLineBytes = 1 << 20;

private:
  bool append(std::string_view line);
  void compact();
  // Creates a file beside the map under a name no one can guess (O_EXCL|O_NOFOLLOW), for
  // appending and reading; -1 on failure.
  int create_beside(std::string& name);

  mutable pthread_mutex_t mutex_ = PTHREAD_MUTEX_INITIALIZER;
  int fd_ = -1;     // the map, a file the agent created; opened for appending and reading
  int dir_fd_ = -1; // the directory holding it
  std::string name_;
  std::string path_;
  std::string open_error_;
  // Code the JVM still has, by start address.
  struct Owner {
    uint64_t size = 0;         // of the method or blob
    uint64_t first_offset = 0; // file offset of its first line: earlier lines are of older code
    uint64_t line_bytes = 0;   // bytes of its lines in the file
  };
  std::map<uint64_t, Owner> live_;
  uint64_t file_bytes_ = 0;
  uint64_t live_bytes_ = 0; // bytes of lines of live owners
  uint64_t lost_lines_ = 0;
  uint64_t compactions_ = 0;
};

// The map line for [start, start + size): "7f01d0ac8800 b8 name\n".
std::string perf_map_line(uint64_t start, uint64_t size, std::string_view name);

} // namespace flamebpf::agent
