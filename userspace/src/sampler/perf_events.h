// One software cpu-clock perf event per CPU, each running the sampling program.
#pragma once

#include <bpf/libbpf.h>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf::sampler {

class PerfEvents {
public:
  PerfEvents() = default;
  PerfEvents(PerfEvents&&) noexcept = default;
  PerfEvents& operator=(PerfEvents&&) noexcept = default;
  PerfEvents(const PerfEvents&) = delete;
  PerfEvents& operator=(const PerfEvents&) = delete;
  ~PerfEvents() = default;

  // Opens a cpu-clock event sampling at frequency_hz on every CPU in cpus and attaches program
  // to each. CPUs that went offline meanwhile are skipped; failing on all CPUs is an error.
  [[nodiscard]] static Result<PerfEvents>
  open_and_attach(bpf_program* program, const std::vector<int>& cpus, uint32_t frequency_hz);

  // CPUs with an attached event.
  const std::vector<int>& cpus() const { return cpus_; }

private:
  std::vector<int> cpus_;
  struct LinkDestroyer {
    void operator()(bpf_link* link) const;
  };
  // Owned, so that moving a PerfEvents over another detaches the other's program; each link owns
  // its perf event's descriptor and closes it.
  std::vector<std::unique_ptr<bpf_link, LinkDestroyer>> links_;
};

} // namespace flamebpf::sampler
