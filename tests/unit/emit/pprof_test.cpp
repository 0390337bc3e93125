#include <chrono>
#include <cstdint>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <zlib.h>

#include "common/utf8.h"
#include "emit/pprof.h"
#include "proto/profile.pb.h"

namespace flamebpf::emit {
namespace {

namespace pb = perftools::profiles;
using profile::Frame;
using profile::FrameKind;
using profile::Stack;
using profile::SymbolizedProfile;

constexpr const char* kBurner = "/usr/bin/burner";
constexpr const char* kLibc = "/usr/lib/x86_64-linux-gnu/libc.so.6";

Frame native(const std::string& name, const std::string& module = kBurner)
{
  return {name, module, FrameKind::kNative};
}

Frame kernel(const std::string& name, const std::string& module = "")
{
  return {name, module, FrameKind::kKernel};
}

Frame jit(const std::string& name)
{
  return {name, "", FrameKind::kJit};
}

Frame inlined(const std::string& name)
{
  return {name, "", FrameKind::kInlined};
}

Frame unknown(const std::string& name, const std::string& module = "")
{
  return {name, module, FrameKind::kUnknown};
}

pb::Profile parse(const SymbolizedProfile& input)
{
  auto bytes = pprof_bytes(input);
  EXPECT_TRUE(bytes.has_value()) << bytes.error().message;
  pb::Profile profile;
  if (bytes) {
    EXPECT_TRUE(profile.ParseFromString(*bytes));
  }
  return profile;
}

const std::string& text(const pb::Profile& profile, int64_t index)
{
  return profile.string_table(static_cast<int>(index));
}

const pb::Function& function(const pb::Profile& profile, uint64_t id)
{
  for (const auto& candidate : profile.function())
    if (candidate.id() == id)
      return candidate;
  ADD_FAILURE() << "no function " << id;
  static const pb::Function none;
  return none;
}

const pb::Location& location(const pb::Profile& profile, uint64_t id)
{
  for (const auto& candidate : profile.location())
    if (candidate.id() == id)
      return candidate;
  ADD_FAILURE() << "no location " << id;
  static const pb::Location none;
  return none;
}

const pb::Mapping& mapping_named(const pb::Profile& profile, const std::string& file)
{
  for (const auto& candidate : profile.mapping())
    if (text(profile, candidate.filename()) == file)
      return candidate;
  ADD_FAILURE() << "no mapping " << file;
  static const pb::Mapping none;
  return none;
}

// Function names of one location's lines, innermost first, joined by '+'.
std::string location_names(const pb::Profile& profile, uint64_t id)
{
  std::string names;
  for (const auto& line : location(profile, id).line()) {
    if (!names.empty())
      names += '+';
    names += text(profile, function(profile, line.function_id()).name());
  }
  return names;
}

// A sample's locations, leaf first.
std::vector<std::string> sample_names(const pb::Profile& profile, const pb::Sample& sample)
{
  std::vector<std::string> names;
  for (uint64_t id : sample.location_id())
    names.push_back(location_names(profile, id));
  return names;
}

// The labels of a sample as "key=value" text, numeric ones as "key=num unit".
std::vector<std::string> labels(const pb::Profile& profile, const pb::Sample& sample)
{
  std::vector<std::string> out;
  for (const auto& label : sample.label()) {
    std::string value = label.str() != 0
                            ? text(profile, label.str())
                            : std::to_string(label.num()) + " " + text(profile, label.num_unit());
    out.push_back(text(profile, label.key()) + "=" + value);
  }
  return out;
}

std::string gunzip(const std::string& compressed)
{
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK); // gzip only, no zlib or raw deflate
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[4096];
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    status = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(status, Z_STREAM_END);
  EXPECT_EQ(stream.avail_in, 0u) << "bytes after the gzip trailer";
  inflateEnd(&stream);
  return out;
}

// Two processes, a container, kernel and libc frames, JIT code with inlining, unnamed code.
SymbolizedProfile sample_profile()
{
  SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.start = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  profile.end = profile.start + std::chrono::milliseconds(2500);
  profile.stacks = {
      {100,
       "burner",
       "",
       {native("__libc_start_call_main", kLibc), native("main"), native("run"), native("c")},
       50},
      {100,
       "burner",
       "",
       {native("__libc_start_call_main", kLibc), native("main"), native("run"),
        kernel("entry_SYSCALL_64"), kernel("do_syscall_64")},
       7},
      {101, "burner", "web", {native("__libc_start_call_main", kLibc), native("main")}, 5},
      {200,
       "java",
       "",
       {native("main", "/usr/lib/jvm/bin/java"), unknown("libjvm.so+0x1234", "/usr/lib/libjvm.so"),
        jit("Thread.run"), jit("Burner.loop"), inlined("Burner.a"), inlined("Burner.b")},
       30},
      {200,
       "java",
       "",
       {native("main", "/usr/lib/jvm/bin/java"), unknown("[unknown]"), jit("Burner.loop"),
        kernel("nft_do_chain", "nf_tables")},
       3},
      {0, "swapper/0", "", {}, 11},
  };
  profile.build_ids = {{kBurner, "0123abcd"}, {kLibc, "feedf00d"}};
  return profile;
}

TEST(Pprof, MatchesGoldenTextproto)
{
  SymbolizedProfile input;
  input.frequency_hz = 100;
  input.start = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  input.end = input.start + std::chrono::milliseconds(2500);
  input.stacks = {{42, "burner", "", {native("main"), native("run"), kernel("do_idle")}, 3},
                  {7, "java", "web", {jit("Burner.loop"), inlined("Burner.a")}, 2}};
  input.build_ids = {{kBurner, "abc123"}};
  // Written by hand from the rules in pprof.h.
  const char* golden = R"pb(
    sample_type { type: 1 unit: 2 }
    sample_type { type: 3 unit: 4 }
    sample {
      location_id: [ 4, 3, 2, 1 ]
      value: [ 3, 30000000 ]
      label { key: 12 num: 42 num_unit: 12 }
      label { key: 13 str: 5 }
      label { key: 14 str: 15 }
    }
    sample {
      location_id: [ 6, 5 ]
      value: [ 2, 20000000 ]
      label { key: 12 num: 7 num_unit: 12 }
      label { key: 13 str: 16 }
      label { key: 14 str: 20 }
    }
    mapping { id: 1 filename: 7 build_id: 8 has_functions: true }
    mapping { id: 2 filename: 11 has_functions: true }
    mapping { id: 3 filename: 18 has_functions: true has_inline_frames: true }
    location { id: 1 line { function_id: 1 } }
    location { id: 2 mapping_id: 1 line { function_id: 2 } }
    location { id: 3 mapping_id: 1 line { function_id: 3 } }
    location { id: 4 mapping_id: 2 line { function_id: 4 } }
    location { id: 5 line { function_id: 5 } }
    location { id: 6 mapping_id: 3 line { function_id: 7 } line { function_id: 6 } }
    function { id: 1 name: 5 system_name: 5 }
    function { id: 2 name: 6 system_name: 6 }
    function { id: 3 name: 9 system_name: 9 }
    function { id: 4 name: 10 system_name: 10 }
    function { id: 5 name: 16 system_name: 16 }
    function { id: 6 name: 17 system_name: 17 }
    function { id: 7 name: 19 system_name: 19 }
    string_table: [
      "", "samples", "count", "cpu", "nanoseconds", "burner", "main", "/usr/bin/burner",
      "abc123", "run", "do_idle", "[kernel.kallsyms]", "pid", "comm", "target", "host",
      "java", "Burner.loop", "[jit]", "Burner.a", "web"
    ]
    time_nanos: 1700000000000000000
    duration_nanos: 2500000000
    period_type { type: 3 unit: 4 }
    period: 10000000
    default_sample_type: 3
  )pb";
  pb::Profile expected;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(golden, &expected));
  pb::Profile actual = parse(input);
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(expected, actual)) << differences;
}

