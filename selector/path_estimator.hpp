#pragma once

// What one path can carry, estimated from successive samples of its
// /sys/block/sdX/stat counters. Pure: the caller reads the file and the
// clock and passes both in, so tests drive it with synthetic counters and
// explicit timestamps.
//
// Capacity, not demand. The weights of a service-time map must follow what
// each path *could* carry, but the counters only show what it *did* carry,
// and that depends on how the selector spread the load. The estimate used
// here is bytes per busy second: delivered bytes divided by the time the
// device had at least one request in flight (io_ticks).
//  - Under service-time (or queue-length) with a saturating workload, both
//    paths are busy nearly all the time, so bytes per busy second is their
//    delivered throughput, and the selector already balances the queues so
//    that the delivered ratio approximates the capacity ratio.
//  - Under round-robin, the slow path holds most of the queue depth and the
//    fast path sits idle part of the time waiting for the next request; its
//    raw throughput understates its capacity, but per busy second it still
//    shows its own service rate.
//  - Under a light workload both paths are idle most of the time; dividing
//    by busy time keeps a lightly used fast path from looking slow.
// The caveat: a path given a single 4 KiB request at a time is latency- not
// bandwidth-bound, and its bytes per busy second understate a fat link. The
// weights only matter when the map is loaded, and then the queues are deep.
// Busy fractions below kMinBusyFraction are floored so that a handful of
// requests in an otherwise idle interval cannot produce a huge capacity.
//
// Idle versus slow: an interval with fewer completions than idleIops per
// second says nothing about the path; it leaves every estimate and the
// confidence unchanged, so a path without recent I/O is never judged slow.
// Unless the path was busy most of that interval: a slow link moving large
// requests (1 MiB reads merged to 8 MiB complete once every few seconds at
// 10 Mbit/s) completes fewer than idleIops while never idle. Such intervals
// are joined into one measurement window until it holds kMinWindowIos
// completions (or kMaxWindow passes, which a stalled path never fills: it is
// then dropped as idle, and its failure is the health checker's business).
// Confidence does not decay while idle either: the last measured capacity is
// still the best guess, and the first busy intervals correct it.
//
// Outliers: each estimate is an EWMA of the median of the last three busy
// intervals. A one-interval spike (a burst that finished just inside the
// interval, a request that completed after a long stall) is dropped entirely,
// while a real step change, which shows in two consecutive intervals, passes
// after one interval of delay. A clamp on single-interval jumps would resist
// spikes only partially and slow every real step down as well.
//
// Confidence is the EWMA's total weight on real samples, 1 - prod(1 - alpha):
// 0 before the first busy interval, 0.5 after one half-life of busy
// intervals. Estimates are divided by it (bias correction), so the first
// interval's value is taken as it is rather than pulled towards zero.

#include "expected.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief The counters of /sys/block/<dev>/stat (Documentation/block/stat.rst).
/// Kernels print 11 fields (before 4.18), 15 (with discards) or 17 (with
/// flushes); the later ones are zero when absent.
struct BlockStat {
  std::uint64_t readIos = 0;
  std::uint64_t readMerges = 0;
  std::uint64_t readSectors = 0;
  std::uint64_t readTicks = 0; ///< ms
  std::uint64_t writeIos = 0;
  std::uint64_t writeMerges = 0;
  std::uint64_t writeSectors = 0;
  std::uint64_t writeTicks = 0; ///< ms
  std::uint64_t inFlight = 0;   ///< a gauge, not a counter
  std::uint64_t ioTicks = 0;    ///< ms with at least one request in flight
  std::uint64_t timeInQueue = 0;
  std::uint64_t discardIos = 0;
  std::uint64_t discardMerges = 0;
  std::uint64_t discardSectors = 0;
  std::uint64_t discardTicks = 0;
  std::uint64_t flushIos = 0;
  std::uint64_t flushTicks = 0;

  bool operator==(const BlockStat &) const = default;
};

/// @brief Parses the stat file's line: 11, 15 or 17 unsigned decimal fields
/// separated by blanks. More fields (a future kernel) are ignored; fewer, or
/// anything that is not a number, is an error.
Expected<BlockStat> parseBlockStat(std::string_view text);

