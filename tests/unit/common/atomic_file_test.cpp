#include <chrono>
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

namespace fs = std::filesystem;
using flamebpf::testing::TempDir;

std::string contents(const fs::path& path)
{
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

ContentWriter text(const std::string& content)
{
  return [content](std::ostream& out) -> Result<> {
    out << content;
    return {};
  };
}

struct stat status_of(const fs::path& path)
{
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path;
  return status;
}

// Sets the umask for a test's scope, so that modes are checked against a known one.
class Umask {
public:
  explicit Umask(mode_t mask) : previous_(::umask(mask)) {}
  ~Umask() { ::umask(previous_); }

private:
  mode_t previous_;
};

size_t entries(const fs::path& dir)
{
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), {}));
}

TEST(OutputFile, ReplacesTheFileWhole)
{
  TempDir dir;
  auto path = dir.path() / "out.folded";
  std::ofstream(path) << "old\n";
  auto written = write_output_file(path, FileAccess{}, text("new\n"));
  ASSERT_TRUE(written.has_value()) << written.error().message;
  EXPECT_EQ(contents(path), "new\n");
  // No temporary file is left beside it.
  EXPECT_EQ(entries(dir.path()), 1u);
}

TEST(OutputFile, FailureLeavesTheOldFileAndNoTemporary)
{
  TempDir dir;
  auto path = dir.path() / "out.folded";
  std::ofstream(path) << "old\n";
  auto written = write_output_file(path, FileAccess{}, [](std::ostream& out) -> Result<> {
    out << "partial";
    return fail(error("emitter failed"));
  });
  ASSERT_FALSE(written.has_value());
  EXPECT_EQ(written.error().message, "emitter failed");
  EXPECT_EQ(contents(path), "old\n");
  EXPECT_EQ(entries(dir.path()), 1u);
}

TEST(OutputFile, MissingDirectoryIsOneError)
{
  TempDir dir;
  auto path = dir.path() / "no/such/dir/out.folded";
  auto written = write_output_file(path, FileAccess{}, text(""));
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().message.find("No such file or directory"), std::string::npos)
      << written.error().message;
  EXPECT_FALSE(check_output_path(path).has_value());
}

