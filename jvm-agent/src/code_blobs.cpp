#include "code_blobs.h"

#include <cstring>
#include <string_view>

namespace flamebpf::agent {
namespace {

// HotSpot's segment map marks a free segment with this; any other non-zero value is the distance
// back towards the segment where the block starts.
constexpr uint8_t kFreeSegment = 0xff;
// A blob this far from the segment it was found through is not one (the map was misread, or
// forged): each hop goes back up to 254 segments, so this is far beyond the largest blob.
constexpr int kMaxSegmentHops = 4096;
// Frame sizes beyond this are no real frame (HotSpot's largest are a few hundred words).
constexpr int64_t kMaxFrameWords = 1 << 16;
constexpr int64_t kMaxBlobBytes = 1LL << 31;

} // namespace

bool CodeBlobFinder::typed(
    const VmStructs& structs, const char* type, const char* name, Typed& out, std::string* error)
{
  const VmField* field = structs.field(type, name);
  if (!field || field->is_static) {
    *error = std::string("no field ") + type + "::" + name;
    return false;
  }
  std::string_view kind = field->type;
  out.offset = field->offset;
  if (kind == "int" || kind == "jint" || kind == "int32_t") {
    out.bytes = 4;
    out.is_signed = true;
  } else if (kind == "uint" || kind == "uint32_t" || kind == "u4") {
    out.bytes = 4;
  } else if (kind == "int16_t" || kind == "short" || kind == "jshort") {
    out.bytes = 2;
    out.is_signed = true;
  } else if (kind == "uint16_t" || kind == "u2") {
    out.bytes = 2;
  } else if (kind == "uint8_t" || kind == "u1" || kind == "bool") {
    out.bytes = 1;
  } else if (kind == "address" || kind == "size_t" || kind == "uintptr_t" || kind.ends_with('*')) {
    out.bytes = 8;
  } else {
    *error =
        std::string("field ") + type + "::" + name + " has a type of unknown size: " + field->type;
    return false;
  }
  return true;
}

std::optional<int64_t>
CodeBlobFinder::read(const VmMemory& memory, uint64_t object, const Typed& field)
{
  uint64_t where = object + field.offset;
  auto widen = [](auto value) -> std::optional<int64_t> {
    if (!value)
      return std::nullopt;
    return static_cast<int64_t>(*value);
  };
  switch (field.bytes) {
  case 1:
    return widen(memory.load<uint8_t>(where));
  case 2:
    return field.is_signed ? widen(memory.load<int16_t>(where))
                           : widen(memory.load<uint16_t>(where));
  case 4:
    return field.is_signed ? widen(memory.load<int32_t>(where))
                           : widen(memory.load<uint32_t>(where));
  default:
    return widen(memory.load<uint64_t>(where));
  }
}

std::optional<CodeBlobFinder> CodeBlobFinder::make(const VmStructs& structs, std::string* error)
{
  CodeBlobFinder finder;
  auto plain = [&](const char* type, const char* name, uint64_t& out) {
    const VmField* field = structs.field(type, name);
    if (!field) {
      *error = std::string("no field ") + type + "::" + name;
      return false;
    }
    out = field->is_static ? field->address : field->offset;
    return true;
  };
  const VmField* heaps = structs.field("CodeCache", "_heaps");
  if (!heaps || !heaps->is_static) {
    *error = "no field CodeCache::_heaps";
    return std::nullopt;
  }
  finder.heaps_address = heaps->address;
  auto heap_block = structs.type_size("HeapBlock");
  if (!heap_block) {
    *error = "no type HeapBlock";
    return std::nullopt;
  }
  finder.heap_block_size = *heap_block;
  if (!plain("GrowableArrayBase", "_len", finder.array_length) ||
      !plain("GrowableArray<int>", "_data", finder.array_data) ||
      !plain("CodeHeap", "_memory", finder.heap_memory) ||
      !plain("CodeHeap", "_segmap", finder.heap_segmap) ||
      !typed(structs, "CodeHeap", "_log2_segment_size", finder.heap_log2_segment, error) ||
      !plain("VirtualSpace", "_low_boundary", finder.space_low_boundary) ||
      !plain("VirtualSpace", "_high", finder.space_high) ||
      !typed(structs, "CodeBlob", "_size", finder.blob_size, error) ||
      !typed(structs, "CodeBlob", "_frame_size", finder.blob_frame_size, error) ||
      !typed(structs, "CodeBlob", "_frame_complete_offset", finder.blob_frame_complete, error))
    return std::nullopt;
  if (structs.field("CodeBlob", "_code_offset")) {
    finder.code_is_offset = true;
    if (!typed(structs, "CodeBlob", "_code_offset", finder.blob_code, error))
      return std::nullopt;
  } else if (!typed(structs, "CodeBlob", "_code_begin", finder.blob_code, error)) {
    return std::nullopt;
  }
  return finder;
}

std::optional<CodeBlobFrame> CodeBlobFinder::find(const VmMemory& memory, uint64_t address) const
{
  auto array = memory.load<uint64_t>(heaps_address);
  if (!array || !*array)
    return std::nullopt;
  auto count = memory.load<int32_t>(*array + array_length);
  auto data = memory.load<uint64_t>(*array + array_data);
  if (!count || !data || *count <= 0 || *count > 16 || !*data)
    return std::nullopt;
  for (int32_t i = 0; i < *count; ++i) {
    auto heap = memory.load<uint64_t>(*data + 8 * static_cast<uint64_t>(i));
    if (!heap)
      return std::nullopt;
    if (!*heap)
      continue;
    auto low = memory.load<uint64_t>(*heap + heap_memory + space_low_boundary);
    auto high = memory.load<uint64_t>(*heap + heap_memory + space_high);
    if (!low || !high)
      return std::nullopt;
    if (address < *low || address >= *high)
      continue;
    auto log2_segment = read(memory, *heap, heap_log2_segment);
    auto segmap = memory.load<uint64_t>(*heap + heap_segmap + space_low_boundary);
    if (!log2_segment || *log2_segment < 4 || *log2_segment > 16 || !segmap)
      return std::nullopt;
    // The address is committed code, so the map's entries for it and before it are committed.
    uint64_t segment = (address - *low) >> *log2_segment;
    for (int hops = 0;; ++hops) {
      auto tag = memory.load<uint8_t>(*segmap + segment);
      if (!tag || *tag == kFreeSegment || hops > kMaxSegmentHops || *tag > segment)
        return std::nullopt;
      if (*tag == 0)
        break;
      segment -= *tag;
    }
    CodeBlobFrame frame;
    frame.blob = *low + (segment << *log2_segment) + heap_block_size;
    auto size = read(memory, frame.blob, blob_size);
    auto code = read(memory, frame.blob, blob_code);
    auto frame_words = read(memory, frame.blob, blob_frame_size);
    auto complete = read(memory, frame.blob, blob_frame_complete);
    if (!size || !code || !frame_words || !complete)
      return std::nullopt;
    frame.code_begin =
        code_is_offset ? frame.blob + static_cast<uint64_t>(*code) : static_cast<uint64_t>(*code);
    frame.code_end = frame.blob + static_cast<uint64_t>(*size);
    if (*size <= 0 || *size > kMaxBlobBytes || frame.code_begin < frame.blob ||
        frame.code_begin >= frame.code_end || address >= frame.code_end || *frame_words < 0 ||
        *frame_words > kMaxFrameWords || *complete < -1 || *complete > *size)
      return std::nullopt;
    frame.frame_words = static_cast<uint32_t>(*frame_words);
    frame.frame_complete = static_cast<int32_t>(*complete);
    return frame;
  }
  return std::nullopt;
}

} // namespace flamebpf::agent
