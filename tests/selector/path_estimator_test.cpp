#include "path_estimator.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>

namespace pathkeeper::selector {
namespace {

using Clock = std::chrono::steady_clock;
using testing::HasSubstr;

constexpr double kMB = 1e6;

Clock::time_point at(double seconds) {
  return Clock::time_point{
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))};
}

// A synthetic disk: its counters advance as a path carrying the given load
// would advance them, and each advance returns the sample a reader would take.
struct FakeDisk {
  BlockStat stat;
  double now = 0;

  StatSample advance(double seconds, double bytesPerSecond, double busyFraction, double iops,
                     double latencyMs) {
    now += seconds;
    auto ios = static_cast<std::uint64_t>(std::llround(iops * seconds));
    stat.readIos += ios;
    stat.readSectors += static_cast<std::uint64_t>(std::llround(bytesPerSecond * seconds / 512));
    stat.readTicks +=
        static_cast<std::uint64_t>(std::llround(latencyMs * static_cast<double>(ios)));
    stat.ioTicks += static_cast<std::uint64_t>(std::llround(busyFraction * seconds * 1000));
    return StatSample{at(now), stat};
  }
  // A path moving @p bytesPerSecond in 1 MiB requests while busy the given fraction.
  StatSample busy(double bytesPerSecond, double busyFraction = 1.0, double seconds = 2) {
    return advance(seconds, bytesPerSecond, busyFraction, bytesPerSecond / 1048576.0 + 20, 40);
  }
  StatSample idle(double seconds = 2) { return advance(seconds, 0, 0, 0, 0); }
};

EstimatorSettings tenSecondHalfLife() {
  return EstimatorSettings{std::chrono::seconds{10}, 5.0};
}

// ------------------------------------------------------------------ parsing

TEST(ParseBlockStat, ReadsTheElevenFieldsOfOldKernels) {
  auto stat = parseBlockStat("    1234      56    98765     432     2345      67   123456     789 "
                             "       2     1500     1800\n");
  ASSERT_TRUE(stat.has_value()) << stat.error();
  EXPECT_EQ(stat->readIos, 1234U);
  EXPECT_EQ(stat->readMerges, 56U);
  EXPECT_EQ(stat->readSectors, 98765U);
  EXPECT_EQ(stat->readTicks, 432U);
  EXPECT_EQ(stat->writeIos, 2345U);
  EXPECT_EQ(stat->writeMerges, 67U);
  EXPECT_EQ(stat->writeSectors, 123456U);
  EXPECT_EQ(stat->writeTicks, 789U);
  EXPECT_EQ(stat->inFlight, 2U);
  EXPECT_EQ(stat->ioTicks, 1500U);
  EXPECT_EQ(stat->timeInQueue, 1800U);
  EXPECT_EQ(stat->discardIos, 0U);
  EXPECT_EQ(stat->flushIos, 0U);
}

TEST(ParseBlockStat, ReadsDiscardsFromFifteenFieldsAndFlushesFromSeventeen) {
  auto fifteen = parseBlockStat("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15");
  ASSERT_TRUE(fifteen.has_value());
  EXPECT_EQ(fifteen->discardIos, 12U);
  EXPECT_EQ(fifteen->discardTicks, 15U);
  EXPECT_EQ(fifteen->flushIos, 0U);
  auto seventeen = parseBlockStat("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n");
  ASSERT_TRUE(seventeen.has_value());
  EXPECT_EQ(seventeen->flushIos, 16U);
  EXPECT_EQ(seventeen->flushTicks, 17U);
}

TEST(ParseBlockStat, IgnoresFieldsAFutureKernelMayAdd) {
  auto stat = parseBlockStat("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19");
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->flushTicks, 17U);
}

TEST(ParseBlockStat, RefusesTooFewFieldsAndNonNumbers) {
  EXPECT_THAT(parseBlockStat("1 2 3 4 5 6 7 8 9 10").error(), HasSubstr("10 fields"));
  EXPECT_THAT(parseBlockStat("").error(), HasSubstr("0 fields"));
  EXPECT_THAT(parseBlockStat("1 2 3 x 5 6 7 8 9 10 11").error(), HasSubstr("field 4"));
  EXPECT_THAT(parseBlockStat("1 2 3 -4 5 6 7 8 9 10 11").error(), HasSubstr("field 4"));
  EXPECT_THAT(parseBlockStat("1 2 3 4a 5 6 7 8 9 10 11").error(), HasSubstr("field 4"));
  EXPECT_FALSE(parseBlockStat("1 2 3 4 5 6 7 8 9 10 99999999999999999999999").has_value());
}

