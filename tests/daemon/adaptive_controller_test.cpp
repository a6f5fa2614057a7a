#include "adaptive_controller.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace pathkeeper::daemon {
namespace {

using namespace std::chrono_literals;
using selector::AdaptiveDecision;
using selector::SelectorKind;
using testing::ElementsAre;
using testing::HasSubstr;
using Action = AdaptiveDecision::Action;
using TimePoint = AdaptiveController::TimePoint;
using WallTime = AdaptiveController::WallTime;

const TimePoint t0{std::chrono::hours(100)};
const WallTime wall0{std::chrono::hours(500000)};

// The stat text of a disk that has moved @p bytes in 64 KiB requests and was
// busy for @p busyMs, with @p inFlight requests in flight, in the kernel's
// 17-field format.
std::string statText(std::uint64_t bytes, std::uint64_t busyMs, std::uint64_t inFlight = 0) {
  std::uint64_t ios = bytes / 65536;
  return std::to_string(ios) + " 0 " + std::to_string(bytes / 512) + " " +
         std::to_string(ios * 40) + " 0 0 0 0 " + std::to_string(inFlight) + " " +
         std::to_string(busyMs) + " " + std::to_string(busyMs) + " 0 0 0 0 0 0\n";
}

// Two paths busy all the time, sda at 4 MB/s and sdb at @p sdbRate, sampled
// every 2 s from @p from for @p samples samples.
void feed(AdaptiveController &controller, int samples, double sdbRate = 1e6, TimePoint from = t0,
          std::uint64_t sdbInFlight = 0) {
  for (int i = 0; i < samples; ++i) {
    const auto seconds = static_cast<std::uint64_t>(2 * i);
    const auto at = from + std::chrono::seconds{2 * i};
    controller.sample("sda", statText(4000000 * seconds, 1000 * seconds), at);
    controller.sample(
        "sdb", statText(static_cast<std::uint64_t>(sdbRate) * seconds, 1000 * seconds, sdbInFlight),
        at);
  }
}

AdaptiveMapInput upperMap(unsigned sda = 1, unsigned sdb = 1) {
  AdaptiveMapInput input;
  input.alias = "xserve-upper";
  input.paths = {{"sda", sda}, {"sdb", sdb}};
  return input;
}

selector::PlannedMap plannedUpper(SelectorKind kind = SelectorKind::ServiceTime) {
  selector::PlannedMap planned;
  selector::MapSpec &spec = planned.spec;
  spec.alias = "xserve-upper";
  spec.wwid = "36001405a1b2c3d4e5f60718293a4b5c6";
  spec.sizeSectors = 2097152;
  spec.selector = kind;
  selector::PathGroup group;
  for (auto [device, minor] : {std::pair{"sda", 0U}, std::pair{"sdb", 16U}}) {
    selector::Path path;
    path.device = device;
    path.devt = selector::DevT{8, minor};
    group.paths.push_back(path);
  }
  spec.groups.push_back(group);
  spec.initialGroup = 1;
  return planned;
}

TEST(AdaptiveController, WaitsUntilBothPathsAreMeasuredWithConfidence) {
  AdaptiveController controller;
  feed(controller, 3);
  auto decision = controller.evaluate(upperMap(), t0 + 4s, wall0);
  EXPECT_EQ(decision.action, Action::Waiting);
  EXPECT_TRUE(controller.history("xserve-upper").empty());
}

TEST(AdaptiveController, ReloadsAMapToTheMeasuredRatioAndRecordsWhy) {
  AdaptiveController controller;
  feed(controller, 8);
  ASSERT_NE(controller.estimate("sda"), nullptr);
  EXPECT_NEAR(controller.estimate("sda")->capacityBytesPerSecond, 4e6, 0.1e6);
  auto decision = controller.evaluate(upperMap(), t0 + 14s, wall0);
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_THAT(decision.weights, ElementsAre(100U, 25U));
  EXPECT_EQ(controller.reloads("xserve-upper"), 1U);
  EXPECT_EQ(controller.decidedWeight("sdb"), 25U);
  const auto &history = controller.history("xserve-upper");
  ASSERT_EQ(history.size(), 1U);
  EXPECT_EQ(history.front().at, wall0);
  EXPECT_EQ(history.front().action, Action::Reload);
  EXPECT_THAT(history.front().reason, HasSubstr("weights sda 100, sdb 25"));
}

TEST(AdaptiveController, PutsTheDecidedWeightsIntoEveryLaterPlan) {
  AdaptiveController controller;
  feed(controller, 8);
  controller.evaluate(upperMap(), t0 + 14s, wall0);
  auto planned = plannedUpper();
  EXPECT_TRUE(controller.applyTo(planned));
  EXPECT_EQ(planned.spec.groups[0].paths[0].relativeThroughput, 100U);
  EXPECT_EQ(planned.spec.groups[0].paths[1].relativeThroughput, 25U);
  EXPECT_THAT(planned.table, HasSubstr("service-time 0 2 2 8:0 1 100 8:16 1 25"));
  EXPECT_THAT(planned.notes.back(), HasSubstr("measured weights sda 100, sdb 25"));
  // Applying again changes nothing; another map is not touched.
  EXPECT_FALSE(controller.applyTo(planned));
  auto other = plannedUpper();
  other.spec.alias = "xserve-lower";
  EXPECT_FALSE(controller.applyTo(other));
}

TEST(AdaptiveController, HoldsWhileAPathIsInTransitionAndRecordsThatOnce) {
  AdaptiveController controller;
  feed(controller, 8);
  auto input = upperMap();
  input.transitionDevice = "sdb";
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(controller.evaluate(input, t0 + 14s + std::chrono::seconds{2 * i}, wall0).action,
              Action::Held);
  }
  EXPECT_EQ(controller.reloads("xserve-upper"), 0U);
  ASSERT_EQ(controller.history("xserve-upper").size(), 1U);
  EXPECT_THAT(controller.history("xserve-upper").front().reason, HasSubstr("sdb is failing"));
  auto planned = plannedUpper();
  EXPECT_FALSE(controller.applyTo(planned));
}

