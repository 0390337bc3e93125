#include "sampler/task_offsets.h"

#include <bpf/btf.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/btf.h>
#include <memory>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/procfs.h"
#include "common/unique_fd.h"

namespace flamebpf::sampler {
namespace {

// Bytes that follow a type's 12-byte header, by kind; nullopt for a kind this scanner does not
// know.
std::optional<size_t> trailing_bytes(uint32_t kind, uint32_t vlen)
{
  switch (kind) {
  case BTF_KIND_INT:
  case BTF_KIND_VAR:
  case BTF_KIND_DECL_TAG:
    return 4;
  case BTF_KIND_ARRAY:
    return sizeof(struct btf_array);
  case BTF_KIND_STRUCT:
  case BTF_KIND_UNION:
    return vlen * sizeof(struct btf_member);
  case BTF_KIND_ENUM:
    return vlen * sizeof(struct btf_enum);
  case BTF_KIND_FUNC_PROTO:
    return vlen * sizeof(struct btf_param);
  case BTF_KIND_DATASEC:
    return vlen * sizeof(struct btf_var_secinfo);
  case BTF_KIND_ENUM64:
    return vlen * sizeof(struct btf_enum64);
  case BTF_KIND_PTR:
  case BTF_KIND_FWD:
  case BTF_KIND_TYPEDEF:
  case BTF_KIND_VOLATILE:
  case BTF_KIND_CONST:
  case BTF_KIND_RESTRICT:
  case BTF_KIND_FUNC:
  case BTF_KIND_FLOAT:
  case BTF_KIND_TYPE_TAG:
    return 0;
  default:
    return std::nullopt;
  }
}

class TypeSection {
public:
  static Result<TypeSection> index(std::string_view btf)
  {
    btf_header header{};
    if (btf.size() < sizeof header)
      return fail(error("kernel BTF is truncated"));
    std::memcpy(&header, btf.data(), sizeof header);
    if (header.magic != BTF_MAGIC)
      return fail(error("kernel BTF has a bad magic number"));
    uint64_t types_at = uint64_t{header.hdr_len} + header.type_off;
    uint64_t strings_at = uint64_t{header.hdr_len} + header.str_off;
    if (header.hdr_len < sizeof header || types_at + header.type_len > btf.size() ||
        strings_at + header.str_len > btf.size())
      return fail(error("kernel BTF sections lie outside the file"));
    TypeSection section;
    section.types_ = btf.substr(types_at, header.type_len);
    section.strings_ = btf.substr(strings_at, header.str_len);
    // Type ids count from 1 (0 is void), in the order of the section; most types take 12 to 28
    // bytes.
    section.offsets_.reserve(header.type_len / 16);
    section.offsets_.push_back(0);
    size_t at = 0;
    while (at < section.types_.size()) {
      if (section.types_.size() - at < sizeof(btf_type))
        return fail(error("kernel BTF ends inside a type"));
      btf_type type{};
      std::memcpy(&type, section.types_.data() + at, sizeof type);
      auto extra = trailing_bytes(BTF_INFO_KIND(type.info), BTF_INFO_VLEN(type.info));
      if (!extra)
        return fail(error("kernel BTF has a type kind unknown to flamebpf (" +
                          std::to_string(BTF_INFO_KIND(type.info)) + ")"));
      section.offsets_.push_back(at);
      at += sizeof(btf_type) + *extra;
    }
    if (at != section.types_.size())
      return fail(error("kernel BTF ends inside a type"));
    return section;
  }

  size_t count() const { return offsets_.size(); }

  btf_type type(uint32_t id) const
  {
    btf_type type{};
    std::memcpy(&type, types_.data() + offsets_[id], sizeof type);
    return type;
  }

  btf_member member(uint32_t id, uint32_t index) const
  {
    btf_member member{};
    std::memcpy(&member, types_.data() + offsets_[id] + sizeof(btf_type) + index * sizeof member,
                sizeof member);
    return member;
  }

