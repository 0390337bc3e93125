#include "symbolize/demangle.h"

#include <algorithm>
#include <csetjmp>
#include <cstring>

// libiberty's demangle.h pulls in libiberty.h, whose declarations clash with glibc's; the entry
// points used are declared here as demangle.h declares them.
extern "C" int cplus_demangle_v3_callback(const char* mangled,
                                          int options,
                                          void (*callback)(const char*, size_t, void*),
                                          void* opaque);
extern "C" int rust_demangle_callback(const char* mangled,
                                      int options,
                                      void (*callback)(const char*, size_t, void*),
                                      void* opaque);

namespace flamebpf::symbolize {
namespace {

// demangle.h's DMGL_PARAMS | DMGL_TYPES: the options __cxa_demangle uses, for the same names.
constexpr int kDemangleOptions = (1 << 0) | (1 << 4);
// Rust's names without DMGL_VERBOSE: a legacy name's hash and a v0 name's disambiguators left
// out, as rustfilt and perf print them.
constexpr int kRustOptions = 0;

enum class Scheme { kItanium, kRust };

// Where the demangler's output goes. Plain data only: collect() leaves the demangler with
// longjmp, which runs no destructors.
struct Sink {
  char* out;
  size_t capacity;
  size_t used;
  bool cut;
  std::chrono::steady_clock::time_point deadline;
  // Whether collect() may leave the demangler (see may_leave_rust_demangler); if not, output past
  // the budget is dropped and the demangler runs to its end.
  bool may_leave;
  std::jmp_buf stop;
};

// Rust's v0 demangler holds one block on the heap while it prints an identifier in Punycode
// (u<length>…), and frees it after: leaving from inside that print would leak the block. Its
// other steps, and the Itanium and legacy Rust demanglers, hold nothing on the heap. A v0 name
// with no 'u' before a digit has no Punycode identifier, and may be left at any point.
bool may_hold_punycode(std::string_view name)
{
  for (size_t i = 0; i + 1 < name.size(); ++i) {
    if (name[i] == 'u' && name[i + 1] >= '0' && name[i + 1] <= '9')
      return true;
  }
  return false;
}

// libiberty's callback, called with each piece of output (at most 256 bytes at a time).
void collect(const char* piece, size_t length, void* opaque)
{
  auto* sink = static_cast<Sink*>(opaque);
  size_t taken = std::min(length, sink->capacity - sink->used);
  if (taken > 0) // Rust's demangler passes empty pieces without a pointer
    std::memcpy(sink->out + sink->used, piece, taken);
  sink->used += taken;
  if (taken < length || std::chrono::steady_clock::now() > sink->deadline) {
    sink->cut = true;
    // Only C frames of libiberty lie between here and run(), and (may_leave) they hold nothing
    // on the heap: jumping out leaks nothing.
    if (sink->may_leave)
      std::longjmp(sink->stop, 1);
  }
}

// libiberty's answer (non-zero: demangled), or -1 when the sink stopped it. No object with a
// destructor lives in this frame, so longjmp back into it is safe.
int run(const char* mangled, Sink* sink, Scheme scheme)
{
  if (setjmp(sink->stop) != 0)
    return -1;
  if (scheme == Scheme::kRust)
    return rust_demangle_callback(mangled, kRustOptions, collect, sink);
  return cplus_demangle_v3_callback(mangled, kDemangleOptions, collect, sink);
}

// The start of text that a budget cut (of bytes, or of time), ended by kTruncated, within
// max_bytes and never inside a UTF-8 character.
std::string marked(std::string_view text, size_t max_bytes)
{
  size_t keep = std::min(text.size(), max_bytes - kTruncated.size());
  while (keep > 0 && keep < text.size() && (static_cast<unsigned char>(text[keep]) & 0xc0) == 0x80)
    --keep;
  std::string cut(text.substr(0, keep));
  cut += kTruncated;
  return cut;
}

} // namespace

Demangled demangle_bounded(std::string_view name, size_t max_bytes)
{
  // Rust's v0 names start with _R; its legacy ones are Itanium-shaped (_ZN...17h<hash>E), which
  // the Rust demangler tells apart by their hash.
  bool itanium = name.starts_with("_Z");
  bool rust = name.starts_with("_R") || name.starts_with("_ZN");
  // A v0 name with a Punycode identifier is demangled to its end (see may_hold_punycode), which
  // is linear in the name unless it has back-references ('B'), whose output can grow
  // exponentially, or binders ('G'), whose count of lifetimes is a number of any size that the
  // demangler prints a lifetime for each of: one that may have both is shown as it is.
  bool v0 = name.starts_with("_R");
  bool punycode = v0 && may_hold_punycode(name);
  bool as_is = !(itanium || rust) || name.size() > kMaxMangledBytes ||
               name.find('\0') != std::string_view::npos ||
               (punycode && name.find_first_of("BG", 2) != std::string_view::npos);
  if (as_is)
    return {cut_name(name, max_bytes), name.size() > max_bytes};
  std::string mangled(name);
  // One byte more than the budget tells a name that fits from one that does not.
  std::string out(max_bytes + 1, '\0');
  auto deadline = std::chrono::steady_clock::now() + kMaxDemangleTime;
  Sink sink{out.data(), out.size(), 0, false, deadline, !punycode, {}};
  int result = rust ? run(mangled.c_str(), &sink, Scheme::kRust) : 0;
  if (result == 0 && itanium) {
    sink.used = 0;
    result = run(mangled.c_str(), &sink, Scheme::kItanium);
  }
  if (result == 0) // not a name libiberty demangles
    return {cut_name(name, max_bytes), name.size() > max_bytes};
  out.resize(sink.used);
  if (!sink.cut && out.size() <= max_bytes)
    return {std::move(out), false};
  // Cut by the byte budget (the spare byte was written) or the time budget.
  return {marked(out, max_bytes), true};
}

std::string demangle(std::string_view name)
{
  return demangle_bounded(name).text;
}

} // namespace flamebpf::symbolize
