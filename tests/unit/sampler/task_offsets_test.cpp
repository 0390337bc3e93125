#include <bpf/btf.h>
#include <cstring>
#include <gtest/gtest.h>
#include <linux/btf.h>
#include <string>
#include <vector>

#include "common/procfs.h"
#include "sampler/task_offsets.h"

namespace flamebpf::sampler {
namespace {

constexpr const char* kKernelBtf = "/sys/kernel/btf/vmlinux";

// Raw BTF of one struct with the members given (all 8-byte integers, or anonymous unions).
class BtfBuilder {
public:
  BtfBuilder() { strings_.push_back('\0'); }

  uint32_t name(const std::string& text)
  {
    if (text.empty())
      return 0;
    uint32_t offset = static_cast<uint32_t>(strings_.size());
    strings_.insert(strings_.end(), text.begin(), text.end());
    strings_.push_back('\0');
    return offset;
  }

  uint32_t add_int()
  {
    add_type(name("long"), BTF_KIND_INT, 0, 0, 8);
    uint32_t encoding = 64;
    append(&encoding, sizeof encoding);
    return ++types_;
  }

  // members: (name, type id, byte offset).
  uint32_t add_struct(const std::string& struct_name,
                      const std::vector<std::tuple<std::string, uint32_t, uint32_t>>& members,
                      uint32_t kind = BTF_KIND_STRUCT)
  {
    add_type(name(struct_name), kind, static_cast<uint32_t>(members.size()), 0, 64);
    for (const auto& [member_name, type, offset] : members) {
      btf_member member{name(member_name), type, offset * 8};
      append(&member, sizeof member);
    }
    return ++types_;
  }

  std::string build() const
  {
    btf_header header{};
    header.magic = BTF_MAGIC;
    header.version = 1;
    header.hdr_len = sizeof header;
    header.type_off = 0;
    header.type_len = static_cast<uint32_t>(types_bytes_.size());
    header.str_off = header.type_len;
    header.str_len = static_cast<uint32_t>(strings_.size());
    std::string out(reinterpret_cast<const char*>(&header), sizeof header);
    out.append(types_bytes_.begin(), types_bytes_.end());
    out.append(strings_.begin(), strings_.end());
    return out;
  }

private:
  void add_type(uint32_t name_off, uint32_t kind, uint32_t vlen, uint32_t kflag, uint32_t size)
  {
    btf_type type{};
    type.name_off = name_off;
    type.info = (kflag << 31) | (kind << 24) | vlen;
    type.size = size;
    append(&type, sizeof type);
  }
  void append(const void* data, size_t size)
  {
    auto* bytes = static_cast<const char*>(data);
    types_bytes_.insert(types_bytes_.end(), bytes, bytes + size);
  }

  std::vector<char> types_bytes_;
  std::vector<char> strings_;
  uint32_t types_ = 0;
};

TEST(TaskOffsets, FindsMembersDirectlyAndInsideAnonymousUnions)
{
  BtfBuilder btf;
  uint32_t integer = btf.add_int();
  uint32_t anonymous =
      btf.add_struct("", {{"mm", integer, 8}, {"other", integer, 16}}, BTF_KIND_UNION);
  btf.add_struct("mm_struct", {{"mm", integer, 0}}); // a decoy: not task_struct's
  btf.add_struct("task_struct", {{"flags", integer, 4},
                                 {"", anonymous, 96},
                                 {"group_leader", integer, 200},
                                 {"comm", integer, 300}});
  auto offsets = scan_task_offsets(btf.build());
  ASSERT_TRUE(offsets) << offsets.error().message;
  EXPECT_EQ(offsets->mm, 104u);
  EXPECT_EQ(offsets->group_leader, 200u);
  EXPECT_EQ(offsets->comm, 300u);
}

TEST(TaskOffsets, MissingMemberOrStructIsAnError)
{
  BtfBuilder without_mm;
  uint32_t integer = without_mm.add_int();
  without_mm.add_struct("task_struct", {{"flags", integer, 4}, {"comm", integer, 8}});
  auto missing = scan_task_offsets(without_mm.build());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no member mm"), std::string::npos);

  BtfBuilder without_struct;
  without_struct.add_int();
  EXPECT_FALSE(scan_task_offsets(without_struct.build()));
}

TEST(TaskOffsets, MalformedBtfIsAnErrorNotACrash)
{
  BtfBuilder btf;
  uint32_t integer = btf.add_int();
  btf.add_struct("task_struct",
                 {{"mm", integer, 8}, {"group_leader", integer, 16}, {"comm", integer, 24}});
  std::string good = btf.build();
  EXPECT_FALSE(scan_task_offsets(""));
  EXPECT_FALSE(scan_task_offsets(good.substr(0, 10)));
  // Every truncation, and a bad magic number.
  for (size_t size = 0; size < good.size(); ++size)
    EXPECT_FALSE(scan_task_offsets(good.substr(0, size))) << size;
  std::string bad_magic = good;
  bad_magic[0] ^= 1;
  EXPECT_FALSE(scan_task_offsets(bad_magic));
  // A type kind from the future.
  std::string future = good;
  btf_type first{};
  std::memcpy(&first, future.data() + sizeof(btf_header), sizeof first);
  first.info = (31u << 24);
  std::memcpy(future.data() + sizeof(btf_header), &first, sizeof first);
  auto unknown = scan_task_offsets(future);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown"), std::string::npos);
}

// On this machine's kernel, the scan agrees with libbpf's full parse.
TEST(TaskOffsets, AgreeWithLibbpfOnThisKernel)
{
  auto raw = procfs::read_file(kKernelBtf, 256 << 20);
  if (!raw)
    GTEST_SKIP() << "no kernel BTF: " << raw.error().message;
  auto scanned = scan_task_offsets(*raw);
  ASSERT_TRUE(scanned) << scanned.error().message;

  btf* parsed = btf__parse(kKernelBtf, nullptr);
  ASSERT_NE(parsed, nullptr);
  int id = btf__find_by_name_kind(parsed, "task_struct", BTF_KIND_STRUCT);
  ASSERT_GT(id, 0);
  const btf_type* task = btf__type_by_id(parsed, static_cast<uint32_t>(id));
  const btf_member* members = btf_members(task);
  auto offset_of = [&](const std::string& wanted) -> int64_t {
    for (uint16_t i = 0; i < btf_vlen(task); ++i)
      if (btf__name_by_offset(parsed, members[i].name_off) == wanted)
        return btf_member_bit_offset(task, i) / 8;
    return -1; // inside an anonymous member: not checked here
  };
  for (auto [name, value] : {std::pair{"mm", scanned->mm},
                             {"group_leader", scanned->group_leader},
                             {"comm", scanned->comm}}) {
    int64_t expected = offset_of(name);
    if (expected >= 0) {
      EXPECT_EQ(value, expected) << name;
    }
  }
  btf__free(parsed);
  auto loaded = load_task_offsets(kKernelBtf);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->mm, scanned->mm);
}

} // namespace
} // namespace flamebpf::sampler
