#include "emit/pprof.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>
#include <zlib.h>

#include "common/utf8.h"
#include "profile/source_name.h"
#include "proto/profile.pb.h"

namespace flamebpf::emit {
namespace {

namespace pb = perftools::profiles;
using profile::Frame;
using profile::FrameKind;

constexpr std::string_view kUnknownName = "[unknown]";
constexpr std::string_view kKernelMapping = "[kernel.kallsyms]";
constexpr std::string_view kJitMapping = "[jit]";
constexpr std::string_view kInterpreterMapping = "[interpreter]";
// The Function of a process name; no FrameKind, so that it never merges with a frame's.
constexpr int kProcessKind = -1;

std::string_view or_unknown(const std::string& name)
{
  return name.empty() ? kUnknownName : std::string_view(name);
}

// The file a frame's code came from, "" if unknown. perf's names for the kernel's pseudo-files;
// a kernel module's is made in scratch.
std::string_view mapping_name(const Frame& frame, std::string& scratch)
{
  switch (frame.kind) {
  case FrameKind::kKernel:
    if (frame.module.empty())
      return kKernelMapping;
    scratch = "[" + frame.module + "]";
    return scratch;
  case FrameKind::kJit:
  case FrameKind::kInlined:
    return kJitMapping;
  case FrameKind::kInterpreted:
    return kInterpreterMapping;
  case FrameKind::kNative:
  case FrameKind::kUnknown:
    break;
  }
  return frame.module;
}

// What pprof's own heuristic would take for the main binary: a file, not a library or "[...]".
bool could_be_main_binary(std::string_view path)
{
  std::string_view base = path.substr(path.rfind('/') + 1);
  if (base.empty() || base.front() == '[')
    return false;
  for (size_t so = base.find(".so"); so != std::string_view::npos; so = base.find(".so", so + 1)) {
    size_t after = so + 3;
    if (after == base.size() || base[after] == '.' || base[after] == '_')
      return false;
  }
  return true;
}

// perf_data_converter's Builder, reduced to what a SymbolizedProfile holds: every string,
// function, location and mapping is added once and referred to by index or id.
class Builder {
public:
  explicit Builder(const profile::SymbolizedProfile& input) : input_(input)
  {
    out_.add_string_table(""); // index 0, by pprof's rule
    strings_.emplace("", 0);
  }

  Result<pb::Profile> build() &&;

private:
  int64_t string(std::string_view text);
  uint64_t function(std::string_view name, int kind, std::string_view module);
  uint64_t mapping(std::string_view file);
  // The location of code at address (a file offset; 0 if not known) in the mapping, with the
  // functions that name it (none: unnamed, for pprof's readers to name), the innermost at line
  // (an interpreted frame's; 0: its function's first line, if it says one).
  uint64_t location(uint64_t mapping_id,
                    uint64_t address,
                    const std::vector<uint64_t>& functions_root_first,
                    uint32_t line = 0);
  Result<> add_sample(const profile::Stack& stack, uint64_t period);
  void put_main_binary_first();

