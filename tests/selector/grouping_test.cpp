#include "grouping.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::selector {
namespace {

using testing::makePath;
using testing::marginal;
using testing::withController;
using testing::withPriority;
using testing::withTpg;

std::vector<std::string> devices(const PathGroup &group) {
  std::vector<std::string> out;
  for (const auto &path : group.paths) {
    out.push_back(path.device);
  }
  return out;
}

TEST(GroupPaths, MultibusPutsEveryPathInOneGroupOrderedByDevT) {
  auto groups = groupPaths({makePath("sdd", 48), makePath("sdb", 16)}, GroupingPolicy::Multibus);
  ASSERT_EQ(groups.size(), 1U);
  EXPECT_EQ(devices(groups[0]), (std::vector<std::string>{"sdb", "sdd"}));
}

TEST(GroupPaths, MultibusKeepsMarginalPathsInALastGroup) {
  auto groups =
      groupPaths({marginal(makePath("sdb", 16)), makePath("sdd", 48)}, GroupingPolicy::Multibus);
  ASSERT_EQ(groups.size(), 2U);
  EXPECT_EQ(devices(groups[0]), std::vector<std::string>{"sdd"});
  EXPECT_TRUE(groups[1].marginal());
}

TEST(GroupPaths, FailoverGivesEachPathItsOwnGroup) {
  auto groups = groupPaths({makePath("sdb", 16), makePath("sdc", 32), makePath("sdd", 48)},
                           GroupingPolicy::Failover);
  ASSERT_EQ(groups.size(), 3U);
  for (const auto &group : groups) {
    EXPECT_EQ(group.paths.size(), 1U);
  }
}

TEST(GroupByController, PutsOptimizedGroupFirst) {
  auto groups = groupPaths({withTpg(makePath("sdb", 16), 1, AluaState::ActiveNonOptimized),
                            withTpg(makePath("sdc", 32), 2, AluaState::ActiveOptimized),
                            withTpg(makePath("sdd", 48), 1, AluaState::ActiveNonOptimized),
                            withTpg(makePath("sde", 64), 2, AluaState::ActiveOptimized)},
                           GroupingPolicy::GroupByController);
  ASSERT_EQ(groups.size(), 2U);
  EXPECT_EQ(groups[0].controller, "tpg2");
  EXPECT_EQ(devices(groups[0]), (std::vector<std::string>{"sdc", "sde"}));
  EXPECT_EQ(groups[0].priority(), 50);
  EXPECT_EQ(groups[1].controller, "tpg1");
  EXPECT_EQ(groups[1].priority(), 10);
}

TEST(GroupByController, PrefersTheConfiguredLabelOverTheTpg) {
  auto groups = groupPaths(
      {withController(withTpg(makePath("sdb", 16), 1, AluaState::ActiveOptimized), "upper"),
       withController(withTpg(makePath("sdc", 32), 2, AluaState::ActiveOptimized), "upper")},
      GroupingPolicy::GroupByController);
  ASSERT_EQ(groups.size(), 1U);
  EXPECT_EQ(groups[0].controller, "upper");
}

TEST(GroupByController, PutsPathsWithoutControllerInfoTogether) {
  auto groups =
      groupPaths({makePath("sdb", 16), makePath("sdc", 32)}, GroupingPolicy::GroupByController);
  ASSERT_EQ(groups.size(), 1U);
  EXPECT_EQ(groups[0].controller, "");
}

TEST(GroupByPrio, MakesOneGroupPerPriorityHighestFirst) {
  auto groups =
      groupPaths({withPriority(makePath("sdb", 16), 1), withPriority(makePath("sdc", 32), 50),
                  withPriority(makePath("sdd", 48), 10), withPriority(makePath("sde", 64), 50)},
                 GroupingPolicy::GroupByPrio);
  ASSERT_EQ(groups.size(), 3U);
  EXPECT_EQ(devices(groups[0]), (std::vector<std::string>{"sdc", "sde"}));
  EXPECT_EQ(groups[1].priority(), 10);
  EXPECT_EQ(groups[2].priority(), 1);
}

TEST(SortGroups, PutsMarginalGroupsLastEvenWithHigherPriority) {
  std::vector<PathGroup> groups{PathGroup{{marginal(withPriority(makePath("sdb", 16), 50))}, {}},
                                PathGroup{{withPriority(makePath("sdc", 32), 1)}, {}}};
  sortGroups(groups);
  EXPECT_EQ(groups[0].paths[0].device, "sdc");
}

TEST(SortGroups, BreaksPriorityTiesByUsablePathCount) {
  std::vector<PathGroup> groups{
      PathGroup{{makePath("sdb", 16), makePath("sdc", 32, "w", PathState::Down)}, "a"},
      PathGroup{{makePath("sdd", 48), makePath("sde", 64)}, "b"}};
  sortGroups(groups);
  EXPECT_EQ(groups[0].controller, "b");
}

TEST(SortGroups, UsesTheMeanOverUsablePathsOnly) {
  // Group a: one up path at 10 and a down path at 50 -> priority 10.
  // Group b: one up path at 20 -> priority 20, so b goes first.
  std::vector<PathGroup> groups{
      PathGroup{{withPriority(makePath("sdb", 16), 10),
                 withPriority(makePath("sdc", 32, "w", PathState::Down), 50)},
                "a"},
      PathGroup{{withPriority(makePath("sdd", 48), 20)}, "b"}};
  sortGroups(groups);
  EXPECT_EQ(groups[0].controller, "b");
}

TEST(SortGroups, IsStableForFullTies) {
  std::vector<PathGroup> groups{PathGroup{{makePath("sdb", 16)}, "first"},
                                PathGroup{{makePath("sdc", 32)}, "second"}};
  sortGroups(groups);
  EXPECT_EQ(groups[0].controller, "first");
}

} // namespace
} // namespace pathkeeper::selector
