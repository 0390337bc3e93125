// The inline indexer builds each queued file's index once, off the caller's thread; hurried at a
// recording's end, it builds them again at the caller's priority, and each file's result still
// comes once, from whichever build ended first.
#include <chrono>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <thread>

#include "common/unique_fd.h"
#include "symbolize/dwarf_inlines.h"
#include "symbolize/inline_indexer.h"

namespace flamebpf::symbolize {
namespace {

InlineSource source_of(const std::string& name)
{
  std::string path = std::string(INLINE_SPINNERS_DIR) + "/" + name;
  InlineSource source;
  source.fd = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  source.shown = path;
  return source;
}

// The results taken until none is pending, by key; fails after 30 s.
std::map<uint64_t, size_t> take_all(InlineIndexer& indexer)
{
  std::map<uint64_t, size_t> results;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < give_up) {
    for (const auto& built : indexer.take_built()) {
      EXPECT_TRUE(built.index) << built.shown;
      if (built.index) {
        EXPECT_GT((*built.index)->ranges(), 0u) << built.shown;
      }
      ++results[built.key];
    }
    if (indexer.pending() == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(indexer.pending(), 0u);
  for (const auto& built : indexer.take_built()) // nothing may come after
    ++results[built.key];
  return results;
}

const char* const kFiles[] = {"gcc-dwarf4", "gcc-dwarf5", "clang-dwarf5", "gcc-cpp"};

TEST(InlineIndexer, EachQueuedFileIsBuiltAndGivenOnce)
{
  InlineIndexer indexer;
  for (uint64_t key = 0; key < std::size(kFiles); ++key)
    ASSERT_TRUE(indexer.queue(key + 1, source_of(kFiles[key])));
  auto results = take_all(indexer);
  EXPECT_EQ(results.size(), std::size(kFiles));
  for (const auto& [key, count] : results)
    EXPECT_EQ(count, 1u) << key;
}

TEST(InlineIndexer, HurriedBuildsGiveEachFileOnceWhicheverBuildEndsFirst)
{
  // Hurried at every point of the worker's progress: before it starts, while it builds, after.
  for (int delay_ms : {0, 1, 3, 10, 30}) {
    InlineIndexer indexer;
    for (uint64_t key = 0; key < std::size(kFiles); ++key)
      ASSERT_TRUE(indexer.queue(key + 1, source_of(kFiles[key])));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    indexer.hurry();
    indexer.hurry(); // a second hurry builds nothing again
    auto results = take_all(indexer);
    EXPECT_EQ(results.size(), std::size(kFiles)) << delay_ms;
    for (const auto& [key, count] : results)
      EXPECT_EQ(count, 1u) << "key " << key << ", hurried after " << delay_ms << " ms";
  }
}

} // namespace
} // namespace flamebpf::symbolize