  const profile::SymbolizedProfile& input_;
  pb::Profile out_;
  std::map<std::string, int64_t, std::less<>> strings_;
  std::map<std::tuple<std::string, int, std::string>, uint64_t, std::less<>> functions_;
  std::map<std::string, uint64_t, std::less<>> mappings_;
  std::map<std::tuple<uint64_t, uint64_t, std::vector<uint64_t>, uint32_t>, uint64_t, std::less<>>
      locations_;
  std::string scratch_;                   // a kernel module's mapping name
  std::vector<uint64_t> mapping_samples_; // by mapping id - 1
  std::vector<int64_t> function_lines_;   // by function id - 1: an interpreted one's line, or 0
};

int64_t Builder::string(std::string_view text)
{
  // profile.proto's strings are proto3 strings, UTF-8 by definition (a parser may reject anything
  // else); names from targets are any bytes.
  if (!utf8::is_valid(text))
    return string(utf8::valid(text));
  if (auto it = strings_.find(text); it != strings_.end())
    return it->second;
  auto index = static_cast<int64_t>(out_.string_table_size());
  out_.add_string_table(std::string(text));
  strings_.emplace(std::string(text), index);
  return index;
}

uint64_t Builder::function(std::string_view name, int kind, std::string_view module)
{
  // Looked up by views: a frame's name and module are copied only for a new function.
  if (auto it = functions_.find(std::make_tuple(name, kind, module)); it != functions_.end())
    return it->second;
  auto key = std::make_tuple(std::string(name), kind, std::string(module));
  uint64_t id = functions_.size() + 1;
  pb::Function* function = out_.add_function();
  function->set_id(id);
  // An interpreted function's frame names its file and line too, which pprof keeps apart.
  std::optional<profile::SourcePlace> place;
  if (kind == static_cast<int>(FrameKind::kInterpreted))
    place = profile::source_place(name);
  function->set_name(string(place ? place->function : name));
  function->set_system_name(string(place ? place->function : name));
  if (place) {
    function->set_filename(string(place->file));
    function->set_start_line(place->line);
  }
  function_lines_.push_back(place ? place->line : 0);
  functions_.emplace(std::move(key), id);
  return id;
}

uint64_t Builder::mapping(std::string_view file)
{
  if (file.empty())
    return 0;
  if (auto it = mappings_.find(file); it != mappings_.end())
    return it->second;
  uint64_t id = mappings_.size() + 1;
  pb::Mapping* mapping = out_.add_mapping();
  mapping->set_id(id);
  mapping->set_filename(string(file));
  if (auto build_id = input_.build_ids.find(std::string(file)); build_id != input_.build_ids.end())
    mapping->set_build_id(string(build_id->second));
  // Addresses are offsets in the file: the mapping starts at 0 with the file's start, and ends
  // past the highest address of its locations.
  mapping->set_memory_start(0);
  mapping->set_file_offset(0);
  // Its functions are named, until a location of code flamebpf could not name says otherwise.
  mapping->set_has_functions(true);
  mappings_.emplace(std::string(file), id);
  mapping_samples_.push_back(0);
  return id;
}

uint64_t Builder::location(uint64_t mapping_id,
                           uint64_t address,
                           const std::vector<uint64_t>& functions_root_first,
                           uint32_t line)
{
  if (auto it = locations_.find(std::tie(mapping_id, address, functions_root_first, line));
      it != locations_.end())
    return it->second;
  auto key = std::make_tuple(mapping_id, address, functions_root_first, line);
  uint64_t id = locations_.size() + 1;
  pb::Location* location = out_.add_location();
  location->set_id(id);
  location->set_mapping_id(mapping_id);
  location->set_address(address);
  if (mapping_id != 0) {
    pb::Mapping* mapping = out_.mutable_mapping(static_cast<int>(mapping_id - 1));
    if (functions_root_first.size() > 1)
      mapping->set_has_inline_frames(true);
    if (functions_root_first.empty())
      mapping->set_has_functions(false);
    if (address != 0 && address >= mapping->memory_limit())
      mapping->set_memory_limit(address + 1);
  }
  // pprof lists a location's inlined functions innermost first.
  for (auto function = functions_root_first.rbegin(); function != functions_root_first.rend();
       ++function) {
    pb::Line* entry = location->add_line();
    entry->set_function_id(*function);
    int64_t number = function_lines_[*function - 1];
    if (function == functions_root_first.rbegin() && line != 0)
      number = line;
    if (number != 0)
      entry->set_line(number);
  }
  locations_.emplace(std::move(key), id);
  return id;
}

Result<> Builder::add_sample(const profile::Stack& stack, uint64_t period)
{
  if (stack.count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return fail(error("cannot write pprof profile: " + std::to_string(stack.count) +
                      " samples of pid " + std::to_string(stack.pid) + " overflow int64"));
  auto count = static_cast<int64_t>(stack.count);
  int64_t nanoseconds = 0;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(period), &nanoseconds))
    return fail(error("cannot write pprof profile: " + std::to_string(stack.count) +
                      " samples of pid " + std::to_string(stack.pid) +
                      " overflow int64 nanoseconds"));

