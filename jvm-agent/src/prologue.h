// Where the prologue of HotSpot-generated code builds its frame, found in the code's own bytes.
// HotSpot's compilers build a frame in one of two forms (frame_size counts the return address
// and the saved rbp, in words):
//   push  %rbp ; [mov %rsp,%rbp] ; sub $imm,%rsp        imm + 16 == frame_size * 8
//   sub   $imm,%rsp ; mov %rbp,disp(%rsp)               imm + 8 == frame_size * 8, disp == imm - 8
// (the second where no stack bang precedes the frame). Only a match whose sizes agree with the
// blob's frame size counts: anything else leaves the prologue unknown, and an unknown prologue
// gets only rules that are safe without it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flamebpf::agent {

struct Prologue {
  enum class Form : uint8_t {
    kUnknown, // not found, or its sizes disagree with the frame size
    kPush,    // push %rbp first: first_end is after the push, second_end after the sub
    kSave,    // sub first: first_end is after the sub, second_end after the store of rbp
  };
  Form form = Form::kUnknown;
  uint32_t first_end = 0;  // bytes from the code's start
  uint32_t second_end = 0; // bytes from the code's start
};

// How far into the code the prologue is looked for: past the inline-cache check, alignment and
// stack bang that precede it.
inline constexpr size_t kMaxPrologueSearch = 96;

// Finds the prologue in the first bytes of code (size of them readable) of a frame of
// frame_words words.
Prologue find_prologue(const uint8_t* code, size_t size, uint32_t frame_words);

} // namespace flamebpf::agent
