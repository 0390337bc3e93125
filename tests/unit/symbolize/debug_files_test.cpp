#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <zlib.h>

#include "common/contained_file.h"
#include "symbolize/debug_files.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

namespace fs = std::filesystem;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

std::string link_section(const std::string& name, uint32_t crc)
{
  std::string section = name;
  section.push_back('\0');
  while (section.size() % 4 != 0)
    section.push_back('\0');
  section.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return section;
}

std::vector<std::string> paths(const std::vector<DebugCandidate>& candidates)
{
  std::vector<std::string> result;
  for (const auto& candidate : candidates)
    result.push_back(candidate.path);
  return result;
}

TEST(DebugLink, ParsesNameAndCrc)
{
  auto link = parse_debug_link(link_section("libc.so.6.debug", 0xdeadbeef));
  ASSERT_TRUE(link.has_value());
  EXPECT_EQ(link->name, "libc.so.6.debug");
  EXPECT_EQ(link->crc, 0xdeadbeefu);
  // Name of 3 bytes + NUL: the CRC follows at once.
  auto short_name = parse_debug_link(link_section("a.d", 7));
  ASSERT_TRUE(short_name.has_value());
  EXPECT_EQ(short_name->crc, 7u);
}

TEST(DebugLink, RefusesWhatIsNoPlainFileName)
{
  for (const std::string& name :
       std::vector<std::string>{"", ".", "..", "../../etc/shadow", "/etc/shadow", "dir/file",
                                "tab\tname", "new\nline", "esc\x1b[31m", std::string(300, 'x')})
    EXPECT_FALSE(parse_debug_link(link_section(name, 1)).has_value()) << name;
  // No NUL, or no room for the CRC.
  EXPECT_FALSE(parse_debug_link("name.debug").has_value());
  EXPECT_FALSE(parse_debug_link(std::string("name.debug\0\0", 12)).has_value());
}

TEST(DebugCandidates, BuildIdFirstThenTheLinkBesideInDotDebugAndUnderUsrLibDebug)
{
  DebugLink link{"libc.so.6.debug", 1};
  auto candidates = debug_candidates("/usr/lib/x86_64-linux-gnu/libc.so.6",
                                     std::string("\xab\xcd\xef\x01", 4), link, true);
  EXPECT_EQ(paths(candidates), (std::vector<std::string>{
                                   "/usr/lib/debug/.build-id/ab/cdef01.debug",
                                   "/usr/lib/x86_64-linux-gnu/libc.so.6.debug",
                                   "/usr/lib/x86_64-linux-gnu/.debug/libc.so.6.debug",
                                   "/usr/lib/debug/usr/lib/x86_64-linux-gnu/libc.so.6.debug",
                               }));
  EXPECT_EQ(candidates[0].check, DebugCheck::kBuildId);
  EXPECT_EQ(candidates[1].check, DebugCheck::kCrc);
  // A root that is not the file's own has only /usr/lib/debug.
  EXPECT_EQ(paths(debug_candidates("/bin/true", "\x01\x02", link, false)),
            (std::vector<std::string>{"/usr/lib/debug/.build-id/01/02.debug",
                                      "/usr/lib/debug/bin/libc.so.6.debug"}));
  // A file in "/".
  EXPECT_EQ(
      paths(debug_candidates("/init", "", DebugLink{"init.debug", 1}, true)),
      (std::vector<std::string>{"/init.debug", "/.debug/init.debug", "/usr/lib/debug/init.debug"}));
}

TEST(DebugCandidates, NothingFromMalformedInput)
{
  DebugLink link{"x.debug", 1};
  // A build ID of one byte has no xx/rest form.
  EXPECT_TRUE(debug_candidates("/bin/true", "\x01", std::nullopt, true).empty());
  EXPECT_TRUE(debug_candidates("/bin/true", std::string(65, 'a'), std::nullopt, true).empty());
  // File paths that are not absolute and clean give no link candidates.
  for (const std::string path : {"bin/true", "/bin/../etc/true", "/bin/./true", "//bin/true",
                                 "/bin/true (deleted)", "/", "/bin/", ""})
    EXPECT_TRUE(debug_candidates(path, "", link, true).empty()) << path;
  // A link that is no plain file name, however it was made.
  EXPECT_TRUE(debug_candidates("/bin/true", "", DebugLink{"../x", 1}, true).empty());
  EXPECT_TRUE(debug_candidates("/bin/true", "", DebugLink{"/etc/passwd", 1}, true).empty());
}

