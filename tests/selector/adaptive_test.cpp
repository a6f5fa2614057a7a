#include "adaptive.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

namespace pathkeeper::selector {
namespace {

using Clock = std::chrono::steady_clock;
using testing::ElementsAre;
using testing::HasSubstr;
using Action = AdaptiveDecision::Action;

constexpr double kMB = 1e6;

Clock::time_point at(int seconds) {
  return Clock::time_point{std::chrono::seconds{seconds}};
}

PathCapacity measured(std::string device, double capacity, unsigned current = 1) {
  return PathCapacity{std::move(device), capacity, current, std::nullopt};
}
PathCapacity unmeasured(std::string device, unsigned current = 1) {
  return PathCapacity{std::move(device), std::nullopt, current, std::nullopt};
}

AdaptiveInput twoPaths(double sda, double sdb, unsigned weightA = 1, unsigned weightB = 1) {
  AdaptiveInput input;
  input.map = "xserve-upper";
  input.paths = {measured("sda", sda, weightA), measured("sdb", sdb, weightB)};
  return input;
}

// ------------------------------------------------------------------ weights

TEST(ComputeWeights, GivesTheFastestPath100AndTheOthersTheirShare) {
  EXPECT_THAT(computeWeights({measured("sda", 40 * kMB), measured("sdb", 10 * kMB)}),
              ElementsAre(100U, 25U));
  EXPECT_THAT(computeWeights({measured("sda", 10 * kMB), measured("sdb", 40 * kMB)}),
              ElementsAre(25U, 100U));
}

TEST(ComputeWeights, RoundsToTheNearestWeight) {
  EXPECT_THAT(computeWeights({measured("sda", 30), measured("sdb", 20), measured("sdc", 10)}),
              ElementsAre(100U, 67U, 33U));
  EXPECT_THAT(computeWeights({measured("sda", 1000), measured("sdb", 4)}), ElementsAre(100U, 1U));
}

TEST(ComputeWeights, NeverGivesANearlyDeadPathZero) {
  EXPECT_THAT(computeWeights({measured("sda", 100 * kMB), measured("sdb", 1)}),
              ElementsAre(100U, 1U));
  EXPECT_THAT(computeWeights({measured("sda", 100 * kMB), measured("sdb", 0)}),
              ElementsAre(100U, 1U));
}

TEST(ComputeWeights, KeepsTheNominalShareOfAPathWithoutEstimate) {
  // Equal nominal weights mean "as fast as the fastest": 1 becomes 100.
  EXPECT_THAT(computeWeights({measured("sda", 10 * kMB, 1), unmeasured("sdb", 1)}),
              ElementsAre(100U, 100U));
  // Link-speed weights keep their ratio.
  EXPECT_THAT(computeWeights({measured("sda", 10 * kMB, 100), unmeasured("sdb", 10)}),
              ElementsAre(100U, 10U));
}

TEST(ComputeWeights, LeavesEveryWeightWithoutAnyMeasurement) {
  EXPECT_THAT(computeWeights({unmeasured("sda", 100), unmeasured("sdb", 10)}),
              ElementsAre(100U, 10U));
}

TEST(ConfidentCapacity, WithholdsAnEstimateBelowTheMinimumConfidence) {
  AdaptiveSettings settings;
  PathEstimate estimate;
  estimate.capacityBytesPerSecond = 4 * kMB;
  estimate.busySamples = 3;
  estimate.confidence = 0.49;
  EXPECT_EQ(confidentCapacity(estimate, settings), std::nullopt);
  estimate.confidence = 0.5;
  EXPECT_EQ(confidentCapacity(estimate, settings), 4 * kMB);
}

// --------------------------------------------------------------- hysteresis

TEST(WeightsMoved, IgnoresASmallWobble) {
  EXPECT_FALSE(weightsMoved({100, 25}, {100, 28}, 20));
  EXPECT_FALSE(weightsMoved({100, 25}, {100, 22}, 20));
  EXPECT_FALSE(weightsMoved({100, 25}, {100, 25}, 20));
}

TEST(WeightsMoved, SeesAChangeBeyondTheThreshold) {
  EXPECT_TRUE(weightsMoved({100, 25}, {100, 40}, 20));
  EXPECT_TRUE(weightsMoved({100, 25}, {100, 19}, 20));
  EXPECT_TRUE(weightsMoved({100, 100}, {100, 25}, 20));
  EXPECT_TRUE(weightsMoved({100, 25}, {100, 25, 100}, 20));
}

TEST(WeightsMoved, ComparesOnTheSameScaleSoEqualWeightsMatchAnyEqualWeights) {
  EXPECT_FALSE(weightsMoved({1, 1}, {100, 100}, 20));
  EXPECT_FALSE(weightsMoved({4, 1}, {100, 25}, 20));
}

TEST(WeightsMoved, IgnoresAOnePointStepOfATinyWeight) {
  EXPECT_FALSE(weightsMoved({100, 1}, {100, 2}, 20));
  EXPECT_TRUE(weightsMoved({100, 1}, {100, 3}, 20));
}

// ----------------------------------------------------------------- governor

TEST(ReloadGovernor, WaitsUntilTwoPathsAreMeasured) {
  ReloadGovernor governor;
  AdaptiveInput input;
  input.map = "xserve-upper";
  input.paths = {measured("sda", 40 * kMB), unmeasured("sdb")};
  auto decision = governor.evaluate(input, at(0));
  EXPECT_EQ(decision.action, Action::Waiting);
  EXPECT_THAT(decision.reason, HasSubstr("1 of 2 paths"));
  EXPECT_EQ(governor.reloads(), 0U);
}

TEST(ReloadGovernor, ReloadsWithMeasuredWeightsAndSaysWhy) {
  ReloadGovernor governor;
  auto decision = governor.evaluate(twoPaths(4.9 * kMB, 1.2 * kMB), at(0));
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_EQ(decision.selector, SelectorKind::ServiceTime);
  EXPECT_THAT(decision.weights, ElementsAre(100U, 24U));
  EXPECT_EQ(decision.reason, "xserve-upper: weights sda 100, sdb 24 (measured 4.9 MB/s vs 1.2 "
                             "MB/s busy capacity); previous 1/1");
  EXPECT_EQ(governor.reloads(), 1U);
  EXPECT_EQ(governor.lastReload(), at(0));
}

TEST(ReloadGovernor, KeepsTheTableForASmallWobble) {
  ReloadGovernor governor;
  auto decision = governor.evaluate(twoPaths(4 * kMB, 1.1 * kMB, 100, 25), at(0));
  EXPECT_EQ(decision.action, Action::Keep);
  EXPECT_THAT(decision.weights, ElementsAre(100U, 25U));
  EXPECT_THAT(decision.reason, HasSubstr("within 20% hysteresis"));
  EXPECT_EQ(governor.reloads(), 0U);
}

TEST(ReloadGovernor, DefersASecondChangeUntilTheMinimumIntervalHasPassed) {
  ReloadGovernor governor; // 60 s minimum
  ASSERT_EQ(governor.evaluate(twoPaths(4 * kMB, 1 * kMB), at(100)).action, Action::Reload);
  auto soon = governor.evaluate(twoPaths(4 * kMB, 4 * kMB, 100, 25), at(130));
  EXPECT_EQ(soon.action, Action::Deferred);
  EXPECT_THAT(soon.reason, HasSubstr("last reload 30s ago, minimum interval 60s"));
  EXPECT_EQ(governor.evaluate(twoPaths(4 * kMB, 4 * kMB, 100, 25), at(159)).action,
            Action::Deferred);
  auto later = governor.evaluate(twoPaths(4 * kMB, 4 * kMB, 100, 25), at(160));
  EXPECT_EQ(later.action, Action::Reload);
  EXPECT_THAT(later.weights, ElementsAre(100U, 100U));
  EXPECT_EQ(governor.reloads(), 2U);
}

TEST(ReloadGovernor, DropsADeferredChangeThatNoLongerHolds) {
  ReloadGovernor governor;
  ASSERT_EQ(governor.evaluate(twoPaths(4 * kMB, 1 * kMB), at(0)).action, Action::Reload);
  EXPECT_EQ(governor.evaluate(twoPaths(4 * kMB, 2 * kMB, 100, 25), at(30)).action,
            Action::Deferred);
  EXPECT_EQ(governor.evaluate(twoPaths(4 * kMB, 1 * kMB, 100, 25), at(90)).action, Action::Keep);
  EXPECT_EQ(governor.reloads(), 1U);
}

TEST(ReloadGovernor, NeverReloadsWhileAPathIsFailingOrBeingReinstated) {
  ReloadGovernor governor;
  auto input = twoPaths(4 * kMB, 1 * kMB);
  input.pathTransition = true;
  input.transitionDevice = "sdb";
  auto held = governor.evaluate(input, at(0));
  EXPECT_EQ(held.action, Action::Held);
  EXPECT_THAT(held.reason, HasSubstr("while sdb is failing or being reinstated"));
  EXPECT_EQ(governor.reloads(), 0U);
  input.pathTransition = false;
  EXPECT_EQ(governor.evaluate(input, at(2)).action, Action::Reload);
}

TEST(ReloadGovernor, UsesItsConfiguredHysteresisAndInterval) {
  AdaptiveSettings settings;
  settings.hysteresisPercent = 5;
  settings.minReloadInterval = std::chrono::seconds{10};
  ReloadGovernor governor(settings);
  ASSERT_EQ(governor.evaluate(twoPaths(4 * kMB, 1 * kMB), at(0)).action, Action::Reload);
  // 25 -> 28 is 12%: a wobble at 20%, a change at 5%.
  EXPECT_EQ(governor.evaluate(twoPaths(4 * kMB, 1.12 * kMB, 100, 25), at(10)).action,
            Action::Reload);
}

// ------------------------------------------------------------ quiet moment

AdaptiveInput withDrains(AdaptiveInput input, std::optional<double> sda,
                         std::optional<double> sdb) {
  input.paths[0].drainMs = sda;
  input.paths[1].drainMs = sdb;
  return input;
}

TEST(ExpectedDrain, IsTheBytesInFlightOverThePathsOwnRate) {
  // A 10 Mbit/s path carrying 128 KiB requests, four of them in flight.
  PathEstimate slow;
  slow.capacityBytesPerSecond = 1.25e6;
  slow.throughputBytesPerSecond = 1.25e6;
  slow.iops = 1.25e6 / 131072;
  slow.latencyMs = 400;
  slow.inFlight = 4;
  EXPECT_NEAR(*expectedDrainMs(slow), 4 * 131072 / 1.25e6 * 1000, 0.01);
  // Busy a quarter of the time: each request still moves at the busy rate.
  slow.throughputBytesPerSecond /= 4;
  slow.iops /= 4;
  EXPECT_NEAR(*expectedDrainMs(slow), 4 * 131072 / 1.25e6 * 1000, 0.01);
  slow.inFlight = 0;
  EXPECT_EQ(expectedDrainMs(slow), 0.0);
}

TEST(MsPerRequest, IsTheRequestSizeOverTheBusyRate) {
  PathEstimate path;
  EXPECT_EQ(msPerRequest(path), std::nullopt);
  path.capacityBytesPerSecond = 5e6;
  path.throughputBytesPerSecond = 2.5e6;
  path.iops = 2.5e6 / 131072;
  EXPECT_NEAR(*msPerRequest(path), 131072 / 5e6 * 1000, 1e-9);
}

TEST(ExpectedDrain, KnowsWhenItCannotTell) {
  PathEstimate unmeasured;
  EXPECT_EQ(expectedDrainMs(unmeasured), 0.0); // nothing in flight: nothing to wait for
  unmeasured.inFlight = 2;
  EXPECT_EQ(expectedDrainMs(unmeasured), std::nullopt);
  unmeasured.latencyMs = 35; // a latency alone gives no rate
  EXPECT_EQ(expectedDrainMs(unmeasured), std::nullopt);
}

TEST(ReloadGovernor, StartsTheLullWaitAgainAfterTheRateLimitOrNewSettings) {
  AdaptiveSettings settings;
  settings.minReloadInterval = std::chrono::seconds{10};
  ReloadGovernor governor(settings);
  EXPECT_EQ(governor.evaluate(withDrains(twoPaths(4 * kMB, 1 * kMB), 0.0, 0.0), at(0)).action,
            Action::Reload);
  EXPECT_EQ(
      governor.evaluate(withDrains(twoPaths(4 * kMB, 4 * kMB, 100, 25), 0.0, 420.0), at(5)).action,
      Action::Deferred);
  // A wait begins, then new settings: it begins again.
  EXPECT_EQ(
      governor.evaluate(withDrains(twoPaths(4 * kMB, 4 * kMB, 100, 25), 0.0, 420.0), at(20)).action,
      Action::Lull);
  governor.setSettings(settings);
  EXPECT_EQ(
      governor.evaluate(withDrains(twoPaths(4 * kMB, 4 * kMB, 100, 25), 0.0, 420.0), at(50)).action,
      Action::Lull);
  EXPECT_EQ(
      governor.evaluate(withDrains(twoPaths(4 * kMB, 4 * kMB, 100, 25), 0.0, 420.0), at(80)).action,
      Action::Reload);
}

TEST(ReloadGovernor, WaitsForALullBeforeReloading) {
  ReloadGovernor governor; // 50 ms target, 30 s wait
  auto busy = governor.evaluate(withDrains(twoPaths(4 * kMB, 1 * kMB), 20.0, 420.0), at(0));
  EXPECT_EQ(busy.action, Action::Lull);
  EXPECT_EQ(busy.reason,
            "xserve-upper: waiting for a lull to load weights sda 100, sdb 25 (measured 4.0 MB/s "
            "vs 1.0 MB/s busy capacity): the I/O in flight would hold the map about 420 ms (sdb), "
            "over the 50 ms reload_hold_target; reloading regardless after 30s");
  EXPECT_EQ(governor.reloads(), 0U);
  EXPECT_EQ(governor.lastReload(), std::nullopt);
  // Exactly at the target is quiet enough; an unknown drain does not hold it.
  auto quiet = governor.evaluate(withDrains(twoPaths(4 * kMB, 1 * kMB), 50.0, std::nullopt), at(4));
  EXPECT_EQ(quiet.action, Action::Reload);
  EXPECT_THAT(quiet.weights, ElementsAre(100U, 25U));
  EXPECT_THAT(quiet.reason, testing::Not(HasSubstr("lull")));
  EXPECT_TRUE(quiet.atLull); // the swap is to wait for one too
  EXPECT_EQ(governor.lastReload(), at(4));
}

TEST(ReloadGovernor, ReloadsRegardlessWhenNoLullComesInTime) {
  ReloadGovernor governor;
  auto saturated = withDrains(twoPaths(4 * kMB, 1 * kMB), 210.0, 420.0);
  EXPECT_EQ(governor.evaluate(saturated, at(10)).action, Action::Lull);
  EXPECT_EQ(governor.evaluate(saturated, at(39)).action, Action::Lull);
  auto late = governor.evaluate(saturated, at(40));
  EXPECT_EQ(late.action, Action::Reload);
  EXPECT_THAT(late.reason, HasSubstr("previous 1/1; no lull in 30s, the I/O in flight holds the "
                                     "map about 420 ms (sdb)"));
  EXPECT_FALSE(late.atLull);
  EXPECT_EQ(governor.reloads(), 1U);
}

TEST(ReloadGovernor, StartsWaitingAfreshForAChangeThatCameBack) {
  ReloadGovernor governor;
  auto change = withDrains(twoPaths(4 * kMB, 1 * kMB), 0.0, 420.0);
  EXPECT_EQ(governor.evaluate(change, at(0)).action, Action::Lull);
  // The change went away (the weights match after all) and came back.
  EXPECT_EQ(
      governor.evaluate(withDrains(twoPaths(4 * kMB, 1 * kMB, 100, 25), 0.0, 420.0), at(20)).action,
      Action::Keep);
  EXPECT_EQ(governor.evaluate(change, at(40)).action, Action::Lull);
  EXPECT_EQ(governor.evaluate(change, at(69)).action, Action::Lull);
  EXPECT_EQ(governor.evaluate(change, at(70)).action, Action::Reload);
}

TEST(ReloadGovernor, ReloadsAtOnceWhenTheLullWaitIsOff) {
  AdaptiveSettings settings;
  settings.reloadHoldWait = std::chrono::milliseconds{0};
  ReloadGovernor governor(settings);
  auto decision = governor.evaluate(withDrains(twoPaths(4 * kMB, 1 * kMB), 0.0, 420.0), at(0));
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_THAT(decision.reason, testing::Not(HasSubstr("lull")));
  EXPECT_FALSE(decision.atLull);
}

TEST(ReloadGovernor, UsesItsConfiguredHoldTarget) {
  AdaptiveSettings settings;
  settings.reloadHoldTarget = std::chrono::milliseconds{500};
  ReloadGovernor governor(settings);
  EXPECT_EQ(governor.evaluate(withDrains(twoPaths(4 * kMB, 1 * kMB), 0.0, 420.0), at(0)).action,
            Action::Reload);
}

// ------------------------------------------------------------ selector auto

TEST(ChooseAutoSelector, PicksQueueLengthForEqualPathsAndServiceTimeForUnequalOnes) {
  EXPECT_EQ(
      chooseAutoSelector({measured("sda", 40), measured("sdb", 39)}, SelectorKind::ServiceTime, 15),
      SelectorKind::QueueLength);
  EXPECT_EQ(
      chooseAutoSelector({measured("sda", 40), measured("sdb", 10)}, SelectorKind::QueueLength, 15),
      SelectorKind::ServiceTime);
}

TEST(ChooseAutoSelector, DoesNotFlipAtTheBoundary) {
  // A 10% spread: within the 15% tolerance, but not within half of it.
  EXPECT_EQ(
      chooseAutoSelector({measured("sda", 40), measured("sdb", 36)}, SelectorKind::ServiceTime, 15),
      SelectorKind::ServiceTime);
  EXPECT_EQ(
      chooseAutoSelector({measured("sda", 40), measured("sdb", 36)}, SelectorKind::QueueLength, 15),
      SelectorKind::QueueLength);
}

TEST(ChooseAutoSelector, DecidesNothingWithFewerThanTwoMeasuredPaths) {
  EXPECT_EQ(
      chooseAutoSelector({measured("sda", 40), unmeasured("sdb")}, SelectorKind::ServiceTime, 15),
      std::nullopt);
}

TEST(ReloadGovernor, SwitchesAnAutoMapToQueueLengthWhenItsPathsAreEqual) {
  ReloadGovernor governor;
  auto input = twoPaths(4 * kMB, 3.9 * kMB);
  input.autoSelector = true;
  auto decision = governor.evaluate(input, at(0));
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_EQ(decision.selector, SelectorKind::QueueLength);
  EXPECT_THAT(decision.reason, HasSubstr("selector queue-length"));
  EXPECT_THAT(decision.reason, HasSubstr("paths equal within 15%"));
  EXPECT_THAT(decision.reason, HasSubstr("previous service-time"));
}

TEST(ReloadGovernor, SwitchesAnAutoMapToWeightedServiceTimeWhenItsPathsDiverge) {
  ReloadGovernor governor;
  auto input = twoPaths(4 * kMB, 1 * kMB);
  input.autoSelector = true;
  input.currentSelector = SelectorKind::QueueLength;
  auto decision = governor.evaluate(input, at(0));
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_EQ(decision.selector, SelectorKind::ServiceTime);
  EXPECT_THAT(decision.weights, ElementsAre(100U, 25U));
  EXPECT_THAT(decision.reason, HasSubstr("selector service-time, weights sda 100, sdb 25"));
}

TEST(ReloadGovernor, KeepsAnEqualAutoMapOnQueueLengthWhateverTheWeights) {
  ReloadGovernor governor;
  auto input = twoPaths(4 * kMB, 3.9 * kMB, 100, 25);
  input.autoSelector = true;
  input.currentSelector = SelectorKind::QueueLength;
  EXPECT_EQ(governor.evaluate(input, at(0)).action, Action::Keep);
}

TEST(FormatRate, PrintsDecimalMegabytes) {
  EXPECT_EQ(formatRate(4.94e6), "4.9 MB/s");
  EXPECT_EQ(formatRate(123.4e6), "123 MB/s");
}

} // namespace
} // namespace pathkeeper::selector
