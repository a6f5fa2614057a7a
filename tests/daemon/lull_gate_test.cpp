#include "lull_gate.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// sdb carries 128 KiB requests on 10 Mbit/s (105 ms each), sdc on 40 (26 ms).
LullGate twoPaths() {
  return LullGate{{{"sdb", 105.0}, {"sdc", 26.0}}, 50ms, 2000ms};
}

// A clock that moves only when the gate sleeps, and in-flight counts that
// follow it: each device's count from the given time on.
struct FakeTime {
  Clock::time_point now{std::chrono::hours(1)};
  std::vector<std::chrono::microseconds> sleeps;
  std::map<std::string, std::map<std::chrono::milliseconds, std::uint64_t>> counts;
  Clock::time_point start = now;

  InFlightReader reader() {
    return [this](const std::string &device) -> std::optional<std::uint64_t> {
      auto it = counts.find(device);
      if (it == counts.end()) {
        return std::nullopt;
      }
      const auto at = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      std::uint64_t value = 0;
      for (const auto &[from, count] : it->second) {
        if (from <= at) {
          value = count;
        }
      }
      return value;
    };
  }
  LullWait wait(const LullGate &gate) {
    return waitForLull(
        gate, reader(),
        [this](std::chrono::microseconds d) {
          sleeps.push_back(d);
          now += d;
        },
        [this] { return now; });
  }
};

TEST(LullGate, TheDrainIsTheLongestPathsInFlightTimesItsRequestTime) {
  FakeTime time;
  time.counts["sdb"] = {{0ms, 2}};
  time.counts["sdc"] = {{0ms, 6}};
  EXPECT_DOUBLE_EQ(drainNowMs(twoPaths(), time.reader()), 210.0); // not 156, not the sum
  time.counts.erase("sdb");                                       // unreadable: counts 0
  EXPECT_DOUBLE_EQ(drainNowMs(twoPaths(), time.reader()), 156.0);
}

TEST(LullGate, SwapsAtOnceWhenLittleIsInFlight) {
  FakeTime time;
  time.counts["sdb"] = {{0ms, 0}};
  time.counts["sdc"] = {{0ms, 1}};
  auto wait = time.wait(twoPaths());
  EXPECT_TRUE(wait.found);
  EXPECT_EQ(wait.waited, 0us);
  EXPECT_DOUBLE_EQ(wait.drainMs, 26.0);
  EXPECT_TRUE(time.sleeps.empty());
}

TEST(LullGate, WaitsForTheBurstToEnd) {
  FakeTime time;
  time.counts["sdb"] = {{0ms, 3}, {300ms, 0}};
  time.counts["sdc"] = {{0ms, 5}, {290ms, 0}};
  auto wait = time.wait(twoPaths());
  EXPECT_TRUE(wait.found);
  EXPECT_EQ(wait.waited, 300ms);
  EXPECT_EQ(wait.drainMs, 0.0);
  EXPECT_EQ(time.sleeps.size(), 60U); // polled every 5 ms
}

TEST(LullGate, SwapsRegardlessAfterItsLongestWait) {
  FakeTime time;
  time.counts["sdb"] = {{0ms, 4}};
  auto gate = twoPaths();
  gate.maxWait = 500ms;
  auto wait = time.wait(gate);
  EXPECT_FALSE(wait.found);
  EXPECT_EQ(wait.waited, 500ms);
  EXPECT_DOUBLE_EQ(wait.drainMs, 420.0);
}

TEST(LullGate, ReadsTheKernelsInflightFile) {
  char pattern[] = "/tmp/pk-lull-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path root = pattern;
  fs::create_directories(root / "block/sdb");
  std::ofstream(root / "block/sdb/inflight") << "       3        2\n";
  fs::create_directories(root / "block/sdc");
  std::ofstream(root / "block/sdc/inflight") << "garbage\n";
  auto read = sysfsInFlight(root);
  EXPECT_EQ(read("sdb"), 5U);
  EXPECT_EQ(read("sdc"), std::nullopt);
  EXPECT_EQ(read("sdz"), std::nullopt);
  fs::remove_all(root);
}

} // namespace
} // namespace pathkeeper::daemon
