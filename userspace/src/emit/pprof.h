// pprof's profile format (github.com/google/pprof, proto/profile.proto), as `go tool pprof`, the
// Go runtime's profiles and perf_data_converter use it: a gzip-compressed
// perftools.profiles.Profile.
//
// What flamebpf puts in it:
//   - sample_type [samples/count, cpu/nanoseconds], period_type cpu/nanoseconds, period
//     1e9 / frequency_hz, each sample valued [count, count * period], "cpu" shown by default. An
//     unknown frequency (0 Hz) leaves only samples/count, with no period_type and period 0: a
//     cpu time of 0 would be a lie.
//   - time_nanos and duration_nanos from the recording's start and end.
//   - One Function per distinct (name, kind, module), one Location per distinct (functions,
//     mapping); no addresses are known, so every address is 0. Ids start at 1.
//   - Mappings: an ELF file's path (with its GNU build ID when known), "[kernel.kallsyms]" for the
//     kernel and "[<module>]" for a kernel module, "[jit]" for code named by a perf map. Frames
//     without a file ("[unknown]", "[vdso]") have no mapping. Mapping 0, which pprof shows as
//     "File:", is the non-library ELF file in the most samples, if there is one.
//   - A JIT-compiled Java method and the methods inlined into it are one Location whose lines
//     list the inlined methods innermost first, the way pprof records inlining: `-top` and
//     `-traces` mark them "(inline)" (or "(partial-inline)" where a method also runs compiled on
//     its own), and `-noinlines` folds them into the compiled method.
//   - The process name (comm) is the root-most Location of every stack, with no mapping, as it is
//     the root frame of the folded format: `go tool pprof -top` and `-traces` then list the same
//     functions with the same flat and cum counts as the folded file of the same profile (pprof
//     merges functions by name and shows no "_[k]"-style kind suffix).
//   - Labels on each sample: "pid" (numeric, unit "pid": pprof drops a unitless 0), "comm" and
//     "container" (the stack's target, or "host").
// Empty names become "[unknown]", as in the folded format. Stacks counting 0 samples are left out.
#pragma once

#include <string>

#include "emit/emitter.h"

namespace flamebpf::emit {

class PprofEmitter final : public Emitter {
public:
  // Writes the profile as gzip-compressed pprof; fails if the profile cannot be represented (see
  // pprof_bytes) or the stream fails.
  Result<> write(const profile::SymbolizedProfile& profile, std::ostream& out) override;
};

// The serialized, uncompressed Profile message for profile. The message is checked before it is
// serialized (as check_pprof does); fails with one error naming the first problem, e.g. a sample
// value that overflows int64.
[[nodiscard]] Result<std::string> pprof_bytes(const profile::SymbolizedProfile& profile);

// Checks a serialized, uncompressed Profile message the way pprof does before it reads one:
// string_table[0] is "", every string index is in range, ids are nonzero and unique, every id
// referenced exists, and each sample has one value per sample type.
[[nodiscard]] Result<> check_pprof(const std::string& serialized);

// data gzip-compressed (RFC 1952), as pprof files are stored.
[[nodiscard]] Result<std::string> gzip_compress(const std::string& data);

} // namespace flamebpf::emit