TEST(OutputFile, AFifoIsRefusedWithoutBlocking)
{
  TempDir dir;
  auto path = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // No reader: opening the FIFO for writing would block for good.
  auto started = std::chrono::steady_clock::now();
  auto checked = check_output_path(path);
  auto written = write_output_file(path, FileAccess{}, text("into the pipe\n"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  ASSERT_FALSE(checked.has_value());
  ASSERT_FALSE(written.has_value());
  EXPECT_EQ(written.error().errno_value, kRefusedErrno);
  EXPECT_NE(written.error().message.find("it is a FIFO"), std::string::npos)
      << written.error().message;
  EXPECT_NE(written.error().message.find("-o -"), std::string::npos) << written.error().message;
  EXPECT_TRUE(S_ISFIFO(status_of(path).st_mode)) << "the FIFO was replaced";
  EXPECT_EQ(entries(dir.path()), 1u);
}

TEST(OutputFile, ASocketOrADirectoryIsRefused)
{
  TempDir dir;
  int listener = flamebpf::testing::listen_at(dir.path() / "socket");
  auto on_socket = write_output_file(dir.path() / "socket", FileAccess{}, text("x"));
  ::close(listener);
  ASSERT_FALSE(on_socket.has_value());
  EXPECT_NE(on_socket.error().message.find("it is a socket"), std::string::npos);
  fs::create_directory(dir.path() / "sub");
  auto on_directory = write_output_file(dir.path() / "sub", FileAccess{}, text("x"));
  ASSERT_FALSE(on_directory.has_value());
  EXPECT_NE(on_directory.error().message.find("Is a directory"), std::string::npos);
  EXPECT_FALSE(check_output_path(dir.path() / "sub").has_value());
}

TEST(OutputFile, ALinkAtTheNameIsReplacedNeverFollowed)
{
  TempDir dir;
  TempDir elsewhere;
  auto victim = elsewhere.path() / "victim";
  std::ofstream(victim) << "precious\n";
  auto path = dir.path() / "out.folded";
  fs::create_symlink(victim, path);
  auto written = write_output_file(path, FileAccess{}, text("profile\n"));
  ASSERT_TRUE(written.has_value()) << written.error().message;
  EXPECT_EQ(contents(victim), "precious\n");
  EXPECT_TRUE(S_ISREG(status_of(path).st_mode));
  EXPECT_EQ(contents(path), "profile\n");
}

TEST(OutputFile, AHardLinkedFileIsReplacedNotWrittenThrough)
{
  TempDir dir;
  auto victim = dir.path() / "victim";
  std::ofstream(victim) << "precious\n";
  auto path = dir.path() / "out.folded";
  fs::create_hard_link(victim, path);
  ASSERT_TRUE(write_output_file(path, FileAccess{}, text("profile\n")).has_value());
  EXPECT_EQ(contents(victim), "precious\n");
  EXPECT_EQ(contents(path), "profile\n");
}

TEST(OutputFile, NewFilesHaveTheModeAsked)
{
  Umask mask(022);
  TempDir dir;
  ASSERT_TRUE(write_output_file(dir.path() / "private", FileAccess{0600, {}, 0}, text("x")));
  EXPECT_EQ(status_of(dir.path() / "private").st_mode & 07777, 0600u);
  // Replacing a world-readable file does not keep its mode.
  std::ofstream(dir.path() / "old") << "old";
  ::chmod((dir.path() / "old").c_str(), 0644);
  ASSERT_TRUE(write_output_file(dir.path() / "old", FileAccess{0640, {}, 0}, text("x")));
  EXPECT_EQ(status_of(dir.path() / "old").st_mode & 07777, 0640u);
}

TEST(OutputFile, OwnerIsGivenTheNewFile)
{
  if (::geteuid() != 0)
    GTEST_SKIP() << "giving a file to another user takes root";
  TempDir dir;
  FileAccess access{0600, 65534, 65534};
  ASSERT_TRUE(write_output_file(dir.path() / "theirs", access, text("x")));
  auto status = status_of(dir.path() / "theirs");
  EXPECT_EQ(status.st_uid, 65534u);
  EXPECT_EQ(status.st_gid, 65534u);
  ASSERT_TRUE(write_output_file(dir.path() / "ours", FileAccess{}, text("x")));
  EXPECT_EQ(status_of(dir.path() / "ours").st_uid, 0u);
}

TEST(OutputFile, OwnDescriptorsAreWrittenDirectly)
{
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  std::string path = "/dev/fd/" + std::to_string(pipe_ends[1]);
  ASSERT_TRUE(check_output_path(path).has_value());
  auto written = write_output_file(path, FileAccess{}, text("through the pipe\n"));
  ::close(pipe_ends[1]);
  ASSERT_TRUE(written.has_value()) << written.error().message;
  char buffer[64] = {};
  EXPECT_EQ(::read(pipe_ends[0], buffer, sizeof buffer - 1), 17);
  EXPECT_STREQ(buffer, "through the pipe\n");
  ::close(pipe_ends[0]);
}

TEST(OutputFile, TheNullDeviceTakesEverything)
{
  ASSERT_TRUE(check_output_path("/dev/null").has_value());
  auto written = write_output_file("/dev/null", FileAccess{}, text("nothing\n"));
  ASSERT_TRUE(written.has_value()) << written.error().message;
  EXPECT_TRUE(S_ISCHR(status_of("/dev/null").st_mode));
  // An emitter's failure is still one.
  EXPECT_FALSE(write_output_file("/dev/null", FileAccess{},
                                 [](std::ostream&) -> Result<> { return fail(error("failed")); }));
}

TEST(PrivateDirectory, CreatedWithMode0750)
{
  Umask mask(022);
  TempDir dir;
  auto path = dir.path() / "a" / "dumps";
  auto opened = open_private_directory(path, true);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  EXPECT_EQ(status_of(path).st_mode & 07777, 0750u);
  auto sub = open_private_subdirectory(opened->get(), "web", true, "web");
  ASSERT_TRUE(sub.has_value()) << sub.error().message;
  EXPECT_EQ(status_of(path / "web").st_mode & 07777, 0750u);
  EXPECT_FALSE(open_private_directory(dir.path() / "missing", false).has_value());
}

TEST(PrivateDirectory, LinksAndOthersDirectoriesAreRefused)
{
  TempDir dir;
  fs::create_directory(dir.path() / "real");
  ::chmod((dir.path() / "real").c_str(), 0750);
  fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
  auto linked = open_private_directory(dir.path() / "link", true);
  ASSERT_FALSE(linked.has_value());
  EXPECT_EQ(linked.error().errno_value, kRefusedErrno);
  EXPECT_NE(linked.error().message.find("is a symbolic link"), std::string::npos)
      << linked.error().message;
  EXPECT_NE(linked.error().message.find("give the directory it leads to"), std::string::npos);

  fs::create_directory(dir.path() / "open");
  ::chmod((dir.path() / "open").c_str(), 01777);
  auto open = open_private_directory(dir.path() / "open", true);
  ASSERT_FALSE(open.has_value());
  EXPECT_EQ(open.error().errno_value, kRefusedErrno);
  EXPECT_NE(open.error().message.find("is writable by others (mode 1777)"), std::string::npos)
      << open.error().message;
  EXPECT_NE(open.error().message.find("chmod go-w"), std::string::npos);

  std::ofstream(dir.path() / "file") << "x";
  auto file = open_private_directory(dir.path() / "file", true);
  ASSERT_FALSE(file.has_value());
  EXPECT_NE(file.error().message.find("not a directory"), std::string::npos);

  if (::geteuid() == 0) {
    fs::create_directory(dir.path() / "theirs");
    ::chmod((dir.path() / "theirs").c_str(), 0755);
    ASSERT_EQ(::chown((dir.path() / "theirs").c_str(), 65534, 65534), 0);
    auto theirs = open_private_directory(dir.path() / "theirs", true);
    ASSERT_FALSE(theirs.has_value());
    EXPECT_NE(theirs.error().message.find("belongs to uid 65534, not to root"), std::string::npos)
        << theirs.error().message;
  }

  // Inside: a link or file where a subdirectory should be is refused, never followed.
  auto real = open_private_directory(dir.path() / "real", false);
  ASSERT_TRUE(real.has_value()) << real.error().message;
  fs::create_directory_symlink(dir.path() / "open", dir.path() / "real" / "web");
  auto sub = open_private_subdirectory(real->get(), "web", true, "real/web");
  ASSERT_FALSE(sub.has_value());
  EXPECT_EQ(sub.error().errno_value, kRefusedErrno);
  EXPECT_EQ(sub.error().message, "real/web is a symbolic link, not a directory of flamebpf's own");
}

TEST(WriteFileAt, WritesThroughTheDirectoryDescriptor)
{
  TempDir dir;
  fs::create_directory(dir.path() / "d");
  auto opened = open_private_directory(dir.path() / "d", false);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  // The directory moves away and a link to elsewhere takes its place: the file still goes to the
  // directory that was opened.
  fs::rename(dir.path() / "d", dir.path() / "moved");
  fs::create_directory(dir.path() / "elsewhere");
  fs::create_directory_symlink(dir.path() / "elsewhere", dir.path() / "d");
  ASSERT_TRUE(write_file_at(opened->get(), "f", FileAccess{}, text("x"), "d/f").has_value());
  EXPECT_EQ(contents(dir.path() / "moved" / "f"), "x");
  EXPECT_EQ(entries(dir.path() / "elsewhere"), 0u);
  ASSERT_TRUE(replace_symlink_at(opened->get(), "latest", "f", "d/latest").has_value());
  EXPECT_EQ(fs::read_symlink(dir.path() / "moved" / "latest"), "f");
  EXPECT_EQ(entries(dir.path() / "moved"), 2u);
}

TEST(AppendAt, AppendsWholeLinesToItsOwnRegularFile)
{
  Umask mask(022);
  TempDir dir;
  auto opened = open_private_directory(dir.path(), false);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  ASSERT_TRUE(append_at(opened->get(), "stats", "{\"a\":1}\n", 0640, "stats").has_value());
  ASSERT_TRUE(append_at(opened->get(), "stats", "{\"b\":2}\n", 0640, "stats").has_value());
  EXPECT_EQ(contents(dir.path() / "stats"), "{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(status_of(dir.path() / "stats").st_mode & 07777, 0640u);
}

TEST(AppendAt, RefusesLinksFifosAndHardLinksWithoutBlocking)
{
  TempDir dir;
  TempDir elsewhere;
  auto victim = elsewhere.path() / "victim";
  std::ofstream(victim) << "precious\n";
  auto opened = open_private_directory(dir.path(), false);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  fs::create_symlink(victim, dir.path() / "link");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  fs::create_hard_link(victim, dir.path() / "hard");
  auto started = std::chrono::steady_clock::now();
  for (const char* name : {"link", "fifo", "hard"}) {
    auto appended = append_at(opened->get(), name, "line\n", 0640, name);
    ASSERT_FALSE(appended.has_value()) << name;
    EXPECT_EQ(appended.error().errno_value, kRefusedErrno) << name;
    EXPECT_TRUE(appended.error().message.starts_with(std::string("refusing to append to ") + name))
        << appended.error().message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_EQ(contents(victim), "precious\n");
}

TEST(TemporaryName, OnlyTheNamesWritesMake)
{
  EXPECT_TRUE(is_temporary_name(".out.folded.tmp.0123456789abcdef"));
  EXPECT_TRUE(is_temporary_name("out.folded.tmp.4242"));              // earlier versions
  EXPECT_FALSE(is_temporary_name("out.folded.tmp.0123456789abcdef")); // not hidden
  EXPECT_FALSE(is_temporary_name(".out.folded.tmp.0123456789abcdeg"));
  EXPECT_FALSE(is_temporary_name("notes.tmp.txt"));
  EXPECT_FALSE(is_temporary_name("20261122T162000Z_20261122T162100Z.folded"));
  EXPECT_FALSE(is_temporary_name("x.tmp."));
}

} // namespace
} // namespace flamebpf
