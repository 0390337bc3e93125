#include "prologue.h"

#include <cstring>

namespace flamebpf::agent {
namespace {

constexpr uint8_t kPushRbp = 0x55;
constexpr uint8_t kRexW = 0x48;

// "sub $imm,%rsp" at code[at]: its length and immediate, or 0.
size_t sub_rsp(const uint8_t* code, size_t size, size_t at, int64_t& imm)
{
  if (at + 4 <= size && code[at] == kRexW && code[at + 1] == 0x83 && code[at + 2] == 0xec) {
    imm = static_cast<int8_t>(code[at + 3]);
    return 4;
  }
  if (at + 7 <= size && code[at] == kRexW && code[at + 1] == 0x81 && code[at + 2] == 0xec) {
    int32_t value;
    std::memcpy(&value, code + at + 3, sizeof value);
    imm = value;
    return 7;
  }
  return 0;
}

// "mov %rbp,disp(%rsp)" at code[at]: its length and displacement, or 0.
size_t store_rbp(const uint8_t* code, size_t size, size_t at, int64_t& disp)
{
  if (at + 5 <= size && code[at] == kRexW && code[at + 1] == 0x89 && code[at + 2] == 0x6c &&
      code[at + 3] == 0x24) {
    disp = static_cast<int8_t>(code[at + 4]);
    return 5;
  }
  if (at + 8 <= size && code[at] == kRexW && code[at + 1] == 0x89 && code[at + 2] == 0xac &&
      code[at + 3] == 0x24) {
    int32_t value;
    std::memcpy(&value, code + at + 4, sizeof value);
    disp = value;
    return 8;
  }
  return 0;
}

// "mov %rsp,%rbp", which -XX:+PreserveFramePointer adds after the push.
size_t move_rsp_to_rbp(const uint8_t* code, size_t size, size_t at)
{
  return at + 3 <= size && code[at] == kRexW && code[at + 1] == 0x89 && code[at + 2] == 0xe5 ? 3
                                                                                             : 0;
}

} // namespace

Prologue find_prologue(const uint8_t* code, size_t size, uint32_t frame_words)
{
  Prologue found;
  if (!code || frame_words < 2)
    return found;
  int64_t frame_bytes = int64_t{frame_words} * 8;
  size_t limit = size < kMaxPrologueSearch ? size : kMaxPrologueSearch;
  // The first place where either form matches with the right sizes: the bytes before it are
  // instructions of the entry (inline-cache check, nops, stack bang) that an exact match of
  // these sequences with these sizes does not occur in.
  for (size_t at = 0; at < limit; ++at) {
    int64_t imm = 0;
    if (code[at] == kPushRbp) {
      size_t after_push = at + 1;
      size_t after_mov = after_push + move_rsp_to_rbp(code, size, after_push);
      if (size_t sub = sub_rsp(code, size, after_mov, imm); sub && imm + 16 == frame_bytes) {
        found.form = Prologue::Form::kPush;
        found.first_end = static_cast<uint32_t>(after_push);
        found.second_end = static_cast<uint32_t>(after_mov + sub);
        return found;
      }
      // A frame of just the return address and rbp has no sub.
      if (frame_bytes == 16 && after_mov > after_push) {
        found.form = Prologue::Form::kPush;
        found.first_end = static_cast<uint32_t>(after_push);
        found.second_end = static_cast<uint32_t>(after_mov);
        return found;
      }
      continue;
    }
    if (size_t sub = sub_rsp(code, size, at, imm); sub && imm + 8 == frame_bytes) {
      int64_t disp = 0;
      if (size_t store = store_rbp(code, size, at + sub, disp); store && disp == imm - 8) {
        found.form = Prologue::Form::kSave;
        found.first_end = static_cast<uint32_t>(at + sub);
        found.second_end = static_cast<uint32_t>(at + sub + store);
        return found;
      }
    }
  }
  return found;
}

} // namespace flamebpf::agent
