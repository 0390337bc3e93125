// flamebpf's own reader of ELF files. The files are a target's, so hostile: every part is read with
// pread (never mapped: a container that truncates its file cannot fault us) against a byte budget
// fixed here, never against a size the file states. Only what symbolization and the unwind tables
// need is read: the headers, notes, named sections and symbol tables. Files in the other byte
// order are refused: they cannot run on this machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/read_record.h"
#include "common/result.h"

namespace flamebpf {

// The program header table and the section header table, each: 16384 section headers of 64 bytes.
inline constexpr size_t kMaxElfHeaderTableBytes = 1 << 20;
// The section names (.shstrtab); names past it are read as "".
inline constexpr size_t kMaxSectionNamesBytes = 1 << 20;
// Each note section or segment searched for the build ID.
inline constexpr size_t kMaxNoteBytes = 64 << 10;
// A GNU build ID longer than this is not one (they are 8 to 20 bytes).
inline constexpr size_t kMaxBuildIdBytes = 64;

// Where an ELF image's bytes are: an open file (not owned) read with pread, or memory (not owned).
class ElfBytes {
public:
  // The file fd, of size bytes (from fstat); what is read of it goes into record, if given,
  // which must outlive this.
  static ElfBytes file(int fd, uint64_t size, ReadRecord* record = nullptr);
  // The bytes in memory, which must outlive this.
  static ElfBytes memory(std::string_view bytes);

  // The image's size in bytes.
  uint64_t size() const { return size_; }
  // The file's descriptor, or -1 for bytes in memory.
  int fd() const { return fd_; }
  // Exactly length bytes from offset; an error if the image ends before them. length is the
  // caller's budget: nothing larger is ever allocated.
  [[nodiscard]] Result<std::string> read(uint64_t offset, size_t length) const;
  // The same into buffer, whose memory is reused.
  [[nodiscard]] Result<> read(uint64_t offset, size_t length, std::string& buffer) const;

private:
  int fd_ = -1;
  std::string_view memory_;
  uint64_t size_ = 0;
  ReadRecord* record_ = nullptr;
};

// A section header, widened to 64 bits.
struct ElfSection {
  std::string name;  // from .shstrtab; "" if it has none or it is past the budget
  uint32_t type = 0; // SHT_*
  uint64_t flags = 0;
  uint64_t address = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t link = 0; // for a symbol table: its string table's index
  uint64_t alignment = 0;
  uint64_t entry_size = 0;
};

// A program header, widened to 64 bits.
struct ElfSegment {
  uint32_t type = 0;  // PT_*
  uint32_t flags = 0; // PF_*
  uint64_t offset = 0;
  uint64_t vaddr = 0;
  uint64_t file_size = 0;
  uint64_t alignment = 0;
};

// One entry of a symbol table, in either class.
struct ElfSymbolEntry {
  uint64_t value = 0;
  uint64_t size = 0;
  uint32_t name = 0;    // offset in the linked string table
  uint8_t type = 0;     // STT_*
  uint16_t section = 0; // SHN_UNDEF, SHN_ABS or the index of its section
};

class ElfReader {
public:
  // Reads and checks the ELF header, the program headers and the section headers (with their
  // names) of bytes. shown names the image in errors.
  [[nodiscard]] static Result<ElfReader> open(ElfBytes bytes, std::string shown);

  // How messages name the image.
  const std::string& shown() const { return shown_; }
  // ELFCLASS64, else ELFCLASS32.
  bool is_64() const { return is_64_; }
  // The architecture: EM_X86_64, EM_AARCH64, ...
  uint16_t machine() const { return machine_; }
  // The section headers, in file order (index 0 is the null section).
  const std::vector<ElfSection>& sections() const { return sections_; }
  // The program headers, in file order.
  const std::vector<ElfSegment>& segments() const { return segments_; }
  // The first section named name, or of type type; null if none.
  const ElfSection* section_named(std::string_view name) const;
  const ElfSection* section_of_type(uint32_t type) const;

  struct Content {
    std::string bytes;
    bool cut = false; // the section is larger than the budget: bytes holds its start
  };
  // The section's content, at most max_bytes of it; SHT_NOBITS sections are empty.
  [[nodiscard]] Result<Content> read_section(const ElfSection& section, size_t max_bytes) const;

  // Where the image's bytes are, for readers of parts the sections above do not cover.
  const ElfBytes& bytes() const { return bytes_; }
  // The file offset of virtual address vaddr and how many bytes of the load segment holding it
  // follow in the file; nullopt if no load segment's file bytes hold it.
  std::optional<std::pair<uint64_t, uint64_t>> file_offset_of(uint64_t vaddr) const;
  // The GNU build ID (raw bytes) from the note sections, else the note segments; "" if none.
  std::string build_id() const;

  // Reads the entries of a symbol table section (SHT_SYMTAB, SHT_DYNSYM) but the first, at most
  // max_bytes of it, in small steps, passing each to visit. Returns whether the table was cut.
  [[nodiscard]] Result<bool>
  read_symbols(const ElfSection& table,
               size_t max_bytes,
               const std::function<void(const ElfSymbolEntry&)>& visit) const;

private:
  ElfReader(ElfBytes bytes, std::string shown) : bytes_(bytes), shown_(std::move(shown)) {}
  Result<> read_headers();
  // The GNU build ID in the notes of content (aligned to alignment), or "".
  static std::string build_id_in_notes(std::string_view content, uint64_t alignment);

  ElfBytes bytes_;
  std::string shown_;
  bool is_64_ = true;
  uint16_t machine_ = 0;
  std::vector<ElfSection> sections_;
  std::vector<ElfSegment> segments_;
};

} // namespace flamebpf
