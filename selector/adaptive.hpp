#pragma once

// Adaptive selection for one map: from per-path capacity estimates
// (path_estimator.hpp) to service-time weights and, for selector = "auto",
// to the selector itself, with the hysteresis and rate limit that keep a
// reload (a suspend/resume of the map) rare. Pure: time is an argument.
//
// Hysteresis: a reload is worth it only when some path's weight moves by
// more than hysteresisPercent of its current value (and by more than one
// point, so that 1 <-> 2 on a nearly unused path does not count). Weights
// are normalised to the fastest path = 100, so a per-path relative change is
// a change of that path's share against the fastest.
// Rate limit: at most one reload per minReloadInterval; a change that
// arrives sooner is deferred and applied once the interval has passed, if
// it still holds then.
// Never while failing: a map with a path failing or being reinstated keeps
// its table; the reconciler and health engine are busy with it already, and
// the estimates of a failing path are meaningless.
// At a quiet moment: a reload's suspend holds every new request of the map
// until the requests already in flight have completed (even with noflush),
// so the I/O pause it causes is the time the paths need for what they carry
// at that moment: on a 10 Mbit/s link, 100 ms per 128 KiB in flight. The
// daemon cannot shorten that drain, only choose when it happens: a due
// reload waits, for up to reloadHoldWait, for a sample at which the I/O in
// flight would drain within reloadHoldTarget, and then reloads anyway. A
// bursty workload gets its reload in a lull; a saturating one gets it late
// by reloadHoldWait, with the pause it would have had. A reload decided at
// a lull (AdaptiveDecision::atLull) waits once more at its swap, which comes
// a pass later (daemon/lull_gate.hpp).

#include "model.hpp"
#include "path_estimator.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pathkeeper::selector {

/// @brief The [adaptive] table.
struct AdaptiveSettings {
  /// How often the daemon samples /sys/block/<dev>/stat.
  std::chrono::milliseconds sampleInterval{2000};
  std::chrono::milliseconds halfLife{10000};          ///< the estimator's EWMA half-life
  std::chrono::milliseconds minReloadInterval{60000}; ///< at most one reload per this
  unsigned hysteresisPercent = 20;                    ///< weight change that is worth a reload
  unsigned equalTolerancePercent = 15;                ///< capacity spread still called "equal"
  unsigned idleIops = 5;                              ///< fewer completions/s: idle
  unsigned minConfidencePercent = 50;                 ///< below: the estimate has no vote
  /// A reload waits for I/O in flight that drains within this.
  std::chrono::milliseconds reloadHoldTarget{50};
  /// For at most this long; 0: never waits.
  std::chrono::milliseconds reloadHoldWait{30000};

  bool operator==(const AdaptiveSettings &) const = default;
};

/// @brief The estimator settings that follow from @p settings.
EstimatorSettings estimatorSettings(const AdaptiveSettings &settings);

/// @brief One path of a map as the weight computation sees it.
struct PathCapacity {
  std::string device;
  /// Bytes per busy second; nullopt when the estimate is not confident yet.
  std::optional<double> capacity;
  unsigned currentWeight = 1; ///< what the table has now (link speed or equal)
  /// How long the requests in flight on the path at the latest sample need
  /// to complete (expectedDrainMs()); nullopt when that cannot be told.
  std::optional<double> drainMs;
};

/// @brief How long one request in flight on the path takes at its busy
/// rate, in ms: bytes per request / bytes per busy second; nullopt before
/// a rate and a request size were measured.
std::optional<double> msPerRequest(const PathEstimate &estimate);

/// @brief How long @p estimate's requests in flight need to complete, in
/// ms: in-flight count x msPerRequest(), the path's own rate with its queue
/// as deep as it is. 0 with nothing in flight; nullopt while msPerRequest()
/// is (the swap-time look, daemon/lull_gate.hpp, skips such a path too).
std::optional<double> expectedDrainMs(const PathEstimate &estimate);

/// @brief The estimate if its confidence reaches @p settings' minimum.
std::optional<double> confidentCapacity(const PathEstimate &estimate,
                                        const AdaptiveSettings &settings);

