// The profiles of ?seconds=N: one target's samples over the next N seconds, as Go's
// net/http/pprof takes a CPU profile, summed from the recorder's drains as they come. While one
// waits, the recorder drains at once (its start) and again at its end, so that it covers the
// seconds asked for to within a poll of the recorder's loop (200 ms), not to a drain period.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "profile/accumulator.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::serve {

class LiveProfiles {
public:
  using Clock = std::chrono::steady_clock;
  // Called on the recorder's thread with the profile, once its seconds passed.
  using Done = std::function<void(profile::SymbolizedProfile)>;

  // Requests waiting at once: a client asking for many long profiles holds memory, not threads.
  static constexpr size_t kMaxWaiting = 64;
  static constexpr std::chrono::seconds kMaxLength{600};

  // Whether the one who asked went away (a client that hung up): its request is dropped, and
  // its place is free for the next.
  using Abandoned = std::function<bool()>;

  // Asks for the profile of the target whose dumps go to directory (dumps::target_directory),
  // or of every target if directory is empty, over the next length; false if kMaxWaiting already
  // wait (counting none that was abandoned).
  [[nodiscard]] bool
  wait(std::string directory, Clock::duration length, Done done, Abandoned abandoned = nullptr);

  // The recorder's side. When the next drain is wanted, if any waits: at once for one that has
  // not started, else at the earliest end.
  std::optional<Clock::time_point> drain_wanted_by() const;
  // A drain's profile, drained at now: it starts the waiting profiles that had not started, is
  // added to those that had, and ends those whose time is up.
  void drained(const profile::SymbolizedProfile& delta, Clock::time_point now);
  // The recording ends: what waits is dropped (the server answers it 503 as it stops).
  void clear();

  size_t waiting() const;

  // The targets being recorded (by name), so that one with no dump yet can be asked for.
  void target_added(const std::string& name);
  void target_removed(const std::string& name);
  // Whether the target whose dumps go to directory is being recorded.
  bool recording(std::string_view directory) const;

private:
  struct Request {
    std::string directory;
    Clock::duration length;
    Done done;
    Abandoned abandoned;
    std::optional<Clock::time_point> started; // at the drain that started it
    profile::Accumulator profile;
  };

  // Drops the requests whose asker went away; the mutex is held.
  void drop_abandoned();

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Request>> requests_;
  std::set<std::string, std::less<>> recorded_; // directories of the targets being recorded
};

} // namespace flamebpf::serve
