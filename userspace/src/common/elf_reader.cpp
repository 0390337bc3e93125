#include "common/elf_reader.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <elf.h>
#include <unistd.h>

namespace flamebpf {
namespace {

template <class T> T load(std::string_view bytes, size_t at = 0)
{
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}

// Reading in steps this large keeps a symbol table's buffer small whatever its size.
constexpr size_t kSymbolStepEntries = 4096;
// A section name longer than this is no name flamebpf looks for.
constexpr size_t kMaxSectionNameLength = 256;

uint64_t aligned(uint64_t value, uint64_t alignment)
{
  return (value + alignment - 1) / alignment * alignment;
}

// The header fields both classes share, widened.
struct Header {
  uint64_t phoff = 0;
  uint64_t shoff = 0;
  uint32_t phentsize = 0;
  uint32_t shentsize = 0;
  uint64_t phnum = 0;
  uint64_t shnum = 0;
  uint64_t shstrndx = 0;
};

template <class Shdr> ElfSection section_from(const Shdr& header)
{
  ElfSection section;
  section.type = header.sh_type;
  section.flags = header.sh_flags;
  section.address = header.sh_addr;
  section.offset = header.sh_offset;
  section.size = header.sh_size;
  section.link = header.sh_link;
  section.alignment = header.sh_addralign;
  section.entry_size = header.sh_entsize;
  return section;
}

template <class Phdr> ElfSegment segment_from(const Phdr& header)
{
  return {header.p_type,  header.p_flags,  header.p_offset,
          header.p_vaddr, header.p_filesz, header.p_align};
}

} // namespace

ElfBytes ElfBytes::file(int fd, uint64_t size, ReadRecord* record)
{
  ElfBytes bytes;
  bytes.fd_ = fd;
  bytes.size_ = size;
  bytes.record_ = record;
  return bytes;
}

ElfBytes ElfBytes::memory(std::string_view memory)
{
  ElfBytes bytes;
  bytes.memory_ = memory;
  bytes.size_ = memory.size();
  return bytes;
}

Result<std::string> ElfBytes::read(uint64_t offset, size_t length) const
{
  std::string bytes;
  if (auto done = read(offset, length, bytes); !done)
    return fail(done.error());
  return bytes;
}

Result<> ElfBytes::read(uint64_t offset, size_t length, std::string& bytes) const
{
  if (offset > size_ || length > size_ - offset)
    return fail(Error{EINVAL, "past the end"});
  if (fd_ < 0) {
    bytes.assign(memory_.substr(offset, length));
    return {};
  }
  bytes.resize(length);
  size_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd_, bytes.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "read failed"));
    // The file shrank since fstat: the container truncated it.
    if (n == 0)
      return fail(Error{EINVAL, "past the end"});
    done += static_cast<size_t>(n);
  }
  if (record_)
    record_->add(offset, bytes);
  return {};
}

std::optional<std::pair<uint64_t, uint64_t>> ElfReader::file_offset_of(uint64_t vaddr) const
{
  for (const auto& segment : segments_) {
    if (segment.type != PT_LOAD || vaddr < segment.vaddr ||
        vaddr - segment.vaddr >= segment.file_size)
      continue;
    uint64_t into = vaddr - segment.vaddr;
    return std::pair{segment.offset + into, segment.file_size - into};
  }
  return std::nullopt;
}

Result<ElfReader> ElfReader::open(ElfBytes bytes, std::string shown)
{
  ElfReader reader(bytes, std::move(shown));
  if (auto read = reader.read_headers(); !read)
    return fail(Error{read.error().errno_value,
                      "cannot read ELF " + reader.shown_ + ": " + read.error().message});
  return reader;
}

