#include "base/hand_off.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace braid {
namespace {

TEST(HandOff, TakesWhatWasGivenInOrderOnce) {
  HandOff<int> handOff;
  EXPECT_TRUE(handOff.take().empty());
  handOff.give(3);
  handOff.give(1);
  EXPECT_EQ(handOff.take(), (std::vector<int>{3, 1}));
  EXPECT_TRUE(handOff.take().empty());
  handOff.give(2);
  EXPECT_EQ(handOff.take(), std::vector<int>{2});
}

TEST(HandOff, MovesItemsThatCannotBeCopied) {
  HandOff<std::unique_ptr<int>> handOff;
  handOff.give(std::make_unique<int>(7));
  std::vector<std::unique_ptr<int>> taken = handOff.take();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(*taken[0], 7);
}

TEST(HandOff, EveryItemOfManyGiversReachesTheTaker) {
  constexpr int kGivers = 4;
  constexpr int kEach = 5000;
  HandOff<int> handOff;
  std::vector<std::thread> givers;
  for (int g = 0; g < kGivers; ++g) {
    givers.emplace_back([&handOff, g] {
      for (int i = 0; i < kEach; ++i) handOff.give(g * kEach + i);
    });
  }
  std::vector<int> seen(kGivers * kEach, 0);
  std::vector<int> lastOf(kGivers, -1);
  int taken = 0;
  while (taken < kGivers * kEach) {
    for (int item : handOff.take()) {
      ++seen[size_t(item)];
      ++taken;
      // Each giver's items arrive in the order it gave them.
      EXPECT_GT(item, lastOf[size_t(item / kEach)]);
      lastOf[size_t(item / kEach)] = item;
    }
  }
  for (std::thread& t : givers) t.join();
  EXPECT_TRUE(handOff.take().empty());
  for (int count : seen) ASSERT_EQ(count, 1);
}

}  // namespace
}  // namespace braid
