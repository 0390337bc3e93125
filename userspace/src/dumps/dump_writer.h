// Agent mode's output: at the end of every interval, for each target with samples, the files
// DIR/<target>/<window>.<ext> in each format (and latest.<ext> linking to the newest), written
// beside and renamed into place so a reader never sees a partial file. A write that fails (a
// full disk) loses nothing at once: the interval is kept and retried at the next one, up to a
// bound. Old dumps are removed by the retention policy.
//
// DIR and every DIR/<target> must be flamebpf's own (common/atomic_file.h): every file is
// written, linked and removed through their descriptors, never through a path, so a link planted
// anywhere below DIR leads nowhere. A target whose directory is not flamebpf's own (a link, a
// file, someone else's directory) has its dumps dropped, said once, while the others are written.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/memory_account.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "dumps/dump_files.h"
#include "dumps/retention.h"
#include "emit/formats.h"
#include "profile/coverage.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::dumps {

struct DumpOptions {
  std::string directory;
  std::vector<emit::Format> formats{emit::Format::kFolded, emit::Format::kSvg};
  RetentionPolicy retention;
  bool diff_previous = false; // also <window>.diff.svg against the previous interval
  emit::SvgOptions svg;       // title, width, … of the flame graphs
  size_t max_pending = 8;     // intervals kept in memory while writes fail
};

// What one interval's write did.
struct DumpReport {
  size_t targets = 0; // targets with samples this interval
  size_t files = 0;   // files written (including retried intervals)
  size_t removed = 0; // old dumps removed by retention
  size_t pending = 0; // intervals waiting to be written
  size_t dropped = 0; // intervals given up because too many were pending
  size_t refused = 0; // targets whose dumps were dropped: their directory is not flamebpf's own
  std::string error;  // the first failure, or empty
};

// The file name of agent mode's record of every interval, in DIR.
inline constexpr const char* kStatsFileName = "flamebpf-stats.jsonl";

// Permissions of agent mode's files (its directories are 0750): the group of DIR may read them.
inline constexpr mode_t kDumpFileMode = 0640;

class DumpWriter {
public:
  // Opens options.directory, creating it (0750) if missing; fails with one line that says how to
  // fix it unless it is flamebpf's own. Removes the temporary files a killed earlier run left in
  // the target directories.
  [[nodiscard]] static Result<DumpWriter> open(DumpOptions options);

  // Writes interval, split by target, as the dumps of window, each flame graph's subtitle with
  // its target's coverage; retries earlier failed ones first.
  DumpReport write(const profile::SymbolizedProfile& interval,
                   const Window& window,
                   const std::vector<profile::TargetCoverage>& coverage = {});

  // Writes what is still pending (at exit); returns the report of that last attempt.
  DumpReport flush();

  // Appends line and a newline to DIR/flamebpf-stats.jsonl in one write.
  [[nodiscard]] Result<> append_stats(const std::string& line);

  const DumpOptions& options() const { return options_; }

  // What the intervals pending (and, with --diff-previous, each target's last dump) take is
  // measured in account from now on, after each write. Measured, not charged: they are
  // flamebpf's own, bounded by max_pending, and refusing them would lose the dumps.
  void measure_memory(std::shared_ptr<MemoryAccount> account);

private:
  struct Interval {
    Window window;
    std::map<std::string, profile::SymbolizedProfile> targets; // by target name
    std::map<std::string, std::string> directories;            // target name -> directory name
    std::vector<profile::TargetCoverage> coverage;
  };
  // What writing one target's dump did.
  struct TargetWritten {
    size_t files = 0;
    size_t removed = 0;
  };

  DumpWriter(DumpOptions options, UniqueFd directory);
  // Writes one target's dump into DIR/directory and applies retention there; fails on the first
  // file that cannot be written.
  Result<TargetWritten> write_target(const std::string& target,
                                     const std::string& directory,
                                     const profile::SymbolizedProfile& profile,
                                     const Window& window,
                                     const std::vector<profile::TargetCoverage>& coverage);
  // Writes target's part of interval (write_target); false if it failed and is to be kept for
  // a retry, the first failure's message in report. A refused directory drops the part.
  bool write_part(const std::string& target,
                  const profile::SymbolizedProfile& part,
                  const Interval& interval,
                  DumpReport& report);
  size_t apply_retention(int dir_fd, const std::string& shown);
  void clean_stale_temporaries();
  DumpReport drain_pending(DumpReport report);
  void measure();

  DumpOptions options_;
  UniqueFd directory_; // DIR
  std::deque<Interval> pending_;
  std::map<std::string, profile::SymbolizedProfile> previous_; // for --diff-previous
  std::set<std::string> refused_; // target directories refused, said once until written again
  MemoryCharge memory_;           // pending_ and previous_
};

} // namespace flamebpf::dumps