TEST(Pprof, StringTableStartsEmptyAndHoldsEachStringOnce)
{
  pb::Profile profile = parse(sample_profile());
  ASSERT_GT(profile.string_table_size(), 0);
  EXPECT_EQ(profile.string_table(0), "");
  std::set<std::string> distinct(profile.string_table().begin(), profile.string_table().end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(profile.string_table_size()));
  for (const char* expected : {"samples", "count", "cpu", "nanoseconds", "burner", "java",
                               "swapper/0", "main", "pid", "comm", "target", "host", "web"})
    EXPECT_TRUE(distinct.contains(expected)) << expected;
}

TEST(Pprof, NamesOfAnyBytesBecomeValidUtf8Strings)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  input.stacks = {{7,
                   "bad\xff\xfe",
                   "web\xc0\x80",
                   {native("utf8 \xff bad", "/lib\xed\xa0\x80.so"), jit("caf\xC3\xA9\x1b[31m")},
                   3},
                  {8, "bad\xfe\xff", "web", {native("utf8 \xfe bad")}, 2}};
  // protobuf's parser refuses a proto3 string that is not UTF-8.
  pb::Profile profile = parse(input);
  std::set<std::string> strings(profile.string_table().begin(), profile.string_table().end());
  for (const auto& text : strings)
    EXPECT_TRUE(utf8::is_valid(text)) << text;
  EXPECT_EQ(strings.size(), static_cast<size_t>(profile.string_table_size())); // still once each
  for (const char* expected : {"utf8 \xEF\xBF\xBD bad", "bad\xEF\xBF\xBD\xEF\xBF\xBD",
                               "web\xEF\xBF\xBD\xEF\xBF\xBD", "caf\xC3\xA9\x1b[31m"})
    EXPECT_TRUE(strings.contains(expected)) << ::testing::PrintToString(strings);
}

