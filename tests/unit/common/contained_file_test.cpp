#include <filesystem>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/contained_file.h"
#include "test_support.h"

namespace flamebpf {
namespace {

using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

class ContainedFile : public ::testing::Test {
protected:
  void SetUp() override
  {
    write_file(root() + "/tmp/inside.txt", "inside\n");
    write_file(dir_.path() / "outside.txt", "secret\n");
  }
  std::string root() const { return dir_.path().string() + "/root"; }
  TempDir dir_;
};

TEST_F(ContainedFile, ReadsARegularFileInside)
{
  auto text = read_contained(root(), "/tmp/inside.txt", 100);
  ASSERT_TRUE(text.has_value()) << text.error().message;
  EXPECT_EQ(*text, "inside\n");
  EXPECT_EQ(read_contained(root(), "tmp/inside.txt", 100).value_or(""), "inside\n");
}

TEST_F(ContainedFile, AbsoluteSymlinkResolvesInsideTheRoot)
{
  // Inside the root, /outside.txt does not exist: the link cannot reach the host's file.
  std::filesystem::create_symlink(dir_.path() / "outside.txt", root() + "/tmp/link");
  EXPECT_FALSE(read_contained(root(), "/tmp/link", 100).has_value());
  std::filesystem::create_symlink("/tmp/inside.txt", root() + "/tmp/inner-link");
  EXPECT_EQ(read_contained(root(), "/tmp/inner-link", 100).value_or(""), "inside\n");
}

TEST_F(ContainedFile, DotDotStopsAtTheRoot)
{
  std::filesystem::create_symlink("../../../outside.txt", root() + "/tmp/up");
  EXPECT_FALSE(read_contained(root(), "/tmp/up", 100).has_value());
  EXPECT_FALSE(read_contained(root(), "../outside.txt", 100).has_value());
}

TEST_F(ContainedFile, FifoAndDirectoryAreRefusedWithoutBlocking)
{
  ASSERT_EQ(::mkfifo((root() + "/tmp/fifo").c_str(), 0600), 0);
  auto fifo = read_contained(root(), "/tmp/fifo", 100);
  ASSERT_FALSE(fifo.has_value());
  EXPECT_NE(fifo.error().message.find("not a regular file"), std::string::npos);
  EXPECT_FALSE(read_contained(root(), "/tmp", 100).has_value());
}

TEST_F(ContainedFile, SizeCap)
{
  write_file(root() + "/big", std::string(1000, 'x'));
  auto refused = read_contained(root(), "/big", 999);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("larger than 999 bytes"), std::string::npos);
  EXPECT_EQ(read_contained(root(), "/big", 1000).value_or("").size(), 1000u);
  EXPECT_EQ(read_contained(root(), "/big", 10, false).value_or("").size(), 10u);
}

} // namespace
} // namespace flamebpf
