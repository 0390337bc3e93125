#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "runtimes/hotspot/agent_installer.h"
#include "test_support.h"

// A noexec directory cannot be made without root (mount): the integration tests cover the
// fallback past a noexec /tmp.

namespace flamebpf::hotspot {
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

// Opens of the files in a directory, seen by inotify from construction on; an O_PATH lookup is
// no open.
class Opens {
public:
  explicit Opens(const std::string& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
  {
    EXPECT_GE(::inotify_add_watch(fd_, dir.c_str(), IN_OPEN), 0) << dir;
  }
  ~Opens() { ::close(fd_); }
  Opens(const Opens&) = delete;
  Opens& operator=(const Opens&) = delete;

  // How often name was opened so far.
  int of(const std::string& name)
  {
    alignas(inotify_event) char buffer[4096];
    for (ssize_t n; (n = ::read(fd_, buffer, sizeof buffer)) > 0;) {
      for (char* at = buffer; at < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(at);
        if (event->len > 0)
          ++counts_[event->name];
        at += sizeof(inotify_event) + event->len;
      }
    }
    return counts_[name];
  }

private:
  int fd_;
  std::map<std::string, int> counts_;
};

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
    std::sort(names.begin(), names.end());
    return names;
  }
  // A fresh name beside the usual one, as installed when the usual one is taken.
  bool is_fresh_name(const std::string& path, const std::string& directory) const
  {
    std::string stem = name_.substr(0, name_.size() - 3);
    return std::regex_match(path, std::regex(directory + "/" + stem + "-[0-9a-f]{16}\\.so"));
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
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_EQ(installed->path, "/tmp/" + name_);
  EXPECT_EQ(installed->usual_name_taken, "");
  std::string file = root_ + installed->path;
  EXPECT_EQ(read_whole(file), library_text());
  struct stat status {};
  ASSERT_EQ(::stat(file.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0644u);
  EXPECT_EQ(status.st_uid, target_.uid);
  EXPECT_EQ(status.st_gid, target_.gid);
  // No temporary file left behind.
  EXPECT_EQ(names_in("/tmp"), std::vector<std::string>{name_});
  // The usual name stays for the next JVM.
  remove_agent(target_, *installed);
  EXPECT_EQ(names_in("/tmp"), std::vector<std::string>{name_});
}

TEST_F(AgentInstaller, ReusesAnIdenticalFile)
{
  auto first = install_agent(target_, library_, name_);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  struct stat before {};
  ASSERT_EQ(::stat((root_ + first->path).c_str(), &before), 0);
  auto second = install_agent(target_, library_, name_);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(second->path, first->path);
  EXPECT_EQ(second->usual_name_taken, "");
  struct stat after {};
  ASSERT_EQ(::stat((root_ + second->path).c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
}

TEST_F(AgentInstaller, DifferentFileOfThatNameIsLeftAloneAndAFreshNameUsed)
{
  write_file(root_ + "/tmp/" + name_, "someone else's library");
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_TRUE(is_fresh_name(installed->path, "/tmp")) << installed->path;
  EXPECT_EQ(installed->usual_name_taken,
            name_ + " is held by uid " + std::to_string(::geteuid()) + ", a different file");
  EXPECT_EQ(read_whole(root_ + "/tmp/" + name_), "someone else's library");
  EXPECT_EQ(read_whole(root_ + installed->path), library_text());
  // A fresh name serves one attach: removed once the JVM has loaded it.
  remove_agent(target_, *installed);
  EXPECT_EQ(names_in("/tmp"), std::vector<std::string>{name_});
  // Each attach gets a name of its own.
  auto again = install_agent(target_, library_, name_);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_NE(again->path, installed->path);
}

TEST_F(AgentInstaller, IdenticalButWritableByOthersIsNotReused)
{
  write_file(root_ + "/tmp/" + name_, library_text());
  ASSERT_EQ(::chmod((root_ + "/tmp/" + name_).c_str(), 0666), 0);
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_TRUE(is_fresh_name(installed->path, "/tmp")) << installed->path;
  EXPECT_TRUE(contains(installed->usual_name_taken, "writable by other users"))
      << installed->usual_name_taken;
}

TEST_F(AgentInstaller, SymlinkOutOfTheRootIsNeverFollowed)
{
  // Even a link to a file with the very same bytes: the JVM would run whatever it points to.
  std::string outside = dir_.path().string() + "/outside.so";
  write_file(outside, library_text());
  std::filesystem::create_symlink(outside, root_ + "/tmp/" + name_);
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_TRUE(is_fresh_name(installed->path, "/tmp")) << installed->path;
  EXPECT_TRUE(contains(installed->usual_name_taken, "a symlink")) << installed->usual_name_taken;
  EXPECT_EQ(read_whole(outside), library_text());
  EXPECT_TRUE(std::filesystem::is_symlink(root_ + "/tmp/" + name_));
}

TEST_F(AgentInstaller, TmpSymlinkedOutOfTheRootResolvesInsideIt)
{
  std::string outside = dir_.path().string() + "/outside-tmp";
  std::filesystem::create_directories(outside);
  std::filesystem::remove(root_ + "/tmp");
  std::filesystem::create_symlink(outside, root_ + "/tmp");
  std::filesystem::create_directories(root_ + "/var/tmp");
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_EQ(installed->path, "/var/tmp/" + name_);
  EXPECT_TRUE(std::filesystem::is_empty(outside));
}

TEST_F(AgentInstaller, FifoInTheWayIsNeverOpened)
{
  ASSERT_EQ(::mkfifo((root_ + "/tmp/" + name_).c_str(), 0644), 0);
  Opens opens(root_ + "/tmp");
  auto installed = install_agent(target_, library_, name_);
  EXPECT_EQ(opens.of(name_), 0) << "the FIFO was opened";
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_TRUE(is_fresh_name(installed->path, "/tmp")) << installed->path;
  EXPECT_EQ(installed->usual_name_taken,
            name_ + " is held by uid " + std::to_string(::geteuid()) + ", not a regular file");
}

TEST_F(AgentInstaller, DirectoryInTheWayGetsAFreshNameBesideIt)
{
  std::filesystem::create_directories(root_ + "/tmp/" + name_);
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_TRUE(is_fresh_name(installed->path, "/tmp")) << installed->path;
}

TEST_F(AgentInstaller, DirectoryOthersMayWriteIsUsedOnlyIfSticky)
{
  std::filesystem::create_directories(root_ + "/var/tmp");
  ASSERT_EQ(::chmod((root_ + "/tmp").c_str(), 0777), 0);
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_EQ(installed->path, "/var/tmp/" + name_);
  EXPECT_TRUE(names_in("/tmp").empty());

  ASSERT_EQ(::chmod((root_ + "/tmp").c_str(), 01777), 0);
  auto sticky = install_agent(target_, library_, name_);
  ASSERT_TRUE(sticky.has_value()) << sticky.error().message;
  EXPECT_EQ(sticky->path, "/tmp/" + name_);
}

TEST_F(AgentInstaller, TemporaryNamesCannotBeTakenInAdvance)
{
  // Names a co-tenant could guess (the installer's pid and a counter) are all taken.
  for (int counter = 0; counter < 500; ++counter)
    write_file(root_ + "/tmp/." + name_ + ".tmp-" + std::to_string(::getpid()) + "-" +
                   std::to_string(counter),
               "");
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_EQ(installed->path, "/tmp/" + name_);
}

TEST_F(AgentInstaller, NamesEveryDirectoryTriedWhenNoneExists)
{
  std::filesystem::remove(root_ + "/tmp");
  auto installed = install_agent(target_, library_, name_);
  ASSERT_FALSE(installed.has_value());
  EXPECT_EQ(installed.error().message,
            "cannot install agent " + name_ + " for JVM 4242 under " + root_ +
                ": no usable directory (/tmp: does not exist; /var/tmp: does not exist; "
                "/dev/shm: does not exist); try: give the container a /tmp mounted with exec "
                "(e.g. --tmpfs /tmp:exec)");
}

// A Docker container run --read-only with a volume: its mountinfo as the kernel writes it.
constexpr const char* kVolumeMountinfo =
    "1 0 0:50 / / ro,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w\n"
    "2 1 0:53 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
    "3 1 0:54 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
    "4 3 0:55 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620\n"
    "5 3 0:56 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k\n"
    "6 3 0:57 / /dev/mqueue rw,nosuid,nodev,noexec,relatime - mqueue mqueue rw\n"
    "7 1 0:58 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
    "8 7 0:29 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n"
    "9 1 8:1 /var/lib/docker/containers/c/hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw\n"
    "10 1 8:1 /srv/data /data rw,relatime - ext4 /dev/sda1 rw\n"
    "11 1 8:1 /srv/odd /odd\\040dir rw,relatime - ext4 /dev/sda1 rw\n"
    "12 1 8:1 /srv/data /data rw,relatime - ext4 /dev/sda1 rw\n"
    "13 1 0:59 / /tmp rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw\n";

TEST(AgentMounts, OnlyMountsThatHoldFilesOutsideTheScratchDirectories)
{
  EXPECT_EQ(agent_mount_candidates(kVolumeMountinfo),
            (std::vector<std::string>{"/etc/hosts", "/data", "/odd dir"}));
  std::string many;
  for (int i = 0; i < 100; ++i)
    many +=
        std::to_string(i + 20) + " 1 8:1 / /v" + std::to_string(i) + " rw - ext4 /dev/sda1 rw\n";
  EXPECT_EQ(agent_mount_candidates(many).size(), kMaxAgentMounts);
  EXPECT_TRUE(agent_mount_candidates("garbage\n\n1 2 3\n").empty());
}

// With no scratch directory, the agent goes into the JVM's volume under a fresh name, which is
// removed once loaded; the file mounted over /etc/hosts is passed over without a word.
TEST_F(AgentInstaller, VolumeTakesTheAgentUnderAFreshNameThatIsRemovedAfterwards)
{
  std::filesystem::remove(root_ + "/tmp");
  std::filesystem::create_directories(root_ + "/data");
  std::filesystem::create_directories(root_ + "/etc");
  write_file(root_ + "/etc/hosts", "127.0.0.1 localhost\n");
  write_file(dir_.path().string() + "/proc/4242/mountinfo", kVolumeMountinfo);
  auto installed = install_agent(target_, library_, name_);
  ASSERT_TRUE(installed.has_value()) << installed.error().message;
  EXPECT_TRUE(installed->in_application_mount);
  EXPECT_TRUE(installed->path.starts_with("/data/" + name_.substr(0, name_.size() - 3) + "-"))
      << installed->path;
  EXPECT_EQ(read_whole(root_ + installed->path).size(), library_.size());
  remove_agent(target_, *installed);
  EXPECT_TRUE(names_in("/data").empty());
  EXPECT_EQ(read_whole(root_ + "/etc/hosts"), "127.0.0.1 localhost\n");

  // Nowhere at all: every directory tried is named, but not the file mounted over /etc/hosts.
  std::filesystem::remove(root_ + "/data");
  auto nowhere = install_agent(target_, library_, name_);
  ASSERT_FALSE(nowhere.has_value());
  EXPECT_TRUE(contains(nowhere.error().message, "/dev/shm: does not exist; /data: does not exist"))
      << nowhere.error().message;
  EXPECT_TRUE(contains(nowhere.error().message, "; /odd dir: does not exist"))
      << nowhere.error().message;
  EXPECT_FALSE(contains(nowhere.error().message, "/etc/hosts")) << nowhere.error().message;
}

TEST_F(AgentInstaller, RefusesBadNamesAndEmptyLibraries)
{
  for (std::string name : std::vector<std::string>{"", ".", "..", "a/b", "../../etc/ld.so.preload",
                                                   std::string(201, 'x'), std::string("a\0b", 3)}) {
    auto installed = install_agent(target_, library_, name);
    ASSERT_FALSE(installed.has_value()) << name;
    EXPECT_TRUE(contains(installed.error().message, "invalid file name"))
        << installed.error().message;
  }
  EXPECT_FALSE(install_agent(target_, {}, name_).has_value());
  EXPECT_TRUE(names_in("/tmp").empty());
}

} // namespace
} // namespace flamebpf::hotspot