TEST(Pprof, FunctionsLocationsAndMappingsAreSharedAcrossStacks)
{
  pb::Profile profile = parse(sample_profile());
  // Functions: 3 processes; libc's, burner's main, run, c; 2 kernel; java's main, libjvm's,
  // [unknown]; 4 Java methods; nft_do_chain. "main" of burner and of java are two functions.
  EXPECT_EQ(profile.function_size(), 3 + 4 + 2 + 3 + 4 + 1);
  // Locations: the same, less two for Burner.a and Burner.b, inlined into Burner.loop's.
  EXPECT_EQ(profile.location_size(), profile.function_size() - 2 + 1);
  std::set<std::string> files;
  for (const auto& mapping : profile.mapping())
    files.insert(text(profile, mapping.filename()));
  EXPECT_EQ(files,
            (std::set<std::string>{kBurner, kLibc, "[kernel.kallsyms]", "/usr/lib/jvm/bin/java",
                                   "/usr/lib/libjvm.so", "[jit]", "[nf_tables]"}));
  EXPECT_EQ(files.size(), static_cast<size_t>(profile.mapping_size()));

  std::set<uint64_t> ids;
  for (const auto& function : profile.function())
    ids.insert(function.id());
  EXPECT_EQ(*ids.begin(), 1u);
  EXPECT_EQ(*ids.rbegin(), static_cast<uint64_t>(profile.function_size()));
  ids.clear();
  for (const auto& location : profile.location()) {
    ids.insert(location.id());
    EXPECT_EQ(location.address(), 0u);
  }
  EXPECT_EQ(*ids.begin(), 1u);
  EXPECT_EQ(*ids.rbegin(), static_cast<uint64_t>(profile.location_size()));

  // burner's two first stacks share the locations of libc's frame, main and run.
  ASSERT_EQ(profile.sample_size(), 6);
  const auto& first = profile.sample(0).location_id();
  const auto& second = profile.sample(1).location_id();
  EXPECT_EQ(std::vector<uint64_t>(first.end() - 4, first.end()),
            std::vector<uint64_t>(second.end() - 4, second.end()));
}

TEST(Pprof, LocationsAreLeafFirstWithTheProcessAtTheRoot)
{
  pb::Profile profile = parse(sample_profile());
  ASSERT_EQ(profile.sample_size(), 6);
  EXPECT_EQ(sample_names(profile, profile.sample(0)),
            (std::vector<std::string>{"c", "run", "main", "__libc_start_call_main", "burner"}));
  EXPECT_EQ(sample_names(profile, profile.sample(1)),
            (std::vector<std::string>{"do_syscall_64", "entry_SYSCALL_64", "run", "main",
                                      "__libc_start_call_main", "burner"}));
  EXPECT_EQ(sample_names(profile, profile.sample(5)), (std::vector<std::string>{"swapper/0"}));
  // The process's location has no mapping.
  EXPECT_EQ(location(profile, profile.sample(0).location_id(4)).mapping_id(), 0u);
}