// sdb at 1 MB/s with eight requests of about 64 KiB in flight needs about
// half a second to drain them (528 ms: statText counts whole requests, 30-31
// per 2 MB, so each is about 66 kB): over the 50 ms target, so the reload waits
// for a sample with less in flight, and the history says so once.
TEST(AdaptiveController, WaitsForALullReadFromTheRequestsInFlightAndRecordsThatOnce) {
  AdaptiveController controller;
  feed(controller, 8, 1e6, t0, 8);
  ASSERT_NE(controller.estimate("sdb"), nullptr);
  EXPECT_EQ(controller.estimate("sdb")->inFlight, 8U);
  for (int i = 0; i < 3; ++i) {
    auto decision = controller.evaluate(upperMap(), t0 + 14s + std::chrono::seconds{i}, wall0);
    EXPECT_EQ(decision.action, Action::Lull);
    EXPECT_THAT(decision.reason, HasSubstr("about 528 ms (sdb)"));
  }
  EXPECT_EQ(controller.reloads("xserve-upper"), 0U);
  auto planned = plannedUpper();
  EXPECT_FALSE(controller.applyTo(planned)); // nothing decided yet
  // The next sample finds sdb's queue empty.
  controller.sample("sda", statText(4000000 * 16, 1000 * 16), t0 + 16s);
  controller.sample("sdb", statText(1000000 * 16, 1000 * 16, 0), t0 + 16s);
  EXPECT_EQ(controller.evaluate(upperMap(), t0 + 16s, wall0).action, Action::Reload);
  const auto &history = controller.history("xserve-upper");
  ASSERT_EQ(history.size(), 2U);
  EXPECT_EQ(history.front().action, Action::Lull);
  EXPECT_EQ(history.back().action, Action::Reload);
  EXPECT_TRUE(controller.applyTo(planned));
  EXPECT_EQ(planned.spec.groups[0].paths[1].relativeThroughput, 25U);
}

TEST(AdaptiveController, KeepsABoundedHistory) {
  AdaptiveController controller;
  feed(controller, 8);
  controller.evaluate(upperMap(), t0 + 14s, wall0);
  // Weights 100/25 are in; equal ones now would be a change, deferred or
  // held by turns, each turn recorded.
  auto input = upperMap(100, 100);
  for (int i = 0; i < 40; ++i) {
    input.transitionDevice = i % 2 == 0 ? "sdb" : "";
    controller.evaluate(input, t0 + 16s, wall0 + std::chrono::seconds{i});
  }
  const auto &history = controller.history("xserve-upper");
  EXPECT_EQ(history.size(), AdaptiveController::kHistoryLength);
  EXPECT_EQ(history.back().at, wall0 + 39s);
}

TEST(AdaptiveController, SwitchesAnAutoMapWithEqualPathsToQueueLength) {
  AdaptiveController controller;
  feed(controller, 8, 4e6);
  auto input = upperMap();
  input.autoSelector = true;
  auto decision = controller.evaluate(input, t0 + 14s, wall0);
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_EQ(decision.selector, SelectorKind::QueueLength);
  auto planned = plannedUpper();
  planned.autoSelector = true;
  EXPECT_TRUE(controller.applyTo(planned));
  EXPECT_EQ(planned.spec.selector, SelectorKind::QueueLength);
  EXPECT_THAT(planned.table, HasSubstr("queue-length 0 2 1 8:0 1 8:16 1"));
  // A map that is not selector = "auto" keeps its configured selector.
  auto fixed = plannedUpper();
  controller.applyTo(fixed);
  EXPECT_EQ(fixed.spec.selector, SelectorKind::ServiceTime);
}

