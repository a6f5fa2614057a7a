#include "health.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace {

using namespace std::chrono_literals;
using pathkeeper::daemon::CheckResult;
using pathkeeper::daemon::CheckStatus;
using pathkeeper::daemon::DeviceState;
using pathkeeper::daemon::DmAction;
using pathkeeper::daemon::HealthDecision;
using pathkeeper::daemon::HealthTracker;
using pathkeeper::daemon::PathFacts;
using pathkeeper::daemon::PathRoute;
using pathkeeper::daemon::SessionState;
using pathkeeper::selector::AluaState;
using pathkeeper::selector::HealthSettings;
using pathkeeper::selector::PathState;
using pathkeeper::selector::Portal;
using testing::ElementsAre;
using testing::HasSubstr;
using testing::IsEmpty;

using TimePoint = HealthTracker::TimePoint;

// A fake clock is just a time point the test advances.
const TimePoint t0{std::chrono::hours(100)};

PathFacts loggedIn(unsigned sessionId = 3, std::string netdev = "eth1",
                   std::string address = "10.10.1.20") {
  PathFacts facts;
  facts.session = SessionState::LoggedIn;
  facts.device = DeviceState::Running;
  facts.sessionId = sessionId;
  facts.route = PathRoute{std::move(netdev), Portal{std::move(address), 3260, 1}};
  return facts;
}

CheckResult passed() {
  return CheckResult{CheckStatus::Ok, "", 800us};
}
CheckResult turFailed() {
  return CheckResult{CheckStatus::Failed, "sense 02/04/03", 900us};
}
CheckResult transitioning() {
  return CheckResult{CheckStatus::Transitioning,
                     "TUR: NOT READY, ASC 04/0A asymmetric access state transition", 600us};
}
CheckResult standby() {
  return CheckResult{CheckStatus::Standby, "ALUA standby", 700us};
}

/// One decision, or a failure that shows what came instead.
HealthDecision only(const std::vector<HealthDecision> &decisions) {
  EXPECT_EQ(decisions.size(), 1U);
  return decisions.empty() ? HealthDecision{} : decisions.front();
}

/// Adds @p device and runs its first check, which passes: the path is Up.
void addUp(HealthTracker &tracker, const std::string &device, TimePoint now,
           PathFacts facts = loggedIn()) {
  tracker.addPath(device, facts, now);
  tracker.markCheckStarted(device, now);
  const auto decisions = tracker.checkCompleted(device, passed(), now);
  ASSERT_EQ(tracker.state(device), PathState::Up);
  ASSERT_EQ(decisions.size(), 1U);
}

/// The kernel fails an Up path, and a passing TUR brings it back.
std::vector<HealthDecision> flapOnce(HealthTracker &tracker, const std::string &device,
                                     TimePoint failAt, TimePoint backAt) {
  auto decisions = tracker.kernelFailed(device, failAt);
  const auto back = tracker.checkCompleted(device, passed(), backAt);
  decisions.insert(decisions.end(), back.begin(), back.end());
  return decisions;
}

TEST(HealthTracker, PublishesUnknownThenPendingThenUpForANewPath) {
  HealthTracker tracker(HealthSettings{});
  const auto added = only(tracker.addPath("sdb", loggedIn(), t0));
  EXPECT_EQ(added.state, PathState::Unknown);
  EXPECT_EQ(added.action, DmAction::None);

  const auto started = only(tracker.markCheckStarted("sdb", t0));
  EXPECT_EQ(started.state, PathState::Pending);

  const auto up = only(tracker.checkCompleted("sdb", passed(), t0 + 1ms));
  EXPECT_EQ(up.state, PathState::Up);
  EXPECT_EQ(up.action, DmAction::None); // a fresh table has it active already
  EXPECT_EQ(up.reason, "session 3 logged in and TUR passed");
}

TEST(HealthTracker, ReturnsNothingWhenAPassingCheckChangesNothing) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  EXPECT_THAT(tracker.markCheckStarted("sdb", t0 + 5s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Up); // not Pending after the first result
  EXPECT_THAT(tracker.checkCompleted("sdb", passed(), t0 + 5s), IsEmpty());
}

TEST(HealthTracker, KernelFailureMakesThePathDownWithoutADmMessage) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto down = only(tracker.kernelFailed("sdb", t0 + 1s));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(down.action, DmAction::None);
  EXPECT_THAT(down.reason, HasSubstr("PATH_FAILED"));
  EXPECT_EQ(tracker.health("sdb")->failures, 1U);
  EXPECT_TRUE(tracker.health("sdb")->failedInDm);
}

TEST(HealthTracker, FailedTurFailsTheUpPathInDm) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.markCheckStarted("sdb", t0 + 5s);
  const auto down = only(tracker.checkCompleted("sdb", turFailed(), t0 + 5s));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(down.action, DmAction::Fail);
  EXPECT_EQ(down.reason, "TUR failed: sense 02/04/03");
  const auto health = tracker.health("sdb");
  EXPECT_EQ(health->lastCheck, CheckStatus::Failed);
  EXPECT_EQ(health->lastCheckReason, "sense 02/04/03");
  EXPECT_EQ(health->lastCheckLatency, 900us);
}

TEST(HealthTracker, CountsOneOutageOnceHoweverManyReportsItGets) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.kernelFailed("sdb", t0 + 1s);
  tracker.sessionChanged("sdb", SessionState::Failed, t0 + 2s);
  tracker.checkCompleted("sdb", turFailed(), t0 + 3s);
  tracker.kernelFailed("sdb", t0 + 4s);
  EXPECT_EQ(tracker.health("sdb")->failures, 1U);
  EXPECT_FALSE(tracker.health("sdb")->shaky);
}

TEST(HealthTracker, PathAddedWithAFailedSessionIsDownAndFailedInDmWithoutAFailure) {
  HealthTracker tracker(HealthSettings{});
  PathFacts facts = loggedIn();
  facts.session = SessionState::Failed;
  const auto added = only(tracker.addPath("sdb", facts, t0));
  EXPECT_EQ(added.state, PathState::Down);
  EXPECT_EQ(added.action, DmAction::Fail);
  EXPECT_EQ(tracker.health("sdb")->failures, 0U);
}

