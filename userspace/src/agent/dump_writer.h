// Agent mode's output: at the end of every interval, for each target with samples, the files
// DIR/<target>/<window>.<ext> in each format (and latest.<ext> linking to the newest), written
// beside and renamed into place so a reader never sees a partial file. A write that fails (a
// full disk) loses nothing at once: the interval is kept and retried at the next one, up to a
// bound. Old dumps are removed by the retention policy.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "agent/dump_files.h"
#include "agent/retention.h"
#include "emit/formats.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::agent {

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
  std::string error;  // the first failure, or empty
};

class DumpWriter {
public:
  // Removes temporary files a killed earlier run left in the directory.
  explicit DumpWriter(DumpOptions options);

  // Writes interval, split by target, as the dumps of window; retries earlier failed ones first.
  DumpReport write(const profile::SymbolizedProfile& interval, const Window& window);

  // Writes what is still pending (at exit); returns the report of that last attempt.
  DumpReport flush();

  const DumpOptions& options() const { return options_; }

private:
  struct Interval {
    Window window;
    std::map<std::string, profile::SymbolizedProfile> targets; // by target name
    std::map<std::string, std::string> directories;            // target name -> directory name
  };
  // Writes one target's dump into DIR/directory; fails on the first file that cannot be written.
  Result<size_t> write_target(const std::string& target,
                              const std::string& directory,
                              const profile::SymbolizedProfile& profile,
                              const Window& window);
  Result<> write_latest_link(const std::string& directory,
                             const std::string& file,
                             std::string_view extension);
  size_t apply_retention(const std::string& directory);
  void clean_stale_temporaries();
  DumpReport drain_pending(DumpReport report);

  DumpOptions options_;
  std::deque<Interval> pending_;
  std::map<std::string, profile::SymbolizedProfile> previous_; // for --diff-previous
};

} // namespace flamebpf::agent
