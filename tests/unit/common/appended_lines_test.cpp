// The rules of a file a target appends lines to, once for both its readers (perf maps and the
// JVM agent's unwind records): identity, truncation, rewrites, owner, budgets, holes, links.
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/appended_lines.h"
#include "common/unique_fd.h"
#include "test_support.h"

namespace flamebpf {
namespace {

using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

constexpr AppendedLines::Budgets kBudgets{
    .max_line = 64, .max_read_per_interval = 4 << 20, .max_lines_per_interval = 1 << 10};

// A /proc/<pid>/status for a process whose real, effective, saved and filesystem uid are uid.
void write_status(const std::string& proc, uint32_t pid, uint32_t uid)
{
  std::string id = std::to_string(uid);
  write_file(proc + "/" + std::to_string(pid) + "/status",
             "Name:\tjava\nUid:\t" + id + "\t" + id + "\t" + id + "\t" + id + "\n");
}

class AppendedLinesTest : public ::testing::Test {
protected:
  // Process 7 runs as the user who writes the file.
  void SetUp() override { write_status(proc(), 7, ::geteuid()); }
  std::string proc() const { return dir_.path().string(); }
  std::string file() const { return proc() + "/7/root/tmp/lines"; }
  void append(const std::string& text) { append_to(file(), text); }
  static void append_to(const std::string& path, const std::string& text)
  {
    std::ofstream(path, std::ios::app) << text;
  }
  void replace(const std::string& text)
  {
    write_file(proc() + "/7/root/tmp/new", text);
    std::filesystem::rename(proc() + "/7/root/tmp/new", file());
  }
  // The lines passed since the reader last started over.
  const std::vector<std::string>& read(AppendedLines& reader)
  {
    reader.read(
        [this] {
          lines_.clear();
          offsets_.clear();
        },
        [this](std::string_view line, uint64_t offset) {
          lines_.emplace_back(line);
          offsets_.push_back(offset);
        });
    return lines_;
  }
  AppendedLines reader(AppendedLines::Budgets budgets = kBudgets)
  {
    return AppendedLines(7, proc(), "/tmp/lines", budgets, "it names nothing");
  }

