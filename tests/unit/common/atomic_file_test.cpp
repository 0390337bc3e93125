#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "test_support.h"

namespace flamebpf {
namespace {

std::string contents(const std::filesystem::path& path)
{
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(AtomicFile, ReplacesTheFileWhole)
{
  flamebpf::testing::TempDir dir;
  auto path = dir.path() / "out.folded";
  std::ofstream(path) << "old\n";
  auto written = write_file_atomically(path, [](std::ostream& out) -> Result<> {
    out << "new\n";
    return {};
  });
  ASSERT_TRUE(written.has_value()) << written.error().message;
  EXPECT_EQ(contents(path), "new\n");
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(AtomicFile, FailureLeavesTheOldFileAndNoTemporary)
{
  flamebpf::testing::TempDir dir;
  auto path = dir.path() / "out.folded";
  std::ofstream(path) << "old\n";
  auto written = write_file_atomically(path, [](std::ostream& out) -> Result<> {
    out << "partial";
    return fail(error("emitter failed"));
  });
  ASSERT_FALSE(written.has_value());
  EXPECT_EQ(written.error().message, "emitter failed");
  EXPECT_EQ(contents(path), "old\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(AtomicFile, MissingDirectoryIsOneError)
{
  flamebpf::testing::TempDir dir;
  auto written = write_file_atomically(dir.path() / "no/such/dir/out.folded",
                                       [](std::ostream&) -> Result<> { return {}; });
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().message.find("No such file or directory"), std::string::npos)
      << written.error().message;
}

TEST(AtomicFile, AFifoIsWrittenInPlaceNotReplaced)
{
  flamebpf::testing::TempDir dir;
  auto path = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // A reader on the FIFO, so that opening it for writing does not block.
  int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  auto written = write_file_atomically(path, [](std::ostream& out) -> Result<> {
    out << "through the pipe\n";
    return {};
  });
  ASSERT_TRUE(written.has_value()) << written.error().message;
  char buffer[64] = {};
  EXPECT_EQ(::read(reader, buffer, sizeof buffer - 1), 17);
  EXPECT_STREQ(buffer, "through the pipe\n");
  ::close(reader);
  struct stat status {};
  ASSERT_EQ(::stat(path.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode)) << "the FIFO was replaced by a regular file";
}

} // namespace
} // namespace flamebpf