// ---------------------------------------------------------------- intervals

TEST(CounterDelta, UndoesTheWrapOfA32BitCounter) {
  EXPECT_EQ(counterDelta(100, 250), 150U);
  EXPECT_EQ(counterDelta(4294967290ULL, 10), 16U);
}

TEST(CounterDelta, CallsAnImplausibleDecreaseAReset) {
  // From the middle of the 32-bit range back to nearly zero is no wrap.
  EXPECT_EQ(counterDelta(2000000000ULL, 5), std::nullopt);
  // A 64-bit counter (sectors) never wraps in practice.
  EXPECT_EQ(counterDelta(1ULL << 40, 5), std::nullopt);
}

TEST(IntervalBetween, DerivesRatesLatencyAndBusyFraction) {
  BlockStat before;
  BlockStat after;
  after.readIos = 100;
  after.writeIos = 100;
  after.readSectors = 20000; // 10.24 MB in two seconds
  after.writeSectors = 20000;
  after.readTicks = 1000;
  after.writeTicks = 3000;
  after.ioTicks = 1500;
  auto result = intervalBetween({at(10), before}, {at(12), after});
  ASSERT_EQ(result.kind, IntervalResult::Kind::Measured);
  EXPECT_DOUBLE_EQ(result.metrics.seconds, 2.0);
  EXPECT_EQ(result.metrics.ios, 200U);
  EXPECT_EQ(result.metrics.bytes, 40000U * 512U);
  EXPECT_DOUBLE_EQ(result.metrics.bytesPerSecond, 40000.0 * 512 / 2);
  EXPECT_DOUBLE_EQ(result.metrics.iops, 100.0);
  EXPECT_DOUBLE_EQ(result.metrics.latencyMs, 20.0);
  EXPECT_DOUBLE_EQ(result.metrics.busyFraction, 0.75);
}

TEST(IntervalBetween, ClampsABusyTimeLongerThanTheInterval) {
  BlockStat after;
  after.ioTicks = 2600;
  auto result = intervalBetween({at(0), BlockStat{}}, {at(2), after});
  ASSERT_EQ(result.kind, IntervalResult::Kind::Measured);
  EXPECT_DOUBLE_EQ(result.metrics.busyFraction, 1.0);
}

TEST(IntervalBetween, IsInvalidWhenTheClockDoesNotAdvance) {
  EXPECT_EQ(intervalBetween({at(5), BlockStat{}}, {at(5), BlockStat{}}).kind,
            IntervalResult::Kind::Invalid);
  EXPECT_EQ(intervalBetween({at(5), BlockStat{}}, {at(4), BlockStat{}}).kind,
            IntervalResult::Kind::Invalid);
}

// ---------------------------------------------------------------- estimator

TEST(PathEstimator, TakesTheFirstSampleAsBaselineWithoutAnEstimate) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  EXPECT_EQ(estimator.add(disk.busy(4 * kMB)), PathEstimator::Update::Baseline);
  EXPECT_EQ(estimator.estimate().confidence, 0.0);
  EXPECT_EQ(estimator.estimate().busySamples, 0U);
}

TEST(PathEstimator, ReportsASteadyPathExactlyAndGainsConfidenceOverOneHalfLife) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.busy(4 * kMB));
  EXPECT_EQ(estimator.add(disk.busy(4 * kMB)), PathEstimator::Update::Busy);
  // Bias correction: one busy interval already gives the value, not a fraction of it.
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 4 * kMB, 0.01 * kMB);
  EXPECT_LT(estimator.estimate().confidence, 0.5);
  for (int i = 0; i < 4; ++i) {
    estimator.add(disk.busy(4 * kMB));
  }
  // Five 2 s intervals are one 10 s half-life.
  EXPECT_NEAR(estimator.estimate().confidence, 0.5, 1e-9);
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 4 * kMB, 0.01 * kMB);
  EXPECT_NEAR(estimator.estimate().throughputBytesPerSecond, 4 * kMB, 0.01 * kMB);
  EXPECT_NEAR(estimator.estimate().latencyMs, 40.0, 0.5);
  EXPECT_EQ(estimator.estimate().busySamples, 5U);
}

