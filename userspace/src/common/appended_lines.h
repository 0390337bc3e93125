// A file in a target's root that a process of the target keeps appending lines to (a JIT's perf
// map, flamebpf's agent's unwind records), read as it grows: each read() passes the whole lines
// appended since the last. The file is the target's, so hostile:
//   identity  the file at the path now is the one read; another file there (an atomic rewrite)
//             is read from its start, and so is one that shrank or was rewritten in place, at most
//             once an interval: a process that replaces its file all the time costs one read.
//             The path is looked up again when the file held has lost its last link (a rename
//             over it), and otherwise every kPathCheckPeriod: a poll of a quiet file is one fstat.
//   owner     believed only if the process's own user or root owns it, as perf does.
//   budgets   a line (longer ones are skipped, and their sparse holes never read), and per
//             interval the bytes read and the bytes of lines passed on; the rest waits for the
//             next interval.
// The file stays open, so what a process wrote before it exited can still be read to its end.
// Opening never blocks, follows no link out of the root and takes regular files only
// (common/contained_file.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/line_assembler.h"
#include "common/unique_fd.h"

namespace flamebpf {

// Whether a file owned by file_uid may speak for a process whose effective uid is process_euid
// (both as the host sees them): the process's own user or root.
bool appended_file_owner_trusted(uint32_t file_uid, uint32_t process_euid);

class AppendedLines {
public:
  struct Budgets {
    size_t max_line = 0;
    size_t max_read_per_interval = 0;  // bytes read, lines skipped as overlong included
    size_t max_lines_per_interval = 0; // bytes of lines passed on
  };

  // The longest a file replaced under the path while the one held keeps another link is read
  // in its place.
  static constexpr std::chrono::seconds kPathCheckPeriod{10};

  // The file at path_in_root inside the root of process host_pid, below proc_root (normally
  // "/proc"). refusal_cost says, in the one warning about a file refused for its owner, what the
  // target loses ("its JIT frames stay unnamed").
  AppendedLines(uint32_t host_pid,
                std::string proc_root,
                std::string path_in_root,
                Budgets budgets,
                std::string refusal_cost);

  // Reads what is new within what is left of the interval's budgets, passing each whole line to
  // on_line with the offset in the file where it begins; calls on_start_over first whenever the
  // lines passed before no longer hold (another file, one that shrank or was rewritten, or one
  // refused for its owner). Never blocks.
  void read(const std::function<void()>& on_start_over,
            const std::function<void(std::string_view line, uint64_t offset)>& on_line);
  // The line that begins at offset in the file being read (as read() passed it), read again, at
  // most max_line bytes (length bytes, if given): what a reader that kept only where a line is
  // needs; nullopt if no whole line of that size is there now (the file may have changed
  // meanwhile).
  std::optional<std::string> line_at(uint64_t offset,
                                     std::optional<size_t> length = std::nullopt) const;
  // A new interval begins: its budgets are whole again.
  void begin_interval();
  // The file was rewritten in place (as `jcmd Compiler.perfmap` does: truncated, then written
  // whole): the next read takes it from its start. Safe from any thread.
  void reread() { reread_requested_.store(true, std::memory_order_relaxed); }
  // Whether a read() now would find nothing new, told without waiting on the file system: the
  // file held is as long as what was read and still linked, by the attributes the kernel has at
  // hand (no round trip to a FUSE daemon or a network server), and no path lookup or rereading
  // is due. False if it cannot tell so: then read() must be called, where a stall is guarded.
  // A poller calls it first, so a quiet file costs one system call and no hand-off to a worker;
  // a file system whose attributes are cached still has the file looked at fully every
  // kPathCheckPeriod.
  bool quiet_at_a_glance() const;
  // Logs each kind of trouble of this file (a budget that cut, a refused owner) the first time.
  void report();