TEST(Pprof, InlinedJavaMethodsAreLinesOfTheCompiledMethodsLocation)
{
  pb::Profile profile = parse(sample_profile());
  EXPECT_EQ(sample_names(profile, profile.sample(3)),
            (std::vector<std::string>{"Burner.b+Burner.a+Burner.loop", "Thread.run",
                                      "libjvm.so+0x1234", "main", "java"}));
  EXPECT_TRUE(mapping_named(profile, "[jit]").has_inline_frames());
  EXPECT_FALSE(mapping_named(profile, kBurner).has_inline_frames());

  // An inlined frame after no frame it could be inlined into (a folded file's first frame, or
  // after an unnamed one) stands alone.
  SymbolizedProfile odd;
  odd.frequency_hz = 99;
  odd.stacks = {{1, "x", "", {inlined("A.a"), unknown("[unknown]"), inlined("B.b")}, 1}};
  pb::Profile alone = parse(odd);
  EXPECT_EQ(sample_names(alone, alone.sample(0)),
            (std::vector<std::string>{"B.b", "[unknown]", "A.a", "x"}));
}

TEST(Pprof, InterpretedFramesCarryTheirFunctionFileAndLine)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  Frame python_caller{"outer.<locals>.run (/app/jobs (old):v2/split.py:17)", "",
                      FrameKind::kInterpreted};
  Frame python_leaf{"heavy (/app/split.py:9)", "", FrameKind::kInterpreted};
  Frame java{"Burner.loop(long, int[])", "", FrameKind::kInterpreted};
  Frame other_run{"outer.<locals>.run (/app/other.py:3)", "", FrameKind::kInterpreted};
  input.stacks = {{1, "python3", "", {python_caller, python_leaf}, 3},
                  {1, "python3", "", {other_run, java}, 1}};
  pb::Profile profile = parse(input);
  auto text = [&](int64_t index) { return profile.string_table(static_cast<int>(index)); };
  std::map<std::string, const pb::Function*> by_file;
  for (const auto& function : profile.function())
    by_file[text(function.name()) + "@" + text(function.filename())] = &function;
  // The file may hold " (" and colons: the function ends at the first " (", the line is the
  // digits after the last colon.
  const pb::Function* caller = by_file["outer.<locals>.run@/app/jobs (old):v2/split.py"];
  ASSERT_NE(caller, nullptr);
  EXPECT_EQ(caller->start_line(), 17);
  const pb::Function* leaf = by_file["heavy@/app/split.py"];
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(leaf->start_line(), 9);
  // Two functions of one name in two files stay two.
  ASSERT_NE(by_file["outer.<locals>.run@/app/other.py"], nullptr);
  // A Java method's parameter list is part of its name.
  ASSERT_NE(by_file["Burner.loop(long, int[])@"], nullptr);
  // Each location's line says the function's line.
  const pb::Location& leaf_location = location(profile, profile.sample(0).location_id(0));
  ASSERT_EQ(leaf_location.line_size(), 1);
  EXPECT_EQ(leaf_location.line(0).function_id(), leaf->id());
  EXPECT_EQ(leaf_location.line(0).line(), 9);
  EXPECT_EQ(location(profile, profile.sample(1).location_id(0)).line(0).line(), 0);
}

TEST(Pprof, AnInterpretedFrameIsAtTheLineItWasSampledAtInOneFunction)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  auto at_line = [](uint32_t line) {
    Frame frame{"work (/app/split.py:1)", "", FrameKind::kInterpreted};
    frame.line = line;
    return frame;
  };
  Frame caller{"heavy (/app/split.py:8)", "", FrameKind::kInterpreted};
  caller.line = 9;
  input.stacks = {{1, "python3", "", {caller, at_line(3)}, 2},
                  {1, "python3", "", {caller, at_line(4)}, 5},
                  {2, "python3", "", {caller, at_line(4)}, 1},
                  {1, "python3", "", {caller, at_line(0)}, 1}};
  pb::Profile profile = parse(input);
  auto text = [&](int64_t index) { return profile.string_table(static_cast<int>(index)); };
  // One function, which starts at its first line, whatever lines its samples were at.
  std::vector<const pb::Function*> work;
  for (const auto& function : profile.function())
    if (text(function.name()) == "work")
      work.push_back(&function);
  ASSERT_EQ(work.size(), 1u);
  EXPECT_EQ(work[0]->start_line(), 1);
  // A location per line: the samples at one line share it; a line not known is the first line.
  std::vector<int64_t> leaf_lines;
  std::set<uint64_t> leaf_locations;
  for (const auto& sample : profile.sample()) {
    const pb::Location& leaf = location(profile, sample.location_id(0));
    ASSERT_EQ(leaf.line_size(), 1);
    EXPECT_EQ(leaf.line(0).function_id(), work[0]->id());
    leaf_lines.push_back(leaf.line(0).line());
    leaf_locations.insert(leaf.id());
    EXPECT_EQ(location(profile, sample.location_id(1)).line(0).line(), 9);
  }
  EXPECT_EQ(leaf_lines, (std::vector<int64_t>{3, 4, 4, 1}));
  EXPECT_EQ(leaf_locations.size(), 3u);
}

