// An interpreted frame's name holds its function, file and line, and gives them back whole; any
// other name gives none.
#include <gtest/gtest.h>

#include "profile/source_name.h"

namespace flamebpf::profile {
namespace {

TEST(SourceName, GivesBackWhatItWasMadeOf)
{
  for (const auto& [function, file, line] :
       {std::tuple<std::string, std::string, uint32_t>{"heavy", "/app/split.py", 8},
        {"outer.<locals>.run", "/app/jobs (old):v2/split.py", 17},
        {"<module>", "<string>", 1},
        {"f", "", 0},
        {"f", "x.py", 4294967295u}}) {
    std::string name = source_name(function, file, line);
    auto place = source_place(name);
    ASSERT_TRUE(place) << name;
    EXPECT_EQ(place->function, function);
    EXPECT_EQ(place->file, file);
    EXPECT_EQ(place->line, line);
  }
  EXPECT_EQ(source_name("heavy", "/app/split.py", 8), "heavy (/app/split.py:8)");
}

TEST(SourceName, OtherNamesHaveNoPlace)
{
  for (const char* name : {"Burner.loop(long, int[])", "Burner.loop", "main", "", ")", " (:1)",
                           "f (x.py:)", "f (x.py:12a)", "f (x.py:-1)", "f (x.py:4294967296)",
                           "f (x.py:1) ", "f x.py:1)", "libc.so.6+0x1234", "[unknown]"})
    EXPECT_FALSE(source_place(name)) << name;
}

} // namespace
} // namespace flamebpf::profile