TEST(PathEstimator, ReadsTheRequestsInFlightAtEveryLatestSample) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  disk.stat.inFlight = 3;
  EXPECT_EQ(estimator.add(disk.idle()), PathEstimator::Update::Baseline);
  EXPECT_EQ(estimator.estimate().inFlight, 3U);
  disk.stat.inFlight = 8;
  EXPECT_EQ(estimator.add(disk.busy(4 * kMB)), PathEstimator::Update::Busy);
  EXPECT_EQ(estimator.estimate().inFlight, 8U);
  // An idle interval leaves the estimates but not the reading.
  disk.stat.inFlight = 0;
  EXPECT_EQ(estimator.add(disk.idle()), PathEstimator::Update::Idle);
  EXPECT_EQ(estimator.estimate().inFlight, 0U);
  EXPECT_EQ(estimator.estimate().busySamples, 1U);
}

TEST(PathEstimator, MeasuresCapacityPerBusySecondSoALightlyLoadedPathIsNotSlow) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  for (int i = 0; i < 10; ++i) {
    // A quarter of the time busy, at 4 MB/s while busy.
    estimator.add(disk.busy(1 * kMB, 0.25));
  }
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 4 * kMB, 0.05 * kMB);
  EXPECT_NEAR(estimator.estimate().throughputBytesPerSecond, 1 * kMB, 0.02 * kMB);
}

TEST(PathEstimator, KeepsEstimateAndConfidenceThroughIdleIntervals) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  for (int i = 0; i < 10; ++i) {
    estimator.add(disk.busy(4 * kMB));
  }
  PathEstimate before = estimator.estimate();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(estimator.add(disk.idle()), PathEstimator::Update::Idle);
  }
  // A trickle below idle_iops (5/s) on a mostly idle path is idle too,
  // however slow its requests look. (A mostly busy one is joined into a
  // longer window instead: MeasuresASlowPathWhoseLargeRequestsCompleteRarely.)
  EXPECT_EQ(estimator.add(disk.advance(2, 4096, 0.3, 2, 150)), PathEstimator::Update::Idle);
  EXPECT_DOUBLE_EQ(estimator.estimate().capacityBytesPerSecond, before.capacityBytesPerSecond);
  EXPECT_DOUBLE_EQ(estimator.estimate().confidence, before.confidence);
}

// The benchmark load on a 10 Mbit/s link: 1 MiB reads merged into
// 8 MiB requests complete once every ~6.4 s, below idle_iops, while the path
// is never idle. Joined intervals measure it; treated as idle it would never
// get an estimate (seen in vm_xserve_adaptive's first runs).
TEST(PathEstimator, MeasuresASlowPathWhoseLargeRequestsCompleteRarely) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  const double eightMiB = 8.0 * 1048576.0;
  int busyUpdates = 0;
  for (int i = 0; i < 60; ++i) {
    // 2 s intervals, 100% busy; one 8 MiB completion every third interval.
    const bool completes = i % 3 == 2;
    const auto update = estimator.add(completes ? disk.advance(2, eightMiB / 2, 1.0, 0.5, 6000)
                                                : disk.advance(2, 0, 1.0, 0, 0));
    busyUpdates += update == PathEstimator::Update::Busy ? 1 : 0;
  }
  EXPECT_GE(busyUpdates, 4);
  EXPECT_GT(estimator.estimate().confidence, 0.5);
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, eightMiB / 6, 0.25 * eightMiB / 6);
}

TEST(PathEstimator, AStalledPathNeverFillsItsWindowAndStaysUnmeasured) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  for (int i = 0; i < 100; ++i) {
    // Busy all the time (one request stuck in flight), nothing completes.
    EXPECT_EQ(estimator.add(disk.advance(2, 0, 1.0, 0, 0)), PathEstimator::Update::Idle);
  }
  EXPECT_EQ(estimator.estimate().confidence, 0.0);
}