TEST(HealthTracker, StandbyPathIsGhostAndNeverFailedForBeingStandby) {
  HealthTracker tracker(HealthSettings{});
  PathFacts facts = loggedIn();
  facts.alua = AluaState::Standby;
  const auto added = only(tracker.addPath("sdc", facts, t0));
  EXPECT_EQ(added.state, PathState::Ghost);
  EXPECT_EQ(added.action, DmAction::None);
  tracker.markCheckStarted("sdc", t0);
  EXPECT_THAT(tracker.checkCompleted("sdc", standby(), t0), IsEmpty());
  EXPECT_EQ(tracker.state("sdc"), PathState::Ghost);
  EXPECT_FALSE(tracker.health("sdc")->failedInDm);
}

TEST(HealthTracker, GhostPathFailedByTheKernelIsReinstatedAsALastResort) {
  HealthTracker tracker(HealthSettings{});
  PathFacts facts = loggedIn();
  facts.alua = AluaState::Standby;
  tracker.addPath("sdc", facts, t0);
  tracker.checkCompleted("sdc", standby(), t0);
  EXPECT_EQ(only(tracker.kernelFailed("sdc", t0 + 1s)).state, PathState::Down);
  const auto back = only(tracker.checkCompleted("sdc", standby(), t0 + 2s));
  EXPECT_EQ(back.state, PathState::Ghost);
  EXPECT_EQ(back.action, DmAction::Reinstate);
  EXPECT_THAT(back.reason, HasSubstr("standby"));
}

TEST(HealthTracker, TurNotReadyTurnsAnUpPathGhostWithoutFailingIt) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto ghost = only(tracker.checkCompleted("sdb", standby(), t0 + 5s));
  EXPECT_EQ(ghost.state, PathState::Ghost);
  EXPECT_EQ(ghost.action, DmAction::None);
  const auto up = only(tracker.checkCompleted("sdb", passed(), t0 + 10s));
  EXPECT_EQ(up.state, PathState::Up);
}

TEST(HealthTracker, AluaStandbyTurnsAHealthyPathGhost) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto ghost = only(tracker.aluaChanged("sdb", AluaState::Standby, t0 + 1s));
  EXPECT_EQ(ghost.state, PathState::Ghost);
  EXPECT_EQ(ghost.action, DmAction::None);
  EXPECT_EQ(only(tracker.aluaChanged("sdb", AluaState::ActiveOptimized, t0 + 2s)).state,
            PathState::Up);
}

TEST(HealthTracker, RemovalPublishesRemovedAndForgetsThePath) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto removed = only(tracker.removePath("sdb", t0 + 1s));
  EXPECT_EQ(removed.state, PathState::Removed);
  EXPECT_EQ(removed.action, DmAction::None);
  EXPECT_EQ(tracker.state("sdb"), std::nullopt);
  EXPECT_THAT(tracker.devices(), IsEmpty());
  EXPECT_THAT(tracker.removePath("sdb", t0 + 2s), IsEmpty());
}

TEST(HealthTracker, IgnoresEventsForDevicesItDoesNotTrack) {
  HealthTracker tracker(HealthSettings{});
  EXPECT_THAT(tracker.kernelFailed("sdz", t0), IsEmpty());
  EXPECT_THAT(tracker.checkCompleted("sdz", passed(), t0), IsEmpty());
  EXPECT_THAT(tracker.sessionChanged("sdz", SessionState::LoggedIn, t0), IsEmpty());
  EXPECT_THAT(tracker.devices(), IsEmpty());
}

TEST(HealthTracker, OfflineDeviceIsDownAndNeedsACheckWhenRunningAgain) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto down = only(tracker.deviceChanged("sdb", DeviceState::TransportOffline, t0 + 1s));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(down.action, DmAction::Fail);
  EXPECT_THAT(tracker.deviceChanged("sdb", DeviceState::Running, t0 + 3s), IsEmpty());
  EXPECT_EQ(tracker.nextCheckDue("sdb"), t0 + 3s);
  EXPECT_EQ(only(tracker.checkCompleted("sdb", passed(), t0 + 3s)).action, DmAction::Reinstate);
}

TEST(HealthTracker, KernelReinstateOfADownPathIsFailedAgainAndCheckedAtOnce) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.checkCompleted("sdb", turFailed(), t0 + 5s);
  const auto again = only(tracker.kernelReinstated("sdb", t0 + 6s));
  EXPECT_EQ(again.action, DmAction::Fail);
  EXPECT_EQ(again.state, PathState::Down);
  EXPECT_EQ(tracker.nextCheckDue("sdb"), t0 + 6s);
}

TEST(HealthTracker, KernelReinstateOfAnUpPathChangesNothing) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  EXPECT_THAT(tracker.kernelReinstated("sdb", t0 + 1s), IsEmpty());
}

TEST(HealthReinstatement, SessionLoginMakesACheckDueNowAndAPassingTurReinstatesAtOnce) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto lost = only(tracker.sessionChanged("sdb", SessionState::Failed, t0 + 10s));
  EXPECT_EQ(lost.state, PathState::Down);
  EXPECT_EQ(lost.action, DmAction::Fail);

  const TimePoint login = t0 + 40s;
  // The session event alone never reinstates.
  EXPECT_THAT(tracker.sessionChanged("sdb", SessionState::LoggedIn, login), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Down);
  EXPECT_EQ(tracker.nextCheckDue("sdb"), login);
  EXPECT_THAT(tracker.dueChecks(login), ElementsAre("sdb"));

  EXPECT_THAT(tracker.markCheckStarted("sdb", login), IsEmpty()); // Down stays Down
  const auto back = only(tracker.checkCompleted("sdb", passed(), login));
  EXPECT_EQ(back.state, PathState::Up);
  EXPECT_EQ(back.action, DmAction::Reinstate);
  EXPECT_EQ(back.reason, "session 3 logged in and TUR passed");
}