Result<> ElfReader::read_headers()
{
  auto ident = bytes_.read(0, EI_NIDENT);
  if (!ident || std::memcmp(ident->data(), ELFMAG, SELFMAG) != 0)
    return fail(error("not an ELF file"));
  unsigned char elf_class = static_cast<unsigned char>((*ident)[EI_CLASS]);
  unsigned char data = static_cast<unsigned char>((*ident)[EI_DATA]);
  if (elf_class != ELFCLASS32 && elf_class != ELFCLASS64)
    return fail(error("unknown ELF class " + std::to_string(elf_class)));
  if (data != (std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB))
    return fail(error("byte order foreign to this machine"));
  is_64_ = elf_class == ELFCLASS64;

  Header header;
  size_t shdr_size = is_64_ ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
  size_t phdr_size = is_64_ ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (is_64_) {
    auto raw = bytes_.read(0, sizeof(Elf64_Ehdr));
    if (!raw)
      return fail(error("truncated ELF header"));
    auto ehdr = load<Elf64_Ehdr>(*raw);
    machine_ = ehdr.e_machine;
    header = {ehdr.e_phoff, ehdr.e_shoff, ehdr.e_phentsize, ehdr.e_shentsize,
              ehdr.e_phnum, ehdr.e_shnum, ehdr.e_shstrndx};
  } else {
    auto raw = bytes_.read(0, sizeof(Elf32_Ehdr));
    if (!raw)
      return fail(error("truncated ELF header"));
    auto ehdr = load<Elf32_Ehdr>(*raw);
    machine_ = ehdr.e_machine;
    header = {ehdr.e_phoff, ehdr.e_shoff, ehdr.e_phentsize, ehdr.e_shentsize,
              ehdr.e_phnum, ehdr.e_shnum, ehdr.e_shstrndx};
  }

  // Section 0 holds the true counts when they do not fit the ELF header (extended numbering).
  if (header.shoff != 0 &&
      (header.shnum == 0 || header.shstrndx == SHN_XINDEX || header.phnum == PN_XNUM)) {
    if (header.shentsize != shdr_size)
      return fail(error("bad section header size " + std::to_string(header.shentsize)));
    auto raw = bytes_.read(header.shoff, shdr_size);
    if (!raw)
      return fail(error("truncated section headers"));
    ElfSection zero =
        is_64_ ? section_from(load<Elf64_Shdr>(*raw)) : section_from(load<Elf32_Shdr>(*raw));
    if (header.shnum == 0)
      header.shnum = zero.size;
    if (header.shstrndx == SHN_XINDEX)
      header.shstrndx = zero.link;
    if (header.phnum == PN_XNUM)
      header.phnum = is_64_ ? load<Elf64_Shdr>(*raw).sh_info : load<Elf32_Shdr>(*raw).sh_info;
  }
  if (header.shoff == 0)
    header.shnum = 0;
  if (header.phoff == 0)
    header.phnum = 0;

  if (header.phnum > 0) {
    if (header.phentsize != phdr_size)
      return fail(error("bad program header size " + std::to_string(header.phentsize)));
    if (header.phnum > kMaxElfHeaderTableBytes / phdr_size)
      return fail(error(std::to_string(header.phnum) + " program headers, more than " +
                        std::to_string(kMaxElfHeaderTableBytes / phdr_size) + " are read"));
    auto raw = bytes_.read(header.phoff, header.phnum * phdr_size);
    if (!raw)
      return fail(error("truncated program headers"));
    for (uint64_t i = 0; i < header.phnum; ++i) {
      segments_.push_back(is_64_ ? segment_from(load<Elf64_Phdr>(*raw, i * phdr_size))
                                 : segment_from(load<Elf32_Phdr>(*raw, i * phdr_size)));
    }
  }

  std::vector<uint32_t> name_offsets;
  if (header.shnum > 0) {
    if (header.shentsize != shdr_size)
      return fail(error("bad section header size " + std::to_string(header.shentsize)));
    if (header.shnum > kMaxElfHeaderTableBytes / shdr_size)
      return fail(error(std::to_string(header.shnum) + " sections, more than " +
                        std::to_string(kMaxElfHeaderTableBytes / shdr_size) + " are read"));
    auto raw = bytes_.read(header.shoff, header.shnum * shdr_size);
    if (!raw)
      return fail(error("truncated section headers"));
    for (uint64_t i = 0; i < header.shnum; ++i) {
      if (is_64_) {
        auto shdr = load<Elf64_Shdr>(*raw, i * shdr_size);
        sections_.push_back(section_from(shdr));
        name_offsets.push_back(shdr.sh_name);
      } else {
        auto shdr = load<Elf32_Shdr>(*raw, i * shdr_size);
        sections_.push_back(section_from(shdr));
        name_offsets.push_back(shdr.sh_name);
      }
    }
  }

  // Section names, from the section name string table.
  if (header.shstrndx != SHN_UNDEF && header.shstrndx < sections_.size()) {
    auto names = read_section(sections_[header.shstrndx], kMaxSectionNamesBytes);
    if (names) {
      std::string_view table = names->bytes;
      for (size_t i = 0; i < sections_.size(); ++i) {
        uint32_t name = name_offsets[i];
        if (name >= table.size())
          continue;
        auto end = table.find('\0', name);
        if (end != std::string_view::npos && end - name <= kMaxSectionNameLength)
          sections_[i].name = std::string(table.substr(name, end - name));
      }
    }
  }
  return {};
}

