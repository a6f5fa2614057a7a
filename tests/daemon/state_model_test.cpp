// holdLatencyJitter(): which check latencies are published again.

#include "state_model.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace pathkeeper::daemon {
namespace {

StateSnapshot withLatencies(std::initializer_list<std::pair<std::string, std::int64_t>> paths) {
  StateSnapshot snap;
  for (const auto &[device, latency] : paths) {
    PathView view;
    view.device = device;
    view.latencyUs = latency;
    snap.paths.push_back(view);
  }
  return snap;
}

TEST(HoldLatencyJitter, KeepsThePublishedLatencyWhileItMovesByLessThanAThird) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdc", 3000}});
  auto next = withLatencies({{"sdb", 3900}, {"sdc", 2100}});
  EXPECT_FALSE(holdLatencyJitter(next, published, false));
  EXPECT_EQ(next.paths[0].latencyUs, 3000);
  EXPECT_EQ(next.paths[1].latencyUs, 3000);
  EXPECT_EQ(next, published);
}

TEST(HoldLatencyJitter, HoldsEveryMoveWhenAskedButNotAFirstLatency) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdc", -1}});
  auto next = withLatencies({{"sdb", 30000}, {"sdc", 2000}});
  EXPECT_FALSE(holdLatencyJitter(next, published, true));
  EXPECT_EQ(next.paths[0].latencyUs, 3000);
  EXPECT_EQ(next.paths[1].latencyUs, 2000);
}

TEST(HoldLatencyJitter, PublishesARealMoveEitherWay) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdc", 3000}});
  auto next = withLatencies({{"sdb", 4600}, {"sdc", 1900}});
  EXPECT_TRUE(holdLatencyJitter(next, published, false));
  EXPECT_EQ(next.paths[0].latencyUs, 4600);
  EXPECT_EQ(next.paths[1].latencyUs, 1900);
}

TEST(HoldLatencyJitter, IgnoresMovesUnderOneMillisecondEvenWhenRelativelyLarge) {
  const auto published = withLatencies({{"sdb", 200}});
  auto next = withLatencies({{"sdb", 900}});
  holdLatencyJitter(next, published, false);
  EXPECT_EQ(next.paths[0].latencyUs, 200);
}

TEST(HoldLatencyJitter, AFirstLatencyAndAVanishedOneAreAlwaysPublished) {
  const auto published = withLatencies({{"sdb", -1}, {"sdc", 3000}});
  auto next = withLatencies({{"sdb", 3000}, {"sdc", -1}});
  holdLatencyJitter(next, published, false);
  EXPECT_EQ(next.paths[0].latencyUs, 3000);
  EXPECT_EQ(next.paths[1].latencyUs, -1);
}

TEST(HoldLatencyJitter, MatchesPathsByDeviceWhenPathsCameAndWent) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdd", 5000}});
  auto next = withLatencies({{"sda", 100000}, {"sdc", 3100}, {"sdd", 5100}});
  holdLatencyJitter(next, published, false);
  EXPECT_EQ(next.paths[0].latencyUs, 100000); // new path
  EXPECT_EQ(next.paths[1].latencyUs, 3100);   // new path, not sdb's
  EXPECT_EQ(next.paths[2].latencyUs, 5000);   // held
}

} // namespace
} // namespace pathkeeper::daemon