  // Where the file is, for messages: <proc_root>/<pid>/root<path_in_root>.
  std::string path() const;
  // Whether the file was found (now or earlier) and is being read.
  bool found() const { return fd_.valid(); }
  // When the file was last written, as the last read saw it; nullopt if it was never found.
  std::optional<std::chrono::system_clock::time_point> modified() const { return modified_; }
  // How many reads found something new (lines appended, another file, a rewrite): unchanged while
  // the file stays as it was, which tells a poller that it may look less often.
  uint64_t changes() const { return changes_; }
  // Lookups of the path in the process's root.
  uint64_t path_lookups() const { return path_lookups_; }
  // Lines skipped for their length.
  uint64_t overlong_lines() const { return overlong_lines_; }
  // Intervals whose budget ran out before the file was read to its end (or before a replaced
  // file could be read again).
  uint64_t intervals_over_budget() const { return intervals_over_budget_; }
  // Files refused for their owner; the owner of the last one, and the process's effective uid
  // then (nullopt if the process was gone).
  uint64_t refused_files() const { return refused_files_; }
  uint32_t refused_owner() const { return refused_owner_; }
  std::optional<uint32_t> refused_for_euid() const { return refused_for_euid_; }

private:
  // Whether the file (device, inode) owned by owner may be read; counts a refusal once per file.
  bool owner_trusted(uint32_t owner, uint64_t device, uint64_t inode);
  void start_over(UniqueFd fd, uint64_t device, uint64_t inode);
  void note_over_budget();
  // Looks the path up: starts over on another file there (or drops one refused for its owner).
  // False if what was read no longer holds and nothing is to be read.
  bool follow_path(const std::function<void()>& on_start_over);

  uint32_t host_pid_;
  std::string proc_root_;
  std::string path_in_root_;
  Budgets budgets_;
  std::string refusal_cost_;
  UniqueFd fd_;
  uint64_t device_ = 0;
  uint64_t inode_ = 0;
  uint64_t offset_ = 0; // bytes of the file consumed
  uint64_t changes_ = 0;
  uint64_t path_lookups_ = 0;
  std::chrono::steady_clock::time_point path_looked_up_;
  LineAssembler lines_;
  std::optional<std::chrono::system_clock::time_point> modified_;
  // This interval's spending.
  size_t read_in_interval_ = 0;
  size_t passed_in_interval_ = 0;
  bool started_over_in_interval_ = false;
  bool over_budget_in_interval_ = false;
  // A rewrite in place can leave the file as long as before, so its size cannot tell.
  std::atomic<bool> reread_requested_{false};
  // The last file refused for its owner, so that it is counted once.
  uint64_t refused_device_ = 0;
  uint64_t refused_inode_ = 0;
  uint64_t overlong_lines_ = 0;
  uint64_t intervals_over_budget_ = 0;
  uint64_t refused_files_ = 0;
  uint32_t refused_owner_ = 0;
  std::optional<uint32_t> refused_for_euid_;
  bool over_budget_reported_ = false;
  bool refused_reported_ = false;
};

// What turns one process's appended lines into a table (a perf map, a runtime's records): each
// refresh() reads what is new within the interval's budgets, starting the table over when the
// lines read before no longer hold, then logs each kind of trouble once. A file not owned by the
// process's user or root is not read, and what was read of an earlier file is dropped. Readers
// differ only in their three steps below.
class AppendedLinesReader {
public:
  virtual ~AppendedLinesReader() = default;

  // Never blocks on the file.
  void refresh();
  // A new interval begins: its budgets are whole again.
  void begin_interval() { file_.begin_interval(); }
  // The file was rewritten in place: the next refresh reads it again from its start. Safe from
  // any thread.
  void reread() { file_.reread(); }
  // The file: where it is, whether it was found, when it was last written as the last refresh saw
  // it, its budgets' cuts and refusals.
  const AppendedLines& file() const { return file_; }

protected:
  AppendedLinesReader(uint32_t host_pid,
                      std::string proc_root,
                      std::string path_in_root,
                      AppendedLines::Budgets budgets,
                      std::string refusal_cost);

  // The lines taken before no longer hold: the table is emptied.
  virtual void start_over() = 0;
  // A whole line, and where in the file it begins (for a reader that reads it again later).
  virtual void take_line(std::string_view line, uint64_t offset) = 0;
  // After each read, the reader's own trouble (the file's is logged after it).
  virtual void report() = 0;

  AppendedLines file_;
};

} // namespace flamebpf