TEST(Pprof, InlinedNativeFunctionsAreLinesOfTheirCallersLocationInItsFile)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  input.stacks = {
      {1,
       "spinner",
       "",
       {native("main"), native("outer_work"), Frame{"middle_step", kBurner, FrameKind::kInlined},
        Frame{"leaf_mix", kBurner, FrameKind::kInlined}},
       5}};
  pb::Profile profile = parse(input);
  ASSERT_EQ(profile.sample_size(), 1);
  EXPECT_EQ(sample_names(profile, profile.sample(0)),
            (std::vector<std::string>{"leaf_mix+middle_step+outer_work", "main", "spinner"}));
  const pb::Mapping& file = mapping_named(profile, kBurner);
  EXPECT_TRUE(file.has_inline_frames());
  size_t three_lines = 0;
  for (const auto& location : profile.location()) {
    if (location.line_size() != 3)
      continue;
    ++three_lines;
    EXPECT_EQ(location.mapping_id(), file.id());
  }
  EXPECT_EQ(three_lines, 1u);
}

TEST(Pprof, ValuesArePeriodsOfCpuTime)
{
  pb::Profile profile = parse(sample_profile());
  ASSERT_EQ(profile.sample_type_size(), 2);
  EXPECT_EQ(text(profile, profile.sample_type(0).type()), "samples");
  EXPECT_EQ(text(profile, profile.sample_type(0).unit()), "count");
  EXPECT_EQ(text(profile, profile.sample_type(1).type()), "cpu");
  EXPECT_EQ(text(profile, profile.sample_type(1).unit()), "nanoseconds");
  EXPECT_EQ(text(profile, profile.period_type().type()), "cpu");
  EXPECT_EQ(text(profile, profile.period_type().unit()), "nanoseconds");
  EXPECT_EQ(text(profile, profile.default_sample_type()), "cpu");
  EXPECT_EQ(profile.period(), 10'101'010); // 1e9 / 99, rounded
  ASSERT_EQ(profile.sample_size(), 6);
  EXPECT_EQ(profile.sample(0).value(0), 50);
  EXPECT_EQ(profile.sample(0).value(1), 50 * 10'101'010);
  EXPECT_EQ(profile.sample(5).value(0), 11);
  EXPECT_EQ(profile.time_nanos(), 1'700'000'000'000'000'000);
  EXPECT_EQ(profile.duration_nanos(), 2'500'000'000);
}

TEST(Pprof, UnknownFrequencyGivesSampleCountsOnly)
{
  SymbolizedProfile input = sample_profile();
  input.frequency_hz = 0;
  pb::Profile profile = parse(input);
  ASSERT_EQ(profile.sample_type_size(), 1);
  EXPECT_EQ(text(profile, profile.sample_type(0).type()), "samples");
  EXPECT_EQ(text(profile, profile.default_sample_type()), "samples");
  EXPECT_EQ(profile.period(), 0);
  EXPECT_FALSE(profile.has_period_type());
  for (const auto& sample : profile.sample())
    EXPECT_EQ(sample.value_size(), 1);
  EXPECT_EQ(profile.sample(0).value(0), 50);
}

TEST(Pprof, SamplesCarryPidCommAndTargetLabels)
{
  pb::Profile profile = parse(sample_profile());
  ASSERT_EQ(profile.sample_size(), 6);
  EXPECT_EQ(labels(profile, profile.sample(0)),
            (std::vector<std::string>{"pid=100 pid", "comm=burner", "target=host"}));
  EXPECT_EQ(labels(profile, profile.sample(2)),
            (std::vector<std::string>{"pid=101 pid", "comm=burner", "target=web"}));
  // pid 0 has a unit, so that pprof keeps it.
  EXPECT_EQ(labels(profile, profile.sample(5)),
            (std::vector<std::string>{"pid=0 pid", "comm=swapper/0", "target=host"}));
}

TEST(Pprof, SamplesOfContainersAndPodsCarryTheirNamesAndTheNode)
{
  SymbolizedProfile input = sample_profile();
  input.node = "node-7";
  input.target_labels["web"] = {"web", std::string(64, 'a'), "", ""};
  for (auto& stack : input.stacks) {
    if (stack.pid == 100)
      stack.target = "prod/shop-7d9f/api";
  }
  input.target_labels["prod/shop-7d9f/api"] = {"api", std::string(64, 'b'), "prod", "shop-7d9f"};
  pb::Profile profile = parse(input);
  ASSERT_EQ(profile.sample_size(), 6);
  EXPECT_EQ(labels(profile, profile.sample(0)),
            (std::vector<std::string>{"pid=100 pid", "comm=burner", "target=prod/shop-7d9f/api",
                                      "container=api", "container_id=" + std::string(64, 'b'),
                                      "namespace=prod", "pod=shop-7d9f", "node=node-7"}));
  EXPECT_EQ(labels(profile, profile.sample(2)),
            (std::vector<std::string>{"pid=101 pid", "comm=burner", "target=web", "container=web",
                                      "container_id=" + std::string(64, 'a'), "node=node-7"}));
  EXPECT_EQ(
      labels(profile, profile.sample(5)),
      (std::vector<std::string>{"pid=0 pid", "comm=swapper/0", "target=host", "node=node-7"}));
}

TEST(Pprof, SamplesOfAPodTargetCarryTheContainerTheyWereTakenIn)
{
  SymbolizedProfile input = sample_profile();
  for (auto& stack : input.stacks) {
    if (stack.pid == 100 || stack.pid == 101) {
      stack.target = "prod/shop-7d9f";
      stack.pod_container_id = std::string(64, stack.pid == 100 ? 'a' : 'b');
    }
  }
  input.target_labels["prod/shop-7d9f"] = {"", "", "prod", "shop-7d9f"};
  input.pod_container_labels[std::string(64, 'a')] = {"web", std::string(64, 'a'), "prod",
                                                      "shop-7d9f"};
  pb::Profile profile = parse(input);
  ASSERT_EQ(profile.sample_size(), 6);
  EXPECT_EQ(labels(profile, profile.sample(0)),
            (std::vector<std::string>{"pid=100 pid", "comm=burner", "target=prod/shop-7d9f",
                                      "container=web", "container_id=" + std::string(64, 'a'),
                                      "namespace=prod", "pod=shop-7d9f"}));
  // A container not (yet) known: the pod's labels only.
  EXPECT_EQ(labels(profile, profile.sample(2)),
            (std::vector<std::string>{"pid=101 pid", "comm=burner", "target=prod/shop-7d9f",
                                      "namespace=prod", "pod=shop-7d9f"}));
}

TEST(Pprof, MappingsCarryBuildIdsAndTheMainBinaryComesFirst)
{
  pb::Profile profile = parse(sample_profile());
  EXPECT_EQ(text(profile, mapping_named(profile, kBurner).build_id()), "0123abcd");
  EXPECT_EQ(text(profile, mapping_named(profile, kLibc).build_id()), "feedf00d");
  EXPECT_EQ(mapping_named(profile, "/usr/lib/libjvm.so").build_id(), 0);
  for (const auto& mapping : profile.mapping()) {
    EXPECT_TRUE(mapping.has_functions()) << text(profile, mapping.filename());
    EXPECT_EQ(mapping.memory_start(), 0u);
  }
  // libc comes first in the stacks, but burner, in more samples than java, is the main binary.
  ASSERT_GT(profile.mapping_size(), 0);
  EXPECT_EQ(text(profile, profile.mapping(0).filename()), kBurner);
  // Kernel frames, a kernel module's, and unnamed code outside any file.
  EXPECT_EQ(location(profile, profile.sample(1).location_id(0)).mapping_id(),
            mapping_named(profile, "[kernel.kallsyms]").id());
  EXPECT_EQ(location(profile, profile.sample(4).location_id(0)).mapping_id(),
            mapping_named(profile, "[nf_tables]").id());
  EXPECT_EQ(sample_names(profile, profile.sample(4))[2], "[unknown]");
  EXPECT_EQ(location(profile, profile.sample(4).location_id(2)).mapping_id(), 0u);
}

// Code of a file flamebpf could not name is a location with its address (the offset in the file)
// and no function, in a mapping with the file's build ID that says its functions are not all
// named: what Pyroscope and Parca name from the build ID. Named code has its function's start.
TEST(Pprof, UnnamedCodeIsAnAddressInItsFilesMappingForReadersToName)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  input.build_ids[kBurner] = "0123abcd";
  Frame main_frame = native("main");
  main_frame.file_offset = 0x1100;
  Frame unnamed = unknown("burner+0x1234", kBurner);
  unnamed.file_offset = 0x1234;
  Frame in_libc = native("write", kLibc);
  in_libc.file_offset = 0x9000;
  input.stacks.push_back({1, "burner", "", {main_frame, unnamed}, 3});
  input.stacks.push_back({1, "burner", "", {main_frame, in_libc}, 2});
  pb::Profile profile = parse(input);

  const pb::Mapping& burner = mapping_named(profile, kBurner);
  EXPECT_EQ(text(profile, burner.build_id()), "0123abcd");
  EXPECT_FALSE(burner.has_functions());
  EXPECT_EQ(burner.memory_start(), 0u);
  EXPECT_EQ(burner.file_offset(), 0u);
  EXPECT_GT(burner.memory_limit(), 0x1234u);
  EXPECT_TRUE(mapping_named(profile, kLibc).has_functions());

  const pb::Location& leaf = location(profile, profile.sample(0).location_id(0));
  EXPECT_EQ(leaf.mapping_id(), burner.id());
  EXPECT_EQ(leaf.address(), 0x1234u);
  EXPECT_EQ(leaf.line_size(), 0);
  const pb::Location& caller = location(profile, profile.sample(0).location_id(1));
  EXPECT_EQ(caller.address(), 0x1100u);
  ASSERT_EQ(caller.line_size(), 1);
  EXPECT_EQ(location(profile, profile.sample(1).location_id(0)).address(), 0x9000u);
  auto bytes = pprof_bytes(input);
  ASSERT_TRUE(bytes.has_value());
  EXPECT_TRUE(check_pprof(*bytes).has_value());
}

