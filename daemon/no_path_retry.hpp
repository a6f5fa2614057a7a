#pragma once

// no_path_retry = N: how long a map queues I/O once it has no usable path.
// Pure logic; the daemon passes each map's usable path count, its policy and
// the current time, and sends what evaluate() returns.
//
// The table of a map with a count carries queue_if_no_path (the planner's
// reconcileFeatures), so the kernel queues while no path is usable. Once no
// path has been usable for N checker intervals (multipathd's meaning:
// no_path_retry x polling_interval), queueing is turned off: fail_if_no_path,
// and the queued I/O and all new I/O fail at once instead of waiting for a
// path that may never return. The first usable path turns it back on.
//
// A path that has not been checked yet (pending, e.g. right after a restart)
// may be usable: the count does not start while the map has one. "fail" and
// "queue" need nothing here (the table says it), except undoing an expiry
// when the policy changes to "queue" (SIGHUP).

#include "config.hpp"
#include "per_map_state.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace pathkeeper::daemon {

/// @brief Send queue_if_no_path (queue = true) or fail_if_no_path to the map.
struct QueueDecision {
  bool queue = true;
  std::string reason; ///< human, for the log

  bool operator==(const QueueDecision &) const = default;
};

/// @brief The no_path_retry countdown of every map, keyed by map alias.
class NoPathRetryTracker {
public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  /// @brief Decides whether map @p alias must change its queueing now.
  /// @p usable counts the paths that carry I/O, @p unknown those not checked
  /// yet; @p interval is the checker interval a count is made of. Call it
  /// whenever a path of the map changes state, and at nextDeadline().
  std::optional<QueueDecision> evaluate(std::string_view alias, const selector::NoPathRetry &policy,
                                        unsigned usable, unsigned unknown,
                                        std::chrono::milliseconds interval, TimePoint now);

  /// @brief The policy map @p alias was last evaluated with; nullopt when
  /// it never was (in this run: the daemon tells by it which stale maps it
  /// maintained).
  [[nodiscard]] std::optional<selector::NoPathRetry> lastPolicy(std::string_view alias) const;

  /// @brief Whether the map's count ran out: the kernel must not queue, even
  /// after a reload whose table says queue_if_no_path.
  [[nodiscard]] bool expired(std::string_view alias) const;
  /// @brief The map was found not queueing at startup although its count
  /// says it should: treated as run out, so the first usable path (not a
  /// path still unchecked) turns queueing back on.
  void adoptExpired(std::string_view alias);
  /// @brief The message just requested failed: fail_if_no_path is due
  /// again at @p retryAt, queue_if_no_path at the next evaluation.
  void sendFailed(std::string_view alias, TimePoint retryAt);
  /// @brief The map is gone.
  void forget(std::string_view alias);
  /// @brief Maps renamed in the kernel: their counts go with them.
  void rename(const MapRenames &renames);
  /// @brief Forgets every map for which @p gone says so.
  void forgetIf(const std::function<bool(std::string_view)> &gone);

  /// @brief The earliest count that is running, if any.
  [[nodiscard]] std::optional<TimePoint> nextDeadline() const;

private:
  struct MapState {
    std::optional<TimePoint> deadline;           ///< running: when queueing stops
    bool expired = false;                        ///< fail_if_no_path was asked for
    std::optional<selector::NoPathRetry> policy; ///< as last evaluated
  };

  std::map<std::string, MapState, std::less<>> maps_;
};

} // namespace pathkeeper::daemon
