#pragma once

// The per-path health state machine: pure logic. pathkeeperd feeds it kernel
// dm events, checker results, iSCSI session and sd device states and probe
// results, each with the current time, and executes the decisions it returns.
// Nothing here reads a clock, touches the OS or starts a thread; jitter comes
// from a generator seeded by the caller, so tests replay exactly.
//
// Semantics (the contract the daemon and the D-Bus layer rely on):
//
// * Health evidence. A path is healthy when the last check after its last
//   failure passed (TUR ok, or TUR "not ready / standby"), its session is not
//   FAILED or FREE, its sd device is not offline or transport-offline, and (with
//   proactive failover) the last proactiveFailoverProbes probes of its (NIC,
//   portal) pair did not all fail.
//   SessionState::Unknown and DeviceState::Unknown do not count against a path
//   (a non-iSCSI path, or a fact the daemon could not read).
// * Published states. Removed after removal; Shaky while flap damping holds it;
//   Down when not healthy; before the first check result Unknown, or Pending
//   while that first check is in flight (Ghost if the facts say ALUA standby);
//   Ghost when healthy but standby; otherwise Up. A check in flight after the
//   first result keeps the last known state.
// * dm actions. Down and Shaky paths must be failed in dm, Up and Ghost paths
//   active (a standby path is a last resort, never failed just for being
//   standby). Unknown and Pending paths are left as dm has them. An action is
//   returned only when dm's state, as last reported by the kernel or as set by
//   our own previous decision, differs from that.
// * Failures. One failure is recorded each time a path goes from not known to
//   be bad to bad (kernel PATH_FAILED, a failed or timed-out check, session
//   FAILED/FREE, device offline, failed probe). Several reports of the same
//   outage (the kernel fails the path, then the TUR fails, then the session
//   drops) count once. A path that is bad when it is added has no failure.
// * Kernel events. PATH_FAILED marks dm failed (no action needed) and records a
//   failure. PATH_REINSTATED of a path we hold Down or Shaky is failed again at
//   once; for a Down path a check is also made due now, so a path that really
//   came back (e.g. multipathd reinstated it) is reinstated by that check.
// * Event-driven reinstatement. A session logging in again (or the device
//   running again, or its probe passing again) never reinstates by itself: it
//   makes a check due now, and the passing check reinstates in the same call.
//   If a check is in flight then, a failing result of that check is followed by
//   another check due at once instead of after failedCheckerInterval.
// * Flap damping (settings.flapDamping). When a failure brings the failures
//   within the last flapWindow to flapThreshold, the path becomes Shaky and is
//   held failed for flapRecovery. Every further failure while Shaky restarts
//   the hold-down with twice the previous length, capped at flapRecoveryMax.
//   The path is released (Up or Ghost, reinstated in dm) once the hold-down has
//   run out AND it has been healthy without interruption for a whole hold-down
//   length. On release the failure history is cleared, so a later single
//   failure is just Down again; if the path turns Shaky again within flapWindow
//   of its release, its hold-down continues doubling from the last length,
//   otherwise it starts again at flapRecovery. With damping off, failures are
//   still counted but nothing becomes Shaky.
// * Last resort (setLastResort). Damping must not turn a flapping path into
//   an outage: while the caller says no other path of the path's map is
//   usable, a Shaky path that is healthy is reinstated in dm and carries the
//   I/O. It stays Shaky (published so, its hold-down and release unchanged)
//   and is failed again as soon as the caller says another path is usable,
//   or when it turns bad. multipathd does the same with a delayed or
//   marginal path when its map has no other active path.
// * Scheduling. Checks are due failedCheckerInterval after the last result
//   for paths that are not healthy. For Up and Ghost paths the interval backs
//   off as multipathd's does: checkerInterval after the first passing check,
//   then doubled after each further one up to maxCheckerInterval. The backoff
//   starts over with any failure (the path is then checked at
//   failedCheckerInterval until it passes), a return from a bad session,
//   device or probe state, the end of a shaky hold-down, an up <-> ghost
//   change, an ALUA state change and a kernel reinstatement (the last two
//   also bring the next check to within checkerInterval). Passes while shaky
//   do not count. Each interval has +/-10% jitter. What the backoff costs:
//   most failures reach the daemon as events first (the kernel's
//   PATH_FAILED on I/O, session and device uevents), but a fault only a
//   check can see (a LUN gone on an idle path whose session stays up) is
//   noticed up to maxCheckerInterval late instead of checkerInterval.
//   A path with a check in flight or a blocked sd device is never due; a
//   check that has not reported after twice checkerTimeout counts as timed
//   out (so a lost completion cannot stall a path forever).
// * Events for a device that is not tracked are ignored (empty result).