TEST(HealthReinstatement, TurPassWhileTheSessionIsNotLoggedInDoesNotReinstate) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.sessionChanged("sdb", SessionState::Failed, t0 + 1s);
  EXPECT_THAT(tracker.checkCompleted("sdb", passed(), t0 + 2s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Down);
  EXPECT_TRUE(tracker.health("sdb")->failedInDm);
  EXPECT_EQ(tracker.health("sdb")->lastCheck, CheckStatus::Ok);

  // A login after that pass still needs a pass of its own.
  EXPECT_THAT(tracker.sessionChanged("sdb", SessionState::LoggedIn, t0 + 3s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Down);
}

TEST(HealthReinstatement, FailingCheckInFlightAtLoginIsRepeatedAtOnce) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.sessionChanged("sdb", SessionState::Failed, t0 + 1s);
  tracker.markCheckStarted("sdb", t0 + 2s);
  tracker.sessionChanged("sdb", SessionState::LoggedIn, t0 + 3s);
  EXPECT_EQ(tracker.nextCheckDue("sdb"), std::nullopt); // still in flight
  tracker.checkCompleted("sdb", CheckResult{CheckStatus::TimedOut, "", 3s}, t0 + 5s);
  EXPECT_EQ(tracker.nextCheckDue("sdb"), t0 + 5s);
}

TEST(HealthReinstatement, PassingCheckInFlightAtLoginReinstates) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.sessionChanged("sdb", SessionState::Failed, t0 + 1s);
  tracker.markCheckStarted("sdb", t0 + 2s);
  tracker.sessionChanged("sdb", SessionState::LoggedIn, t0 + 3s);
  EXPECT_EQ(only(tracker.checkCompleted("sdb", passed(), t0 + 3s)).action, DmAction::Reinstate);
}

TEST(HealthFlapDamping, ThreeFailuresWithinTheWindowMakeThePathShaky) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 10s, t0 + 11s);
  flapOnce(tracker, "sdb", t0 + 20s, t0 + 21s);
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);

  const auto shaky = only(tracker.kernelFailed("sdb", t0 + 30s));
  EXPECT_EQ(shaky.state, PathState::Shaky);
  EXPECT_EQ(shaky.action, DmAction::None); // the kernel failed it already
  EXPECT_EQ(
      shaky.reason,
      "kernel failed the path (PATH_FAILED); failed 3 times in 60s: shaky, held failed for 30s");
  const auto health = tracker.health("sdb");
  EXPECT_TRUE(health->shaky);
  EXPECT_EQ(health->failures, 3U);
  EXPECT_EQ(health->holdDownUntil, t0 + 60s);
}

// SIGHUP with a shorter checker_interval: the checks scheduled under the
// old one come no later than the new interval allows; a longer one waits
// for the next result.
TEST(HealthTracker, AShorterIntervalOnReloadAppliesAtOnce) {
  HealthSettings slow;
  slow.checkerInterval = std::chrono::seconds(60);
  HealthTracker tracker(slow);
  addUp(tracker, "sdb", t0);
  addUp(tracker, "sdc", t0);
  tracker.markCheckStarted("sdc", t0 + 1s); // in flight: its result reschedules it
  ASSERT_THAT(tracker.dueChecks(t0 + 40s), IsEmpty());
  HealthSettings fast = slow;
  fast.checkerInterval = std::chrono::seconds(2);
  tracker.setSettings(fast, t0 + 10s);
  EXPECT_THAT(tracker.dueChecks(t0 + 10s + 2200ms), ElementsAre("sdb"));
  tracker.setSettings(slow, t0 + 11s);
  EXPECT_THAT(tracker.dueChecks(t0 + 10s + 2200ms), ElementsAre("sdb"));
}

// ALUA 04/0A: the array moving the LU between its ports. The path keeps its
// state and is checked again within a second; the check after the
// transition decides. Three transitions in the flap window make no shaky
// path (multipath-tools 0.9.4 failed the path each time).
TEST(HealthAluaTransition, AnUpPathKeepsItsStateAndIsCheckedAgainSoon) {
  HealthSettings settings;
  settings.failedCheckerInterval = std::chrono::seconds(5);
  HealthTracker tracker(settings);
  addUp(tracker, "sdb", t0);
  for (int round = 1; round <= 3; ++round) {
    const auto at = t0 + std::chrono::seconds(10 * round);
    tracker.markCheckStarted("sdb", at);
    EXPECT_THAT(tracker.checkCompleted("sdb", transitioning(), at), IsEmpty());
    EXPECT_EQ(tracker.state("sdb"), PathState::Up);
    EXPECT_EQ(tracker.nextDeadline(), at + 1s);
    EXPECT_THAT(tracker.dueChecks(at + 1s), ElementsAre("sdb"));
    tracker.markCheckStarted("sdb", at + 1s);
    // The transition ends on the standby side: ghost, never failed.
    const auto after = only(tracker.checkCompleted("sdb", standby(), at + 1s));
    EXPECT_EQ(after.state, PathState::Ghost);
    EXPECT_EQ(after.action, DmAction::None);
    tracker.markCheckStarted("sdb", at + 2s);
    tracker.checkCompleted("sdb", passed(), at + 2s);
    EXPECT_EQ(tracker.state("sdb"), PathState::Up);
  }
  EXPECT_EQ(tracker.health("sdb")->failures, 0U);
  EXPECT_FALSE(tracker.health("sdb")->shaky);
}

TEST(HealthAluaTransition, ADownPathStaysDownUntilACheckPasses) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.markCheckStarted("sdb", t0 + 5s);
  ASSERT_EQ(only(tracker.checkCompleted("sdb", turFailed(), t0 + 5s)).action, DmAction::Fail);
  tracker.markCheckStarted("sdb", t0 + 6s);
  EXPECT_THAT(tracker.checkCompleted("sdb", transitioning(), t0 + 6s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Down);
  tracker.markCheckStarted("sdb", t0 + 7s);
  const auto back = only(tracker.checkCompleted("sdb", passed(), t0 + 7s));
  EXPECT_EQ(back.action, DmAction::Reinstate);
  EXPECT_EQ(tracker.health("sdb")->failures, 1U);
}