TEST(DebugFiles, Crc32IsZlibs)
{
  TempDir dir;
  std::string content = "The debug file's bytes\n";
  write_file(dir.path() / "file", content);
  UniqueFd fd(::open((dir.path() / "file").c_str(), O_RDONLY | O_CLOEXEC));
  auto crc = file_crc32(fd.get(), 1 << 20);
  ASSERT_TRUE(crc.has_value());
  EXPECT_EQ(*crc, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(content.data()),
                                              static_cast<uInt>(content.size()))));
  auto too_large = file_crc32(fd.get(), content.size() - 1);
  ASSERT_FALSE(too_large.has_value());
  EXPECT_EQ(too_large.error().errno_value, EFBIG);
}

// A root with the hostile things a container can put at the candidate paths.
class DebugSearch : public ::testing::Test {
protected:
  void SetUp() override
  {
    root_ = dir_.path() / "root";
    fs::create_directories(root_ / "lib/.debug");
    fs::create_directories(root_ / "usr/lib/debug/lib");
    fs::create_directories(root_ / "usr/lib/debug/.build-id/ab");
    write_file(root_ / "lib/libx.so", "not even ELF");
    content_ = "debug bytes";
    crc_ = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(content_.data()),
                                       static_cast<uInt>(content_.size())));
  }

  std::optional<DebugFile> find(std::vector<std::string>& refused)
  {
    std::vector<DebugRoot> roots;
    auto fd = open_directory(root_.string());
    EXPECT_TRUE(fd.has_value());
    roots.push_back({std::move(*fd), kResolveInRoot, root_.string(), true});
    DebugQuery query{"/lib/libx.so", "\xab\xcd", DebugLink{"libx.so.debug", crc_}, 0, 0};
    return find_debug_file(roots, query, refused);
  }

  TempDir dir_;
  fs::path root_;
  std::string content_;
  uint32_t crc_ = 0;
};

TEST_F(DebugSearch, FifoAndLinksOutOfTheRootAreSkippedForTheNextCandidate)
{
  ASSERT_EQ(::mkfifo((root_ / "usr/lib/debug/.build-id/ab/cd.debug").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((root_ / "lib/libx.so.debug").c_str(), 0644), 0);
  // Outside the root, a file with the right CRC: the link resolves inside the root, where
  // nothing is.
  write_file(dir_.path() / "outside.debug", content_);
  fs::create_symlink(dir_.path() / "outside.debug", root_ / "lib/.debug/libx.so.debug");
  write_file(root_ / "usr/lib/debug/lib/libx.so.debug", content_);

  std::vector<std::string> refused;
  auto started = std::chrono::steady_clock::now();
  auto found = find(refused);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  ASSERT_TRUE(found.has_value()) << ::testing::PrintToString(refused);
  EXPECT_EQ(found->path, "/usr/lib/debug/lib/libx.so.debug");
  EXPECT_EQ(found->shown, root_.string() + "/usr/lib/debug/lib/libx.so.debug");
  // The two FIFOs are refused, said; the link out of the root leads nowhere, silently.
  ASSERT_EQ(refused.size(), 2u) << ::testing::PrintToString(refused);
  EXPECT_NE(refused[0].find("not a regular file"), std::string::npos) << refused[0];
}

TEST_F(DebugSearch, WrongCrcAndMissingBuildIdAreRefused)
{
  write_file(root_ / "usr/lib/debug/.build-id/ab/cd.debug", "not ELF");
  write_file(root_ / "lib/libx.so.debug", content_ + "!");
  std::vector<std::string> refused;
  EXPECT_FALSE(find(refused).has_value());
  ASSERT_EQ(refused.size(), 2u) << ::testing::PrintToString(refused);
  EXPECT_NE(refused[0].find("not an ELF file"), std::string::npos) << refused[0];
  EXPECT_NE(refused[1].find("CRC does not match"), std::string::npos) << refused[1];
}

TEST_F(DebugSearch, TheFileItselfIsNotItsDebugFile)
{
  write_file(root_ / "lib/libx.so.debug", content_);
  struct stat status {};
  ASSERT_EQ(::stat((root_ / "lib/libx.so.debug").c_str(), &status), 0);
  std::vector<DebugRoot> roots;
  roots.push_back({std::move(*open_directory(root_.string())), kResolveInRoot, "", true});
  DebugQuery query{"/lib/libx.so", "", DebugLink{"libx.so.debug", crc_}, status.st_dev,
                   status.st_ino};
  std::vector<std::string> refused;
  EXPECT_FALSE(find_debug_file(roots, query, refused).has_value());
}

} // namespace
} // namespace flamebpf::symbolize
