// The name of an interpreted function's frame: "function (file:line)", as a Python frame reads in
// folded stacks and flame graphs, where a frame is one name. pprof keeps the three apart
// (Function.name, filename and start_line), so its writer takes them back out of the name here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flamebpf::profile {

struct SourcePlace {
  std::string_view function;
  std::string_view file;
  uint32_t line = 0;
};

// "function (file:line)".
std::string source_name(std::string_view function, std::string_view file, uint32_t line);

// The parts of a name source_name() made; nullopt for any other name (a Java method's, whose
// parameter list has no space before it and no line).
std::optional<SourcePlace> source_place(std::string_view name);

} // namespace flamebpf::profile
