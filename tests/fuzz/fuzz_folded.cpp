// Folded text from any producer (render, diff and merge inputs). The line parser, the flame tree
// built from the text and the SVG drawn from it must never crash, and the tree's total must be
// the sum of the counts of the lines the parser accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "common/file_content.h"
#include "emit/flame_tree.h"
#include "emit/svg.h"
#include "profile/folded_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string text(reinterpret_cast<const char*>(data), size);
  uint64_t total = 0;
  bool overflow = false;
  uint64_t bad = flamebpf::profile::for_each_folded_line(text, [&](const auto& line) {
    overflow = overflow || __builtin_add_overflow(total, line.count, &total);
  });
  if (overflow)
    return 0; // counts beyond 2^64 in all: the sum is not defined
  flamebpf::emit::FlameTree tree;
  uint64_t tree_bad = tree.add_folded(flamebpf::FileContent(text));
  if (tree_bad != bad || tree.total() != total)
    std::abort();
  std::ostringstream svg;
  flamebpf::emit::SvgOptions options;
  if (!flamebpf::emit::write_svg(tree, options, svg))
    std::abort();
  return 0;
}
