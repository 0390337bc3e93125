#include <gtest/gtest.h>

#include "unwind/row_space.h"

namespace flamebpf::unwind {
namespace {

TEST(RowSpace, PlacesRunsFirstFitAndRefusesWhatDoesNotFit)
{
  RowSpace space(100);
  EXPECT_EQ(space.take(40), 0u);
  EXPECT_EQ(space.take(50), 40u);
  EXPECT_EQ(space.used(), 90u);
  EXPECT_EQ(space.take(11), std::nullopt);
  EXPECT_EQ(space.take(0), std::nullopt);
  EXPECT_EQ(space.take(10), 90u);
  EXPECT_EQ(space.largest_free(), 0u);
}

TEST(RowSpace, FreedRunsMergeWithBothNeighbours)
{
  RowSpace space(30);
  ASSERT_EQ(space.take(10), 0u);
  ASSERT_EQ(space.take(10), 10u);
  ASSERT_EQ(space.take(10), 20u);
  space.give_back(0, 10);
  space.give_back(20, 10);
  EXPECT_EQ(space.largest_free(), 10u);
  EXPECT_EQ(space.take(20), std::nullopt); // two runs of 10 are not one of 20
  space.give_back(10, 10);
  EXPECT_EQ(space.used(), 0u);
  EXPECT_EQ(space.largest_free(), 30u);
  EXPECT_EQ(space.take(30), 0u);
}

} // namespace
} // namespace flamebpf::unwind
