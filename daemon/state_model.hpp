#pragma once

// What pathkeeperd publishes: a snapshot of its maps, paths and portals as
// plain values, and the commands an admin may send it. The daemon builds a
// new snapshot after every change; publishers (the state file, D-Bus) compare
// it with the previous one and announce only what changed. Keeping this seam
// free of sd-bus and of the daemon's internals lets each side be tested alone.

#include "expected.hpp"

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pathkeeper::daemon {

/// @brief One path as published.
struct PathView {
  std::string device;  ///< "sdb": the object's key
  std::string devt;    ///< "8:16"
  std::string map;     ///< alias of the map holding it; "" when in none
  std::string state;   ///< selector::toString(PathState): "up", "down", "shaky", ...
  std::string dmState; ///< "active", "failed" or "none" (not in a map)
  std::string checker; ///< last checker verdict in words; "" before the first check
  std::uint64_t failures = 0;
  bool shaky = false;
  std::int64_t latencyUs = -1; ///< last check's latency; -1 when none
  std::string alua;            ///< selector::toString(AluaState)
  std::string wwid;
  std::string target; ///< target IQN
  std::string portal; ///< "10.10.1.20:3260,1"
  std::string netdev; ///< NIC the session is bound to; "" when routing chooses
  std::string controller;
  int sessionId = -1;
  /// Why the path is in its state when that needs explaining, e.g. a network
  /// finding that concerns its NIC ("traffic leaves via eth1 although bound to eth2").
  std::string note;
  // Adaptive selection (issue #9). The estimates are published with a 10%
  // dead band (AdaptiveController::refreshPublished), so that a busy path
  // does not announce PropertiesChanged at every 2 s sample.
  std::uint64_t throughputBps =
      0;                         ///< delivered bytes/s, smoothed over busy intervals; 0 unmeasured
  std::uint64_t capacityBps = 0; ///< bytes per busy second, what weights follow; 0 unmeasured
  std::int64_t ioLatencyUs = -1; ///< average I/O service time; -1 unmeasured
  unsigned confidence = 0;       ///< of the estimate, percent in steps of 10
  unsigned weight = 0;           ///< relative_throughput in the live table; 0 when none

  bool operator==(const PathView &) const = default;
};

/// @brief One adaptive-selection decision, as published.
struct DecisionView {
  std::int64_t at = 0; ///< seconds since the Unix epoch
  std::string action;  ///< "reload", "held", "deferred" or "lull"
  std::string reason;

  bool operator==(const DecisionView &) const = default;
};

/// @brief One priority group of a map.
struct GroupView {
  unsigned number = 0; ///< 1-based, as switch_group takes it
  int priority = 0;
  std::vector<std::string> paths; ///< devices

  bool operator==(const GroupView &) const = default;
};

/// @brief One multipath map as published.
struct MapView {
  std::string alias; ///< the object's key
  std::string wwid;
  std::string dmUuid;
  std::string selector; ///< "service-time", ...
  std::string state;    ///< "ok", "degraded" (some paths unusable) or "down" (none usable)
  unsigned activeGroup = 0;
  unsigned usablePaths = 0;
  unsigned totalPaths = 0;
  bool queueing = false; ///< I/O is being queued (no usable path, queue_if_no_path)
  /// What I/O does while no path is usable: "queue", "fail", the count of
  /// no_path_retry ("12"), "expired" (the count ran out) or "disabled"
  /// (the admin's DisableQueueing). Companion mode: "queue" or "fail", as
  /// the kernel's table says.
  std::string noPathRetry;
  std::vector<GroupView> groups;
  /// "off", "weights" (relative_throughput = "auto") or "selector" (selector = "auto").
  std::string adaptive = "off";
  unsigned adaptiveReloads = 0;                ///< reloads for measured weights or selector
  std::vector<DecisionView> adaptiveDecisions; ///< oldest first, bounded

  bool operator==(const MapView &) const = default;
};

/// @brief One portal, and whether each NIC reaches it.
struct PortalView {
  std::string address; ///< "10.10.1.20" (IPv6 without brackets)
  std::uint16_t port = 3260;
  /// NIC ("" = unbound) -> "reachable", "unreachable: <reason>", "refused: <reason>"
  /// (the target answered), "unknown: <reason>" (no probe sent) or "unknown".
  std::map<std::string, std::string> reachability;

  bool operator==(const PortalView &) const = default;
};

/// @brief One network check finding (issue #8), as published.
struct FindingView {
  std::string key;      ///< the object's key: "wrong-egress:eth2,eth1"
  std::string id;       ///< the finding's kind: wrong-egress, arp-flux, ...
  std::string severity; ///< "info", "warning" or "error"
  std::string summary;
  std::string explanation;
  std::vector<std::string> nics;
  std::vector<std::string> portals; ///< "ADDR:PORT"
  std::vector<std::string> paths;   ///< sd devices
  std::vector<std::string> fix;     ///< shell commands, in order; never run by pathkeeper

  bool operator==(const FindingView &) const = default;
};

/// @brief Everything published at one moment.
struct StateSnapshot {
  std::string version;               ///< pathkeeperd's version
  std::string mode;                  ///< "owner" or "companion"
  std::string status;                ///< "2 maps, 4 paths, 1 degraded"
  std::vector<MapView> maps;         ///< sorted by alias
  std::vector<PathView> paths;       ///< sorted by device
  std::vector<PortalView> portals;   ///< sorted by address, port
  std::vector<FindingView> findings; ///< sorted by key

  bool operator==(const StateSnapshot &) const = default;
};

/// @brief A published snapshot, shared by the daemon and the publishers, and
/// never changed once handed out: at 1000 paths each copy would cost 0.6 MiB.
using SharedSnapshot = std::shared_ptr<const StateSnapshot>;

/// @brief Replaces every byte sequence that is not valid UTF-8 in @p snapshot's
/// strings with U+FFFD. D-Bus refuses such strings and JSON cannot hold
/// them, yet NIC names, target names and the checker's texts come from the
/// kernel and the network and may carry any bytes.
void replaceInvalidUtf8(StateSnapshot &snapshot);

/// @brief Keeps @p published's check latency in @p next for every path whose
/// new latency is within a third of the published one (or less than 1 ms
/// away), and for every path when @p holdEveryMove: a TUR's latency wobbles
/// at every check, and publishing each wobble would rewrite the state file
/// and send PropertiesChanged for every path every few seconds. A first
/// latency and a vanished one (-1) always go out.
/// @return whether some path's published latency moves (the caller then
/// holds every move for a while).
bool holdLatencyJitter(StateSnapshot &next, const StateSnapshot &published, bool holdEveryMove);

/// @brief Writes the snapshot as JSON (schema 1) to @p out, the one rendering
/// behind both `pathkeeperctl status --json` and pathkeeperd's state file;
/// @p ready is added as "ready" when given (the state file says whether
/// startup is done). Streams: nothing the size of the document is built.
/// Bytes that are not valid UTF-8 come out as U+FFFD.
void writeSnapshotJson(const StateSnapshot &snapshot, std::optional<bool> ready, std::ostream &out);

/// @brief writeSnapshotJson() into a string.
std::string snapshotToJson(const StateSnapshot &snapshot, std::optional<bool> ready = {});

/// @brief The admin's commands, as the daemon carries them out. Every
/// method runs on the loop thread; an error is a readable message.
class Commands {
public:
  Commands() = default;
  Commands(const Commands &) = delete;
  Commands &operator=(const Commands &) = delete;
  virtual ~Commands() = default;

  /// @brief Re-reads the configuration, as SIGHUP does.
  virtual Expected<void> reconfigure() = 0;
  /// @brief Fails a path in dm and keeps it failed until reinstated.
  virtual Expected<void> failPath(const std::string &device) = 0;
  /// @brief Reinstates a path the admin failed (or that checks say is up).
  virtual Expected<void> reinstatePath(const std::string &device) = 0;
  /// @brief switch_group on a map; @p group is 1-based.
  virtual Expected<void> switchGroup(const std::string &map, unsigned group) = 0;
  /// @brief Stops queueing on a map: I/O fails while no path is usable,
  /// whatever no_path_retry says, until restoreQueueing().
  virtual Expected<void> disableQueueing(const std::string &map) = 0;
  /// @brief Ends disableQueueing(): no_path_retry decides again.
  virtual Expected<void> restoreQueueing(const std::string &map) = 0;
  /// @brief Changes one map's path selector (reloads that map).
  virtual Expected<void> setSelector(const std::string &map, const std::string &selector) = 0;
  /// @brief Rescans sysfs and reconciles.
  virtual Expected<void> rescan() = 0;

  using Done = std::function<void(Expected<void>)>;
  /// @brief Runs @p command (one of the above) and hands its outcome to
  /// @p done, exactly once. Where the command is carried out by another
  /// daemon (companion mode forwards to multipathd), that is its answer, on
  /// the loop thread later; here, at once. Exceptions from @p command
  /// propagate, and then @p done is not called.
  virtual void answerWhenDone(const std::function<Expected<void>()> &command, Done done) {
    done(command());
  }
};

} // namespace pathkeeper::daemon