/// @brief relative_throughput per path, in @p paths' order: the fastest
/// measured path 100, the others round(100 * capacity / fastest), at least 1.
/// Paths without a confident estimate keep their current weight; without
/// any measured path, every weight stays.
std::vector<unsigned> computeWeights(const std::vector<PathCapacity> &paths);

/// @brief True when some weight moved beyond the hysteresis threshold: by
/// more than @p hysteresisPercent of its current value and by more than one
/// point. Different lengths (paths came or went) always count.
bool weightsMoved(const std::vector<unsigned> &current, const std::vector<unsigned> &proposed,
                  unsigned hysteresisPercent);

/// @brief The selector = "auto" choice from the confident capacities.
/// Equal paths (slowest/fastest within the tolerance) get queue-length,
/// which adapts to transient imbalance without weights; unequal ones get
/// service-time with weights. Hysteresis: leaving queue-length needs a
/// spread beyond the tolerance, returning to it a spread within half of it,
/// so a map measured right at the boundary does not flip.
/// @return nullopt when fewer than two paths have a confident estimate (keep
/// the current selector).
std::optional<SelectorKind> chooseAutoSelector(const std::vector<PathCapacity> &paths,
                                               SelectorKind current,
                                               unsigned equalTolerancePercent);

/// @brief What the governor decided for one evaluation.
struct AdaptiveDecision {
  enum class Action {
    Keep,     ///< nothing worth a reload
    Reload,   ///< load the table with selector and weights
    Deferred, ///< a change is due, but the last reload was too recent
    Held,     ///< a change is due, but a path is failing or being reinstated
    Waiting,  ///< not enough confident estimates yet
    Lull,     ///< a reload is due, waiting for less I/O in flight (reloadHoldTarget)
  } action = Action::Keep;
  SelectorKind selector = SelectorKind::ServiceTime;
  std::vector<unsigned> weights; ///< in the order of the evaluated paths
  std::string reason;            ///< one line for the log and the published history
  /// Reload only: decided at a lull (the I/O in flight within
  /// reloadHoldTarget), so the swap should wait for one too; false when it
  /// reloads regardless (no lull within reloadHoldWait, or the wait is off).
  bool atLull = false;
};

/// @brief "keep", "reload", "deferred", "held", "waiting" or "lull".
std::string_view toString(AdaptiveDecision::Action action);

/// @brief What one evaluation looks at.
struct AdaptiveInput {
  std::string map; ///< alias, for the reason
  std::vector<PathCapacity> paths;
  SelectorKind currentSelector = SelectorKind::ServiceTime;
  bool autoSelector = false;    ///< selector = "auto": the governor may change it
  bool pathTransition = false;  ///< a path of the map is failing or being reinstated
  std::string transitionDevice; ///< which one, for the reason
};

/// @brief Rate limit and hysteresis for one map; one per map, kept across
/// evaluations.
class ReloadGovernor {
public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit ReloadGovernor(AdaptiveSettings settings = {}) : settings_(settings) {}

  /// @brief Decides for @p input at @p now. A Reload counts as done: the
  /// caller loads it (a failed load is retried by the next decision, since
  /// the table still has the old weights).
  AdaptiveDecision evaluate(const AdaptiveInput &input, TimePoint now);

  /// @brief New thresholds (SIGHUP); the time of the last reload is kept.
  void setSettings(const AdaptiveSettings &settings) {
    settings_ = settings;
    lullSince_.reset(); // a wait begun under other settings starts again
  }
  [[nodiscard]] std::optional<TimePoint> lastReload() const { return lastReload_; }
  [[nodiscard]] unsigned reloads() const { return reloads_; }

private:
  AdaptiveSettings settings_;
  std::optional<TimePoint> lastReload_;
  std::optional<TimePoint> lullSince_; ///< when a due reload began to wait for a lull
  unsigned reloads_ = 0;
};

/// @brief "sda 100, sdb 25", the weights for logs.
std::string describeWeights(const std::vector<PathCapacity> &paths,
                            const std::vector<unsigned> &weights);

/// @brief "4.9 MB/s" (decimal megabytes).
std::string formatRate(double bytesPerSecond);

} // namespace pathkeeper::selector
