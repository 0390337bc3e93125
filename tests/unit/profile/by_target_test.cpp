#include <cctype>
#include <gtest/gtest.h>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "profile/by_target.h"

namespace flamebpf::profile {
namespace {

TEST(SplitByTarget, EachTargetGetsOnlyItsStacks)
{
  SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.counters.counts[FB_COUNTER_SAMPLES] = 12;
  profile.stacks = {{1, "a", "web", {}, 3}, {2, "b", "db", {}, 4}, {3, "c", "web", {}, 5}};
  auto parts = split_by_target(profile);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts.at("web").total_samples(), 8u);
  EXPECT_EQ(parts.at("web").stacks.size(), 2u);
  EXPECT_EQ(parts.at("db").total_samples(), 4u);
  EXPECT_EQ(parts.at("db").frequency_hz, 99u);
  EXPECT_EQ(parts.at("db").counters[FB_COUNTER_SAMPLES], 12u);
  EXPECT_TRUE(split_by_target(SymbolizedProfile{}).empty());
}

TEST(SplitByTarget, EachTargetKeepsItsOwnLabelsAndTheNode)
{
  SymbolizedProfile profile;
  profile.node = "node-7";
  profile.stacks = {{1, "a", "prod/shop/web", {}, 3}, {2, "b", "", {}, 4}};
  profile.target_labels["prod/shop/web"] = {"web", std::string(64, 'a'), "prod", "shop"};
  profile.target_labels["gone"] = {"gone", std::string(64, 'b'), "", ""};
  auto parts = split_by_target(profile);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts.at("prod/shop/web").target_labels,
            (std::map<std::string, TargetLabels>{
                {"prod/shop/web", {"web", std::string(64, 'a'), "prod", "shop"}}}));
  EXPECT_TRUE(parts.at("").target_labels.empty());
  EXPECT_EQ(parts.at("").node, "node-7");
}

TEST(SplitByTarget, EachPartCarriesTheBuildIdsOfItsOwnFilesOnly)
{
  SymbolizedProfile profile;
  profile.stacks = {{1, "a", "web", {{"f", "/usr/bin/web", FrameKind::kNative}}, 3},
                    {2, "b", "db", {{"g", "/usr/bin/db", FrameKind::kNative}}, 4},
                    {3, "c", "db", {{"h", "/lib/libc.so.6", FrameKind::kNative}}, 1}};
  profile.build_ids = {
      {"/usr/bin/web", "aa"}, {"/usr/bin/db", "bb"}, {"/lib/libc.so.6", "cc"}, {"/gone", "dd"}};
  auto parts = split_by_target(profile);
  EXPECT_EQ(parts.at("web").build_ids,
            (std::map<std::string, std::string>{{"/usr/bin/web", "aa"}}));
  EXPECT_EQ(parts.at("db").build_ids,
            (std::map<std::string, std::string>{{"/usr/bin/db", "bb"}, {"/lib/libc.so.6", "cc"}}));
}

TEST(StacksByTarget, IndexesInTheProfilesOrderAndAPartIsTheSplitsPart)
{
  SymbolizedProfile profile;
  profile.frequency_hz = 19;
  profile.stacks = {{1, "a", "web", {}, 3}, {2, "b", "db", {}, 4}, {3, "c", "web", {}, 5}};
  auto indexes = stacks_by_target(profile);
  EXPECT_EQ(indexes, (std::map<std::string, std::vector<size_t>>{{"db", {1}}, {"web", {0, 2}}}));
  SymbolizedProfile web = target_part(profile, "web", indexes.at("web"));
  ASSERT_EQ(web.stacks.size(), 2u);
  EXPECT_EQ(web.stacks[0].pid, 1u);
  EXPECT_EQ(web.stacks[1].pid, 3u);
  EXPECT_EQ(web.frequency_hz, 19u);
  EXPECT_EQ(web.total_samples(), split_by_target(profile).at("web").total_samples());
}