TEST(Pprof, EmptyNamesAreUnknownAndEmptyStacksLeftOut)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  input.stacks = {{1, "", "", {native(""), kernel("")}, 2}, {2, "x", "", {native("f")}, 0}};
  pb::Profile profile = parse(input);
  ASSERT_EQ(profile.sample_size(), 1);
  EXPECT_EQ(sample_names(profile, profile.sample(0)),
            (std::vector<std::string>{"[unknown]", "[unknown]", "[unknown]"}));
  EXPECT_EQ(labels(profile, profile.sample(0))[1], "comm=[unknown]");
}

TEST(Pprof, EmptyProfileIsValid)
{
  auto bytes = pprof_bytes(SymbolizedProfile{});
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message;
  EXPECT_TRUE(check_pprof(*bytes).has_value());
}

TEST(Pprof, CountsBeyondInt64AreAnError)
{
  SymbolizedProfile input;
  input.frequency_hz = 99;
  input.stacks = {{7, "x", "", {native("f")}, std::numeric_limits<uint64_t>::max()}};
  auto bytes = pprof_bytes(input);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_NE(bytes.error().message.find("pid 7"), std::string::npos) << bytes.error().message;
  // Fits as a count, not as nanoseconds.
  input.stacks[0].count = std::numeric_limits<int64_t>::max() / 2;
  bytes = pprof_bytes(input);
  ASSERT_FALSE(bytes.has_value());
  EXPECT_NE(bytes.error().message.find("nanoseconds"), std::string::npos) << bytes.error().message;
  input.frequency_hz = 0;
  EXPECT_TRUE(pprof_bytes(input).has_value());
}