#include "config.hpp"
#include "model.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief iSCSI session state as sysfs (iscsi_session/state) spells it.
enum class SessionState {
  Unknown,  ///< not an iSCSI path, or not read
  LoggedIn, ///< LOGGED_IN
  Failed,   ///< FAILED: connection lost, in recovery
  Free,     ///< FREE: being torn down
};

/// @brief The sd device's sysfs "state" attribute.
enum class DeviceState {
  Unknown,
  Running,
  Blocked,          ///< session recovery: I/O queues, a TUR would hang
  Offline,          ///< offline
  TransportOffline, ///< transport-offline
};

/// @brief What a path checker (TUR) reported.
enum class CheckStatus {
  Ok,
  Failed,
  TimedOut,
  Standby, ///< NOT READY / ALUA standby: usable as a last resort (ghost)
  /// NOT READY, asymmetric access state transition (ALUA 04/0A): the array
  /// is moving the LU between its ports. Not a verdict: the path keeps its
  /// state and is checked again soon (HealthTracker::kTransitionRecheck),
  /// as multipath-tools does since 0.10; a transition that lasts longer
  /// than kTransitionLimit counts as a failure.
  Transitioning,
};

/// @brief One completed check, as the checker reports it.
struct CheckResult {
  CheckStatus status = CheckStatus::Ok;
  std::string reason;                   ///< e.g. sense data, "" when Ok
  std::chrono::microseconds latency{0}; ///< how long the check took
};

/// @brief The message to send to device-mapper for a path, if any.
enum class DmAction {
  None,
  Fail,      ///< fail_path
  Reinstate, ///< reinstate_path
};

/// @brief Where a path's I/O goes, for proactive failover.
struct PathRoute {
  std::string netdev;      ///< NIC the session is bound to; "" when routing chooses
  selector::Portal portal; ///< address and port are compared, tpgt is not
};

/// @brief What the inventory knows about a path when it appears.
struct PathFacts {
  SessionState session = SessionState::Unknown;
  DeviceState device = DeviceState::Unknown;
  selector::AluaState alua = selector::AluaState::None; ///< Standby => ghost
  bool failedInDm = false;           ///< as dm status shows; a fresh table has it active
  std::optional<unsigned> sessionId; ///< sysfs session number, for log reasons
  PathRoute route;
};

/// @brief One transition to publish and, if action is not None, to execute.
struct HealthDecision {
  std::string device; ///< e.g. "sdb"
  DmAction action = DmAction::None;
  selector::PathState state = selector::PathState::Unknown;
  std::string reason; ///< human, for the log, e.g. "session 3 logged in and TUR passed"

  bool operator==(const HealthDecision &) const = default;
};

/// @brief A path's health as the D-Bus layer publishes it.
struct PathHealth {
  using TimePoint = std::chrono::steady_clock::time_point;

  selector::PathState state = selector::PathState::Unknown;
  std::uint64_t failures = 0; ///< total recorded failures since added
  bool shaky = false;
  std::optional<TimePoint> holdDownUntil; ///< while shaky: the earliest release
  std::optional<CheckStatus> lastCheck;
  std::string lastCheckReason;
  std::optional<std::chrono::microseconds> lastCheckLatency;
  bool checkInFlight = false;
  bool failedInDm = false; ///< dm's state as last known or requested
};

