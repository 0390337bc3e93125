// The pieces every parser of kernel and target text is made of: numbers, whitespace-separated
// fields and lines. Pure functions over string_views: nothing is copied or allocated except the
// field list.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

namespace flamebpf::text {

// The number that the whole of text spells in base: no leading whitespace, '+' or "0x", and a
// '-' only for signed types. nullopt if text is empty, holds anything else, or the number does not
// fit T.
template <std::integral T>
[[nodiscard]] std::optional<T> parse_number(std::string_view text, int base = 10)
{
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

// The number that text starts with, in base; text is advanced past its digits. nullopt, with text
// unchanged, if text does not start with a number that fits T.
template <std::integral T>
[[nodiscard]] std::optional<T> take_number(std::string_view& text, int base = 10)
{
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc())
    return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

// The spaces and tabs that separate fields by default.
inline constexpr std::string_view kBlanks = " \t";

// text without the blanks at its ends.
[[nodiscard]] inline std::string_view trim(std::string_view text, std::string_view blanks = kBlanks)
{
  size_t begin = text.find_first_not_of(blanks);
  if (begin == std::string_view::npos)
    return {};
  return text.substr(begin, text.find_last_not_of(blanks) - begin + 1);
}

// The fields of line: the runs of characters that are not separators. A run of separators counts
// as one, and none yields an empty field, so " a\t b " has the fields "a" and "b".
[[nodiscard]] std::vector<std::string_view> split_fields(std::string_view line,
                                                         std::string_view separators = kBlanks);

// The first line of text, without its terminator; text is advanced past the line and its
// terminator. The terminator is '\n' for lines of text; other lists split the same way, e.g. at
// '\0' (/proc/<pid>/cmdline and environ) or ',' (CPU lists).
[[nodiscard]] std::string_view take_line(std::string_view& text, char terminator = '\n');

// The lines of text, without their terminator (see take_line), for a range-based for loop. A
// final line without one is a line, the nothing after a final one is not: "a\n\nb" has three
// lines, "a\n" one, "" none.
class Lines {
public:
  class iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::string_view*;
    using reference = const std::string_view&;

    iterator() = default;
    iterator(std::string_view text, char terminator)
        : rest_(text), terminator_(terminator), done_(text.empty())
    {
      if (!done_)
        line_ = take_line(rest_, terminator_);
    }

    reference operator*() const { return line_; }
    pointer operator->() const { return &line_; }
    iterator& operator++()
    {
      if (rest_.empty())
        done_ = true;
      else
        line_ = take_line(rest_, terminator_);
      return *this;
    }
    void operator++(int) { ++*this; }
    // Lines are only ever compared with end(): iterators are equal once both are past the end.
    bool operator==(const iterator& other) const { return done_ && other.done_; }

  private:
    std::string_view rest_; // the text after line_
    std::string_view line_;
    char terminator_ = '\n';
    bool done_ = true; // past the last line
  };

  Lines(std::string_view text, char terminator) : text_(text), terminator_(terminator) {}
  iterator begin() const { return iterator(text_, terminator_); }
  iterator end() const { return iterator(); }

private:
  std::string_view text_;
  char terminator_;
};

// The lines of text (see Lines): `for (std::string_view line : text::lines(content))`.
[[nodiscard]] inline Lines lines(std::string_view text, char terminator = '\n')
{
  return Lines(text, terminator);
}

} // namespace flamebpf::text
