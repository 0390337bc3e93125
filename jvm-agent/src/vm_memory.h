// Where HotSpot's structures are read from: the JVM's own memory (inside it, as the agent reads
// it) or another process's (flamebpf, naming the code of a JVM it cannot load the agent into). A
// read of memory that is not there fails, and whatever needed it is not done: nothing is guessed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace flamebpf::agent {

class VmMemory {
public:
  // Copies bytes from address into out; false if any of them cannot be read.
  virtual bool read(uint64_t address, void* out, size_t bytes) const = 0;

  template <class T> std::optional<T> load(uint64_t address) const
  {
    T value;
    if (!read(address, &value, sizeof value))
      return std::nullopt;
    return value;
  }

  // The NUL-terminated text at address, cut to max_bytes; nullopt if it cannot be read.
  virtual std::optional<std::string> text(uint64_t address, size_t max_bytes) const
  {
    std::string out;
    char chunk[64];
    while (out.size() < max_bytes) {
      // Never past the end of the page the text is in: the next page may not be mapped.
      size_t room = 4096 - (address & 4095);
      size_t want = room < sizeof chunk ? room : sizeof chunk;
      if (!read(address, chunk, want))
        return std::nullopt;
      size_t length = strnlen(chunk, want);
      out.append(chunk, length < max_bytes - out.size() ? length : max_bytes - out.size());
      if (length < want)
        break;
      address += want;
    }
    return out;
  }

protected:
  ~VmMemory() = default;
};

// The current process's memory: inside the JVM, where HotSpot's tables and code heaps are mapped
// for as long as it runs.
class OwnMemory final : public VmMemory {
public:
  bool read(uint64_t address, void* out, size_t bytes) const override
  {
    std::memcpy(out, reinterpret_cast<const void*>(address), bytes);
    return true;
  }
  // Byte by byte up to its end: the memory after a string need not be the string's.
  std::optional<std::string> text(uint64_t address, size_t max_bytes) const override
  {
    const char* text = reinterpret_cast<const char*>(address);
    return std::string(text, strnlen(text, max_bytes));
  }
};

} // namespace flamebpf::agent