const ElfSection* ElfReader::section_named(std::string_view name) const
{
  auto it = std::find_if(sections_.begin(), sections_.end(),
                         [&](const ElfSection& s) { return s.name == name; });
  return it == sections_.end() ? nullptr : &*it;
}

const ElfSection* ElfReader::section_of_type(uint32_t type) const
{
  auto it = std::find_if(sections_.begin(), sections_.end(),
                         [&](const ElfSection& s) { return s.type == type; });
  return it == sections_.end() ? nullptr : &*it;
}

Result<ElfReader::Content> ElfReader::read_section(const ElfSection& section,
                                                   size_t max_bytes) const
{
  Content content;
  if (section.type == SHT_NOBITS)
    return content;
  content.cut = section.size > max_bytes;
  auto bytes = bytes_.read(section.offset, std::min<uint64_t>(section.size, max_bytes));
  if (!bytes)
    return fail(Error{bytes.error().errno_value, "cannot read section " + section.name + " of " +
                                                     shown_ + ": " + bytes.error().message});
  content.bytes = std::move(*bytes);
  return content;
}

std::string ElfReader::build_id_in_notes(std::string_view content, uint64_t alignment)
{
  // Notes are 4-aligned, or 8-aligned in sections and segments aligned so.
  uint64_t align = alignment == 8 ? 8 : 4;
  size_t at = 0;
  while (content.size() - at >= sizeof(Elf64_Nhdr)) {
    // Elf32_Nhdr and Elf64_Nhdr are the same three 32-bit words.
    auto note = load<Elf64_Nhdr>(content, at);
    uint64_t name_at = at + sizeof note;
    uint64_t desc_at = aligned(name_at + note.n_namesz, align);
    uint64_t next = aligned(desc_at + note.n_descsz, align);
    if (desc_at > content.size() || note.n_descsz > content.size() - desc_at)
      break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        content.substr(name_at, 4) == std::string_view("GNU\0", 4) && note.n_descsz > 0 &&
        note.n_descsz <= kMaxBuildIdBytes)
      return std::string(content.substr(desc_at, note.n_descsz));
    if (next >= content.size())
      break;
    at = next;
  }
  return "";
}

std::string ElfReader::build_id() const
{
  for (const auto& section : sections_) {
    if (section.type != SHT_NOTE)
      continue;
    auto content = read_section(section, kMaxNoteBytes);
    if (!content)
      continue;
    if (auto id = build_id_in_notes(content->bytes, section.alignment); !id.empty())
      return id;
  }
  for (const auto& segment : segments_) {
    if (segment.type != PT_NOTE)
      continue;
    auto content =
        bytes_.read(segment.offset, std::min<uint64_t>(segment.file_size, kMaxNoteBytes));
    if (!content)
      continue;
    if (auto id = build_id_in_notes(*content, segment.alignment); !id.empty())
      return id;
  }
  return "";
}

Result<bool> ElfReader::read_symbols(const ElfSection& table,
                                     size_t max_bytes,
                                     const std::function<void(const ElfSymbolEntry&)>& visit) const
{
  size_t entry_size = is_64_ ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  if (table.type == SHT_NOBITS || table.size == 0)
    return false;
  if (table.entry_size != entry_size)
    return fail(error("cannot read symbols of " + shown_ + ": entry size " +
                      std::to_string(table.entry_size)));
  uint64_t readable = std::min<uint64_t>(table.size, max_bytes) / entry_size;
  std::string step; // one buffer for every step
  // Entry 0 is the undefined symbol.
  for (uint64_t first = 1; first < readable; first += kSymbolStepEntries) {
    uint64_t count = std::min<uint64_t>(kSymbolStepEntries, readable - first);
    if (auto read = bytes_.read(table.offset + first * entry_size, count * entry_size, step); !read)
      return fail(Error{read.error().errno_value,
                        "cannot read symbols of " + shown_ + ": " + read.error().message});
    for (uint64_t i = 0; i < count; ++i) {
      ElfSymbolEntry entry;
      if (is_64_) {
        auto symbol = load<Elf64_Sym>(step, i * entry_size);
        entry = {symbol.st_value, symbol.st_size, symbol.st_name,
                 static_cast<uint8_t>(ELF64_ST_TYPE(symbol.st_info)), symbol.st_shndx};
      } else {
        auto symbol = load<Elf32_Sym>(step, i * entry_size);
        entry = {symbol.st_value, symbol.st_size, symbol.st_name,
                 static_cast<uint8_t>(ELF32_ST_TYPE(symbol.st_info)), symbol.st_shndx};
      }
      visit(entry);
    }
  }
  return table.size > max_bytes;
}

} // namespace flamebpf
