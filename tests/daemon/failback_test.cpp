#include "failback.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace {

using namespace std::chrono_literals;
using pathkeeper::daemon::bestGroup;
using pathkeeper::daemon::FailbackGroup;
using pathkeeper::daemon::FailbackTracker;
using pathkeeper::selector::Failback;
using testing::HasSubstr;

using TimePoint = FailbackTracker::TimePoint;

const TimePoint t0{std::chrono::hours(100)};

const Failback immediate{Failback::Kind::Immediate, 0s};
const Failback manual{Failback::Kind::Manual, 0s};
const Failback followover{Failback::Kind::Followover, 0s};

Failback deferred(std::chrono::seconds delay) {
  return Failback{Failback::Kind::Deferred, delay};
}

/// Group 1 is preferred (priority 50) over group 2 (priority 10).
std::vector<FailbackGroup> groups(unsigned usableFirst, unsigned usableSecond) {
  return {FailbackGroup{1, 50, usableFirst}, FailbackGroup{2, 10, usableSecond}};
}

TEST(FailbackBestGroup, IsTheUsableGroupWithTheHighestPriority) {
  EXPECT_EQ(bestGroup(groups(2, 2)), 1U);
  EXPECT_EQ(bestGroup(groups(0, 2)), 2U);
  EXPECT_EQ(bestGroup(groups(0, 0)), 0U);
  const std::vector<FailbackGroup> reversed{{1, 10, 1}, {2, 50, 1}};
  EXPECT_EQ(bestGroup(reversed), 2U);
}

TEST(FailbackBestGroup, BreaksTiesTowardsTheLowerGroupNumber) {
  const std::vector<FailbackGroup> tied{{2, 30, 1}, {1, 30, 1}, {3, 30, 1}};
  EXPECT_EQ(bestGroup(tied), 1U);
}

TEST(FailbackImmediate, SwitchesAsSoonAsTheBestGroupIsNotActive) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(0, 2), 2, t0), std::nullopt);
  const auto decision = tracker.evaluate("upper", immediate, groups(1, 2), 2, t0 + 1s);
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->group, 1U);
  EXPECT_THAT(decision->reason, HasSubstr("group 1 (priority 50, 1 usable path)"));
  EXPECT_THAT(decision->reason, HasSubstr("immediate"));
}

TEST(FailbackImmediate, DoesNothingWhenTheBestGroupIsActive) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(2, 2), 1, t0), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(0, 0), 1, t0), std::nullopt);
}

TEST(FailbackImmediate, DoesNotRepeatTheSwitchWhileDmStillShowsTheOldGroup) {
  FailbackTracker tracker;
  ASSERT_TRUE(tracker.evaluate("upper", immediate, groups(2, 2), 2, t0));
  // An idle map moves its active flag only on the next I/O.
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(2, 2), 2, t0 + 1s), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(2, 2), 1, t0 + 2s), std::nullopt);
  // Once dm showed it, a later loss of group 1 and its return switch again.
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(0, 2), 2, t0 + 3s), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(1, 2), 2, t0 + 4s)->group, 1U);
}

TEST(FailbackImmediate, RetriesAfterTheSwitchMessageFailed) {
  FailbackTracker tracker;
  ASSERT_TRUE(tracker.evaluate("upper", immediate, groups(2, 2), 2, t0));
  tracker.switchFailed("upper");
  EXPECT_EQ(tracker.evaluate("upper", immediate, groups(2, 2), 2, t0 + 1s)->group, 1U);
}

TEST(FailbackManual, NeverSwitchesByItself) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", manual, groups(0, 2), 2, t0), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", manual, groups(2, 2), 2, t0 + 1s), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", manual, groups(2, 2), 2, t0 + 1h), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
}

TEST(FailbackFollowover, SwitchesWhenTheFirstPathOfTheBestGroupComesBack) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(0, 2), 2, t0), std::nullopt);
  const auto decision = tracker.evaluate("upper", followover, groups(1, 2), 2, t0 + 1s);
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->group, 1U);
  EXPECT_THAT(decision->reason, HasSubstr("followover"));
}

TEST(FailbackFollowover, DoesNotUndoASwitchWhileTheBestGroupStayedUsable) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(2, 2), 1, t0), std::nullopt);
  // Another node or the operator moved the map to group 2.
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(2, 2), 2, t0 + 1s), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(2, 2), 2, t0 + 2s), std::nullopt);
  // A second path of group 1 coming back is not its first path.
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(1, 2), 2, t0 + 3s), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(2, 2), 2, t0 + 4s), std::nullopt);
}

TEST(FailbackFollowover, FirstLookAtAMapOnlyRecordsItsGroups) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", followover, groups(2, 2), 2, t0), std::nullopt);
}

TEST(FailbackDeferred, SwitchesOnceTheBestGroupWasUsableForTheDelay) {
  FailbackTracker tracker;
  const auto policy = deferred(30s);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(0, 2), 2, t0), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(1, 2), 2, t0 + 10s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 40s);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(2, 2), 2, t0 + 39s), std::nullopt);
  const auto decision = tracker.evaluate("upper", policy, groups(2, 2), 2, t0 + 40s);
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->group, 1U);
  EXPECT_THAT(decision->reason, HasSubstr("usable for 30s"));
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
}

TEST(FailbackDeferred, BestGroupGoingUnusableRestartsTheWait) {
  FailbackTracker tracker;
  const auto policy = deferred(30s);
  tracker.evaluate("upper", policy, groups(0, 2), 2, t0);
  tracker.evaluate("upper", policy, groups(1, 2), 2, t0 + 10s);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(0, 2), 2, t0 + 20s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(1, 2), 2, t0 + 25s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 55s);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(1, 2), 2, t0 + 40s), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", policy, groups(1, 2), 2, t0 + 55s)->group, 1U);
}

TEST(FailbackDeferred, ZeroDelaySwitchesAtOnce) {
  FailbackTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", deferred(0s), groups(1, 2), 2, t0)->group, 1U);
}

TEST(FailbackTracker, KeepsMapsApartAndReportsTheEarliestDeadline) {
  FailbackTracker tracker;
  tracker.evaluate("upper", deferred(30s), groups(1, 2), 2, t0);
  tracker.evaluate("lower", deferred(10s), groups(1, 2), 2, t0 + 5s);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 15s);
  EXPECT_EQ(tracker.evaluate("lower", deferred(10s), groups(1, 2), 2, t0 + 15s)->group, 1U);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 30s);
  tracker.forget("upper");
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
}

TEST(FailbackTracker, ForgetsTheMapsItIsToldAreGone) {
  FailbackTracker tracker;
  tracker.evaluate("upper", deferred(30s), groups(1, 2), 2, t0);
  tracker.evaluate("lower", deferred(10s), groups(1, 2), 2, t0 + 5s);
  tracker.forgetIf([](std::string_view alias) { return alias == "lower"; });
  EXPECT_EQ(tracker.nextDeadline(), t0 + 30s);
  tracker.forgetIf([](std::string_view) { return true; });
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
}

} // namespace