// selector = "auto" starts as queue-length (config): equal paths keep it
// without a reload, unequal ones get weighted service-time.
TEST(AdaptiveController, AnAutoMapStartingAsQueueLengthReloadsOnlyForUnequalPaths) {
  AdaptiveController equal;
  feed(equal, 8, 4e6);
  auto input = upperMap();
  input.autoSelector = true;
  input.currentSelector = SelectorKind::QueueLength;
  EXPECT_EQ(equal.evaluate(input, t0 + 14s, wall0).action, Action::Keep);

  AdaptiveController unequal;
  feed(unequal, 8, 1e6);
  auto decision = unequal.evaluate(input, t0 + 14s, wall0);
  EXPECT_EQ(decision.action, Action::Reload);
  EXPECT_EQ(decision.selector, SelectorKind::ServiceTime);
  EXPECT_THAT(decision.weights, ElementsAre(100U, 25U));
}

TEST(AdaptiveController, ForgetsAMapThatIsNoLongerAdaptive) {
  AdaptiveController controller;
  feed(controller, 8);
  controller.evaluate(upperMap(), t0 + 14s, wall0);
  controller.forgetMap("xserve-upper");
  auto planned = plannedUpper();
  EXPECT_FALSE(controller.applyTo(planned));
  EXPECT_TRUE(controller.history("xserve-upper").empty());
  EXPECT_EQ(controller.reloads("xserve-upper"), 0U);
}

TEST(AdaptiveController, ForgetsTheMapsItIsToldAreGone) {
  AdaptiveController controller;
  feed(controller, 8);
  controller.evaluate(upperMap(), t0 + 14s, wall0);
  ASSERT_EQ(controller.reloads("xserve-upper"), 1U);
  controller.forgetMapsIf([](std::string_view alias) { return alias == "xserve-lower"; });
  EXPECT_EQ(controller.reloads("xserve-upper"), 1U);
  controller.forgetMapsIf([](std::string_view alias) { return alias == "xserve-upper"; });
  EXPECT_EQ(controller.reloads("xserve-upper"), 0U);
  EXPECT_TRUE(controller.history("xserve-upper").empty());
}

TEST(AdaptiveControllerPublishing, AnnouncesAnEstimateOnceThenOnlyMovesBeyondTheDeadBand) {
  AdaptiveController controller;
  EXPECT_EQ(controller.published("sda"), PublishedEstimate{});
  feed(controller, 2);
  EXPECT_TRUE(controller.refreshPublished());
  const PublishedEstimate first = controller.published("sda");
  EXPECT_NEAR(static_cast<double>(first.throughputBps), 4e6, 0.05e6);
  EXPECT_NEAR(static_cast<double>(first.capacityBps), 4e6, 0.05e6);
  EXPECT_EQ(first.confidencePercent, 10U);
  EXPECT_GT(first.latencyUs, 0);
  EXPECT_FALSE(controller.refreshPublished());
}

TEST(AdaptiveControllerPublishing, KeepsASteadyBusyPathQuietWhileConfidenceClimbsInTenths) {
  AdaptiveController controller;
  feed(controller, 2);
  controller.refreshPublished();
  // Continue the same steady load: 40 more samples, each published at once.
  int announcements = 0;
  for (int i = 2; i < 42; ++i) {
    const auto seconds = static_cast<std::uint64_t>(2 * i);
    controller.sample("sda", statText(4000000 * seconds, 1000 * seconds), t0 + seconds * 1s);
    controller.sample("sdb", statText(1000000 * seconds, 1000 * seconds), t0 + seconds * 1s);
    announcements += controller.refreshPublished() ? 1 : 0;
  }
  // Only the confidence steps 10% -> 90% are news; the rates never moved by 10%.
  EXPECT_LE(announcements, 9);
  EXPECT_GE(controller.published("sda").confidencePercent, 90U);
  EXPECT_NEAR(static_cast<double>(controller.published("sda").throughputBps), 4e6, 0.05e6);
}

TEST(AdaptiveControllerPublishing, AnnouncesARealChangeAndForgetsARemovedPath) {
  AdaptiveController controller;
  feed(controller, 8);
  controller.refreshPublished();
  // sdb quadruples its rate: the estimate crosses the 10% band within a few samples.
  bool announced = false;
  for (int i = 8; i < 14 && !announced; ++i) {
    const auto seconds = static_cast<std::uint64_t>(2 * i);
    controller.sample("sdb", statText(14000000 + 4000000 * (seconds - 14), 1000 * seconds),
                      t0 + seconds * 1s);
    announced = controller.refreshPublished();
  }
  EXPECT_TRUE(announced);
  EXPECT_GT(controller.published("sdb").throughputBps, 1100000U);
  controller.forgetPath("sdb");
  EXPECT_EQ(controller.published("sdb"), PublishedEstimate{});
}