  TempDir dir_;
  std::vector<std::string> lines_;
  std::vector<uint64_t> offsets_; // where each of lines_ begins in the file
};

using Lines = std::vector<std::string>;

TEST(AppendedFileOwner, TheProcesssUserOrRoot)
{
  EXPECT_TRUE(appended_file_owner_trusted(1000, 1000));
  EXPECT_TRUE(appended_file_owner_trusted(0, 1000));
  EXPECT_TRUE(appended_file_owner_trusted(0, 0));
  EXPECT_FALSE(appended_file_owner_trusted(1001, 1000));
  EXPECT_FALSE(appended_file_owner_trusted(1000, 0));
}

TEST_F(AppendedLinesTest, PassesWhatIsAppendedInWholeLines)
{
  write_file(file(), "a\nb");
  auto lines = reader();
  EXPECT_EQ(read(lines), Lines{"a"});
  append("c\n\nd\n");
  EXPECT_EQ(read(lines), (Lines{"a", "bc", "d"}));
  EXPECT_EQ(lines.path(), proc() + "/7/root/tmp/lines");
  EXPECT_TRUE(lines.modified().has_value());
}

// Each line comes with where it begins, also one that two reads completed, and is read there
// again; what a read found new is counted, a read that found nothing is not.
TEST_F(AppendedLinesTest, EachLineIsFoundAgainWhereItBegan)
{
  write_file(file(), "first\nsec");
  auto lines = reader();
  EXPECT_EQ(read(lines), (std::vector<std::string>{"first"}));
  uint64_t changes = lines.changes();
  read(lines);
  EXPECT_EQ(lines.changes(), changes);
  append("ond\nthird\nfour");
  EXPECT_EQ(read(lines), (std::vector<std::string>{"first", "second", "third"}));
  EXPECT_GT(lines.changes(), changes);
  EXPECT_EQ(offsets_, (std::vector<uint64_t>{0, 6, 13}));
  for (size_t i = 0; i < lines_.size(); ++i) {
    EXPECT_EQ(lines.line_at(offsets_[i]), lines_[i]);
    EXPECT_EQ(lines.line_at(offsets_[i], lines_[i].size()), lines_[i]);
  }
  // No whole line there: an unfinished one, or none at all; one of another length.
  EXPECT_FALSE(lines.line_at(19));
  EXPECT_FALSE(lines.line_at(1000));
  EXPECT_FALSE(lines.line_at(6, 5));
  EXPECT_FALSE(lines.line_at(6, 7));
}

TEST_F(AppendedLinesTest, AReplacedOrShrunkFileStartsOver)
{
  write_file(file(), "a\nb\n");
  auto lines = reader();
  read(lines);
  replace("c\n");
  lines.begin_interval();
  EXPECT_EQ(read(lines), Lines{"c"});
  std::ofstream(file(), std::ios::trunc) << "";
  lines.begin_interval();
  read(lines);
  append("d\n");
  EXPECT_EQ(read(lines), Lines{"d"});
}

// A poll of the file held is one fstat: the path is looked up again only when that file lost its
// last link (a rename over it), or once the period has passed. A file still linked elsewhere and
// replaced under the path is read in its place until then.
TEST_F(AppendedLinesTest, ThePathIsLookedUpAgainOnlyWhenTheFileHeldIsUnlinked)
{
  write_file(file(), "a\n");
  auto lines = reader();
  EXPECT_EQ(read(lines), Lines{"a"});
  for (int poll = 0; poll < 50; ++poll) {
    append("x\n");
    read(lines);
  }
  EXPECT_EQ(lines.path_lookups(), 1u);
  EXPECT_EQ(lines_.size(), 51u);

  // Kept under a second name, then replaced under the first: still the file read.
  ASSERT_EQ(::link(file().c_str(), (file() + ".kept").c_str()), 0);
  replace("new\n");
  lines.begin_interval();
  append_to(file() + ".kept", "old\n");
  read(lines);
  EXPECT_EQ(lines_.back(), "old");
  EXPECT_EQ(lines.path_lookups(), 1u);

  // Its last link gone, the next read finds the file at the path.
  std::filesystem::remove(file() + ".kept");
  EXPECT_EQ(read(lines), Lines{"new"});
  EXPECT_EQ(lines.path_lookups(), 2u);
}

// A poller is told at a glance, without a read, that a file read to its end is as it was; never
// while it was not yet found, once it grew, shrank, lost its last link or must be read again.
TEST_F(AppendedLinesTest, AQuietFileIsToldAtAGlance)
{
  write_file(file(), "a\nb");
  auto lines = reader();
  EXPECT_FALSE(lines.quiet_at_a_glance()); // not found yet
  read(lines);
  EXPECT_TRUE(lines.quiet_at_a_glance()); // read to its end, the unfinished line included
  append("\n");
  EXPECT_FALSE(lines.quiet_at_a_glance());
  EXPECT_EQ(read(lines), (Lines{"a", "b"}));
  EXPECT_TRUE(lines.quiet_at_a_glance());
  lines.reread();
  EXPECT_FALSE(lines.quiet_at_a_glance());
  read(lines); // a start over waits for the next interval
  EXPECT_FALSE(lines.quiet_at_a_glance());
  lines.begin_interval();
  read(lines);
  EXPECT_TRUE(lines.quiet_at_a_glance());
  ::truncate(file().c_str(), 1);
  EXPECT_FALSE(lines.quiet_at_a_glance());
  lines.begin_interval();
  read(lines);
  replace("c\n");
  EXPECT_FALSE(lines.quiet_at_a_glance()); // the file held lost its last link
  lines.begin_interval();
  EXPECT_EQ(read(lines), Lines{"c"});
  EXPECT_TRUE(lines.quiet_at_a_glance());
}

// Truncated and written whole again (jcmd Compiler.perfmap), as long as before: only being told
// makes the reader start over.
TEST_F(AppendedLinesTest, ARewriteInPlaceIsReadFromTheStartWhenTold)
{
  write_file(file(), "a\nb\n");
  auto lines = reader();
  read(lines);
  std::ofstream(file(), std::ios::trunc) << "c\nd\ne\n";
  lines.begin_interval();
  EXPECT_EQ(read(lines), (Lines{"a", "b", "e"}));
  lines.reread();
  lines.begin_interval();
  EXPECT_EQ(read(lines), (Lines{"c", "d", "e"}));
  // Asked for twice in an interval: the second waits for the next, and no budget cut.
  std::ofstream(file(), std::ios::trunc) << "f\n";
  lines.reread();
  lines.begin_interval();
  EXPECT_EQ(read(lines), Lines{"f"});
  std::ofstream(file(), std::ios::trunc) << "g\n";
  lines.reread();
  EXPECT_EQ(read(lines), Lines{"f"});
  EXPECT_EQ(lines.intervals_over_budget(), 0u);
  lines.begin_interval();
  EXPECT_EQ(read(lines), Lines{"g"});
}

TEST_F(AppendedLinesTest, AFileReplacedAgainAndAgainIsReadOnceAnInterval)
{
  replace("first\n");
  auto lines = reader();
  read(lines);
  for (int poll = 0; poll < 5; ++poll) {
    replace("replaced" + std::to_string(poll) + "\n");
    EXPECT_EQ(read(lines), Lines{"first"});
  }
  EXPECT_EQ(lines.intervals_over_budget(), 1u);
  lines.begin_interval();
  EXPECT_EQ(read(lines), Lines{"replaced4"});
  // Unasked, truncated twice in an interval: the process's doing, and counted.
  lines.begin_interval();
  std::ofstream(file(), std::ios::trunc) << "x\n";
  EXPECT_EQ(read(lines), Lines{"x"});
  std::ofstream(file(), std::ios::trunc) << "";
  EXPECT_EQ(read(lines), Lines{"x"});
  EXPECT_EQ(lines.intervals_over_budget(), 2u);
}

TEST_F(AppendedLinesTest, TheOpenFileIsReadAfterTheProcessIsGone)
{
  write_file(file(), "a\n");
  auto lines = reader();
  read(lines);
  append("b\n");
  std::filesystem::rename(proc() + "/7", proc() + "/gone");
  EXPECT_EQ(read(lines), (Lines{"a", "b"}));
  EXPECT_TRUE(lines.found());
}

TEST_F(AppendedLinesTest, LongLinesAreSkippedAndCountedAndTheirHolesNeverRead)
{
  write_file(file(), std::string(kBudgets.max_line + 1, 'x') + "\na\n");
  {
    // A terabyte of NULs (one endless line), then a line: reading the hole would take minutes.
    UniqueFd fd(::open(file().c_str(), O_WRONLY));
    ASSERT_TRUE(fd.valid());
    std::string tail = "\nb\n";
    ASSERT_EQ(::pwrite(fd.get(), tail.data(), tail.size(), off_t{1} << 40),
              static_cast<ssize_t>(tail.size()));
  }
  auto lines = reader();
  EXPECT_EQ(read(lines), (Lines{"a", "b"}));
  EXPECT_EQ(lines.overlong_lines(), 2u);
}

TEST_F(AppendedLinesTest, AnIntervalReadsAtMostItsBudgetHoweverOftenItReads)
{
  // 3.4 MiB of lines of 12 bytes; an interval passes on 1 MiB of them (a chunk at most beyond).
  constexpr AppendedLines::Budgets budgets{
      .max_line = 64, .max_read_per_interval = 8 << 20, .max_lines_per_interval = 1 << 20};
  constexpr int kLines = 300000;
  std::string text;
  for (int i = 0; i < kLines; ++i)
    text += "line " + std::to_string(100000 + i) + "\n";
  write_file(file(), text);
  auto lines = reader(budgets);
  for (int poll = 0; poll < 10; ++poll)
    read(lines);
  EXPECT_EQ(lines.intervals_over_budget(), 1u);
  EXPECT_GE(lines_.size(), size_t{1 << 20} / 12);
  EXPECT_LT(lines_.size(), size_t{kLines});
  for (int interval = 0; interval < 3; ++interval) {
    lines.begin_interval();
    read(lines);
  }
  ASSERT_EQ(lines_.size(), size_t{kLines});
  EXPECT_EQ(lines_.back(), "line 399999");
  // Skipping overlong lines draws on the larger budget of bytes read, not on the lines'.
  std::string overlong(1 << 10, 'x');
  std::string skipped;
  for (int i = 0; i < 3000; ++i)
    skipped += overlong + "\n";
  append(skipped + "last\n");
  lines.begin_interval();
  read(lines);
  EXPECT_EQ(lines_.back(), "last");
  EXPECT_EQ(lines.overlong_lines(), 3000u);
}

TEST_F(AppendedLinesTest, LinksAndFifosAreNotFollowed)
{
  std::filesystem::create_directories(proc() + "/7/root/tmp");
  write_file(proc() + "/host-secret", "secret\n");
  // An absolute link resolves inside the process's root, where the target does not exist.
  std::filesystem::create_symlink(proc() + "/host-secret", file());
  auto linked = reader();
  EXPECT_TRUE(read(linked).empty());
  EXPECT_FALSE(linked.found());
  std::filesystem::remove(file());
  ASSERT_EQ(::mkfifo(file().c_str(), 0600), 0);
  auto fifo = reader(); // must not block
  read(fifo);
  EXPECT_FALSE(fifo.found());
}

// A file owned by another user than the process's, whoever runs the test: root gives the file
// away; anyone else says the process runs as someone else.
struct ForeignOwner {
  uint32_t owner = 0;
  uint32_t euid = 0;
};

ForeignOwner give_away(const std::string& proc, const std::string& file)
{
  struct stat status {};
  EXPECT_EQ(::stat(file.c_str(), &status), 0);
  ForeignOwner foreign{status.st_uid, 0};
  if (foreign.owner == 0) {
    foreign.owner = 4242;
    EXPECT_EQ(::chown(file.c_str(), foreign.owner, foreign.owner), 0);
  }
  foreign.euid = foreign.owner + 1;
  write_status(proc, 7, foreign.euid);
  return foreign;
}

TEST_F(AppendedLinesTest, AFileOfAnotherUserIsNotReadAndCountedOnce)
{
  write_file(file(), "planted\n");
  auto foreign = give_away(proc(), file());
  auto lines = reader();
  EXPECT_TRUE(read(lines).empty());
  EXPECT_FALSE(lines.found());
  EXPECT_EQ(lines.refused_owner(), foreign.owner);
  EXPECT_EQ(lines.refused_for_euid(), foreign.euid);
  read(lines);
  lines.begin_interval();
  read(lines);
  EXPECT_EQ(lines.refused_files(), 1u);
}

TEST_F(AppendedLinesTest, WhatWasReadIsDroppedWhenAnotherUsersFileReplacesIt)
{
  write_file(file(), "own\n");
  auto lines = reader();
  EXPECT_EQ(read(lines), Lines{"own"});
  replace("planted\n");
  give_away(proc(), file());
  lines.begin_interval();
  EXPECT_TRUE(read(lines).empty());
  EXPECT_FALSE(lines.found());
  EXPECT_EQ(lines.refused_files(), 1u);
}

TEST_F(AppendedLinesTest, NothingNewIsBelievedOfAProcessWhoseUserIsUnknown)
{
  write_file(file(), "a\n");
  std::filesystem::remove(proc() + "/7/status");
  struct stat status {};
  ASSERT_EQ(::stat(file().c_str(), &status), 0);
  auto lines = reader();
  read(lines);
  // Only root's own files are read without asking.
  EXPECT_EQ(lines.found(), status.st_uid == 0);
}

} // namespace
} // namespace flamebpf