// A valid profile broken in one way at a time.
TEST(Pprof, CheckRejectsMalformedProfiles)
{
  auto bytes = pprof_bytes(sample_profile());
  ASSERT_TRUE(bytes.has_value());
  ASSERT_TRUE(check_pprof(*bytes).has_value());
  pb::Profile good;
  ASSERT_TRUE(good.ParseFromString(*bytes));

  auto problem = [](const pb::Profile& profile) {
    auto checked = check_pprof(profile.SerializeAsString());
    return checked ? std::string("(accepted)") : checked.error().message;
  };
  pb::Profile bad = good;
  bad.set_string_table(0, "x");
  EXPECT_EQ(problem(bad), "invalid pprof profile: string_table[0] is not \"\"");
  bad = good;
  bad.mutable_function(0)->set_name(bad.string_table_size());
  EXPECT_EQ(problem(bad), "invalid pprof profile: function 1 names string " +
                              std::to_string(bad.string_table_size()) + " of " +
                              std::to_string(bad.string_table_size()));
  bad = good;
  bad.mutable_sample(0)->mutable_label(1)->set_str(-1);
  EXPECT_NE(problem(bad).find("sample 0's label names string -1"), std::string::npos);
  bad = good;
  bad.mutable_location(0)->mutable_line(0)->set_function_id(999);
  EXPECT_EQ(problem(bad), "invalid pprof profile: location 1 names missing function 999");
  bad = good;
  bad.mutable_location(1)->set_mapping_id(999);
  EXPECT_EQ(problem(bad), "invalid pprof profile: location 2 names missing mapping 999");
  bad = good;
  bad.mutable_sample(2)->add_location_id(999);
  EXPECT_EQ(problem(bad), "invalid pprof profile: sample 2 names missing location 999");
  bad = good;
  bad.mutable_sample(1)->add_value(1);
  EXPECT_EQ(problem(bad), "invalid pprof profile: sample 1 has 3 values for 2 sample types");
  bad = good;
  bad.mutable_mapping(1)->set_id(bad.mapping(0).id());
  EXPECT_NE(problem(bad).find("is zero or not unique"), std::string::npos);
  bad = good;
  bad.mutable_location(2)->set_id(0);
  EXPECT_EQ(problem(bad), "invalid pprof profile: location 0 is zero or not unique");
  bad = good;
  bad.set_default_sample_type(12345);
  EXPECT_NE(problem(bad).find("names string 12345"), std::string::npos);

  auto garbage = check_pprof("\xff\xff\xff");
  ASSERT_FALSE(garbage.has_value());
  EXPECT_NE(garbage.error().message.find("not a serialized"), std::string::npos);
}

