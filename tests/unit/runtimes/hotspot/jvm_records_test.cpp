#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

#include "runtimes/hotspot/jvm_records.h"
#include "temp_dir.h"

namespace flamebpf::hotspot {
namespace {

using flamebpf::testing::TempDir;

TEST(JvmRecordLine, ParsesEachKind)
{
  auto code = parse_jvm_record_line("code 7f0000001000 100 6 40 push 20 24");
  ASSERT_TRUE(code);
  EXPECT_EQ(code->kind, JvmRecord::Kind::kCode);
  EXPECT_EQ(code->code.start, 0x7f0000001000u);
  EXPECT_EQ(code->code.size, 0x100u);
  EXPECT_EQ(code->code.frame_words, 6u);
  EXPECT_EQ(code->code.frame_complete, 40);
  EXPECT_EQ(code->code.prologue, PrologueForm::kPush);
  EXPECT_EQ(code->code.first_end, 0x20u);
  EXPECT_EQ(code->code.second_end, 0x24u);

  auto unknown = parse_jvm_record_line("code 1000 10 0 -1 none 0 0");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->code.prologue, PrologueForm::kUnknown);
  EXPECT_EQ(unknown->code.frame_complete, -1);

  auto interpreter = parse_jvm_record_line("interpreter 7f0000000000 800");
  ASSERT_TRUE(interpreter);
  EXPECT_EQ(interpreter->kind, JvmRecord::Kind::kInterpreter);

  auto method = parse_jvm_record_line("method 7f3b0b400338 org.example.Foo.bar(long, int[])");
  ASSERT_TRUE(method);
  EXPECT_EQ(method->method, 0x7f3b0b400338u);
  EXPECT_EQ(method->name, "org.example.Foo.bar(long, int[])");

