// Whole lines out of a file that its writer (a target's JIT or agent) is still appending to, read
// a piece at a time: an unfinished last line waits for the next piece, and a line longer than the
// budget is skipped, and counted, without being kept.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>

namespace flamebpf {

class LineAssembler {
public:
  explicit LineAssembler(size_t max_line) : max_line_(max_line) {}

  struct Taken {
    size_t kept_bytes = 0; // bytes of lines kept, as opposed to skipped as overlong
    size_t overlong = 0;   // lines skipped for their length
  };

  // Calls on_line for each non-empty whole line that text completes: on_line(line), or
  // on_line(line, end) with end the bytes of text up to the line's newline, which tells where in
  // the file a line began that earlier pieces started.
  template <typename OnLine> Taken take(std::string_view text, OnLine&& on_line)
  {
    Taken taken;
    size_t consumed = 0;
    while (!text.empty()) {
      size_t newline = text.find('\n');
      std::string_view piece = text.substr(0, newline);
      bool complete = newline != std::string_view::npos;
      size_t step = complete ? newline + 1 : text.size();
      text.remove_prefix(step);
      consumed += step;
      if (skipping_) {
        skipping_ = !complete;
        continue;
      }
      if (partial_.size() + piece.size() > max_line_) {
        ++taken.overlong;
        partial_.clear();
        skipping_ = !complete;
        continue;
      }
      taken.kept_bytes += piece.size() + (complete ? 1 : 0);
      if (!complete) {
        partial_.append(piece);
        continue;
      }
      std::string_view line = piece;
      if (!partial_.empty()) {
        partial_.append(piece);
        line = partial_;
      }
      if (!line.empty()) {
        if constexpr (std::is_invocable_v<OnLine, std::string_view, size_t>)
          on_line(line, consumed - 1);
        else
          on_line(line);
      }
      partial_.clear();
    }
    return taken;
  }

  // Inside an overlong line: what follows up to its end need not even be read.
  bool skipping() const { return skipping_; }
  // For a file read again from its start.
  void clear()
  {
    partial_.clear();
    skipping_ = false;
  }

private:
  size_t max_line_;
  std::string partial_;   // an unfinished last line
  bool skipping_ = false; // inside a line longer than max_line_
};

} // namespace flamebpf
