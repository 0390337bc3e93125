// A record of what a parse read of a file replays on another file that holds the same bytes where
// the parse read, whatever the rest holds, and on no other.
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "common/elf_reader.h"
#include "common/read_record.h"
#include "common/unique_fd.h"
#include "temp_dir.h"
#include "test_support.h"

namespace flamebpf {
namespace {

namespace fs = std::filesystem;

constexpr size_t kFileBytes = 64 << 10;

std::string pattern()
{
  std::string bytes(kFileBytes, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>((i * 131) >> 3);
  return bytes;
}

class ReadRecordTest : public ::testing::Test {
protected:
  // The file name holding bytes, opened.
  UniqueFd file(const std::string& name, const std::string& bytes)
  {
    fs::path path = dir_.path() / name;
    testing::write_file(path, bytes);
    return UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }

  // What a parse of the original reads: two reads that follow one another, then one before them.
  void parse(int fd, ReadRecord& record)
  {
    ElfBytes bytes = ElfBytes::file(fd, kFileBytes, &record);
    ASSERT_TRUE(bytes.read(4096, 2048));
    std::string buffer;
    ASSERT_TRUE(bytes.read(6144, 1024, buffer));
    ASSERT_TRUE(bytes.read(100, 10));
  }

  testing::TempDir dir_;
};

TEST_F(ReadRecordTest, ReplaysOnlyOnFilesWithTheSameBytesWhereTheParseRead)
{
  std::string original = pattern();
  UniqueFd recorded = file("original", original);
  ReadRecord record(kFileBytes);
  parse(recorded.get(), record);
  EXPECT_FALSE(record.replays_on(recorded.get(), kFileBytes)); // not sealed yet
  record.seal();
  EXPECT_EQ(record.bytes_read(), 2048u + 1024 + 10);

  EXPECT_TRUE(record.replays_on(recorded.get(), kFileBytes));
  EXPECT_TRUE(record.replays_on(file("copy", original).get(), kFileBytes));
  std::string elsewhere = original;
  elsewhere[40000] ^= 1; // no read went there
  elsewhere[4095] ^= 1;  // the byte before a read
  EXPECT_TRUE(record.replays_on(file("changed-elsewhere", elsewhere).get(), kFileBytes));
  for (size_t at : {4096u, 6143u, 6144u, 7167u, 109u}) {
    std::string changed = original;
    changed[at] ^= 1;
    EXPECT_FALSE(
        record.replays_on(file("changed-at-" + std::to_string(at), changed).get(), kFileBytes))
        << at;
  }
  // A file of another size, though its bytes agree where the parse read.
  std::string longer = original + "more";
  EXPECT_FALSE(record.replays_on(file("longer", longer).get(), longer.size()));
  // One cut short since it was measured.
  EXPECT_FALSE(record.replays_on(file("cut", original.substr(0, 5000)).get(), kFileBytes));
}

TEST_F(ReadRecordTest, BytesReadAgainAreRecordedOnce)
{
  std::string original = pattern();
  UniqueFd recorded = file("original", original);
  ReadRecord record(kFileBytes);
  ElfBytes bytes = ElfBytes::file(recorded.get(), kFileBytes, &record);
  // Windows that overlap as they move on, as a reader with a window cache reads: one range.
  for (uint64_t at = 0; at + 4096 <= 32768; at += 1024)
    ASSERT_TRUE(bytes.read(at, 4096));
  // Inside what was read, then across both ends of it and of a range apart from it.
  ASSERT_TRUE(bytes.read(40000, 100));
  ASSERT_TRUE(bytes.read(2000, 100));
  ASSERT_TRUE(bytes.read(39990, 200));
  ASSERT_TRUE(bytes.read(32000, 1000));
  record.seal();
  EXPECT_EQ(record.bytes_read(), 32768u + 1000 - 768 + 200);
  EXPECT_TRUE(record.replays_on(file("copy", original).get(), kFileBytes));
  for (size_t at : {0u, 20000u, 32767u, 32999u, 39990u, 40150u, 40189u}) {
    std::string changed = original;
    changed[at] ^= 1;
    EXPECT_FALSE(
        record.replays_on(file("changed-at-" + std::to_string(at), changed).get(), kFileBytes))
        << at;
  }
  std::string elsewhere = original;
  elsewhere[33000] ^= 1;
  elsewhere[40190] ^= 1;
  EXPECT_TRUE(record.replays_on(file("changed-elsewhere", elsewhere).get(), kFileBytes));
}

TEST_F(ReadRecordTest, ADroppedRecordReplaysOnNothingAndRecordsNothingMore)
{
  std::string original = pattern();
  UniqueFd recorded = file("original", original);
  ReadRecord record(kFileBytes);
  parse(recorded.get(), record);
  record.drop();
  ElfBytes bytes = ElfBytes::file(recorded.get(), kFileBytes, &record);
  ASSERT_TRUE(bytes.read(0, 16));
  record.seal();
  EXPECT_FALSE(record.usable());
  EXPECT_FALSE(record.replays_on(recorded.get(), kFileBytes));
}

TEST_F(ReadRecordTest, AParseThatJumpsAboutReplaysOnNothing)
{
  std::string original = pattern();
  UniqueFd recorded = file("original", original);
  ReadRecord record(kFileBytes);
  ElfBytes bytes = ElfBytes::file(recorded.get(), kFileBytes, &record);
  // Reads that follow one another make one range, however many.
  for (uint64_t at = 0; at < 4 * ReadRecord::kMaxRanges; at += 8)
    ASSERT_TRUE(bytes.read(at, 8));
  // Reads apart from one another, one range each.
  for (size_t i = 0; i < ReadRecord::kMaxRanges; ++i)
    ASSERT_TRUE(bytes.read((i % 2 == 0 ? 32768 : 16384) + i, 1));
  record.seal();
  EXPECT_FALSE(record.usable());
  EXPECT_FALSE(record.replays_on(recorded.get(), kFileBytes));
}

} // namespace
} // namespace flamebpf
