#pragma once

// Failback: when a map goes back to its preferred path group. Pure logic; the
// daemon passes each map's groups as dm status shows them, the policy and the
// current time, and sends `switch_group N` when told to.
//
// The best group is the usable group (at least one usable path) with the
// highest priority; on a tie the lowest group number wins, as the kernel's
// own choice does. No usable group means no decision. Per policy:
//
// * Immediate: switch whenever the best group is not the active one.
// * Manual: never; the operator's SwitchGroup is executed elsewhere.
// * Followover (multipath-tools' meaning: "only fail back when the first path
//   of a path group becomes active", so that a node does not undo a failover
//   another cluster node asked for): switch only when the best group went from
//   no usable path to at least one between two evaluations of the map. If the
//   best group was already usable when the map moved off it (an operator or
//   another node switched), nothing switches back. The first evaluation of a
//   map only records its groups. This is multipathd's rule; the "active group
//   has lost none" condition sketched in config.hpp is not applied, because
//   multipathd does not have it and it would keep a map on a degrading group.
// * Deferred: switch once the best group has been usable, and the best, for
//   `delay` without interruption; it going unusable, or another group
//   becoming the best, restarts the wait. nextDeadline() says when to
//   evaluate again. A zero delay behaves as Immediate.
//
// A switch is requested once: while the best group stays the same and the
// kernel has not shown it active yet (dm only moves the active flag on the
// next I/O, so an idle map keeps showing the old group), the same switch is not
// repeated. switchFailed() allows one more attempt when the message failed.

#include "config.hpp"
#include "per_map_state.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace pathkeeper::daemon {

/// @brief One path group of a map as failback sees it.
struct FailbackGroup {
  unsigned number = 0; ///< 1-based, as in dm tables and switch_group
  int priority = 0;    ///< the group's priority (multipathd: mean of usable paths')
  unsigned usable = 0; ///< usable paths (up or ghost)
};

/// @brief Send `switch_group group` to the map.
struct SwitchDecision {
  unsigned group = 0;
  std::string reason; ///< human, for the log

  bool operator==(const SwitchDecision &) const = default;
};

/// @brief The usable group with the highest priority; 0 when none is usable.
unsigned bestGroup(std::span<const FailbackGroup> groups);

/// @brief Failback state of every map, keyed by map alias.
class FailbackTracker {
public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;

  /// @brief Decides whether map @p alias must switch group now. @p active is
  /// the group dm reports active (0 when none or unknown). Call it whenever a
  /// path of the map changes state, after the map's status was read, and at
  /// nextDeadline().
  std::optional<SwitchDecision> evaluate(std::string_view alias, const selector::Failback &policy,
                                         std::span<const FailbackGroup> groups, unsigned active,
                                         TimePoint now);

  /// @brief The switch_group message just requested failed; allow a retry.
  void switchFailed(std::string_view alias);
  /// @brief The map is gone.
  void forget(std::string_view alias);
  /// @brief Forgets every map for which @p gone says so.
  void forgetIf(const std::function<bool(std::string_view)> &gone);
  /// @brief Maps renamed in the kernel: their waits go with them.
  void rename(const MapRenames &renames);

  /// @brief The earliest deferred failback that is waiting, if any.
  [[nodiscard]] std::optional<TimePoint> nextDeadline() const;

private:
  struct MapState {
    std::map<unsigned, unsigned> usable; ///< group number -> usable paths, last evaluation
    bool seen = false;
    unsigned candidate = 0; ///< deferred: the best group being waited for
    TimePoint candidateSince{};
    std::optional<TimePoint> deadline; ///< deferred: when candidate may be switched to
    unsigned requested = 0;            ///< switch already asked for, not yet shown active
  };

  std::map<std::string, MapState, std::less<>> maps_;
};

} // namespace pathkeeper::daemon