/// @brief One reading of the counters and when it was taken.
struct StatSample {
  std::chrono::steady_clock::time_point at;
  BlockStat stat;
};

/// @brief What one interval between two samples shows.
struct IntervalMetrics {
  double seconds = 0;
  std::uint64_t ios = 0;   ///< completed reads and writes
  std::uint64_t bytes = 0; ///< read and written
  double bytesPerSecond = 0;
  double iops = 0;
  double latencyMs = 0;    ///< average service time per completed I/O; 0 without I/O
  double busyFraction = 0; ///< io_ticks over wall time, clamped to 0..1
};

/// @brief How two samples relate.
struct IntervalResult {
  enum class Kind {
    Measured, ///< metrics hold the interval (counter wraps already undone)
    Reset,    ///< counters went back too far to be a wrap: device replaced or reset
    Invalid,  ///< the clock did not advance; ignore the newer sample
  } kind = Kind::Invalid;
  IntervalMetrics metrics;
};

/// @brief The difference of one counter. A decrease is a wrap of a 32-bit
/// counter (ticks are u32 in every kernel, I/O counts are unsigned long and
/// so 32-bit on 32-bit kernels) when the previous value fits 32 bits and the
/// wrapped difference is below 2^31; otherwise nullopt, a reset.
std::optional<std::uint64_t> counterDelta(std::uint64_t before, std::uint64_t after);

/// @brief The interval from @p before to @p after.
IntervalResult intervalBetween(const StatSample &before, const StatSample &after);

/// @brief The estimator's knobs.
struct EstimatorSettings {
  /// The EWMA's half-life in busy time: after it, old samples weigh half.
  std::chrono::milliseconds halfLife{10000};
  /// Below this many completions per second an interval counts as idle.
  double idleIops = 5;
};

/// @brief Busy fractions below this are raised to it before dividing.
inline constexpr double kMinBusyFraction = 0.05;
/// A slow interval busier than this is joined with the next ones, not idle.
inline constexpr double kBusyWindowFraction = 0.5;
/// Completions a joined window needs before it is measured.
inline constexpr std::uint64_t kMinWindowIos = 4;
/// The longest a joined window may grow before it is dropped as idle.
inline constexpr std::chrono::seconds kMaxWindow{60};

/// @brief The estimates of one path.
struct PathEstimate {
  double capacityBytesPerSecond = 0; ///< bytes per busy second
  double throughputBytesPerSecond = 0;
  double latencyMs = 0;
  double iops = 0;
  double confidence = 0; ///< 0..1
  unsigned busySamples = 0;
  /// Requests in flight at the latest sample, busy or idle: a reading,
  /// not an estimate.
  std::uint64_t inFlight = 0;
};

/// @brief Feeds successive stat samples of one path into the estimates.
class PathEstimator {
public:
  enum class Update {
    Baseline, ///< first sample (or first after a reset): nothing to compare yet
    Busy,     ///< estimates moved
    Idle,     ///< too few completions; estimates kept
    Reset,    ///< counters went backwards; estimates cleared, sample is the new baseline
    Ignored,  ///< the clock did not advance
  };

  explicit PathEstimator(EstimatorSettings settings = {}) : settings_(settings) {}

  /// @brief Takes one sample; says what it did with it.
  Update add(const StatSample &sample);
  [[nodiscard]] const PathEstimate &estimate() const { return estimate_; }
  /// @brief The last interval's raw figures, for logs and tests.
  [[nodiscard]] const std::optional<IntervalMetrics> &lastInterval() const { return last_; }

private:
  // An EWMA over the median of the last three busy values, bias-corrected
  // by the confidence the estimator keeps.
  struct Smoothed {
    std::vector<double> recent; // at most three, oldest first
    double sum = 0;             // EWMA of the medians, not yet bias-corrected
    double feed(double value, double alpha);
  };

  EstimatorSettings settings_;
  std::optional<StatSample> previous_;
  std::optional<IntervalMetrics> last_;
  PathEstimate estimate_;
  double weight_ = 0; // 1 - prod(1 - alpha), the bias correction
  Smoothed capacity_;
  Smoothed throughput_;
  Smoothed latency_;
  Smoothed iops_;
};

} // namespace pathkeeper::selector
