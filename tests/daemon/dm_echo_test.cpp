// DmEchoFilter: the kernel's PATH_FAILED/PATH_REINSTATED events that are
// echoes of our own messages, against the kernel's own verdicts.

#include "dm_echo.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::daemon {
namespace {

using namespace std::chrono_literals;
constexpr bool kFailed = true;
constexpr bool kReinstated = false;

struct EchoFilterTest : ::testing::Test {
  DmEchoFilter filter{30s};
  DmEchoFilter::Clock::time_point t0{};
};

TEST_F(EchoFilterTest, AnEventNobodyAskedForIsTheKernels) {
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0));
  EXPECT_FALSE(filter.isEcho("sda", kReinstated, t0));
}

TEST_F(EchoFilterTest, TheEchoOfAMessageIsConsumedOnce) {
  filter.expect("sda", kFailed, t0);
  EXPECT_TRUE(filter.isEcho("sda", kFailed, t0 + 1s));
  // A second PATH_FAILED is the kernel's own.
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0 + 2s));
}

TEST_F(EchoFilterTest, OtherPathsAreNotConfused) {
  filter.expect("sda", kFailed, t0);
  EXPECT_FALSE(filter.isEcho("sdb", kFailed, t0));
  EXPECT_TRUE(filter.isEcho("sda", kFailed, t0));
}

// The VM case: fail at t, reinstate at t+5 s, and only then do both echoes
// arrive through a slow udev, in order. Neither is the kernel's verdict.
TEST_F(EchoFilterTest, LateEchoesOfFailThenReinstateAreBothEchoes) {
  filter.expect("sda", kFailed, t0);
  filter.expect("sda", kReinstated, t0 + 5s);
  EXPECT_TRUE(filter.isEcho("sda", kFailed, t0 + 5200ms));
  EXPECT_TRUE(filter.isEcho("sda", kReinstated, t0 + 5400ms));
  EXPECT_EQ(filter.pending("sda"), 0U);
}

// A fail_path on a path the kernel had already failed raises no event; its
// record must not swallow the echo of the next reinstate, nor outlive it.
TEST_F(EchoFilterTest, AMessageThatRaisedNoEventIsDroppedAtTheNextMatch) {
  filter.expect("sda", kFailed, t0);          // no-op in the kernel: no event
  filter.expect("sda", kReinstated, t0 + 1s); // raises PATH_REINSTATED
  EXPECT_TRUE(filter.isEcho("sda", kReinstated, t0 + 2s));
  EXPECT_EQ(filter.pending("sda"), 0U);
  // Now an I/O error: the kernel's own failure.
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0 + 3s));
}

TEST_F(EchoFilterTest, RecordsExpire) {
  filter.expect("sda", kFailed, t0);
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0 + 31s));
  EXPECT_EQ(filter.pending("sda"), 0U);
}

TEST_F(EchoFilterTest, AFailedMessageIsCancelled) {
  filter.expect("sda", kReinstated, t0);
  filter.expect("sda", kFailed, t0 + 1s);
  filter.cancel("sda", kFailed); // the ioctl failed: no event will come
  EXPECT_EQ(filter.pending("sda"), 1U);
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0 + 2s));
  EXPECT_TRUE(filter.isEcho("sda", kReinstated, t0 + 2s));
}

// The kernel fails the path on an I/O error while our reinstate is on its
// way: the kernel's event comes first and is not taken for an echo of the
// reinstate; the reinstate's own echo still is one.
TEST_F(EchoFilterTest, AKernelFailureBetweenOurMessagesIsTheKernels) {
  filter.expect("sda", kReinstated, t0);
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0 + 100ms));
  EXPECT_TRUE(filter.isEcho("sda", kReinstated, t0 + 200ms));
}

TEST_F(EchoFilterTest, ForgetDropsAPathsRecords) {
  filter.expect("sda", kFailed, t0);
  filter.forget("sda");
  EXPECT_FALSE(filter.isEcho("sda", kFailed, t0));
}

} // namespace
} // namespace pathkeeper::daemon
