#include "method_name.h"

#include <cstdint>

namespace flamebpf::agent {
namespace {

void append_code_point(std::string& out, uint32_t code_point)
{
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// Decodes one modified-UTF-8 sequence at text[i]; returns its length, 0 if malformed.
size_t decode(std::string_view text, size_t i, uint32_t& code_point)
{
  auto byte = [&](size_t at) { return static_cast<uint8_t>(text[at]); };
  auto continuation = [&](size_t at) { return at < text.size() && (byte(at) & 0xC0) == 0x80; };
  uint8_t lead = byte(i);
  if (lead < 0x80) {
    code_point = lead;
    return 1;
  }
  if ((lead & 0xE0) == 0xC0 && continuation(i + 1)) {
    code_point = ((lead & 0x1Fu) << 6) | (byte(i + 1) & 0x3Fu);
    return 2;
  }
  if ((lead & 0xF0) == 0xE0 && continuation(i + 1) && continuation(i + 2)) {
    code_point = ((lead & 0x0Fu) << 12) | ((byte(i + 1) & 0x3Fu) << 6) | (byte(i + 2) & 0x3Fu);
    return 3;
  }
  return 0;
}

// Parses one field type at descriptor[i], advancing i past it.
std::string parse_type(std::string_view descriptor, size_t& i)
{
  size_t dimensions = 0;
  while (i < descriptor.size() && descriptor[i] == '[') {
    ++dimensions;
    ++i;
  }
  if (i >= descriptor.size())
    return "?";
  std::string name;
  switch (descriptor[i]) {
  case 'B':
    name = "byte";
    break;
  case 'C':
    name = "char";
    break;
  case 'D':
    name = "double";
    break;
  case 'F':
    name = "float";
    break;
  case 'I':
    name = "int";
    break;
  case 'J':
    name = "long";
    break;
  case 'S':
    name = "short";
    break;
  case 'Z':
    name = "boolean";
    break;
  case 'V':
    name = "void";
    break;
  case 'L': {
    size_t end = descriptor.find(';', i);
    if (end == std::string_view::npos) {
      name = std::string(descriptor.substr(i + 1));
      i = descriptor.size() - 1;
    } else {
      name = std::string(descriptor.substr(i + 1, end - i - 1));
      i = end;
    }
    // A hidden class's name (lambdas, proxies) ends in "<sep>0x<hex>", where JVMTI writes the
    // separator as '.' and class files as '+'; the JVM's own perf maps and stack traces print
    // '/', and so does flamebpf, so that names match whoever wrote the map.
    size_t hidden = name.find_last_of("./+");
    if (hidden != std::string::npos &&
        (name.compare(hidden + 1, 2, "0x") != 0 || hidden + 3 >= name.size() ||
         name.find_first_not_of("0123456789abcdef", hidden + 3) != std::string::npos))
      hidden = std::string::npos;
    for (size_t at = 0; at < name.size(); ++at) {
      if (at == hidden)
        name[at] = '/';
      else if (name[at] == '/')
        name[at] = '.';
    }
    break;
  }
  default:
    name = "?";
    break;
  }
  ++i;
  for (size_t d = 0; d < dimensions; ++d)
    name += "[]";
  return name;
}

} // namespace

std::string standard_utf8(std::string_view modified)
{
  std::string out;
  out.reserve(modified.size());
  for (size_t i = 0; i < modified.size();) {
    uint32_t code_point = 0;
    size_t length = decode(modified, i, code_point);
    if (length == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD for a byte that starts no valid sequence
      ++i;
      continue;
    }
    i += length;
    // A high surrogate followed by a low one is one supplementary character.
    uint32_t low = 0;
    size_t next = 0;
    if (code_point >= 0xD800 && code_point <= 0xDBFF && i < modified.size() &&
        (next = decode(modified, i, low)) == 3 && low >= 0xDC00 && low <= 0xDFFF) {
      code_point = 0x10000 + ((code_point - 0xD800) << 10) + (low - 0xDC00);
      i += next;
    }
    if (code_point == 0)
      out += "\\0";
    else if (code_point == '\n' || code_point == '\r')
      out.push_back(' ');
    else
      append_code_point(out, code_point);
  }
  return out;
}

std::string type_name(std::string_view descriptor)
{
  size_t i = 0;
  return parse_type(descriptor, i);
}

std::string parameter_list(std::string_view method_descriptor)
{
  std::string list;
  if (method_descriptor.empty() || method_descriptor.front() != '(')
    return list;
  size_t i = 1;
  while (i < method_descriptor.size() && method_descriptor[i] != ')') {
    if (!list.empty())
      list += ", ";
    list += parse_type(method_descriptor, i);
  }
  return list;
}

std::string method_display_name(std::string_view class_signature,
                                std::string_view method_name,
                                std::string_view method_descriptor)
{
  std::string name = standard_utf8(type_name(class_signature));
  name.push_back('.');
  name += standard_utf8(method_name);
  name.push_back('(');
  name += standard_utf8(parameter_list(method_descriptor));
  name.push_back(')');
  return name;
}

} // namespace flamebpf::agent