  EXPECT_TRUE(parse_jvm_record_line("flamebpf-unwind 1"));
  EXPECT_TRUE(parse_jvm_record_line("unload 1000"));
}

TEST(JvmRecordLine, RefusesMalformedLines)
{
  for (const char* line :
       {"", "flamebpf-unwind 2", "code", "code 1000 0 6 0 none 0 0", // empty
        "code ffffffffffffff00 200 6 0 none 0 0",                    // wraps
        "code 1000 100 6 300 none 0 0", // complete past the end (decimal)
        "code 1000 100 6 -2 none 0 0", "code 1000 100 6 10 push 0 4", // push ending at 0
        "code 1000 100 6 10 push 8 4",                                // ends out of order
        "code 1000 100 6 10 push 8 104",                              // past the code
        "code 1000 100 6 10 jump 8 10", "code 1000 100 x 10 none 0 0",
        "code 1000 100 6 10 none 0 0 extra", "code -1000 100 6 10 none 0 0", "interpreter 1000",
        "unload", "method 0 Foo.bar()", "method 1000", "stub 1000 10"}) {
    EXPECT_FALSE(parse_jvm_record_line(line)) << line;
  }
}

JvmRecord code_at(uint64_t start, uint64_t size)
{
  JvmRecord record;
  record.kind = JvmRecord::Kind::kCode;
  record.code.start = start;
  record.code.size = size;
  record.code.frame_words = 4;
  return record;
}

TEST(JvmRecords, NewCodeReplacesWhatItOverlapsAndUnloadRemoves)
{
  JvmRecords records;
  records.apply(code_at(0x1000, 0x100));
  records.apply(code_at(0x1100, 0x100));
  uint64_t generation = records.generation();
  records.apply(code_at(0x10f0, 0x20)); // over the end of one and the start of the next
  EXPECT_GT(records.generation(), generation);
  EXPECT_EQ(records.overlaps(), 2u);
  ASSERT_EQ(records.code().size(), 1u);
  EXPECT_EQ(records.code().begin()->first, 0x10f0u);
  JvmRecord unload;
  unload.kind = JvmRecord::Kind::kUnload;
  unload.code.start = 0x10f0;
  records.apply(unload);
  EXPECT_TRUE(records.code().empty());
}

TEST(JvmRecords, TheFirstInterpreterRangeHolds)
{
  JvmRecords records;
  EXPECT_TRUE(records.apply(*parse_jvm_record_line("interpreter 1000 800")));
  EXPECT_TRUE(records.apply(*parse_jvm_record_line("interpreter 1000 800"))); // replayed
  EXPECT_FALSE(records.apply(*parse_jvm_record_line("interpreter 0 ffffffffffff")));
  EXPECT_EQ(records.interpreter(), (std::pair<uint64_t, uint64_t>{0x1000, 0x1800}));
}

// A method's line is kept by where it is; its name once read again, cut to its budget, and
// forgotten when a later line of the method is applied.
TEST(JvmRecords, KeepWhereEachMethodIsAndTheNamesReadOfIt)
{
  JvmRecords records;
  auto at = [](std::string_view line, uint64_t offset) {
    auto record = parse_jvm_record_line(line);
    EXPECT_TRUE(record);
    record->line_offset = offset;
    return *record;
  };
  EXPECT_TRUE(records.apply(at("method 30 org.example.Foo.baz()", 100)));
  EXPECT_TRUE(records.apply(at("method 10 org.example.Foo.bar()", 200)));
  EXPECT_EQ(records.method_line(0x10), 200u);
  EXPECT_EQ(records.method_line(0x30), 100u);
  EXPECT_FALSE(records.method_line(0x20));
  EXPECT_FALSE(records.method_name_read(0x10));
  EXPECT_TRUE(records.keep_method_name(0x10, "org.example.Foo.bar()"));
  EXPECT_EQ(records.method_name(0x10), "org.example.Foo.bar()");
  // Applied again (lines appended after the lookups above), the last line of a method holds.
  EXPECT_TRUE(records.apply(at("method 20 org.example.Foo.qux()", 300)));
  EXPECT_TRUE(records.apply(at("method 10 org.example.Foo.bar(int)", 400)));
  EXPECT_EQ(records.method_line(0x10), 400u);
  EXPECT_EQ(records.method_line(0x20), 300u);
  EXPECT_FALSE(records.method_name_read(0x10));
  EXPECT_FALSE(records.method_name(0x10));
  EXPECT_TRUE(records.keep_method_name(0x20, std::string(JvmRecords::kMaxMethodName * 2, 'a')));
  EXPECT_EQ(records.method_name(0x20)->size(), JvmRecords::kMaxMethodName);
  // A line read again that named nothing is read: no second try, and no name.
  EXPECT_TRUE(records.keep_method_name(0x30, ""));
  EXPECT_TRUE(records.method_name_read(0x30));
  EXPECT_FALSE(records.method_name(0x30));
}

// A JVM names some ten thousand methods, their Method*s in a few 4 GiB spans of metadata: settled,
// each costs 8 bytes, the last line of a method holds, and a line far into its file is not kept.
TEST(JvmRecords, ManyMethodsAcrossSpansSettleAtEightBytesEach)
{
  auto account = MemoryAccount::create(64 << 20);
  auto share = account->share("jvm");
  JvmRecords records;
  records.charge_to(share);
  auto method_at = [](uint64_t method, uint64_t offset) {
    JvmRecord record;
    record.kind = JvmRecord::Kind::kMethod;
    record.method = method;
    record.line_offset = offset;
    return record;
  };
  constexpr uint64_t kSpans[] = {0x7f2e00000000, 0x7f2f00000000, 0x800000000};
  constexpr size_t kPerSpan = 10000;
  uint64_t offset = 0;
  // Out of order, as class loading writes them; every tenth method named twice, later again.
  for (size_t i = 0; i < kPerSpan; ++i) {
    for (uint64_t span : kSpans) {
      uint64_t method = span + (kPerSpan - i) * 0x58;
      ASSERT_TRUE(records.apply(method_at(method, offset += 100)));
      if (i % 10 == 0) {
        ASSERT_TRUE(records.apply(method_at(method + 0x8, offset += 100)));
      }
    }
  }
  uint64_t last_of_first = 0;
  for (uint64_t span : kSpans) {
    for (size_t i = 0; i < kPerSpan; i += 10) {
      ASSERT_TRUE(records.apply(method_at(span + (kPerSpan - i) * 0x58 + 0x8, offset += 100)));
      if (span == kSpans[2] && i == 0)
        last_of_first = offset;
    }
  }
  EXPECT_EQ(records.method_line(kSpans[0] + kPerSpan * 0x58), 100u);
  EXPECT_EQ(records.method_line(kSpans[2] + kPerSpan * 0x58 + 0x8), last_of_first);
  EXPECT_FALSE(records.method_line(kSpans[1] + 0x8));
  EXPECT_FALSE(records.method_line(0x7f3000000000 + kPerSpan * 0x58));
  size_t methods = 3 * (kPerSpan + kPerSpan / 10);
  for (uint64_t span : kSpans) {
    for (size_t i = 0; i < kPerSpan; ++i)
      ASSERT_TRUE(records.method_line(span + (kPerSpan - i) * 0x58))
          << std::hex << span << " " << i;
  }
  EXPECT_EQ(share->held(), methods * JvmRecords::kSettledMethodBytes);
  // 4 GiB into the file and beyond, a line is not kept.
  EXPECT_FALSE(records.apply(method_at(0x10, JvmRecords::kMaxMethodLineOffset + 1)));
  EXPECT_FALSE(records.method_line(0x10));
  records.clear();
  EXPECT_EQ(share->held(), 0u);
}

TEST(JvmRecords, HoldWhatTheirShareAllowsAndGiveItBack)
{
  // An account of 16 MiB has a sixteenth for its floor; alone, the share may hold it all.
  auto account = MemoryAccount::create(16 << 20);
  auto share = account->share("jvm");
  JvmRecords records;
  records.charge_to(share);
  size_t kept = 0;
  for (uint64_t i = 0; i < 300000; ++i)
    kept += records.apply(code_at(0x100000 + i * 0x100, 0x80));
  // 16 MiB of 96-byte records: refused once the share is full, and said by the share.
  EXPECT_EQ(kept, (16u << 20) / JvmRecords::kCodeBytes);
  EXPECT_GT(share->refusals(), 0u);
  // What the code left takes a few method lines, then no more.
  size_t methods = 0;
  while (methods < 10 && records.apply(*parse_jvm_record_line("method 10 org.example.Foo.bar()")))
    ++methods;
  EXPECT_EQ(methods, ((16u << 20) % JvmRecords::kCodeBytes) / JvmRecords::kMethodBytes);
  // Unloaded code makes room; clearing gives everything back.
  JvmRecord unload;
  unload.kind = JvmRecord::Kind::kUnload;
  unload.code.start = 0x100000;
  records.apply(unload);
  EXPECT_TRUE(records.apply(code_at(0x100000, 0x80)));
  records.clear();
  EXPECT_EQ(share->held(), 0u);
  EXPECT_TRUE(records.apply(*parse_jvm_record_line("method 10 org.example.Foo.bar()")));
  EXPECT_EQ(share->held(), JvmRecords::kMethodBytes);
  EXPECT_TRUE(records.keep_method_name(0x10, "org.example.Foo.bar()"));
  uint64_t held = JvmRecords::kMethodBytes + JvmRecords::kNameBytes + 21;
  EXPECT_EQ(share->held(), held);
  EXPECT_EQ(account->breakdown().of(MemoryKind::kJvmRecords), held);
}

// Process 42's root and status as /proc shows them below proc, for our own user; returns where
// the records of its pid 7 (in its namespace) are.
std::string records_of_process_42(const std::string& proc)
{
  std::string root = proc + "/42/root";
  std::filesystem::create_directories(root + "/tmp");
  std::string uid = std::to_string(::geteuid());
  std::ofstream(proc + "/42/status")
      << "Uid:\t" << uid << "\t" << uid << "\t" << uid << "\t" << uid << "\n";
  return root + "/tmp/flamebpf-7.unwind";
}

TEST(JvmRecordsReader, ReadsAppendedLinesAndCountsGarbage)
{
  TempDir dir;
  std::string proc = dir.path().string() + "/proc";
  std::string file = records_of_process_42(proc);
  std::ofstream(file) << "flamebpf-unwind 1\ncode 1000 100 6 10 push 8 c\ngarbage\ncode 2000";
  JvmRecordsReader reader(42, 7, proc);
  reader.refresh();
  ASSERT_TRUE(reader.file().found());
  EXPECT_EQ(reader.records().code().size(), 1u);
  EXPECT_EQ(reader.bad_lines(), 1u);
  // The unfinished line waits for its end.
  std::ofstream(file, std::ios::app) << " 80 0 -1 none 0 0\n";
  reader.refresh();
  EXPECT_EQ(reader.records().code().size(), 2u);
  EXPECT_EQ(reader.bad_lines(), 1u);
  // A line over the budget is skipped whole.
  std::ofstream(file, std::ios::app)
      << "method 10 " << std::string(JvmRecordsReader::kMaxLine, 'x') << "\nmethod 20 Foo.bar()\n";
  reader.refresh();
  EXPECT_EQ(reader.bad_lines(), 2u);
  // Names are read again from their lines when a frame needs them.
  EXPECT_FALSE(reader.records().method_name(0x20));
  reader.read_method_name(0x10);
  reader.read_method_name(0x20);
  EXPECT_FALSE(reader.records().method_name(0x10));
  EXPECT_EQ(reader.records().method_name(0x20), "Foo.bar()");
}

// The file is the target's: a method's line overwritten in place after it was read (same size,
// so the reader sees nothing new) names nothing, and another method's line there names nothing
// for this one.
TEST(JvmRecordsReader, ALineChangedSinceItWasReadNamesNothing)
{
  TempDir dir;
  std::string proc = dir.path().string() + "/proc";
  std::string file = records_of_process_42(proc);
  std::ofstream(file) << "flamebpf-unwind 1\nmethod 10 Foo.one()\nmethod 20 Foo.two()\n";
  JvmRecordsReader reader(42, 7, proc);
  reader.refresh();
  {
    std::fstream rewrite(file, std::ios::in | std::ios::out);
    rewrite.seekp(static_cast<std::streamoff>(std::string("flamebpf-unwind 1\n").size()));
    rewrite << "method 20 Foo.own()\nmethod 10 Foo.two()\n";
  }
  reader.read_method_name(0x10);
  reader.read_method_name(0x20);
  EXPECT_FALSE(reader.records().method_name(0x10));
  EXPECT_FALSE(reader.records().method_name(0x20));
  EXPECT_TRUE(reader.records().method_name_read(0x10));
}

} // namespace
} // namespace flamebpf::hotspot
