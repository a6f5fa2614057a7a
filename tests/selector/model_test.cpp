#include "model.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::selector {
namespace {

using testing::makePath;
using testing::withPriority;

TEST(DevT, PrintsAndParsesMajorMinor) {
  EXPECT_EQ(DevT(8, 16).str(), "8:16");
  EXPECT_EQ(parseDevT("253:0"), (DevT{253, 0}));
  EXPECT_FALSE(parseDevT("8"));
  EXPECT_FALSE(parseDevT("8:"));
  EXPECT_FALSE(parseDevT(":1"));
  EXPECT_FALSE(parseDevT("8:1x"));
  EXPECT_FALSE(parseDevT("-8:1"));
  EXPECT_FALSE(parseDevT("/dev/sda"));
}

TEST(PathState, RoundTripsEveryName) {
  for (auto state : {PathState::Unknown, PathState::Up, PathState::Down, PathState::Shaky,
                     PathState::Ghost, PathState::Pending, PathState::Removed}) {
    EXPECT_EQ(parsePathState(toString(state)), state);
  }
  EXPECT_FALSE(parsePathState("UP"));
}

TEST(PathState, CountsUpAndGhostAsUsableLikeMultipathd) {
  EXPECT_TRUE(isUsable(PathState::Up));
  EXPECT_TRUE(isUsable(PathState::Ghost));
  EXPECT_FALSE(isUsable(PathState::Down));
  EXPECT_FALSE(isUsable(PathState::Shaky));
  EXPECT_FALSE(isUsable(PathState::Pending));
  EXPECT_FALSE(isUsable(PathState::Removed));
}

TEST(AluaState, ParsesTheKernelsSysfsSpelling) {
  EXPECT_EQ(parseAluaState("active/optimized\n"), AluaState::ActiveOptimized);
  EXPECT_EQ(parseAluaState("active/non-optimized"), AluaState::ActiveNonOptimized);
  EXPECT_EQ(parseAluaState("standby"), AluaState::Standby);
  EXPECT_EQ(parseAluaState("lba-dependent"), AluaState::LbaDependent);
  EXPECT_EQ(parseAluaState("transitioning"), AluaState::Transitioning);
  EXPECT_FALSE(parseAluaState("optimized"));
}

TEST(AluaPriority, MatchesMultipathdsAluaPrioritizer) {
  EXPECT_EQ(aluaPriority(AluaState::ActiveOptimized, false), 50);
  EXPECT_EQ(aluaPriority(AluaState::ActiveNonOptimized, false), 10);
  EXPECT_EQ(aluaPriority(AluaState::LbaDependent, false), 5);
  EXPECT_EQ(aluaPriority(AluaState::Standby, false), 1);
  EXPECT_EQ(aluaPriority(AluaState::Unavailable, false), 0);
  EXPECT_EQ(aluaPriority(AluaState::ActiveNonOptimized, true), 90);
  EXPECT_EQ(aluaPriority(AluaState::ActiveOptimized, true), 50);
}

TEST(Portal, PrintsLikeIscsiadm) {
  EXPECT_EQ((Portal{"10.10.1.20", 3260, 1}).str(), "10.10.1.20:3260,1");
  EXPECT_EQ((Portal{"fd00::20", 3260, 2}).str(), "[fd00::20]:3260,2");
}

TEST(PathGroup, PriorityIsTheIntegerMeanOverUsablePaths) {
  PathGroup group;
  group.paths = {withPriority(makePath("sda", 0), 50), withPriority(makePath("sdb", 16), 11),
                 withPriority(makePath("sdc", 32, "w", PathState::Down), 1000)};
  EXPECT_EQ(group.priority(), 30); // (50 + 11) / 2, the down path ignored
  EXPECT_EQ(group.usablePaths(), 2);
}

TEST(PathGroup, PriorityIsZeroWhenNoPathIsUsable) {
  PathGroup group;
  group.paths = {withPriority(makePath("sda", 0, "w", PathState::Down), 50)};
  EXPECT_EQ(group.priority(), 0);
  EXPECT_EQ(group.usablePaths(), 0);
}

TEST(SelectorKind, KnowsTheKernelsPerPathArgCounts) {
  EXPECT_EQ(tableArgsPerPath(SelectorKind::RoundRobin), 1U);
  EXPECT_EQ(tableArgsPerPath(SelectorKind::QueueLength), 1U);
  EXPECT_EQ(tableArgsPerPath(SelectorKind::ServiceTime), 2U);
  EXPECT_EQ(statusArgsPerPath(SelectorKind::RoundRobin), 0U);
  EXPECT_EQ(statusArgsPerPath(SelectorKind::QueueLength), 1U);
  EXPECT_EQ(statusArgsPerPath(SelectorKind::ServiceTime), 2U);
  EXPECT_EQ(tableArgsPerPath(SelectorKind::HistoricalServiceTime), 1U);
  EXPECT_EQ(statusArgsPerPath(SelectorKind::HistoricalServiceTime), 3U);
  EXPECT_EQ(parseSelectorKind("service-time"), SelectorKind::ServiceTime);
  EXPECT_FALSE(parseSelectorKind("round_robin"));
}

TEST(MapSpec, DmUuidIsMpathPrefixedWwid) {
  MapSpec spec;
  spec.wwid = "36001405abc";
  EXPECT_EQ(spec.dmUuid(), "mpath-36001405abc");
}

} // namespace
} // namespace pathkeeper::selector