/// @brief Health state machine for every path, keyed by device name.
class HealthTracker {
public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;
  using Decisions = std::vector<HealthDecision>;

  /// @brief How soon a path reporting an ALUA transition is checked again.
  static constexpr std::chrono::seconds kTransitionRecheck{1};
  /// @brief How long a transition may last before it counts as a failure:
  /// the kernel's default ALUA transition timeout (scsi_dh_alua), after
  /// which it fails the I/O it held.
  static constexpr std::chrono::seconds kTransitionLimit{60};

  /// @brief @p seed seeds the scheduling jitter.
  explicit HealthTracker(selector::HealthSettings settings, std::uint32_t seed = 0);

  /// @brief Applies new settings (SIGHUP); running hold-downs keep their end.
  void setSettings(const selector::HealthSettings &settings);
  /// @brief The same at @p now, and shorter check intervals apply at once:
  /// no check stays scheduled later than the new interval allows.
  void setSettings(const selector::HealthSettings &settings, TimePoint now);
  [[nodiscard]] const selector::HealthSettings &settings() const { return settings_; }

  /// @brief Starts tracking @p device; its first check is due at once. A
  /// device already tracked is replaced (its history is dropped).
  Decisions addPath(const std::string &device, const PathFacts &facts, TimePoint now);
  /// @brief Publishes Removed and forgets the path.
  Decisions removePath(const std::string &device, TimePoint now);

  /// @brief The kernel failed the path (DM_ACTION=PATH_FAILED).
  Decisions kernelFailed(const std::string &device, TimePoint now);
  /// @brief The kernel reinstated the path (DM_ACTION=PATH_REINSTATED).
  Decisions kernelReinstated(const std::string &device, TimePoint now);

  /// @brief The caller started a check of @p device.
  Decisions markCheckStarted(const std::string &device, TimePoint now);
  /// @brief The check of @p device completed.
  Decisions checkCompleted(const std::string &device, const CheckResult &result, TimePoint now);

  /// @brief The iSCSI session of @p device changed state.
  Decisions sessionChanged(const std::string &device, SessionState session, TimePoint now);
  /// @brief The sd device's state attribute changed.
  Decisions deviceChanged(const std::string &device, DeviceState state, TimePoint now);
  /// @brief The ALUA access state changed; Standby makes a healthy path Ghost.
  Decisions aluaChanged(const std::string &device, selector::AluaState alua, TimePoint now);
  /// @brief Where the path's I/O goes changed (session rebound, relogin).
  void setRoute(const std::string &device, PathRoute route);
  /// @brief Whether @p device is its map's last resort: no other path of
  /// the map is usable. Only a Shaky path is affected (see "Last resort"
  /// above); the mark is dropped when its hold-down ends.
  Decisions setLastResort(const std::string &device, bool lastResort, TimePoint now);
  /// @brief True when @p device is Shaky, healthy and its map's last resort:
  /// active in dm and carrying the map's I/O.
  [[nodiscard]] bool inUseAsLastResort(const std::string &device) const;

  /// @brief A probe over (@p netdev, @p portal) passed or failed. Acts on the
  /// paths using that pair only when settings().proactiveFailover, and on a
  /// failure only once settings().proactiveFailoverProbes probes in a row
  /// have failed (a pass resets the count).
  Decisions probeResult(const std::string &netdev, const selector::Portal &portal, bool ok,
                        std::string_view reason, TimePoint now);
  /// @brief Failed probes of the pair since its last pass (counted with or
  /// without proactive failover).
  [[nodiscard]] unsigned probeFailuresInARow(const std::string &netdev,
                                             const selector::Portal &portal) const;

