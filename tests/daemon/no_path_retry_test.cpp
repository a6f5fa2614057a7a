#include "no_path_retry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;
using pathkeeper::daemon::NoPathRetryTracker;
using pathkeeper::selector::NoPathRetry;
using testing::HasSubstr;

using TimePoint = NoPathRetryTracker::TimePoint;

const TimePoint t0{std::chrono::hours(100)};
constexpr std::chrono::milliseconds kInterval = 5s;

NoPathRetry count(unsigned n) {
  return NoPathRetry{NoPathRetry::Kind::Count, n};
}
const NoPathRetry queueForever{NoPathRetry::Kind::Queue, 0};
const NoPathRetry failAtOnce{NoPathRetry::Kind::Fail, 0};

TEST(NoPathRetry, QueuesForTheCountOfCheckerIntervalsThenFails) {
  NoPathRetryTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", count(3), 2, 0, kInterval, t0), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", count(3), 0, 0, kInterval, t0 + 1s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 16s);
  EXPECT_EQ(tracker.evaluate("upper", count(3), 0, 0, kInterval, t0 + 15s), std::nullopt);
  EXPECT_FALSE(tracker.expired("upper"));
  const auto decision = tracker.evaluate("upper", count(3), 0, 0, kInterval, t0 + 16s);
  ASSERT_TRUE(decision);
  EXPECT_FALSE(decision->queue);
  EXPECT_THAT(decision->reason, HasSubstr("no usable path for 15s"));
  EXPECT_THAT(decision->reason, HasSubstr("no_path_retry 3 x checker_interval 5s"));
  EXPECT_TRUE(tracker.expired("upper"));
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  // Said once.
  EXPECT_EQ(tracker.evaluate("upper", count(3), 0, 0, kInterval, t0 + 20s), std::nullopt);
}

TEST(NoPathRetry, RemembersThePolicyAMapWasLastEvaluatedWith) {
  NoPathRetryTracker tracker;
  EXPECT_EQ(tracker.lastPolicy("upper"), std::nullopt);
  tracker.adoptExpired("upper");
  EXPECT_EQ(tracker.lastPolicy("upper"), std::nullopt) << "adopted, never evaluated";
  tracker.evaluate("upper", count(2), 0, 0, kInterval, t0);
  EXPECT_EQ(tracker.lastPolicy("upper"), count(2));
  tracker.evaluate("upper", failAtOnce, 0, 0, kInterval, t0 + 1s);
  EXPECT_EQ(tracker.lastPolicy("upper"), failAtOnce);
  tracker.forget("upper");
  EXPECT_EQ(tracker.lastPolicy("upper"), std::nullopt);
}

TEST(NoPathRetry, TheFirstUsablePathTurnsQueueingBackOn) {
  NoPathRetryTracker tracker;
  tracker.evaluate("upper", count(1), 0, 0, kInterval, t0);
  ASSERT_TRUE(tracker.evaluate("upper", count(1), 0, 0, kInterval, t0 + 5s));
  const auto decision = tracker.evaluate("upper", count(1), 1, 0, kInterval, t0 + 6s);
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->queue);
  EXPECT_THAT(decision->reason, HasSubstr("1 usable path again"));
  EXPECT_FALSE(tracker.expired("upper"));
  // A later outage counts from its own start.
  EXPECT_EQ(tracker.evaluate("upper", count(1), 0, 0, kInterval, t0 + 100s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 105s);
}

TEST(NoPathRetry, APathComingBackBeforeTheEndStopsTheCount) {
  NoPathRetryTracker tracker;
  tracker.evaluate("upper", count(2), 0, 0, kInterval, t0);
  EXPECT_EQ(tracker.evaluate("upper", count(2), 1, 0, kInterval, t0 + 9s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", count(2), 0, 0, kInterval, t0 + 12s), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 22s) << "the count starts again";
}

TEST(NoPathRetry, PathsNotCheckedYetKeepTheCountFromStarting) {
  NoPathRetryTracker tracker;
  EXPECT_EQ(tracker.evaluate("upper", count(1), 0, 2, kInterval, t0), std::nullopt);
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  EXPECT_EQ(tracker.evaluate("upper", count(1), 0, 2, kInterval, t0 + 1h), std::nullopt);
  EXPECT_FALSE(tracker.expired("upper"));
}

TEST(NoPathRetry, ACountOfZeroFailsAsSoonAsNoPathIsUsable) {
  NoPathRetryTracker tracker;
  const auto decision = tracker.evaluate("upper", count(0), 0, 0, kInterval, t0);
  ASSERT_TRUE(decision);
  EXPECT_FALSE(decision->queue);
}

TEST(NoPathRetry, FailAndQueueNeedNothing) {
  NoPathRetryTracker tracker;
  for (const auto &policy : {failAtOnce, queueForever}) {
    EXPECT_EQ(tracker.evaluate("upper", policy, 0, 0, kInterval, t0), std::nullopt);
    EXPECT_EQ(tracker.evaluate("upper", policy, 0, 0, kInterval, t0 + 24h), std::nullopt);
    EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  }
}

TEST(NoPathRetry, ChangingToQueueAfterTheCountRanOutQueuesAgain) {
  NoPathRetryTracker tracker;
  ASSERT_TRUE(tracker.evaluate("upper", count(0), 0, 0, kInterval, t0));
  const auto decision = tracker.evaluate("upper", queueForever, 0, 0, kInterval, t0 + 1s);
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->queue);
  EXPECT_FALSE(tracker.expired("upper"));
  // ... and to "fail" needs no message: the table does not queue.
  ASSERT_TRUE(tracker.evaluate("upper", count(0), 0, 0, kInterval, t0 + 2s));
  EXPECT_EQ(tracker.evaluate("upper", failAtOnce, 0, 0, kInterval, t0 + 3s), std::nullopt);
  EXPECT_FALSE(tracker.expired("upper"));
}

TEST(NoPathRetry, AFailedMessageIsAskedForAgain) {
  NoPathRetryTracker tracker;
  ASSERT_TRUE(tracker.evaluate("upper", count(0), 0, 0, kInterval, t0));
  tracker.sendFailed("upper", t0 + 5s);
  EXPECT_FALSE(tracker.expired("upper"));
  EXPECT_EQ(tracker.nextDeadline(), t0 + 5s);
  EXPECT_EQ(tracker.evaluate("upper", count(0), 0, 0, kInterval, t0 + 4s), std::nullopt);
  ASSERT_TRUE(tracker.evaluate("upper", count(0), 0, 0, kInterval, t0 + 5s));
  // The queue_if_no_path after a path's return fails: asked again next time.
  ASSERT_TRUE(tracker.evaluate("upper", count(0), 1, 0, kInterval, t0 + 6s));
  tracker.sendFailed("upper", t0 + 11s);
  const auto again = tracker.evaluate("upper", count(0), 1, 0, kInterval, t0 + 7s);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->queue);
}

TEST(NoPathRetry, KeepsMapsApartAndForgetsThem) {
  NoPathRetryTracker tracker;
  tracker.evaluate("upper", count(4), 0, 0, kInterval, t0);
  tracker.evaluate("lower", count(1), 0, 0, kInterval, t0 + 1s);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 6s);
  ASSERT_TRUE(tracker.evaluate("lower", count(1), 0, 0, kInterval, t0 + 6s));
  EXPECT_FALSE(tracker.expired("upper"));
  EXPECT_EQ(tracker.nextDeadline(), t0 + 20s);
  tracker.forget("upper");
  tracker.forget("lower");
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  EXPECT_FALSE(tracker.expired("lower"));
}

} // namespace
