// Finds the CodeBlob (HotSpot's header of each piece of generated code: a compiled method, a
// stub, the interpreter) that holds a code address, and reads what unwinding needs from it. The
// blob is found as HotSpot itself finds it: through the segment map of the code heap holding the
// address, which is what both debuggers of HotSpot rely on and has kept its form from JDK 9 on.
// Reads through a VmMemory: inside the JVM (the agent, on addresses the JVM has just announced
// as code), or from outside it (flamebpf), where what is read may be anything and every value is
// checked before it is followed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vm_memory.h"
#include "vm_structs.h"

namespace flamebpf::agent {

// What a CodeBlob says about its frames.
struct CodeBlobFrame {
  uint64_t blob = 0;           // the CodeBlob's address
  uint64_t code_begin = 0;     // its first instruction
  uint64_t code_end = 0;       // past its last instruction
  uint32_t frame_words = 0;    // the frame's size in words, return address and saved rbp included;
                               // 0: the blob keeps no frame of its own (it uses rbp, if anything)
  int32_t frame_complete = -1; // bytes from code_begin after which the frame is built; -1: never
};

class CodeBlobFinder {
public:
  // The finder for this JVM; nullopt, with the first name that is missing in *error, if the JVM
  // lacks a field it needs.
  static std::optional<CodeBlobFinder> make(const VmStructs& structs, std::string* error);

  // The blob holding address, or nullopt if no code heap holds it (or what was read is not
  // plausible for a blob).
  std::optional<CodeBlobFrame> find(const VmMemory& memory, uint64_t address) const;

  // A field of a HotSpot type, with its size and signedness as VMStructs gives them.
  struct Typed {
    uint64_t offset = 0;
    uint8_t bytes = 0; // 1, 2, 4 or 8
    bool is_signed = false;
  };
  // The field type::name of an integer or pointer type; false, with why in *error, if the JVM
  // lacks it or gives it a type of unknown size.
  static bool typed(
      const VmStructs& structs, const char* type, const char* name, Typed& out, std::string* error);
  // The field of the object at object; nullopt if it cannot be read.
  static std::optional<int64_t> read(const VmMemory& memory, uint64_t object, const Typed& field);

private:
  uint64_t heaps_address = 0;      // &CodeCache::_heaps
  uint64_t array_length = 0;       // GrowableArrayBase::_len
  uint64_t array_data = 0;         // GrowableArray<int>::_data
  uint64_t heap_memory = 0;        // CodeHeap::_memory (a VirtualSpace)
  uint64_t heap_segmap = 0;        // CodeHeap::_segmap (a VirtualSpace)
  Typed heap_log2_segment;         // CodeHeap::_log2_segment_size
  uint64_t space_low_boundary = 0; // VirtualSpace::_low_boundary
  uint64_t space_high = 0;         // VirtualSpace::_high: the end of what is committed
  uint64_t heap_block_size = 0;    // sizeof(HeapBlock): the blob follows it
  Typed blob_size;
  Typed blob_frame_size;
  Typed blob_frame_complete;
  // Where the code begins: a pointer until JDK 22 (_code_begin), an offset from JDK 23 on
  // (_code_offset).
  bool code_is_offset = false;
  Typed blob_code;
};

} // namespace flamebpf::agent