TEST(FirstUnsettledPath, IsEmptyWhenEveryPathIsUpOrGhostAndActiveInDm) {
  using selector::PathState;
  EXPECT_EQ(firstUnsettledPath({{"sda", PathState::Up, false}, {"sdb", PathState::Ghost, false}}),
            "");
  EXPECT_EQ(firstUnsettledPath({}), "");
}

TEST(FirstUnsettledPath, NamesAPathThatIsFailingOrBeingReinstated) {
  using selector::PathState;
  // Down, pending, shaky or unchecked: failing, or not known to be usable.
  EXPECT_EQ(firstUnsettledPath({{"sda", PathState::Up, false}, {"sdb", PathState::Down, true}}),
            "sdb");
  EXPECT_EQ(firstUnsettledPath({{"sda", PathState::Pending, false}}), "sda");
  EXPECT_EQ(firstUnsettledPath({{"sda", PathState::Shaky, true}}), "sda");
  EXPECT_EQ(firstUnsettledPath({{"sda", std::nullopt, false}}), "sda");
  // Up by health but still failed in dm: the reinstate_path is on its way.
  EXPECT_EQ(firstUnsettledPath({{"sda", PathState::Up, true}}), "sda");
  // Not listed by dm at all: the table is about to change.
  EXPECT_EQ(firstUnsettledPath({{"sda", PathState::Up, std::nullopt}}), "sda");
}

TEST(AdaptiveController, IgnoresAStatFileThatDoesNotParse) {
  AdaptiveController controller;
  controller.sample("sda", "", t0);
  controller.sample("sda", "gone", t0 + 2s);
  EXPECT_EQ(controller.estimate("sda"), nullptr);
}

TEST(Diskstats, GivesEachDeviceTheFieldsOfItsStatFile) {
  // As Linux 6.1 writes it: major, minor, name, then the 17 counters of
  // /sys/block/<dev>/stat.
  const std::string text =
      "   8       0 sda 1523 12 61234 880 310 7 4920 1200 0 1650 2080 0 0 0 0 41 9\n"
      "   8      16 sdb 9 0 72 3 0 0 0 0 2 10 3 0 0 0 0 0 0\n"
      " 253       0 dm-0 40 0 320 25 0 0 0 0 0 20 25 0 0 0 0 0 0\n";
  const auto stats = parseDiskstats(text);
  ASSERT_EQ(stats.size(), 3U);
  ASSERT_TRUE(stats.contains("sda"));
  EXPECT_EQ(stats.at("sda"), "1523 12 61234 880 310 7 4920 1200 0 1650 2080 0 0 0 0 41 9");
  const auto sda = selector::parseBlockStat(stats.at("sda"));
  ASSERT_TRUE(sda.has_value());
  EXPECT_EQ(sda->readIos, 1523U);
  EXPECT_EQ(sda->writeSectors, 4920U);
  EXPECT_EQ(sda->ioTicks, 1650U);
  EXPECT_EQ(sda->flushTicks, 9U);
  const auto sdb = selector::parseBlockStat(stats.at("sdb"));
  ASSERT_TRUE(sdb.has_value());
  EXPECT_EQ(sdb->inFlight, 2U);
  EXPECT_TRUE(stats.contains("dm-0"));
}

TEST(Diskstats, SkipsLinesWithoutANameAndToleratesNoNewlineAtTheEnd) {
  const auto stats = parseDiskstats("\n   8\n 8 32\n\t8\t32\tsdc 1 2 3 4 5 6 7 8 0 9 10");
  ASSERT_EQ(stats.size(), 1U);
  EXPECT_EQ(stats.at("sdc"), "1 2 3 4 5 6 7 8 0 9 10");
  EXPECT_TRUE(parseDiskstats("").empty());
}

TEST(AdaptiveController, RestartsEstimatesWhenTheHalfLifeChanges) {
  AdaptiveController controller;
  feed(controller, 8);
  selector::AdaptiveSettings settings;
  settings.minReloadInterval = 5min; // governor-only: estimates survive
  controller.setSettings(settings);
  EXPECT_NE(controller.estimate("sda"), nullptr);
  settings.halfLife = 30s;
  controller.setSettings(settings);
  EXPECT_EQ(controller.estimate("sda"), nullptr);
}

} // namespace
} // namespace pathkeeper::daemon