// The kernel gives up on a transition after 60 s (scsi_dh_alua): so does
// the health engine, and that is one failure.
TEST(HealthAluaTransition, ATransitionThatOutlastsTheLimitFailsThePath) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  auto at = t0 + 10s;
  for (; at < t0 + 10s + HealthTracker::kTransitionLimit; at += 1s) {
    tracker.markCheckStarted("sdb", at);
    ASSERT_THAT(tracker.checkCompleted("sdb", transitioning(), at), IsEmpty());
  }
  tracker.markCheckStarted("sdb", at);
  const auto down = only(tracker.checkCompleted("sdb", transitioning(), at));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(down.action, DmAction::Fail);
  EXPECT_THAT(down.reason, HasSubstr("ALUA transition for over 60s"));
  EXPECT_EQ(tracker.health("sdb")->failures, 1U);
  // A new transition later starts its own count.
  tracker.markCheckStarted("sdb", at + 1s);
  ASSERT_EQ(only(tracker.checkCompleted("sdb", passed(), at + 1s)).action, DmAction::Reinstate);
  tracker.markCheckStarted("sdb", at + 2s);
  EXPECT_THAT(tracker.checkCompleted("sdb", transitioning(), at + 2s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
}

TEST(HealthFlapDamping, FailuresSpreadWiderThanTheWindowDoNotMakeItShaky) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 10s, t0 + 11s);
  flapOnce(tracker, "sdb", t0 + 50s, t0 + 51s);
  flapOnce(tracker, "sdb", t0 + 80s, t0 + 81s); // 10s has left the 60s window
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
  EXPECT_EQ(tracker.health("sdb")->failures, 3U);
  EXPECT_FALSE(tracker.health("sdb")->shaky);
}

TEST(HealthFlapDamping, ShakyPathStaysFailedUntilStableForTheWholeHoldDown) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s); // shaky, 30s
  // Passing checks and a logged-in session do not release it early.
  EXPECT_THAT(tracker.checkCompleted("sdb", passed(), t0 + 6s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Shaky);
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 36s);
  EXPECT_EQ(tracker.nextDeadline(), tracker.nextCheckDue("sdb")); // checks come first

  EXPECT_THAT(tracker.checkCompleted("sdb", passed(), t0 + 20s), IsEmpty());
  EXPECT_THAT(tracker.tick(t0 + 35s), IsEmpty()); // hold-down over, but stable only 29s
  EXPECT_EQ(tracker.state("sdb"), PathState::Shaky);

  const auto released = only(tracker.tick(t0 + 36s));
  EXPECT_EQ(released.state, PathState::Up);
  EXPECT_EQ(released.action, DmAction::Reinstate);
  EXPECT_EQ(released.reason, "stable for 30s after flapping: hold-down over");
  EXPECT_FALSE(tracker.health("sdb")->shaky);
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, std::nullopt);
}

TEST(HealthFlapDamping, FailureDuringTheHoldDownDoublesAndRestartsIt) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s);
  tracker.checkCompleted("sdb", passed(), t0 + 6s);

  const auto extended = only(tracker.checkCompleted("sdb", turFailed(), t0 + 20s));
  EXPECT_EQ(extended.state, PathState::Shaky);
  EXPECT_EQ(extended.action, DmAction::None); // still failed in dm
  EXPECT_THAT(extended.reason, HasSubstr("failed again while shaky: held failed for 60s"));
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 80s);

  tracker.checkCompleted("sdb", passed(), t0 + 21s);
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 81s);
  EXPECT_THAT(tracker.tick(t0 + 80s), IsEmpty());
  EXPECT_EQ(only(tracker.tick(t0 + 81s)).action, DmAction::Reinstate);
}

TEST(HealthFlapDamping, HoldDownGrowthIsCappedAtFlapRecoveryMax) {
  HealthSettings settings;
  settings.flapRecoveryMax = 100s;
  HealthTracker tracker(settings);
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  TimePoint now = t0 + 5s;
  tracker.kernelFailed("sdb", now);
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, now + 30s);
  std::vector<std::chrono::seconds> holds;
  for (int i = 0; i < 3; ++i) {
    tracker.checkCompleted("sdb", passed(), now + 1s);
    now += 10s;
    tracker.checkCompleted("sdb", turFailed(), now);
    holds.push_back(std::chrono::duration_cast<std::chrono::seconds>(
        *tracker.health("sdb")->holdDownUntil - now));
  }
  EXPECT_THAT(holds, ElementsAre(60s, 100s, 100s));
}

TEST(HealthFlapDamping, KernelReinstateDuringTheHoldDownIsFailedAgain) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s);
  tracker.checkCompleted("sdb", passed(), t0 + 6s);

  const auto again = only(tracker.kernelReinstated("sdb", t0 + 7s));
  EXPECT_EQ(again.action, DmAction::Fail);
  EXPECT_EQ(again.state, PathState::Shaky);
  EXPECT_THAT(again.reason, HasSubstr("hold-down"));
  // The reinstatement was not a failure: the hold-down does not move.
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 36s);
}

/// sdb made shaky at t0 + 5s (held failed for 30s), failed in dm by the kernel.
void makeShakyAtFiveSeconds(HealthTracker &tracker) {
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s);
  ASSERT_EQ(tracker.state("sdb"), PathState::Shaky);
}

// Damping must not turn a flapping path into an outage: with no stable path
// left in its map, a shaky path that passes its checks carries the I/O.
TEST(HealthLastResort, AShakyPathIsReinstatedOnceHealthyWhileItsMapHasNoOtherPath) {
  HealthTracker tracker(HealthSettings{});
  makeShakyAtFiveSeconds(tracker);
  // Not healthy yet (no passing check since the failure): it stays failed.
  EXPECT_THAT(tracker.setLastResort("sdb", true, t0 + 5s), IsEmpty());
  EXPECT_FALSE(tracker.inUseAsLastResort("sdb"));

  const auto back = only(tracker.checkCompleted("sdb", passed(), t0 + 6s));
  EXPECT_EQ(back.action, DmAction::Reinstate);
  EXPECT_EQ(back.state, PathState::Shaky) << "still published shaky";
  EXPECT_THAT(back.reason, HasSubstr("shaky, but no other path of its map is usable"));
  EXPECT_TRUE(tracker.inUseAsLastResort("sdb"));
  EXPECT_TRUE(tracker.health("sdb")->shaky);
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 36s) << "the hold-down goes on";

  // A kernel reinstatement changes nothing now; a failure fails it and
  // doubles the hold-down as before; the next pass reinstates it again.
  EXPECT_THAT(tracker.kernelReinstated("sdb", t0 + 7s), IsEmpty());
  const auto again = only(tracker.checkCompleted("sdb", turFailed(), t0 + 20s));
  EXPECT_EQ(again.action, DmAction::Fail);
  EXPECT_EQ(again.state, PathState::Shaky);
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 80s);
  EXPECT_FALSE(tracker.inUseAsLastResort("sdb"));
  EXPECT_EQ(only(tracker.checkCompleted("sdb", passed(), t0 + 21s)).action, DmAction::Reinstate);
}