TEST(PprofEmitter, WritesGzipOfTheProfileThatParsesBack)
{
  SymbolizedProfile input = sample_profile();
  std::ostringstream out;
  auto written = PprofEmitter().write(input, out);
  ASSERT_TRUE(written.has_value()) << written.error().message;
  std::string file = out.str();
  ASSERT_GT(file.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(file[0]), 0x1f); // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(file[1]), 0x8b);

  pb::Profile read;
  ASSERT_TRUE(read.ParseFromString(gunzip(file)));
  pb::Profile built = parse(input);
  google::protobuf::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  EXPECT_TRUE(differencer.Compare(built, read)) << differences;
  EXPECT_EQ(sample_names(read, read.sample(0)),
            (std::vector<std::string>{"c", "run", "main", "__libc_start_call_main", "burner"}));
}

TEST(PprofEmitter, FailedStreamIsAnError)
{
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  auto written = PprofEmitter().write(sample_profile(), out);
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().message.find("write failed"), std::string::npos);
}

TEST(GzipCompress, RoundTripsEmptyAndLargeData)
{
  auto empty = gzip_compress("");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(gunzip(*empty), "");
  std::string large;
  for (int i = 0; i < 200'000; ++i)
    large += std::to_string(i * 7919 % 100'003) + ';';
  auto compressed = gzip_compress(large);
  ASSERT_TRUE(compressed.has_value());
  EXPECT_LT(compressed->size(), large.size());
  EXPECT_EQ(gunzip(*compressed), large);
}

} // namespace
} // namespace flamebpf::emit
