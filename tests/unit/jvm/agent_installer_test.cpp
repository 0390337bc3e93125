#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "jvm/agent_installer.h"
#include "test_support.h"

// A noexec directory cannot be made without root (mount): the integration tests cover the
// fallback past a noexec /tmp.

namespace flamebpf::jvm {
namespace {

using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

bool contains(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

std::string read_whole(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class AgentInstaller : public ::testing::Test {
protected:
  void SetUp() override
  {
    std::string process = dir_.path().string() + "/proc/4242";
    root_ = process + "/root";
    std::filesystem::create_directories(root_ + "/tmp");
    std::string uid = std::to_string(::geteuid());
    std::string gid = std::to_string(::getegid());
    write_file(process + "/status", "Name:\tjava\nUid:\t" + uid + "\t" + uid + "\t" + uid + "\t" +
                                        uid + "\nGid:\t" + gid + "\t" + gid + "\t" + gid + "\t" +
                                        gid + "\nNSpid:\t4242\t1\n");
    auto target = attach_target_of(4242, dir_.path().string() + "/proc");
    ASSERT_TRUE(target.has_value()) << target.error().message;
    target_ = *target;
    for (int i = 0; i < 100000; ++i)
      library_.push_back(static_cast<unsigned char>(i * 7 + 3));
    name_ = agent_file_name(library_);
  }
  std::string library_text() const { return std::string(library_.begin(), library_.end()); }
  // Names in a directory of the root, for checking that nothing else was left there.
  std::vector<std::string> names_in(const std::string& directory) const
  {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(root_ + directory))
      names.push_back(entry.path().filename().string());
    return names;
  }

  TempDir dir_;
  std::string root_;
  AttachTarget target_;
  std::vector<unsigned char> library_;
  std::string name_;
};

TEST_F(AgentInstaller, FileNameFollowsTheContent)
{
  EXPECT_TRUE(std::regex_match(name_, std::regex("libflamebpf-agent-[0-9a-f]{16}\\.so"))) << name_;
  EXPECT_EQ(agent_file_name(library_), name_);
  auto changed = library_;
  changed.back() ^= 1;
  EXPECT_NE(agent_file_name(changed), name_);
}

TEST_F(AgentInstaller, WritesTheLibraryIntoTmpForTheJvmToRead)
{
  auto path = install_agent(target_, library_, name_);
  ASSERT_TRUE(path.has_value()) << path.error().message;
  EXPECT_EQ(*path, "/tmp/" + name_);
  std::string file = root_ + *path;
  EXPECT_EQ(read_whole(file), library_text());
  struct stat status {};
  ASSERT_EQ(::stat(file.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0644u);
  EXPECT_EQ(status.st_uid, target_.uid);
  EXPECT_EQ(status.st_gid, target_.gid);
  // No temporary file left behind.
  EXPECT_EQ(names_in("/tmp"), std::vector<std::string>{name_});
}

TEST_F(AgentInstaller, ReusesAnIdenticalFile)
{
  auto first = install_agent(target_, library_, name_);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  struct stat before {};
  ASSERT_EQ(::stat((root_ + *first).c_str(), &before), 0);
  auto second = install_agent(target_, library_, name_);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(*second, *first);
  struct stat after {};
  ASSERT_EQ(::stat((root_ + *second).c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST_F(AgentInstaller, DifferentFileOfThatNameIsLeftAloneAndTheNextDirectoryUsed)
{
  std::filesystem::create_directories(root_ + "/var/tmp");
  write_file(root_ + "/tmp/" + name_, "someone else's library");
  auto path = install_agent(target_, library_, name_);
  ASSERT_TRUE(path.has_value()) << path.error().message;
  EXPECT_EQ(*path, "/var/tmp/" + name_);
  EXPECT_EQ(read_whole(root_ + "/tmp/" + name_), "someone else's library");
  EXPECT_EQ(read_whole(root_ + "/var/tmp/" + name_), library_text());
}

TEST_F(AgentInstaller, IdenticalButWritableByOthersIsNotReused)
{
  std::filesystem::create_directories(root_ + "/dev/shm");
  write_file(root_ + "/tmp/" + name_, library_text());
  ASSERT_EQ(::chmod((root_ + "/tmp/" + name_).c_str(), 0666), 0);
  auto path = install_agent(target_, library_, name_);
  ASSERT_TRUE(path.has_value()) << path.error().message;
  EXPECT_EQ(*path, "/dev/shm/" + name_);
}

TEST_F(AgentInstaller, SymlinkOutOfTheRootIsNeverFollowed)
{
  // Even a link to a file with the very same bytes: the JVM would run whatever it points to.
  std::string outside = dir_.path().string() + "/outside.so";
  write_file(outside, library_text());
  std::filesystem::create_symlink(outside, root_ + "/tmp/" + name_);
  auto path = install_agent(target_, library_, name_);
  ASSERT_FALSE(path.has_value());
  const std::string& message = path.error().message;
  EXPECT_TRUE(contains(message, "/tmp: " + name_ + " is a symlink")) << message;
  EXPECT_TRUE(contains(message, "/var/tmp: does not exist")) << message;
  EXPECT_TRUE(contains(message, "/dev/shm: does not exist")) << message;
  EXPECT_EQ(read_whole(outside), library_text());
}

TEST_F(AgentInstaller, TmpSymlinkedOutOfTheRootResolvesInsideIt)
{
  std::string outside = dir_.path().string() + "/outside-tmp";
  std::filesystem::create_directories(outside);
  std::filesystem::remove(root_ + "/tmp");
  std::filesystem::create_symlink(outside, root_ + "/tmp");
  std::filesystem::create_directories(root_ + "/var/tmp");
  auto path = install_agent(target_, library_, name_);
  ASSERT_TRUE(path.has_value()) << path.error().message;
  EXPECT_EQ(*path, "/var/tmp/" + name_);
  EXPECT_TRUE(std::filesystem::is_empty(outside));
}

TEST_F(AgentInstaller, FifoOrDirectoryInTheWayIsRefusedWithoutBlocking)
{
  ASSERT_EQ(::mkfifo((root_ + "/tmp/" + name_).c_str(), 0644), 0);
  std::filesystem::create_directories(root_ + "/var/tmp/" + name_);
  auto path = install_agent(target_, library_, name_);
  ASSERT_FALSE(path.has_value());
  EXPECT_TRUE(contains(path.error().message, "/tmp: " + name_ + ": it is not a regular file"))
      << path.error().message;
  EXPECT_TRUE(contains(path.error().message, "/var/tmp: " + name_)) << path.error().message;
}

TEST_F(AgentInstaller, NamesEveryDirectoryTriedWhenNoneExists)
{
  std::filesystem::remove(root_ + "/tmp");
  auto path = install_agent(target_, library_, name_);
  ASSERT_FALSE(path.has_value());
  EXPECT_EQ(path.error().message,
            "cannot install agent " + name_ + " for JVM 4242 under " + root_ +
                ": no usable directory (/tmp: does not exist; /var/tmp: does not exist; "
                "/dev/shm: does not exist); try: give the container a /tmp mounted with exec "
                "(e.g. --tmpfs /tmp:exec)");
}

TEST_F(AgentInstaller, RefusesBadNamesAndEmptyLibraries)
{
  for (std::string name : std::vector<std::string>{"", ".", "..", "a/b", "../../etc/ld.so.preload",
                                                   std::string(201, 'x'), std::string("a\0b", 3)}) {
    auto path = install_agent(target_, library_, name);
    ASSERT_FALSE(path.has_value()) << name;
    EXPECT_TRUE(contains(path.error().message, "invalid file name")) << path.error().message;
  }
  EXPECT_FALSE(install_agent(target_, {}, name_).has_value());
  EXPECT_TRUE(names_in("/tmp").empty());
}

} // namespace
} // namespace flamebpf::jvm