TEST(HealthLastResort, AnotherUsablePathFailsTheShakyOneAgainUntilItsHoldDownEnds) {
  HealthTracker tracker(HealthSettings{});
  makeShakyAtFiveSeconds(tracker);
  tracker.setLastResort("sdb", true, t0 + 5s);
  ASSERT_EQ(only(tracker.checkCompleted("sdb", passed(), t0 + 6s)).action, DmAction::Reinstate);

  const auto held = only(tracker.setLastResort("sdb", false, t0 + 10s));
  EXPECT_EQ(held.action, DmAction::Fail);
  EXPECT_EQ(held.state, PathState::Shaky);
  EXPECT_EQ(held.reason, "another path of its map is usable again; held failed until stable");
  EXPECT_FALSE(tracker.inUseAsLastResort("sdb"));
  EXPECT_THAT(tracker.setLastResort("sdb", false, t0 + 11s), IsEmpty()) << "no change, nothing";

  // Its time as the last resort counted as stable: released on schedule.
  const auto released = only(tracker.tick(t0 + 36s));
  EXPECT_EQ(released.state, PathState::Up);
  EXPECT_EQ(released.action, DmAction::Reinstate);
}

TEST(HealthLastResort, TheMarkEndsWithTheHoldDown) {
  HealthTracker tracker(HealthSettings{});
  makeShakyAtFiveSeconds(tracker);
  tracker.setLastResort("sdb", true, t0 + 5s);
  tracker.checkCompleted("sdb", passed(), t0 + 6s);
  const auto released = only(tracker.tick(t0 + 36s));
  EXPECT_EQ(released.state, PathState::Up);
  EXPECT_EQ(released.action, DmAction::None) << "already active in dm";

  // Shaky again later: held failed, until the caller marks it again.
  flapOnce(tracker, "sdb", t0 + 40s, t0 + 41s);
  flapOnce(tracker, "sdb", t0 + 42s, t0 + 43s);
  tracker.kernelFailed("sdb", t0 + 44s);
  ASSERT_EQ(tracker.state("sdb"), PathState::Shaky);
  EXPECT_THAT(tracker.checkCompleted("sdb", passed(), t0 + 45s), IsEmpty());
  EXPECT_TRUE(tracker.health("sdb")->failedInDm);
}

TEST(HealthLastResort, OnlyAShakyPathIsAffected) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  EXPECT_THAT(tracker.setLastResort("sdb", true, t0 + 1s), IsEmpty());
  const auto down = only(tracker.checkCompleted("sdb", turFailed(), t0 + 2s));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(down.action, DmAction::Fail) << "a down path is failed, last resort or not";
  EXPECT_FALSE(tracker.inUseAsLastResort("sdb"));
  EXPECT_THAT(tracker.setLastResort("sdx", true, t0 + 3s), IsEmpty()) << "untracked";
}

TEST(HealthFlapDamping, ReleasedPathIsOnlyDownAfterALaterSingleFailure) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s);
  tracker.checkCompleted("sdb", passed(), t0 + 6s);
  ASSERT_EQ(only(tracker.tick(t0 + 36s)).state, PathState::Up);

  const auto down = only(tracker.kernelFailed("sdb", t0 + 40s));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(tracker.health("sdb")->failures, 4U);
}

TEST(HealthFlapDamping, ShakyAgainSoonAfterReleaseKeepsDoublingAndLaterStartsOver) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  const auto makeShaky = [&tracker](TimePoint start) {
    flapOnce(tracker, "sdb", start, start + 1s);
    flapOnce(tracker, "sdb", start + 2s, start + 3s);
    tracker.kernelFailed("sdb", start + 4s);
    tracker.checkCompleted("sdb", passed(), start + 5s);
  };
  makeShaky(t0); // shaky at +4s, stable from +5s, released at +35s
  ASSERT_EQ(only(tracker.tick(t0 + 35s)).state, PathState::Up);

  makeShaky(t0 + 40s); // within flapWindow of the release
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 45s + 60s);
  ASSERT_EQ(only(tracker.tick(t0 + 105s)).state, PathState::Up);

  makeShaky(t0 + 105s + 61s); // long after: back to flapRecovery
  EXPECT_EQ(tracker.health("sdb")->holdDownUntil, t0 + 171s + 30s);
}

TEST(HealthFlapDamping, DisabledDampingNeverMakesAPathShaky) {
  HealthSettings settings;
  settings.flapDamping = false;
  HealthTracker tracker(settings);
  addUp(tracker, "sdb", t0);
  for (int i = 0; i < 5; ++i) {
    const auto decisions = flapOnce(tracker, "sdb", t0 + std::chrono::seconds(2 * i + 1),
                                    t0 + std::chrono::seconds(2 * i + 2));
    ASSERT_EQ(decisions.size(), 2U);
    EXPECT_EQ(decisions[0].state, PathState::Down);
    EXPECT_EQ(decisions[1].state, PathState::Up);
    EXPECT_EQ(decisions[1].action, DmAction::Reinstate);
  }
  EXPECT_EQ(tracker.health("sdb")->failures, 5U);
  EXPECT_FALSE(tracker.health("sdb")->shaky);
}

TEST(HealthScheduling, NewPathIsDueAtOnce) {
  HealthTracker tracker(HealthSettings{});
  tracker.addPath("sdb", loggedIn(), t0);
  EXPECT_THAT(tracker.dueChecks(t0), ElementsAre("sdb"));
  EXPECT_EQ(tracker.nextDeadline(), t0);
}

TEST(HealthScheduling, UpPathsAreCheckedEveryIntervalWithinTenPercentJitter) {
  HealthSettings fixed;
  fixed.maxCheckerInterval = fixed.checkerInterval; // no backoff
  HealthTracker tracker(fixed, 42);
  addUp(tracker, "sdb", t0);
  std::set<TimePoint::duration> delays;
  TimePoint now = t0;
  for (int i = 0; i < 200; ++i) {
    tracker.markCheckStarted("sdb", now);
    tracker.checkCompleted("sdb", passed(), now);
    const auto due = *tracker.nextCheckDue("sdb");
    ASSERT_GE(due - now, 4500ms);
    ASSERT_LE(due - now, 5500ms);
    EXPECT_THAT(tracker.dueChecks(due - 1ms), IsEmpty());
    EXPECT_THAT(tracker.dueChecks(due), ElementsAre("sdb"));
    delays.insert(due - now);
    now = due;
  }
  EXPECT_GT(delays.size(), 50U); // jittered, not one fixed interval
}