  /// @brief Timer work: releases shaky paths whose hold-down is over and
  /// times out checks that have not reported within twice checker_timeout of
  /// starting. A check in @p queued (the checker's queue: no worker has
  /// taken it, e.g. behind a hung check of its session) has not started: it
  /// is never timed out, and its wait starts again from @p now.
  Decisions tick(TimePoint now, const std::set<std::string> &queued = {});

  /// @brief Devices whose check is due at @p now, sorted by name.
  [[nodiscard]] std::vector<std::string> dueChecks(TimePoint now) const;
  /// @brief When @p device's next check is due; nullopt if untracked, in
  /// flight or blocked.
  [[nodiscard]] std::optional<TimePoint> nextCheckDue(const std::string &device) const;
  /// @brief The earliest time the loop must call dueChecks() or tick().
  [[nodiscard]] std::optional<TimePoint> nextDeadline() const;

  /// @brief The published state; nullopt when untracked.
  [[nodiscard]] std::optional<selector::PathState> state(const std::string &device) const;
  /// @brief Everything the D-Bus layer publishes; nullopt when untracked.
  [[nodiscard]] std::optional<PathHealth> health(const std::string &device) const;
  /// @brief Tracked devices, sorted.
  [[nodiscard]] std::vector<std::string> devices() const;

private:
  /// One tracked path.
  struct Entry {
    PathFacts facts;
    bool standby = false;        ///< ALUA standby or TUR "not ready"
    bool checked = false;        ///< a check result arrived since added
    bool needsGoodCheck = false; ///< bad since the last passing check
    bool probeFailed = false;
    bool failedInDm = false;
    std::uint8_t passStreak = 0; ///< passing checks in a row while healthy (saturates)
    selector::PathState state = selector::PathState::Unknown;
    bool inFlight = false;
    TimePoint checkStarted{};
    bool recheckAfterFlight = false;
    TimePoint nextCheck{};
    /// Within flapWindow, oldest first. A vector: an empty deque still
    /// allocates 576 bytes, half a megabyte at 1000 paths that never fail.
    std::vector<TimePoint> recentFailures;
    std::uint64_t failures = 0;
    bool shaky = false;
    bool lastResort = false; ///< no other path of its map is usable (setLastResort)
    std::chrono::milliseconds holdDown{0};
    TimePoint holdStart{}; ///< last failure while shaky
    std::optional<TimePoint> healthySince;
    std::optional<TimePoint> lastRelease;
    std::chrono::milliseconds lastHoldDown{0};
    std::optional<CheckStatus> lastCheck;
    std::optional<TimePoint> transitioningSince; ///< first of the checks reporting a transition
    std::string lastCheckReason;
    std::optional<std::chrono::microseconds> lastCheckLatency;
  };

  Decisions evaluate(const std::string &device, Entry &entry, TimePoint now, std::string reason,
                     bool force = false);
  bool afterBad(Entry &entry, bool wasHealthy, TimePoint now, std::string &reason);
  void recordBad(Entry &entry, TimePoint now, std::string &reason);
  static void requestCheckNow(Entry &entry, TimePoint now);
  [[nodiscard]] static std::optional<TimePoint> dueOf(const Entry &entry);
  void scheduleAfterResult(Entry &entry, TimePoint now);
  /// The interval to a healthy path's next check, before jitter.
  [[nodiscard]] std::chrono::milliseconds healthyInterval(const Entry &entry) const;
  [[nodiscard]] TimePoint releaseTime(const Entry &entry) const;
  [[nodiscard]] bool healthy(const Entry &entry) const;
  [[nodiscard]] std::chrono::milliseconds jittered(std::chrono::milliseconds interval);

  selector::HealthSettings settings_;
  std::mt19937 random_;
  std::map<std::string, Entry, std::less<>> paths_;
  std::map<std::string, unsigned, std::less<>> probeFailures_; ///< "netdev|addr:port" -> in a row
};

} // namespace pathkeeper::daemon
