#include "runtimes/hotspot/hotspot_code.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <elf.h>
#include <sys/stat.h>

#include "common/elf_reader.h"
#include "common/exported_objects.h"
#include "common/log.h"
#include "common/mapped_file.h"
#include "common/utf8.h"
#include "method_name.h"

namespace flamebpf::hotspot {
namespace {

// A blob's own name ("nmethod", "Interpreter", "StubRoutines (1)") is short.
constexpr size_t kMaxBlobName = 256;
// The name HotSpot gives the blob of every compiled method (JDK 9 to 25).
constexpr std::string_view kCompiledMethod = "nmethod";

} // namespace

Result<std::unique_ptr<HotSpotCode>>
HotSpotCode::open(uint32_t host_pid, const std::string& proc_root, const procfs::Mapping& libjvm)
{
  std::string process = proc_root + "/" + std::to_string(host_pid);
  auto mapped = open_mapped_elf(process, libjvm);
  if (!mapped)
    return fail(mapped.error());
  const ElfReader& elf = mapped->elf;
  const std::string& shown = elf.shown();
  // Where the file is loaded: the segment the executable mapping shows.
  std::optional<uint64_t> bias = load_bias(elf, libjvm);
  if (!bias)
    return fail(error(shown + ": no load segment where it is mapped"));
  constexpr size_t kSymbols = std::size(agent::VmStructs::kLayoutSymbols);
  std::array<std::string_view, kSymbols> names;
  std::copy(std::begin(agent::VmStructs::kLayoutSymbols),
            std::end(agent::VmStructs::kLayoutSymbols), names.begin());
  auto found = exported_objects(elf, *bias, names);
  if (!found)
    return fail(found.error());
  JvmMemory memory(host_pid);
  memory.renew_budget(kBytesToOpen);
  uint64_t values[kSymbols] = {};
  for (size_t i = 0; i < kSymbols; ++i) {
    if (!(*found)[i])
      return fail(error(shown + " exports no " + agent::VmStructs::kLayoutSymbols[i]));
    auto value = memory.load<uint64_t>((*found)[i]->address);
    if (!value)
      return fail(system_error(errno, "cannot read the memory of JVM " + std::to_string(host_pid)));
    values[i] = *value;
  }
  std::string why;
  auto layout = agent::VmStructs::layout_of(values, &why);
  if (!layout)
    return fail(error(shown + ": " + why));
  // HotSpot's tables hold some thousands of entries.
  auto structs = agent::VmStructs::from_layout(*layout, memory, 16384);
  if (memory.budget_spent())
    return fail(error(shown + ": its VMStructs tables take more than " +
                      std::to_string(kBytesToOpen >> 20) + " MiB to read"));
  auto finder = agent::CodeBlobFinder::make(structs, &why);
  if (!finder)
    return fail(error(shown + ": " + why));
  spdlog::debug("{}: read its VMStructs ({} fields, {} types) in {} KiB", shown, structs.fields(),
                structs.types(), memory.spent() >> 10);
  std::unique_ptr<HotSpotCode> code(new HotSpotCode(host_pid, *finder));
  auto plain = [&](const char* type, const char* name, uint64_t& out) {
    const agent::VmField* field = structs.field(type, name);
    if (!field || field->is_static) {
      why = std::string("no field ") + type + "::" + name;
      return false;
    }
    out = field->offset;
    return true;
  };
  bool method_field = structs.field("nmethod", "_method")
                          ? plain("nmethod", "_method", code->method_field)
                          : plain("CompiledMethod", "_method", code->method_field);
  auto pool_size = structs.type_size("ConstantPool");
  if (!method_field || !plain("CodeBlob", "_name", code->blob_name) ||
      !plain("Method", "_constMethod", code->const_method) ||
      !plain("ConstMethod", "_constants", code->constants) ||
      !Finder::typed(structs, "ConstMethod", "_name_index", code->name_index, &why) ||
      !Finder::typed(structs, "ConstMethod", "_signature_index", code->signature_index, &why) ||
      !plain("ConstantPool", "_pool_holder", code->pool_holder) ||
      !plain("Klass", "_name", code->klass_name) ||
      !Finder::typed(structs, "Symbol", "_length", code->symbol_length, &why) ||
      !plain("Symbol", "_body", code->symbol_body))
    return fail(error(shown + ": " + why));
  if (!pool_size)
    return fail(error(shown + ": no type ConstantPool"));
  code->pool_size = *pool_size;
  code->begin_interval();
  return code;
}

std::optional<PerfMapEntry> HotSpotCode::find(uint64_t address)
{
  auto blob = finder_.find(memory_, address);
  if (!blob)
    return std::nullopt;
  auto name_pointer = memory_.load<uint64_t>(blob->blob + blob_name);
  if (!name_pointer || !*name_pointer)
    return std::nullopt;
  auto name = memory_.text(*name_pointer, kMaxBlobName);
  if (!name || name->empty())
    return std::nullopt;
  if (*name == kCompiledMethod) {
    auto method = memory_.load<uint64_t>(blob->blob + method_field);
    if (!method || !*method)
      return std::nullopt;
    name = method_name(*method);
    if (!name)
      return std::nullopt;
  } else {
    *name = utf8::valid(agent::standard_utf8(*name));
  }
  return PerfMapEntry{blob->code_begin, blob->code_end, std::move(*name), false};
}

std::optional<std::string> HotSpotCode::symbol_text(uint64_t symbol) const
{
  auto length = Finder::read(memory_, symbol, symbol_length);
  if (!length || *length <= 0 || *length > 0xffff)
    return std::nullopt;
  std::string text(std::min<size_t>(static_cast<size_t>(*length), kMaxNameBytes), '\0');
  if (!memory_.read(symbol + symbol_body, text.data(), text.size()))
    return std::nullopt;
  return text;
}

std::optional<std::string> HotSpotCode::method_name(uint64_t method) const
{
  auto const_method_pointer = memory_.load<uint64_t>(method + const_method);
  if (!const_method_pointer || !*const_method_pointer)
    return std::nullopt;
  auto pool = memory_.load<uint64_t>(*const_method_pointer + constants);
  auto name_at = Finder::read(memory_, *const_method_pointer, name_index);
  auto signature_at = Finder::read(memory_, *const_method_pointer, signature_index);
  if (!pool || !*pool || !name_at || !signature_at)
    return std::nullopt;
  // The pool's entries (8 bytes each) follow its header; the indexes point at Symbol* entries.
  auto entry = [&](int64_t index) -> std::optional<uint64_t> {
    if (index <= 0 || index > 0xffff)
      return std::nullopt;
    return memory_.load<uint64_t>(*pool + pool_size + 8 * static_cast<uint64_t>(index));
  };
  auto name_symbol = entry(*name_at);
  auto signature_symbol = entry(*signature_at);
  auto holder = memory_.load<uint64_t>(*pool + pool_holder);
  if (!name_symbol || !signature_symbol || !holder || !*name_symbol || !*signature_symbol ||
      !*holder)
    return std::nullopt;
  auto class_symbol = memory_.load<uint64_t>(*holder + klass_name);
  if (!class_symbol || !*class_symbol)
    return std::nullopt;
  auto class_name = symbol_text(*class_symbol);
  auto method_text = symbol_text(*name_symbol);
  auto signature = symbol_text(*signature_symbol);
  if (!class_name || !method_text || !signature || !signature->starts_with('('))
    return std::nullopt;
  // Symbols are modified UTF-8; a forged one may be anything.
  auto text = [](const std::string& symbol) { return utf8::valid(agent::standard_utf8(symbol)); };
  return agent::method_display_name("L" + text(*class_name) + ";", text(*method_text),
                                    text(*signature));
}

} // namespace flamebpf::hotspot