/// Passes @p device's check at @p now and returns the delay to its next one.
TimePoint::duration passAndNextDelay(HealthTracker &tracker, const std::string &device,
                                     TimePoint now) {
  tracker.markCheckStarted(device, now);
  tracker.checkCompleted(device, passed(), now);
  return *tracker.nextCheckDue(device) - now;
}

/// True when @p delay is @p interval within the +/-10% jitter.
bool about(TimePoint::duration delay, std::chrono::milliseconds interval) {
  return delay >= interval * 9 / 10 && delay <= interval * 11 / 10;
}

TEST(HealthScheduling, AnUpPathThatKeepsPassingBacksOffToFourTimesTheIntervalByDefault) {
  HealthTracker tracker(HealthSettings{}, 42); // 5s, max unset: 20s
  addUp(tracker, "sdb", t0);                   // the first pass
  EXPECT_TRUE(about(*tracker.nextCheckDue("sdb") - t0, 5s));
  TimePoint now = *tracker.nextCheckDue("sdb");
  std::vector<std::chrono::milliseconds> expected{10s, 20s, 20s, 20s};
  for (const auto interval : expected) {
    const auto delay = passAndNextDelay(tracker, "sdb", now);
    EXPECT_TRUE(about(delay, interval))
        << std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()
        << " ms, expected about " << interval.count();
    now += delay;
  }
}

TEST(HealthScheduling, TheBackoffStopsAtTheConfiguredMaximum) {
  HealthSettings settings;
  settings.checkerInterval = 2s;
  settings.maxCheckerInterval = 12s; // not a power of two times 2s
  HealthTracker tracker(settings, 3);
  addUp(tracker, "sdb", t0);
  TimePoint now = *tracker.nextCheckDue("sdb");
  std::vector<std::chrono::milliseconds> expected{4s, 8s, 12s, 12s};
  for (const auto interval : expected) {
    const auto delay = passAndNextDelay(tracker, "sdb", now);
    EXPECT_TRUE(about(delay, interval))
        << std::chrono::duration_cast<std::chrono::milliseconds>(delay).count();
    now += delay;
  }
}

TEST(HealthScheduling, AFailureStartsTheBackoffOver) {
  HealthTracker tracker(HealthSettings{}, 9);
  addUp(tracker, "sdb", t0);
  TimePoint now = *tracker.nextCheckDue("sdb");
  for (int i = 0; i < 3; ++i) {
    now += passAndNextDelay(tracker, "sdb", now);
  }
  ASSERT_TRUE(about(passAndNextDelay(tracker, "sdb", now), 20s)); // backed off
  now += 3s;
  tracker.kernelFailed("sdb", now);
  EXPECT_TRUE(about(*tracker.nextCheckDue("sdb") - now, 1s)); // the failed interval at once
  // Back: checked at checker_interval again, then backing off anew.
  now = *tracker.nextCheckDue("sdb");
  EXPECT_TRUE(about(passAndNextDelay(tracker, "sdb", now), 5s));
  now = *tracker.nextCheckDue("sdb");
  EXPECT_TRUE(about(passAndNextDelay(tracker, "sdb", now), 10s));
}

TEST(HealthScheduling, ASessionThatDroppedAndCameBackStartsTheBackoffOver) {
  HealthTracker tracker(HealthSettings{}, 11);
  addUp(tracker, "sdb", t0);
  TimePoint now = *tracker.nextCheckDue("sdb");
  for (int i = 0; i < 4; ++i) {
    now += passAndNextDelay(tracker, "sdb", now);
  }
  tracker.sessionChanged("sdb", SessionState::Failed, now + 1s);
  tracker.sessionChanged("sdb", SessionState::LoggedIn, now + 2s);
  EXPECT_EQ(*tracker.nextCheckDue("sdb"), now + 2s); // the login asks for a check at once
  EXPECT_TRUE(about(passAndNextDelay(tracker, "sdb", now + 2s), 5s));
}

TEST(HealthScheduling, AKernelReinstatementStartsTheBackoffOver) {
  HealthTracker tracker(HealthSettings{}, 13);
  addUp(tracker, "sdb", t0);
  TimePoint now = *tracker.nextCheckDue("sdb");
  for (int i = 0; i < 4; ++i) {
    now += passAndNextDelay(tracker, "sdb", now);
  }
  // dm had it failed behind our back (another tool) and reinstated it.
  tracker.kernelReinstated("sdb", now + 1s);
  EXPECT_LE(*tracker.nextCheckDue("sdb"), now + 1s + 5500ms); // brought forward
  EXPECT_TRUE(about(passAndNextDelay(tracker, "sdb", now + 2s), 5s));
}

TEST(HealthScheduling, APathReleasedFromItsHoldDownStartsAtTheCheckerInterval) {
  HealthTracker tracker(HealthSettings{}, 19);
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s); // shaky, held for 30 s
  ASSERT_EQ(tracker.state("sdb"), PathState::Shaky);
  for (auto at = t0 + 6s; at < t0 + 36s; at += 1s) { // its passes meanwhile
    tracker.markCheckStarted("sdb", at);
    tracker.checkCompleted("sdb", passed(), at);
  }
  ASSERT_EQ(only(tracker.tick(t0 + 36s)).state, PathState::Up);
  EXPECT_TRUE(about(passAndNextDelay(tracker, "sdb", t0 + 37s), 5s));
}

TEST(HealthScheduling, AnAluaChangeStartsTheBackoffOverAndTheSameStateAgainDoesNot) {
  HealthTracker tracker(HealthSettings{}, 23);
  addUp(tracker, "sdb", t0); // ALUA None
  TimePoint now = *tracker.nextCheckDue("sdb");
  for (int i = 0; i < 3; ++i) {
    now += passAndNextDelay(tracker, "sdb", now);
  }
  ASSERT_TRUE(about(passAndNextDelay(tracker, "sdb", now), 20s));
  const auto due = *tracker.nextCheckDue("sdb");
  tracker.aluaChanged("sdb", AluaState::None, now + 1s); // every sync says it again
  EXPECT_EQ(*tracker.nextCheckDue("sdb"), due);
  tracker.aluaChanged("sdb", AluaState::Standby, now + 2s);
  EXPECT_LE(*tracker.nextCheckDue("sdb"), now + 2s + 5500ms);
  EXPECT_TRUE(about(passAndNextDelay(tracker, "sdb", now + 3s), 5s));
}

