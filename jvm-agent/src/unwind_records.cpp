#include "unwind_records.h"

#include <cstdio>

namespace flamebpf::agent {

std::string code_record(uint64_t start,
                        uint64_t size,
                        uint32_t frame_words,
                        int32_t frame_complete,
                        const Prologue& prologue)
{
  const char* form = prologue.form == Prologue::Form::kPush   ? "push"
                     : prologue.form == Prologue::Form::kSave ? "save"
                                                              : "none";
  bool known = prologue.form != Prologue::Form::kUnknown;
  char line[160];
  int length = std::snprintf(line, sizeof line, "code %llx %llx %u %d %s %x %x\n",
                             static_cast<unsigned long long>(start),
                             static_cast<unsigned long long>(size), frame_words, frame_complete,
                             form, known ? prologue.first_end : 0, known ? prologue.second_end : 0);
  return std::string(line, static_cast<size_t>(length));
}

std::string interpreter_record(uint64_t start, uint64_t size)
{
  char line[64];
  int length =
      std::snprintf(line, sizeof line, "interpreter %llx %llx\n",
                    static_cast<unsigned long long>(start), static_cast<unsigned long long>(size));
  return std::string(line, static_cast<size_t>(length));
}

std::string unload_record(uint64_t start)
{
  char line[40];
  int length =
      std::snprintf(line, sizeof line, "unload %llx\n", static_cast<unsigned long long>(start));
  return std::string(line, static_cast<size_t>(length));
}

std::string method_record(uint64_t method, std::string_view name)
{
  char head[40];
  int length =
      std::snprintf(head, sizeof head, "method %llx ", static_cast<unsigned long long>(method));
  std::string line(head, static_cast<size_t>(length));
  line += name;
  line.push_back('\n');
  return line;
}

} // namespace flamebpf::agent
