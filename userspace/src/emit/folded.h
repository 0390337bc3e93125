// Brendan Gregg's folded stack format, as flamegraph.pl and inferno read it:
//   comm;outermost;...;innermost count
// one line per distinct stack, sorted, kernel frames suffixed "_[k]".
#pragma once

#include <string>

#include "emit/emitter.h"

namespace flamebpf::emit {

class FoldedEmitter final : public Emitter {
public:
  // target_frame puts each stack's target name before the process name, so that one file still
  // separates containers.
  explicit FoldedEmitter(bool target_frame = false) : target_frame_(target_frame) {}
  Result<> write(const profile::SymbolizedProfile& profile, std::ostream& out) override;

private:
  bool target_frame_;
};

// The text of one frame in a folded line: ';' and line breaks, which the format cannot carry,
// become ':' and ' ', and kernel, JIT-compiled and inlined Java frames get the "_[k]", "_[j]" and
// "_[i]" suffixes.
std::string folded_frame(const profile::Frame& frame);

// comm plus frames joined by ';', without the count; with target_frame, the target name first.
std::string folded_stack(const profile::Stack& stack, bool target_frame = false);

} // namespace flamebpf::emit