bool portable(const std::string& name)
{
  return !name.empty() && name.front() != '.' &&
         name.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
             std::string::npos;
}

TEST(TargetFileName, PortableNamesAreKept)
{
  EXPECT_EQ(target_file_name("web"), "web");
  EXPECT_EQ(target_file_name("payments-db.v2_blue"), "payments-db.v2_blue");
  EXPECT_EQ(target_file_name("pod-1a2b3c4d"), "pod-1a2b3c4d");
  EXPECT_EQ(target_file_name("web-0123456789ab"), "web-0123456789ab");
}

TEST(TargetFileName, OtherNamesAreSpelledPortablyAndMarked)
{
  // The mark is the same in every run and build: dumps of earlier runs stay in the same directory.
  EXPECT_EQ(target_file_name("system.slice/nginx.service"), "system.slice_nginx.service_47bf0e46");
  for (const std::string& target :
       std::vector<std::string>{"..", ".", "", ".hidden", "../../etc/passwd", "a\nb;c", "\xff\xfe",
                                "flamebpf-stats.jsonl", std::string(300, 'x')}) {
    std::string name = target_file_name(target);
    EXPECT_TRUE(portable(name)) << "'" << target << "' -> '" << name << "'";
    EXPECT_NE(name, target);
    EXPECT_LE(name.size(), kMaxTargetFileName + 10);
    // The same every time.
    EXPECT_EQ(target_file_name(target), name);
  }
}

// Names a case-insensitive file system would fold together, or Windows would refuse, are marked:
// the dumps must survive a copy to any laptop.
TEST(TargetFileName, NamesSomeFileSystemFoldsOrRefusesAreMarked)
{
  std::set<std::string> names{target_file_name("web")};
  for (std::string target : {"Web", "WEB", "web.", "con", "nul.folded", "com1", "lpt9", "aux"}) {
    std::string name = target_file_name(target);
    EXPECT_NE(name, target);
    EXPECT_TRUE(std::regex_match(name, std::regex("[A-Za-z.]+[0-9]?(\\.folded)?_[0-9a-f]{8}")))
        << name;
    std::string folded = name;
    for (char& c : folded)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(names.insert(folded).second) << target << " meets another name as " << folded;
  }
  for (std::string target : {"console", "com", "com10", "nulls", "web.1"})
    EXPECT_EQ(target_file_name(target), target);
}

TEST(TargetFileName, NamesThatMeetOnlyAfterReplacingStayApart)
{
  // "a/b" would become "a_b", the name of the target "a_b".
  std::set<std::string> names;
  for (const char* target : {"a_b", "a/b", "a b", "a;b", "a\nb", "a_b_00000000"})
    names.insert(target_file_name(target));
  EXPECT_EQ(names.size(), 6u) << ::testing::PrintToString(names);
  EXPECT_EQ(target_file_name("a_b"), "a_b");
  // A name that looks marked is marked again, so it cannot take a marked name.
  std::string marked = target_file_name("a/b");
  EXPECT_NE(target_file_name(marked), marked);
  EXPECT_TRUE(target_file_name(marked).starts_with(marked + "_"));
}

TEST(TargetFileNames, UniqueWithinTheSetWhateverCollides)
{
  std::set<std::string> targets{"a_b", "a/b", "a b", "web"};
  auto names = target_file_names(targets);
  ASSERT_EQ(names.size(), 4u);
  std::set<std::string> distinct;
  for (const auto& [target, name] : names) {
    EXPECT_EQ(name, target_file_name(target)); // no collision here: each keeps its own name
    distinct.insert(name);
  }
  EXPECT_EQ(distinct.size(), 4u);
  // Long names cut to the same prefix still differ by their mark.
  std::string base(kMaxTargetFileName + 5, 'x');
  auto long_names = target_file_names({base + "1", base + "2"});
  EXPECT_NE(long_names.at(base + "1"), long_names.at(base + "2"));
}

} // namespace
} // namespace flamebpf::profile