TEST(HealthScheduling, ATurThatTurnsAnUpPathGhostStartsTheBackoffOver) {
  HealthTracker tracker(HealthSettings{}, 29);
  addUp(tracker, "sdb", t0);
  TimePoint now = *tracker.nextCheckDue("sdb");
  for (int i = 0; i < 3; ++i) {
    now += passAndNextDelay(tracker, "sdb", now);
  }
  ASSERT_TRUE(about(passAndNextDelay(tracker, "sdb", now), 20s));
  now = *tracker.nextCheckDue("sdb");
  tracker.markCheckStarted("sdb", now);
  tracker.checkCompleted("sdb", standby(), now);
  ASSERT_EQ(tracker.state("sdb"), PathState::Ghost);
  EXPECT_TRUE(about(*tracker.nextCheckDue("sdb") - now, 5s));
}

TEST(HealthScheduling, ALowerMaximumAppliesAtOnceToABackedOffPath) {
  HealthTracker tracker(HealthSettings{}, 17);
  addUp(tracker, "sdb", t0);
  TimePoint now = *tracker.nextCheckDue("sdb");
  for (int i = 0; i < 3; ++i) {
    now += passAndNextDelay(tracker, "sdb", now);
  }
  ASSERT_TRUE(about(passAndNextDelay(tracker, "sdb", now), 20s));
  HealthSettings fixed;
  fixed.maxCheckerInterval = fixed.checkerInterval;
  tracker.setSettings(fixed, now + 1s);
  EXPECT_LE(*tracker.nextCheckDue("sdb"), now + 1s + 5500ms);
}

TEST(HealthScheduling, FailedPathsAreCheckedAtTheFailedIntervalWithJitter) {
  HealthTracker tracker(HealthSettings{}, 7);
  addUp(tracker, "sdb", t0);
  TimePoint now = t0 + 1s;
  tracker.kernelFailed("sdb", now);
  for (int i = 0; i < 100; ++i) {
    tracker.checkCompleted("sdb", turFailed(), now);
    const auto due = *tracker.nextCheckDue("sdb");
    ASSERT_GE(due - now, 900ms);
    ASSERT_LE(due - now, 1100ms);
    now = due;
  }
}

TEST(HealthScheduling, KernelFailureBringsAnUpPathsNextCheckForward) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.kernelFailed("sdb", t0 + 1s);
  EXPECT_LE(*tracker.nextCheckDue("sdb"), t0 + 1s + 1100ms);
}

TEST(HealthScheduling, CheckInFlightIsNeverScheduledAgain) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.addPath("sdc", loggedIn(4, "eth2"), t0);
  tracker.markCheckStarted("sdb", t0 + 10s);
  EXPECT_EQ(tracker.nextCheckDue("sdb"), std::nullopt);
  EXPECT_THAT(tracker.dueChecks(t0 + 1h), ElementsAre("sdc"));
  EXPECT_TRUE(tracker.health("sdb")->checkInFlight);
}

TEST(HealthScheduling, CheckerThatNeverReportsTimesOutAfterTwiceTheTimeout) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.markCheckStarted("sdb", t0 + 5s);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 11s);
  EXPECT_THAT(tracker.tick(t0 + 10999ms), IsEmpty());
  const auto down = only(tracker.tick(t0 + 11s));
  EXPECT_EQ(down.state, PathState::Down);
  EXPECT_EQ(down.action, DmAction::Fail);
  EXPECT_THAT(down.reason, HasSubstr("TUR timed out after 6s"));
  EXPECT_FALSE(tracker.health("sdb")->checkInFlight);
  EXPECT_EQ(tracker.health("sdb")->lastCheck, CheckStatus::TimedOut);
}

TEST(HealthScheduling, ACheckStillQueuedIsNotTimedOutUntilAWorkerHasItForTwiceTheTimeout) {
  // Behind a hung check of its session, the check waits in the checker's
  // queue: that is no verdict on the path.
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  tracker.markCheckStarted("sdb", t0 + 5s);
  EXPECT_THAT(tracker.tick(t0 + 11s, {"sdb"}), IsEmpty());
  EXPECT_THAT(tracker.tick(t0 + 60s, {"sdb"}), IsEmpty());
  EXPECT_EQ(tracker.health("sdb")->state, PathState::Up);
  EXPECT_TRUE(tracker.health("sdb")->checkInFlight);
  // Last seen queued at 60 s: a worker has it from then on.
  EXPECT_EQ(tracker.nextDeadline(), t0 + 66s);
  EXPECT_THAT(tracker.tick(t0 + 65s), IsEmpty());
  EXPECT_EQ(only(tracker.tick(t0 + 66s)).state, PathState::Down);
}