  // Root first, as the frames come; a function and those inlined into it share one location (its
  // mapping's): a JIT-compiled Java method's, or a native function's.
  std::vector<uint64_t> locations;
  locations.push_back(location(0, 0, {function(or_unknown(stack.comm), kProcessKind, "")}));
  std::vector<uint64_t> group;
  uint64_t group_mapping = 0;
  uint64_t group_address = 0;
  uint32_t group_line = 0;
  bool group_open = false;
  bool group_takes_inlines = false;
  std::set<uint64_t> stack_mappings;
  auto close_group = [&] {
    if (group_open)
      locations.push_back(location(group_mapping, group_address, group, group_line));
    group.clear();
    group_open = false;
  };
  for (const Frame& frame : stack.frames) {
    // Code of an ELF file flamebpf could not name is its address alone, which pprof's readers
    // (Pyroscope, Parca) name from the mapping's build ID.
    bool unnamed_code =
        frame.kind == FrameKind::kUnknown && !frame.module.empty() && frame.file_offset != 0;
    if (frame.kind == FrameKind::kInlined && group_takes_inlines) {
      group.push_back(function(or_unknown(frame.name), static_cast<int>(frame.kind), frame.module));
      continue;
    }
    close_group();
    group_open = true;
    if (!unnamed_code)
      group.push_back(function(or_unknown(frame.name), static_cast<int>(frame.kind), frame.module));
    group_mapping = mapping(mapping_name(frame, scratch_));
    group_address = group_mapping != 0 ? frame.file_offset : 0;
    group_line = frame.line;
    group_takes_inlines = frame.kind == FrameKind::kJit || frame.kind == FrameKind::kNative;
    if (group_mapping != 0)
      stack_mappings.insert(group_mapping);
  }
  close_group();
  for (uint64_t id : stack_mappings)
    mapping_samples_[id - 1] += stack.count;

