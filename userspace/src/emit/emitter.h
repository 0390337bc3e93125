// The emit stage: writes a SymbolizedProfile in one output format. Emitters never symbolize.
#pragma once

#include <ostream>

#include "common/result.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::emit {

class Emitter {
public:
  virtual ~Emitter() = default;
  // Writes profile to out; fails if the stream fails.
  [[nodiscard]] virtual Result<> write(const profile::SymbolizedProfile& profile,
                                       std::ostream& out) = 0;
};

} // namespace flamebpf::emit
