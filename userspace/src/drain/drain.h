// The drain stage: at each interval boundary, switches the BPF double buffer and turns the idle
// buffer's counts and stack ids into a RawProfile of frame addresses.
#pragma once

#include <chrono>

#include "common/result.h"
#include "drain/map_reader.h"
#include "profile/raw_profile.h"

namespace flamebpf::drain {

class Drainer {
public:
  // maps must outlive the Drainer. The first interval starts now.
  explicit Drainer(MapReader& maps);

  // Everything counted since the previous drain (or construction), with the event counters'
  // increase over the same interval.
  [[nodiscard]] Result<profile::RawProfile> drain();

private:
  MapReader& maps_;
  profile::DropCounters counters_at_last_drain_;
  std::chrono::system_clock::time_point interval_start_;
};

} // namespace flamebpf::drain
