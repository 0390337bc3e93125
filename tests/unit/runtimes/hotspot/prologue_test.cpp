#include <gtest/gtest.h>
#include <vector>

#include "code_blobs.h"
#include "prologue.h"
#include "unwind_records.h"
#include "vm_structs.h"

namespace flamebpf::agent {
namespace {

// The entry of a C2 method before its frame: an inline-cache check, alignment, a stack bang.
const std::vector<uint8_t> kEntry{0x44, 0x8b, 0x56, 0x08, 0x49, 0xbb, 0,    0,    0,    0,
                                  0x08, 0,    0,    0,    0x4d, 0x03, 0xd3, 0x4c, 0x3b, 0xd0,
                                  0x0f, 0x85, 0x10, 0x20, 0x30, 0x40, 0x66, 0x90, // cmp, jne, nop
                                  0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff};      // stack bang

std::vector<uint8_t> code(std::initializer_list<uint8_t> prologue)
{
  std::vector<uint8_t> bytes = kEntry;
  bytes.insert(bytes.end(), prologue);
  bytes.insert(bytes.end(), {0x90, 0x90, 0xc3});
  return bytes;
}

TEST(Prologue, PushThenSub)
{
  auto bytes = code({0x55, 0x48, 0x83, 0xec, 0x20}); // push %rbp; sub $0x20,%rsp
  Prologue found = find_prologue(bytes.data(), bytes.size(), 6);
  EXPECT_EQ(found.form, Prologue::Form::kPush);
  EXPECT_EQ(found.first_end, kEntry.size() + 1);
  EXPECT_EQ(found.second_end, kEntry.size() + 5);
}

TEST(Prologue, PushMoveThenLongSub)
{
  // -XX:+PreserveFramePointer: push %rbp; mov %rsp,%rbp; sub $0x100,%rsp
  auto bytes = code({0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00});
  Prologue found = find_prologue(bytes.data(), bytes.size(), (0x100 + 16) / 8);
  EXPECT_EQ(found.form, Prologue::Form::kPush);
  EXPECT_EQ(found.first_end, kEntry.size() + 1);
  EXPECT_EQ(found.second_end, kEntry.size() + 11);
}

TEST(Prologue, SubThenStore)
{
  // sub $0x18,%rsp; mov %rbp,0x10(%rsp): a frame without a stack bang.
  std::vector<uint8_t> bytes{0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x6c, 0x24, 0x10, 0xc3};
  Prologue found = find_prologue(bytes.data(), bytes.size(), 4);
  EXPECT_EQ(found.form, Prologue::Form::kSave);
  EXPECT_EQ(found.first_end, 4u);
  EXPECT_EQ(found.second_end, 9u);
}

TEST(Prologue, SizesThatDisagreeLeaveItUnknown)
{
  auto bytes = code({0x55, 0x48, 0x83, 0xec, 0x20});
  EXPECT_EQ(find_prologue(bytes.data(), bytes.size(), 7).form, Prologue::Form::kUnknown);
  std::vector<uint8_t> store{0x48, 0x83, 0xec, 0x18, 0x48, 0x89, 0x6c, 0x24, 0x08};
  EXPECT_EQ(find_prologue(store.data(), store.size(), 4).form, Prologue::Form::kUnknown);
  EXPECT_EQ(find_prologue(bytes.data(), bytes.size(), 0).form, Prologue::Form::kUnknown);
  // Cut before the sub's immediate: nothing is read past the end.
  EXPECT_EQ(find_prologue(bytes.data(), kEntry.size() + 4, 6).form, Prologue::Form::kUnknown);
}

TEST(UnwindRecords, LinesAsFlamebpfReadsThem)
{
  Prologue push{Prologue::Form::kPush, 0x20, 0x24};
  EXPECT_EQ(code_record(0x7f0000001000, 0x100, 6, 64, push),
            "code 7f0000001000 100 6 64 push 20 24\n");
  EXPECT_EQ(code_record(0x1000, 0x10, 0, -1, Prologue{}), "code 1000 10 0 -1 none 0 0\n");
  EXPECT_EQ(interpreter_record(0x1000, 0x800), "interpreter 1000 800\n");
  EXPECT_EQ(unload_record(0x1000), "unload 1000\n");
  EXPECT_EQ(method_record(0x7f3b0b400338, "Foo.bar()"), "method 7f3b0b400338 Foo.bar()\n");
}

// VMStructs tables as libjvm lays them out, with entries of this test's own layout.
struct StructEntry {
  const char* type_name;
  const char* field_name;
  const char* type_string;
  int32_t is_static;
  uint64_t offset;
  void* address;
};
struct TypeEntry {
  const char* type_name;
  uint64_t size;
};

TEST(VmStructs, FindsFieldsAndTypesByName)
{
  int heaps = 0;
  StructEntry fields[] = {{"CodeBlob", "_frame_size", "int", 0, 24, nullptr},
                          {"CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", 1, 0, &heaps},
                          {nullptr, nullptr, nullptr, 0, 0, nullptr}};
  TypeEntry types[] = {{"HeapBlock", 16}, {nullptr, 0}};
  VmStructs::Layout layout;
  layout.structs = reinterpret_cast<uint64_t>(fields);
  layout.struct_type_name = offsetof(StructEntry, type_name);
  layout.struct_field_name = offsetof(StructEntry, field_name);
  layout.struct_type_string = offsetof(StructEntry, type_string);
  layout.struct_is_static = offsetof(StructEntry, is_static);
  layout.struct_offset = offsetof(StructEntry, offset);
  layout.struct_address = offsetof(StructEntry, address);
  layout.struct_stride = sizeof(StructEntry);
  layout.types = reinterpret_cast<uint64_t>(types);
  layout.type_name = offsetof(TypeEntry, type_name);
  layout.type_size = offsetof(TypeEntry, size);
  layout.type_stride = sizeof(TypeEntry);
  VmStructs structs = VmStructs::from_layout(layout, OwnMemory());
  const VmField* frame_size = structs.field("CodeBlob", "_frame_size");
  ASSERT_TRUE(frame_size);
  EXPECT_EQ(frame_size->offset, 24u);
  EXPECT_EQ(frame_size->type, "int");
  EXPECT_FALSE(frame_size->is_static);
  const VmField* heaps_field = structs.field("CodeCache", "_heaps");
  ASSERT_TRUE(heaps_field);
  EXPECT_TRUE(heaps_field->is_static);
  EXPECT_EQ(heaps_field->address, reinterpret_cast<uint64_t>(&heaps));
  EXPECT_EQ(structs.type_size("HeapBlock"), 16u);
  EXPECT_FALSE(structs.field("CodeBlob", "_code_offset"));
  EXPECT_FALSE(structs.type_size("CodeHeap"));
  // A JVM lacking a field the finder needs gives no finder: nothing is guessed.
  std::string error;
  EXPECT_FALSE(CodeBlobFinder::make(structs, &error));
  EXPECT_NE(error.find("no "), std::string::npos) << error;
}

} // namespace
} // namespace flamebpf::agent
