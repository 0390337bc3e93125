#include <gtest/gtest.h>
#include <random>

#include "emit/flame_tree.h"

namespace flamebpf::emit {
namespace {

using profile::FrameKind;

// "all;java;a;b" paths of the tree with their samples, for comparing trees.
std::map<std::string, std::pair<uint64_t, uint64_t>> paths_of(const FlameTree& tree)
{
  std::map<std::string, std::pair<uint64_t, uint64_t>> paths;
  const auto& nodes = tree.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string path;
    for (uint32_t at = static_cast<uint32_t>(i);; at = nodes[at].parent) {
      std::string frame(nodes[at].name);
      frame += nodes[at].kind == FrameKind::kKernel ? "_[k]"
               : nodes[at].kind == FrameKind::kJit  ? "_[j]"
                                                    : "";
      path = path.empty() ? frame : frame + ";" + path;
      if (at == 0)
        break;
    }
    paths[path] = {nodes[i].samples[kAfter], nodes[i].samples[kBefore]};
  }
  return paths;
}

TEST(FlameTree, MergesStacksAndCountsEveryAncestor)
{
  FlameTree tree;
  tree.add_folded(FileContent("java;main;run_[j];work_[j] 5\n"
                              "java;main;run_[j] 2\n"
                              "java;main;gc 3\n"
                              "bash;main 1\n"
                              "java;main;run_[j];work_[j] 4\n"));
  auto paths = paths_of(tree);
  EXPECT_EQ(tree.total(), 15u);
  EXPECT_EQ(paths.at("all;java").first, 14u);
  EXPECT_EQ(paths.at("all;java;main;run_[j]").first, 11u);
  EXPECT_EQ(paths.at("all;java;main;run_[j];work_[j]").first, 9u);
  EXPECT_EQ(paths.at("all;java;main;gc").first, 3u);
  EXPECT_EQ(paths.at("all;bash;main").first, 1u);
  EXPECT_EQ(paths.size(), 8u);
}

TEST(FlameTree, KindsKeepSameNamesApart)
{
  FlameTree tree;
  tree.add_folded(FileContent("p;read_[k] 1\np;read 2\n"));
  auto paths = paths_of(tree);
  EXPECT_EQ(paths.at("all;p;read_[k]").first, 1u);
  EXPECT_EQ(paths.at("all;p;read").first, 2u);
}

TEST(FlameTree, MalformedLinesAreCountedAndSkipped)
{
  FlameTree tree;
  uint64_t bad =
      tree.add_folded(FileContent("no count\n; 1\na;b x\n 3\na;b 2\n\na;b 1.5\na;b -1\na;b 4\r\n"));
  // Bad: no count, "x", no stack, "1.5", "-1". An empty frame name is a name.
  EXPECT_EQ(bad, 5u);
  EXPECT_EQ(tree.total(), 7u);
}

// Names of folded text stay in the text the tree keeps; names added later are copied, on every
// path through add_folded (an empty tree, empty text, a tree with stacks already).
TEST(FlameTree, AddAfterFoldedTextCopiesNames)
{
  const std::vector<std::vector<std::string>> inputs = {{""}, {"p;a 1\n"}, {"p;a 1\n", "p;b 2\n"}};
  for (const auto& texts : inputs) {
    FlameTree tree;
    for (const auto& text : texts)
      tree.add_folded(FileContent(text));
    std::string name = "a name longer than a short string holds";
    tree.add({{"p", FrameKind::kNative}, {name, FrameKind::kNative}}, 3);
    name.assign(name.size(), 'x'); // the caller's text changes, or goes
    auto paths = paths_of(tree);
    ASSERT_TRUE(paths.contains("all;p;a name longer than a short string holds")) << texts[0];
    EXPECT_EQ(paths.at("all;p;a name longer than a short string holds").first, 3u) << texts[0];
  }
}

TEST(FlameTree, FoldedTextAndProfilesGiveTheSameTree)
{
  profile::SymbolizedProfile profile;
  profile.stacks = {
      {1, "java", "", {{"main", "", FrameKind::kNative}, {"run", "", FrameKind::kJit}}, 4},
      {2, "java", "", {{"main", "", FrameKind::kNative}}, 1},
      {3, "sh", "", {{"read", "", FrameKind::kKernel}}, 2}};
  FlameTree from_profile;
  from_profile.add_profile(profile);
  FlameTree from_text;
  from_text.add_folded(FileContent("java;main;run_[j] 4\njava;main 1\nsh;read_[k] 2\n"));
  EXPECT_EQ(paths_of(from_profile), paths_of(from_text));
}

// Random stacks, sorted or not, several inputs: the tree is the same as one built stack by stack.
TEST(FlameTree, SortedFastPathAgreesWithLookups)
{
  std::mt19937 random(7);
  std::string text;
  FlameTree reference;
  std::vector<PathFrame> path;
  std::vector<std::string> names;
  for (int line = 0; line < 3000; ++line) {
    names.clear();
    size_t depth = 1 + random() % 12;
    for (size_t d = 0; d < depth; ++d)
      names.push_back("f" + std::to_string(random() % (2 + d)) + (random() % 5 == 0 ? "_[k]" : ""));
    uint64_t count = 1 + random() % 9;
    std::string stack;
    for (const auto& name : names)
      stack += (stack.empty() ? "" : ";") + name;
    text += stack + " " + std::to_string(count) + "\n";
    path.clear();
    for (size_t d = 0; d < names.size(); ++d) {
      bool kernel = d > 0 && names[d].ends_with("_[k]");
      path.push_back({kernel ? std::string_view(names[d]).substr(0, names[d].size() - 4)
                             : std::string_view(names[d]),
                      kernel ? FrameKind::kKernel : FrameKind::kNative});
    }
    reference.add(path, count);
  }
  FlameTree fast;
  fast.add_folded(FileContent(text));
  EXPECT_EQ(paths_of(fast), paths_of(reference));
}

TEST(FlameTree, PruningKeepsTotalsExact)
{
  std::string text;
  for (int i = 0; i < 1000; ++i)
    text += "p;hot;leaf" + std::to_string(i) + " 1\n";
  text += "p;hot 1000\np;cold 5\n";
  FlameTree full;
  full.add_folded(FileContent(text));
  FlameTree pruned;
  // Frames under 1% of 2005 samples (20) are left out as they complete.
  pruned.add_folded(FileContent(text), kAfter, 0.01);
  auto all = paths_of(full);
  auto kept = paths_of(pruned);
  EXPECT_EQ(pruned.total(), 2005u);
  EXPECT_EQ(kept.at("all;p").first, 2005u);
  EXPECT_EQ(kept.at("all;p;hot").first, 2000u); // its 1000 one-sample leaves still count in it
  EXPECT_FALSE(kept.contains("all;p;cold"));
  EXPECT_FALSE(kept.contains("all;p;hot;leaf7"));
  EXPECT_EQ(kept.size(), 3u);
  EXPECT_EQ(all.size(), 1004u);
  for (const auto& [path, samples] : kept)
    EXPECT_EQ(all.at(path), samples) << path;
}

TEST(FlameTree, TwoSidesAndNormalization)
{
  FlameTree tree;
  tree.add_folded(FileContent("p;a 10\np;b 30\n"), kBefore);
  tree.add_folded(FileContent("p;a 40\np;c 40\n"), kAfter);
  auto paths = paths_of(tree);
  EXPECT_EQ(paths.at("all;p;a"), (std::pair<uint64_t, uint64_t>{40, 10}));
  EXPECT_EQ(paths.at("all;p;b"), (std::pair<uint64_t, uint64_t>{0, 30}));
  EXPECT_EQ(paths.at("all;p;c"), (std::pair<uint64_t, uint64_t>{40, 0}));
  tree.scale_before(80.0 / 40.0);
  paths = paths_of(tree);
  EXPECT_EQ(tree.total(kBefore), 80u);
  EXPECT_EQ(paths.at("all;p;a").second, 20u);
  EXPECT_EQ(paths.at("all;p;b").second, 60u);
}

TEST(SamplesForShare, AtLeastOne)
{
  EXPECT_EQ(samples_for_share(0, 0.01), 1u);
  EXPECT_EQ(samples_for_share(1000, 0.0), 1u);
  EXPECT_EQ(samples_for_share(1000, 0.01), 10u);
  EXPECT_EQ(samples_for_share(1001, 0.01), 11u);
}

} // namespace
} // namespace flamebpf::emit