TEST(HealthScheduling, BlockedDeviceIsNotCheckedUntilItRunsAgain) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  EXPECT_THAT(tracker.deviceChanged("sdb", DeviceState::Blocked, t0 + 1s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
  EXPECT_THAT(tracker.dueChecks(t0 + 1h), IsEmpty());
  EXPECT_EQ(tracker.nextDeadline(), std::nullopt);
  tracker.deviceChanged("sdb", DeviceState::Running, t0 + 20s);
  EXPECT_THAT(tracker.dueChecks(t0 + 20s), ElementsAre("sdb"));
}

TEST(HealthScheduling, NextDeadlineIsTheEarliestCheckOrRelease) {
  HealthSettings settings;
  settings.failedCheckerInterval = 60s; // checks later than the release
  settings.flapRecovery = 10s;
  HealthTracker tracker(settings);
  addUp(tracker, "sdb", t0);
  flapOnce(tracker, "sdb", t0 + 1s, t0 + 2s);
  flapOnce(tracker, "sdb", t0 + 3s, t0 + 4s);
  tracker.kernelFailed("sdb", t0 + 5s);
  tracker.checkCompleted("sdb", passed(), t0 + 6s);
  EXPECT_EQ(tracker.nextDeadline(), t0 + 16s);
}

/// Settings with proactive failover on, acting after @p probes failed probes.
HealthSettings proactive(unsigned probes) {
  HealthSettings settings;
  settings.proactiveFailover = true;
  settings.proactiveFailoverProbes = probes;
  return settings;
}

TEST(HealthProactiveFailover, FailedProbeFailsOnlyThePathsUsingThatNicAndPortal) {
  HealthTracker tracker(proactive(1));
  addUp(tracker, "sdb", t0, loggedIn(1, "eth1", "10.10.1.20"));
  addUp(tracker, "sdc", t0, loggedIn(2, "eth2", "10.10.1.20"));
  addUp(tracker, "sdd", t0, loggedIn(3, "eth1", "10.10.1.21"));

  const auto decisions = tracker.probeResult("eth1", Portal{"10.10.1.20", 3260, 1}, false,
                                             "connect timed out", t0 + 1s);
  const auto failed = only(decisions);
  EXPECT_EQ(failed.device, "sdb");
  EXPECT_EQ(failed.action, DmAction::Fail);
  EXPECT_EQ(failed.reason, "probe of 10.10.1.20:3260 via eth1 failed: connect timed out");
  EXPECT_EQ(tracker.state("sdc"), PathState::Up);
  EXPECT_EQ(tracker.state("sdd"), PathState::Up);

  // The probe passing again asks for a check; the check reinstates.
  EXPECT_THAT(tracker.probeResult("eth1", Portal{"10.10.1.20", 3260, 1}, true, "", t0 + 5s),
              IsEmpty());
  EXPECT_THAT(tracker.dueChecks(t0 + 5s), ElementsAre("sdb"));
  EXPECT_EQ(only(tracker.checkCompleted("sdb", passed(), t0 + 5s)).action, DmAction::Reinstate);
}

TEST(HealthProactiveFailover, PassingTurDoesNotReinstateWhileTheProbeFails) {
  HealthTracker tracker(proactive(1));
  addUp(tracker, "sdb", t0);
  tracker.probeResult("eth1", Portal{"10.10.1.20", 3260, 1}, false, "no route", t0 + 1s);
  EXPECT_THAT(tracker.checkCompleted("sdb", passed(), t0 + 2s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Down);
}

TEST(HealthProactiveFailover, ProbeResultsAreIgnoredWhenDisabled) {
  HealthTracker tracker(HealthSettings{});
  addUp(tracker, "sdb", t0);
  EXPECT_THAT(tracker.probeResult("eth1", Portal{"10.10.1.20", 3260, 1}, false, "down", t0 + 1s),
              IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
  EXPECT_EQ(tracker.health("sdb")->failures, 0U);
}

TEST(HealthProactiveFailover, UpdatedRouteDecidesWhichProbeApplies) {
  HealthTracker tracker(proactive(1));
  addUp(tracker, "sdb", t0);
  tracker.setRoute("sdb", PathRoute{"eth2", Portal{"10.10.1.20", 3260, 1}});
  EXPECT_THAT(tracker.probeResult("eth1", Portal{"10.10.1.20", 3260, 1}, false, "x", t0 + 1s),
              IsEmpty());
  EXPECT_EQ(
      only(tracker.probeResult("eth2", Portal{"10.10.1.20", 3260, 7}, false, "x", t0 + 1s)).device,
      "sdb");
}

TEST(HealthProactiveFailover, OneFailedProbeFailsNothingByDefault) {
  HealthSettings settings;
  settings.proactiveFailover = true; // the default count
  ASSERT_EQ(settings.proactiveFailoverProbes, 2U);
  HealthTracker tracker(settings);
  addUp(tracker, "sdb", t0, loggedIn(1, "eth1", "10.10.1.20"));
  const Portal portal{"10.10.1.20", 3260, 1};

  EXPECT_THAT(tracker.probeResult("eth1", portal, false, "timed out", t0 + 1s), IsEmpty());
  EXPECT_EQ(tracker.probeFailuresInARow("eth1", portal), 1U);
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
  EXPECT_EQ(tracker.health("sdb")->failures, 0U);

  // The confirming probe fails too: now the path goes.
  const auto failed = only(tracker.probeResult("eth1", portal, false, "timed out", t0 + 2s));
  EXPECT_EQ(failed.device, "sdb");
  EXPECT_EQ(failed.action, DmAction::Fail);
  EXPECT_EQ(failed.reason, "probe of 10.10.1.20:3260 via eth1 failed 2 times in a row: timed out");
  EXPECT_EQ(tracker.probeFailuresInARow("eth1", portal), 2U);
}

TEST(HealthProactiveFailover, APassBetweenFailuresStartsTheCountAgain) {
  HealthTracker tracker(proactive(2));
  addUp(tracker, "sdb", t0, loggedIn(1, "eth1", "10.10.1.20"));
  const Portal portal{"10.10.1.20", 3260, 1};
  EXPECT_THAT(tracker.probeResult("eth1", portal, false, "x", t0 + 1s), IsEmpty());
  EXPECT_THAT(tracker.probeResult("eth1", portal, true, "", t0 + 2s), IsEmpty());
  EXPECT_EQ(tracker.probeFailuresInARow("eth1", portal), 0U);
  EXPECT_THAT(tracker.probeResult("eth1", portal, false, "x", t0 + 3s), IsEmpty());
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
}

TEST(HealthProactiveFailover, FailuresAreCountedPerPair) {
  HealthTracker tracker(proactive(2));
  addUp(tracker, "sdb", t0, loggedIn(1, "eth1", "10.10.1.20"));
  addUp(tracker, "sdc", t0, loggedIn(2, "eth2", "10.10.1.20"));
  EXPECT_THAT(tracker.probeResult("eth1", Portal{"10.10.1.20", 3260, 1}, false, "x", t0 + 1s),
              IsEmpty());
  EXPECT_THAT(tracker.probeResult("eth2", Portal{"10.10.1.20", 3260, 1}, false, "x", t0 + 2s),
              IsEmpty());
  EXPECT_EQ(tracker.probeFailuresInARow("eth1", Portal{"10.10.1.20", 3260, 1}), 1U);
  EXPECT_EQ(tracker.probeFailuresInARow("eth2", Portal{"10.10.1.20", 3260, 1}), 1U);
  EXPECT_EQ(tracker.probeFailuresInARow("eth1", Portal{"10.10.1.21", 3260, 1}), 0U);
  EXPECT_EQ(tracker.state("sdb"), PathState::Up);
  EXPECT_EQ(tracker.state("sdc"), PathState::Up);
}

} // namespace
