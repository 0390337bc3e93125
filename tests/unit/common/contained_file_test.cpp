#include <cerrno>
#include <fcntl.h>
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

TEST_F(ContainedFile, MagicLinksAreRefused)
{
  // /proc/<pid>/root, cwd and fd/<n> name files of any process, wherever they are: a container's
  // perf map linked through its own /proc would lead to whatever the reader's /proc shows.
  auto host = open_directory("/");
  ASSERT_TRUE(host.has_value());
  std::string through_proc = "/proc/self/root" + root() + "/tmp/inside.txt";
  ASSERT_TRUE(std::filesystem::exists(through_proc));
  auto opened = open_regular_at(host->get(), through_proc, kResolveInRoot, through_proc);
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().errno_value, ELOOP);
}

TEST_F(ContainedFile, ReopenRefusesWhatIsNotARegularFile)
{
  ASSERT_EQ(::mkfifo((root() + "/tmp/fifo").c_str(), 0600), 0);
  // O_PATH opens nothing: the FIFO has no reader or writer afterwards either.
  UniqueFd located(::open((root() + "/tmp/fifo").c_str(), O_PATH | O_CLOEXEC));
  ASSERT_TRUE(located.valid());
  auto reopened = reopen_regular(located.get(), "fifo");
  ASSERT_FALSE(reopened.has_value());
  EXPECT_EQ(reopened.error().errno_value, EINVAL);
  UniqueFd regular(::open((root() + "/tmp/inside.txt").c_str(), O_PATH | O_CLOEXEC));
  auto file = reopen_regular(regular.get(), "inside");
  ASSERT_TRUE(file.has_value()) << file.error().message;
  EXPECT_EQ(read_bounded(file->get(), 100, true, "inside").value_or(""), "inside\n");
  // The reopened descriptor reads; it is not the O_PATH one.
  EXPECT_EQ(::fcntl(file->get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_NE(::fcntl(file->get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST_F(ContainedFile, BeneathWithoutLinksRefusesEverySymlink)
{
  std::filesystem::create_symlink("inside.txt", root() + "/tmp/sibling");
  auto tmp = open_directory_in_root(root(), "/tmp");
  ASSERT_TRUE(tmp.has_value()) << tmp.error().message;
  auto linked = open_regular_at(tmp->get(), "sibling", kResolveBeneathNoLinks, "sibling");
  ASSERT_FALSE(linked.has_value());
  EXPECT_EQ(linked.error().errno_value, ELOOP);
  EXPECT_TRUE(open_regular_at(tmp->get(), "inside.txt", kResolveBeneathNoLinks, "inside"));
  EXPECT_FALSE(open_regular_at(tmp->get(), "../tmp/inside.txt", kResolveBeneathNoLinks, "up"));
}

} // namespace
} // namespace flamebpf
