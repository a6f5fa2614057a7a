// PendingForwards: companion mode's path commands that multipathd has not
// confirmed, and when each is sent again.

#include "pending_forwards.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::daemon {
namespace {

using namespace std::chrono_literals;
constexpr bool kFail = true;
constexpr bool kReinstate = false;
constexpr bool kOk = true;
constexpr bool kRefused = false;

struct PendingForwardsTest : ::testing::Test {
  PendingForwards forwards;
  PendingForwards::Clock::time_point t0{};
};

TEST_F(PendingForwardsTest, AnAnsweredForwardIsDone) {
  const auto sent = forwards.sent("sda", kReinstate);
  EXPECT_EQ(sent.attempt, 1U);
  EXPECT_EQ(forwards.answered(sent, kOk, t0), std::nullopt);
  EXPECT_EQ(forwards.size(), 0U);
  EXPECT_EQ(forwards.nextDeadline(), std::nullopt);
}

TEST_F(PendingForwardsTest, AFailedForwardIsSentAgainWithGrowingDelays) {
  auto sent = forwards.sent("sda", kReinstate, "8:0 wwid");
  auto now = t0;
  for (auto expected : {1s, 2s, 4s, 8s, 16s, 30s, 30s}) {
    const auto retry = forwards.answered(sent, kRefused, now);
    ASSERT_TRUE(retry.has_value());
    EXPECT_EQ(*retry - now, expected) << "after try " << sent.attempt;
    EXPECT_EQ(forwards.nextDeadline(), retry);
    EXPECT_TRUE(forwards.due(*retry - 1ms).empty());
    const auto due = forwards.due(*retry);
    ASSERT_EQ(due.size(), 1U);
    EXPECT_EQ(due[0].device, "sda");
    EXPECT_EQ(due[0].fail, kReinstate);
    EXPECT_EQ(due[0].identity, "8:0 wwid") << "the caller checks that the name is the same device";
    now = *retry;
    const auto again = forwards.resent(due[0]);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->attempt, sent.attempt + 1);
    EXPECT_NE(again->ticket, sent.ticket);
    // On its way: nothing is due until it is answered.
    EXPECT_EQ(forwards.nextDeadline(), std::nullopt);
    EXPECT_TRUE(forwards.due(now + 1h).empty());
    sent = *again;
  }
  EXPECT_EQ(forwards.answered(sent, kOk, now), std::nullopt);
  EXPECT_EQ(forwards.size(), 0U);
}

TEST_F(PendingForwardsTest, ANewerVerdictReplacesTheEntryAndItsAnswerAlone) {
  const auto fail = forwards.sent("sda", kFail);
  const auto reinstate = forwards.sent("sda", kReinstate);
  EXPECT_EQ(reinstate.attempt, 1U);
  // The old send's answer, whatever it is, changes nothing.
  EXPECT_EQ(forwards.answered(fail, kRefused, t0), std::nullopt);
  EXPECT_EQ(forwards.nextDeadline(), std::nullopt);
  ASSERT_TRUE(forwards.pending("sda").has_value());
  EXPECT_EQ(forwards.pending("sda")->fail, kReinstate);
  EXPECT_TRUE(forwards.answered(reinstate, kRefused, t0).has_value());
}

TEST_F(PendingForwardsTest, TheKernelReportingTheAskedStateEndsIt) {
  const auto sent = forwards.sent("sda", kReinstate);
  EXPECT_TRUE(forwards.kernelReported("sda", kReinstate)); // e.g. a late success
  EXPECT_EQ(forwards.size(), 0U);
  EXPECT_EQ(forwards.answered(sent, kRefused, t0), std::nullopt) << "nothing left to retry";
}

// The PATH_FAILED of an earlier fail path can arrive after the reinstate
// was sent: the send still decides.
TEST_F(PendingForwardsTest, TheOtherStateWhileASendIsOnItsWayIsOlderNews) {
  const auto sent = forwards.sent("sda", kReinstate);
  EXPECT_FALSE(forwards.kernelReported("sda", kFail));
  EXPECT_TRUE(forwards.answered(sent, kRefused, t0).has_value());
}

// A lost reinstate, then the path fails again (multipathd's checker, the
// kernel): that newest word is followed, not fought.
TEST_F(PendingForwardsTest, AFailureAfterALostReinstateIsFollowed) {
  const auto sent = forwards.sent("sda", kReinstate);
  ASSERT_TRUE(forwards.answered(sent, kRefused, t0).has_value());
  EXPECT_FALSE(forwards.kernelReported("sda", kFail, true)) << "the echo of our own older fail";
  EXPECT_TRUE(forwards.kernelReported("sda", kFail));
  EXPECT_EQ(forwards.size(), 0U);
  EXPECT_TRUE(forwards.due(t0 + 1h).empty());
}

// A fail is multipathd's business to confirm: "fail path" also stops its
// checker, which dm failing the path (an I/O error) or reinstating it
// (that very checker, still on) does not.
TEST_F(PendingForwardsTest, OnlyMultipathdSettlesAFail) {
  const auto sent = forwards.sent("sda", kFail);
  ASSERT_TRUE(forwards.answered(sent, kRefused, t0).has_value());
  EXPECT_FALSE(forwards.kernelReported("sda", kFail));
  EXPECT_FALSE(forwards.kernelReported("sda", kReinstate));
  ASSERT_EQ(forwards.due(t0 + 1s).size(), 1U);
  const auto again = forwards.resent(forwards.due(t0 + 1s)[0]);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(forwards.answered(*again, kOk, t0 + 1s), std::nullopt);
  EXPECT_EQ(forwards.size(), 0U);
}

TEST_F(PendingForwardsTest, PathsAreIndependentAndAGoneOneIsForgotten) {
  const auto sda = forwards.sent("sda", kFail);
  const auto sdb = forwards.sent("sdb", kReinstate);
  ASSERT_TRUE(forwards.answered(sda, kRefused, t0).has_value());
  ASSERT_TRUE(forwards.answered(sdb, kRefused, t0 + 500ms).has_value());
  EXPECT_EQ(forwards.nextDeadline(), t0 + 1s);
  ASSERT_EQ(forwards.due(t0 + 1s).size(), 1U);
  EXPECT_EQ(forwards.due(t0 + 1s)[0].device, "sda");
  EXPECT_FALSE(forwards.kernelReported("sdc", kReinstate));
  forwards.forget("sda");
  EXPECT_EQ(forwards.nextDeadline(), t0 + 1500ms);
  const auto due = forwards.due(t0 + 2s);
  ASSERT_EQ(due.size(), 1U);
  EXPECT_EQ(due[0].device, "sdb");
}

TEST_F(PendingForwardsTest, AResendOfAnEntryThatEndedIsNotMade) {
  const auto sent = forwards.sent("sda", kFail);
  ASSERT_TRUE(forwards.answered(sent, kRefused, t0).has_value());
  const auto due = forwards.due(t0 + 1s);
  ASSERT_EQ(due.size(), 1U);
  forwards.forget("sda");
  EXPECT_EQ(forwards.resent(due[0]), std::nullopt);
  EXPECT_EQ(forwards.size(), 0U);
}

} // namespace
} // namespace pathkeeper::daemon
