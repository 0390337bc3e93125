#include "test_support.h"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace flamebpf::testing {

std::string data_path(const std::string& relative)
{
  return std::string(FLAMEBPF_TEST_DATA) + "/" + relative;
}

std::string read_data(const std::string& relative)
{
  std::ifstream in(data_path(relative), std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open fixture " << data_path(relative);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

void write_file(const std::filesystem::path& path, const std::string& content)
{
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out)
    throw std::runtime_error("cannot write " + path.string());
}

TempDir::TempDir()
{
  std::string pattern = (std::filesystem::temp_directory_path() / "flamebpf-unit-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  path_ = pattern;
}

TempDir::~TempDir()
{
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

} // namespace flamebpf::testing