  pb::Sample* sample = out_.add_sample();
  for (auto id = locations.rbegin(); id != locations.rend(); ++id)
    sample->add_location_id(*id); // leaf first
  sample->add_value(count);
  if (period != 0)
    sample->add_value(nanoseconds);
  pb::Label* pid = sample->add_label();
  pid->set_key(string("pid"));
  pid->set_num(stack.pid);
  // pprof drops a numeric label of 0 that has no unit, and the idle task's pid is 0.
  pid->set_num_unit(string("pid"));
  auto text_label = [&](const char* key, const std::string& value) {
    if (value.empty())
      return;
    pb::Label* label = sample->add_label();
    label->set_key(string(key));
    label->set_str(string(value));
  };
  text_label("comm", std::string(or_unknown(stack.comm)));
  text_label("target", stack.target.empty() ? "host" : stack.target);
  if (auto labels = input_.target_labels.find(stack.target); labels != input_.target_labels.end()) {
    const profile::TargetLabels* container = &labels->second;
    // A pod's target has no container of its own: each sample has the one it was taken in.
    if (auto member = input_.pod_container_labels.find(stack.pod_container_id);
        container->container_id.empty() && member != input_.pod_container_labels.end())
      container = &member->second;
    text_label("container", container->container);
    text_label("container_id", container->container_id);
    text_label("namespace", labels->second.namespace_name);
    text_label("pod", labels->second.pod);
  }
  text_label("node", input_.node);
  return {};
}

// pprof shows mapping[0] as the profile's "File:"; ids stay as they are, only the order changes.
void Builder::put_main_binary_first()
{
  int best = -1;
  for (int i = 0; i < out_.mapping_size(); ++i) {
    const std::string& file = out_.string_table(static_cast<int>(out_.mapping(i).filename()));
    if (could_be_main_binary(file) && (best < 0 || mapping_samples_[static_cast<size_t>(i)] >
                                                       mapping_samples_[static_cast<size_t>(best)]))
      best = i;
  }
  if (best > 0)
    out_.mutable_mapping()->SwapElements(0, best);
}

Result<pb::Profile> Builder::build() &&
{
  // A sample stands for one period of CPU time; without a frequency there is no period.
  uint64_t hz = input_.frequency_hz;
  uint64_t period = hz == 0 ? 0 : (1'000'000'000 + hz / 2) / hz;
  pb::ValueType* samples = out_.add_sample_type();
  samples->set_type(string("samples"));
  samples->set_unit(string("count"));
  if (period != 0) {
    pb::ValueType* cpu = out_.add_sample_type();
    cpu->set_type(string("cpu"));
    cpu->set_unit(string("nanoseconds"));
    out_.mutable_period_type()->set_type(string("cpu"));
    out_.mutable_period_type()->set_unit(string("nanoseconds"));
    out_.set_period(static_cast<int64_t>(period));
    out_.set_default_sample_type(string("cpu"));
  } else {
    out_.set_default_sample_type(string("samples"));
  }
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  out_.set_time_nanos(duration_cast<nanoseconds>(input_.start.time_since_epoch()).count());
  out_.set_duration_nanos(
      std::max<int64_t>(0, duration_cast<nanoseconds>(input_.end - input_.start).count()));

  for (const auto& stack : input_.stacks) {
    if (stack.count == 0)
      continue;
    if (auto added = add_sample(stack, period); !added)
      return fail(added.error());
  }
  put_main_binary_first();
  return std::move(out_);
}

// Returns "" if the profile is well-formed, else the first problem.
std::string first_problem(const pb::Profile& profile)
{
  auto strings = static_cast<int64_t>(profile.string_table_size());
  if (strings == 0 || !profile.string_table(0).empty())
    return "string_table[0] is not \"\"";
  // The first of indices that is no string, if any.
  auto bad_string = [&](std::initializer_list<int64_t> indices) -> std::optional<int64_t> {
    for (int64_t index : indices)
      if (index < 0 || index >= strings)
        return index;
    return std::nullopt;
  };
  auto names_bad = [&](const std::string& what, int64_t index) {
    return what + " names string " + std::to_string(index) + " of " + std::to_string(strings);
  };

  for (const auto& type : profile.sample_type())
    if (auto bad = bad_string({type.type(), type.unit()}))
      return names_bad("a sample_type", *bad);
  if (auto bad =
          bad_string({profile.period_type().type(), profile.period_type().unit(),
                      profile.default_sample_type(), profile.drop_frames(), profile.keep_frames()}))
    return names_bad("the profile", *bad);
  for (int64_t comment : profile.comment())
    if (auto bad = bad_string({comment}))
      return names_bad("a comment", *bad);

  std::set<uint64_t> mappings;
  for (const auto& mapping : profile.mapping()) {
    std::string what = "mapping " + std::to_string(mapping.id());
    if (mapping.id() == 0 || !mappings.insert(mapping.id()).second)
      return what + " is zero or not unique";
    if (auto bad = bad_string({mapping.filename(), mapping.build_id()}))
      return names_bad(what, *bad);
  }
  std::set<uint64_t> functions;
  for (const auto& function : profile.function()) {
    std::string what = "function " + std::to_string(function.id());
    if (function.id() == 0 || !functions.insert(function.id()).second)
      return what + " is zero or not unique";
    if (auto bad = bad_string({function.name(), function.system_name(), function.filename()}))
      return names_bad(what, *bad);
  }
  std::set<uint64_t> locations;
  for (const auto& location : profile.location()) {
    std::string what = "location " + std::to_string(location.id());
    if (location.id() == 0 || !locations.insert(location.id()).second)
      return what + " is zero or not unique";
    if (location.mapping_id() != 0 && !mappings.contains(location.mapping_id()))
      return what + " names missing mapping " + std::to_string(location.mapping_id());
    for (const auto& line : location.line())
      if (!functions.contains(line.function_id()))
        return what + " names missing function " + std::to_string(line.function_id());
  }
  for (int i = 0; i < profile.sample_size(); ++i) {
    const pb::Sample& sample = profile.sample(i);
    std::string what = "sample " + std::to_string(i);
    if (sample.value_size() != profile.sample_type_size())
      return what + " has " + std::to_string(sample.value_size()) + " values for " +
             std::to_string(profile.sample_type_size()) + " sample types";
    for (uint64_t id : sample.location_id())
      if (!locations.contains(id))
        return what + " names missing location " + std::to_string(id);
    for (const auto& label : sample.label())
      if (auto bad = bad_string({label.key(), label.str(), label.num_unit()}))
        return names_bad(what + "'s label", *bad);
  }
  return "";
}

Result<> check(const pb::Profile& profile)
{
  if (std::string problem = first_problem(profile); !problem.empty())
    return fail(error("invalid pprof profile: " + problem));
  return {};
}

} // namespace

Result<std::string> pprof_bytes(const profile::SymbolizedProfile& profile)
{
  auto built = Builder(profile).build();
  if (!built)
    return fail(built.error());
  if (auto valid = check(*built); !valid)
    return fail(valid.error());
  std::string bytes;
  if (!built->SerializeToString(&bytes))
    return fail(error("cannot serialize pprof profile of " + std::to_string(built->ByteSizeLong()) +
                      " bytes: protobuf messages are limited to 2 GiB"));
  return bytes;
}

Result<> check_pprof(const std::string& serialized)
{
  pb::Profile profile;
  if (!profile.ParseFromString(serialized))
    return fail(error("invalid pprof profile: not a serialized perftools.profiles.Profile"));
  return check(profile);
}

Result<std::string> gzip_compress(const std::string& data)
{
  z_stream stream{};
  // windowBits 15 + 16: zlib writes a gzip header and trailer instead of its own. The fastest
  // level, as Go's runtime/pprof writes its profiles: an agent compresses every target's profile
  // each interval, and a profile's repeated strings and varints shrink nearly as much.
  if (int status = deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
      status != Z_OK)
    return fail(error(std::string("cannot start gzip compression: ") + zError(status)));
  std::string out(deflateBound(&stream, data.size()), '\0');
  // avail_in and avail_out are 32-bit: feed and drain in slices.
  constexpr size_t kSlice = size_t{1} << 30;
  size_t in = 0;
  int status = Z_OK;
  while (status == Z_OK) {
    if (stream.avail_in == 0) {
      stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in));
      stream.avail_in = static_cast<uInt>(std::min(kSlice, data.size() - in));
      in += stream.avail_in;
    }
    if (stream.avail_out == 0) {
      if (stream.total_out == out.size())
        out.resize(out.size() + kSlice);
      stream.next_out = reinterpret_cast<Bytef*>(out.data() + stream.total_out);
      stream.avail_out = static_cast<uInt>(std::min(kSlice, out.size() - stream.total_out));
    }
    status = deflate(&stream, in == data.size() ? Z_FINISH : Z_NO_FLUSH);
  }
  std::string why = stream.msg ? stream.msg : zError(status);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (status != Z_STREAM_END)
    return fail(error("cannot gzip-compress " + std::to_string(data.size()) + " bytes: " + why));
  return out;
}

Result<> PprofEmitter::write(const profile::SymbolizedProfile& profile, std::ostream& out)
{
  auto bytes = pprof_bytes(profile);
  if (!bytes)
    return fail(bytes.error());
  auto compressed = gzip_compress(*bytes);
  if (!compressed)
    return fail(compressed.error());
  out.write(compressed->data(), static_cast<std::streamsize>(compressed->size()));
  out.flush();
  if (!out)
    return fail(error("write failed"));
  return {};
}

} // namespace flamebpf::emit