TEST(PathEstimator, ConvergesToAStepChangeWithinThirtySamples) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  for (int i = 0; i < 30; ++i) {
    estimator.add(disk.busy(4 * kMB));
  }
  ASSERT_NEAR(estimator.estimate().capacityBytesPerSecond, 4 * kMB, 0.05 * kMB);
  for (int i = 0; i < 3; ++i) {
    estimator.add(disk.busy(1 * kMB));
  }
  // Smoothed: three intervals in, still well above the new capacity...
  EXPECT_GT(estimator.estimate().capacityBytesPerSecond, 2.5 * kMB);
  for (int i = 3; i < 30; ++i) {
    estimator.add(disk.busy(1 * kMB));
  }
  // ...but within 10% of it after 30 intervals (60 s, six half-lives).
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 1 * kMB, 0.1 * kMB);
}

TEST(PathEstimator, IgnoresASingleIntervalSpike) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  for (int i = 0; i < 10; ++i) {
    estimator.add(disk.busy(4 * kMB));
  }
  estimator.add(disk.busy(40 * kMB));
  for (int i = 0; i < 5; ++i) {
    estimator.add(disk.busy(4 * kMB));
    EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 4 * kMB, 0.05 * kMB) << i;
  }
}

TEST(PathEstimator, ContinuesAcrossA32BitCounterWrap) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  disk.stat.readIos = 4294967000ULL;
  disk.stat.readTicks = 4294960000ULL;
  disk.stat.ioTicks = 4294966000ULL;
  estimator.add(disk.idle());
  for (int i = 0; i < 10; ++i) {
    auto sample = disk.busy(4 * kMB);
    // The kernel's u32 fields wrap; the fake's 64-bit ones do not.
    sample.stat.readIos &= 0xffffffffULL;
    sample.stat.readTicks &= 0xffffffffULL;
    sample.stat.ioTicks &= 0xffffffffULL;
    EXPECT_EQ(estimator.add(sample), PathEstimator::Update::Busy) << i;
  }
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 4 * kMB, 0.05 * kMB);
  EXPECT_NEAR(estimator.estimate().latencyMs, 40.0, 0.5);
}

TEST(PathEstimator, RestartsCleanlyWhenTheDeviceIsReplaced) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  disk.stat.readSectors = 1ULL << 36;
  disk.stat.readIos = 3000000000ULL;
  disk.stat.ioTicks = 3000000000ULL;
  estimator.add(disk.idle());
  for (int i = 0; i < 10; ++i) {
    estimator.add(disk.busy(4 * kMB));
  }
  // The same name now belongs to a fresh device: counters start near zero.
  FakeDisk fresh;
  fresh.now = disk.now;
  EXPECT_EQ(estimator.add(fresh.busy(1 * kMB)), PathEstimator::Update::Reset);
  EXPECT_EQ(estimator.estimate().confidence, 0.0);
  EXPECT_EQ(estimator.estimate().capacityBytesPerSecond, 0.0);
  EXPECT_EQ(estimator.add(fresh.busy(1 * kMB)), PathEstimator::Update::Busy);
  // Nothing of the old device leaks into the new estimate.
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 1 * kMB, 0.01 * kMB);
}

TEST(PathEstimator, IgnoresASampleTakenAtTheSameTime) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  auto sample = disk.busy(4 * kMB);
  estimator.add(sample);
  EXPECT_EQ(estimator.add(sample), PathEstimator::Update::Ignored);
  EXPECT_EQ(estimator.estimate().busySamples, 1U);
}

TEST(PathEstimator, FloorsTheBusyFractionSoAFewRequestsCannotClaimHugeCapacity) {
  PathEstimator estimator(tenSecondHalfLife());
  FakeDisk disk;
  estimator.add(disk.idle());
  // 100 KB/s over 20 requests that kept the device busy for 2 ms of 2 s.
  estimator.add(disk.advance(2, 100000, 0.001, 10, 0.1));
  EXPECT_NEAR(estimator.estimate().capacityBytesPerSecond, 100000 / kMinBusyFraction, 5000);
}

} // namespace
} // namespace pathkeeper::selector