  std::string_view name(uint32_t name_off) const
  {
    if (name_off >= strings_.size())
      return {};
    std::string_view rest = strings_.substr(name_off);
    return rest.substr(0, rest.find('\0'));
  }

private:
  std::string_view types_;
  std::string_view strings_;
  std::vector<size_t> offsets_; // by type id
};

// The byte offset of member `wanted` in struct or union `id`, looking into anonymous members;
// depth bounds the search on malformed input.
std::optional<uint32_t>
member_offset(const TypeSection& section, uint32_t id, std::string_view wanted, int depth = 0)
{
  if (depth > 8 || id == 0 || id >= section.count())
    return std::nullopt;
  btf_type type = section.type(id);
  uint32_t kind = BTF_INFO_KIND(type.info);
  if (kind != BTF_KIND_STRUCT && kind != BTF_KIND_UNION)
    return std::nullopt;
  bool bitfields = BTF_INFO_KFLAG(type.info) != 0;
  for (uint32_t i = 0; i < BTF_INFO_VLEN(type.info); ++i) {
    btf_member member = section.member(id, i);
    uint32_t bits = bitfields ? BTF_MEMBER_BIT_OFFSET(member.offset) : member.offset;
    if (member.name_off != 0) {
      if (section.name(member.name_off) == wanted && bits % 8 == 0)
        return bits / 8;
      continue;
    }
    // Anonymous: its members are the struct's own, at its offset plus theirs.
    uint32_t inner = member.type;
    for (int hops = 0; hops < 8 && inner != 0 && inner < section.count(); ++hops) {
      uint32_t inner_kind = BTF_INFO_KIND(section.type(inner).info);
      if (inner_kind != BTF_KIND_TYPEDEF && inner_kind != BTF_KIND_CONST &&
          inner_kind != BTF_KIND_VOLATILE && inner_kind != BTF_KIND_TYPE_TAG)
        break;
      inner = section.type(inner).type;
    }
    if (auto found = member_offset(section, inner, wanted, depth + 1))
      return bits / 8 + *found;
  }
  return std::nullopt;
}

// The offsets of TaskOffsets' members, found by find(member name).
template <class Find> Result<TaskOffsets> collect_offsets(Find find)
{
  TaskOffsets offsets;
  std::pair<const char*, uint32_t*> wanted[] = {
      {"mm", &offsets.mm}, {"group_leader", &offsets.group_leader}, {"comm", &offsets.comm}};
  for (auto [name, offset] : wanted) {
    auto found = find(name);
    if (!found)
      return fail(error(std::string("struct task_struct in kernel BTF has no member ") + name));
    *offset = *found;
  }
  return offsets;
}

// The same through libbpf, which parses every type: slower, but it knows every BTF kind.
Result<TaskOffsets> task_offsets_through_libbpf(const std::string& path)
{
  std::unique_ptr<btf, decltype(&btf__free)> parsed(btf__parse(path.c_str(), nullptr), btf__free);
  if (!parsed)
    return fail(system_error(errno, "cannot parse kernel BTF " + path));
  int id = btf__find_by_name_kind(parsed.get(), "task_struct", BTF_KIND_STRUCT);
  if (id < 0)
    return fail(error("kernel BTF " + path + " has no struct task_struct"));
  // Finds a member by name, also inside anonymous struct and union members.
  auto find = [&](auto& self, uint32_t type_id, std::string_view wanted,
                  int depth) -> std::optional<uint32_t> {
    const btf_type* type = btf__type_by_id(parsed.get(), type_id);
    if (!type || depth > 8 || (!btf_is_struct(type) && !btf_is_union(type)))
      return std::nullopt;
    const btf_member* members = btf_members(type);
    for (uint16_t i = 0; i < btf_vlen(type); ++i) {
      uint32_t bits = btf_member_bit_offset(type, i);
      if (members[i].name_off != 0) {
        if (btf__name_by_offset(parsed.get(), members[i].name_off) == wanted && bits % 8 == 0)
          return bits / 8;
        continue;
      }
      uint32_t inner = btf__resolve_type(parsed.get(), members[i].type);
      if (auto found = self(self, inner, wanted, depth + 1))
        return bits / 8 + *found;
    }
    return std::nullopt;
  };
  return collect_offsets(
      [&](std::string_view member) { return find(find, static_cast<uint32_t>(id), member, 0); });
}

} // namespace

Result<TaskOffsets> scan_task_offsets(std::string_view btf)
{
  auto section = TypeSection::index(btf);
  if (!section)
    return fail(section.error());
  for (uint32_t id = 1; id < section->count(); ++id) {
    btf_type type = section->type(id);
    if (BTF_INFO_KIND(type.info) != BTF_KIND_STRUCT ||
        section->name(type.name_off) != "task_struct")
      continue;
    return collect_offsets(
        [&](std::string_view member) { return member_offset(*section, id, member); });
  }
  return fail(error("kernel BTF has no struct task_struct"));
}

Result<TaskOffsets> load_task_offsets(const std::string& path)
{
  Result<TaskOffsets> scanned = fail(error("kernel BTF " + path + " cannot be read"));
  // Mapped where the kernel allows it (6.16+): read() hands sysfs files over a page at a time,
  // over a thousand calls for the kernel's five megabytes.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat info {};
  void* mapped = MAP_FAILED;
  if (fd.valid() && ::fstat(fd.get(), &info) == 0 && info.st_size > 0)
    mapped =
        ::mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (mapped != MAP_FAILED) {
    scanned = scan_task_offsets(
        std::string_view(static_cast<const char*>(mapped), static_cast<size_t>(info.st_size)));
    ::munmap(mapped, static_cast<size_t>(info.st_size));
  } else {
    auto raw = procfs::read_file(path, 256 << 20);
    if (!raw)
      return fail(raw.error());
    scanned = scan_task_offsets(*raw);
  }
  if (scanned)
    return scanned;
  spdlog::debug("{}; asking libbpf", scanned.error().message);
  return task_offsets_through_libbpf(path);
}

} // namespace flamebpf::sampler
