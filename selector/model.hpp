#pragma once

// The domain model shared by every part of pathkeeper: paths as the inventory
// sees them, and the multipath maps built from them. Plain values only, so the
// selector logic stays pure and testable without a kernel.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief A block device number, printed the way device-mapper prints it.
struct DevT {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;

  /// @brief "major:minor", as in dm tables.
  [[nodiscard]] std::string str() const;
  auto operator<=>(const DevT &) const = default;
};

/// @brief Parses "8:16"; nullopt for anything else.
std::optional<DevT> parseDevT(std::string_view text);

/// @brief Path health, with multipath-tools' vocabulary.
enum class PathState {
  Unknown, ///< not checked yet
  Up,      ///< usable
  Down,    ///< failed
  Shaky,   ///< usable but flapping; kept out of service by damping
  Ghost,   ///< reachable but passive (ALUA standby); usable as a last resort
  Pending, ///< a check is in flight
  Removed, ///< the device went away
};

std::string_view toString(PathState state);
std::optional<PathState> parsePathState(std::string_view text);

/// @brief True for states that can carry I/O now (multipathd counts ghost).
bool isUsable(PathState state);

/// @brief ALUA asymmetric access state (SPC-4 table "asymmetric access state").
enum class AluaState {
  None, ///< the path reports no ALUA
  ActiveOptimized,
  ActiveNonOptimized,
  Standby,
  Unavailable,
  LbaDependent,
  Offline,
  Transitioning,
};

std::string_view toString(AluaState state);
/// @brief Accepts the kernel's sysfs spelling (access_state), e.g.
/// "active/optimized", "active/non-optimized", "standby".
std::optional<AluaState> parseAluaState(std::string_view text);

/// @brief The priority multipathd's alua prioritizer gives each state.
int aluaPriority(AluaState state, bool preferred);

/// @brief An iSCSI portal: where a session's connection goes.
struct Portal {
  std::string address; ///< IPv4 dotted quad or IPv6 without brackets
  std::uint16_t port = 3260;
  std::uint32_t tpgt = 1;

  /// @brief "10.10.1.20:3260,1" (IPv6 in brackets), as iscsiadm prints it.
  [[nodiscard]] std::string str() const;
  auto operator<=>(const Portal &) const = default;
};

/// @brief One SCSI path to a LUN, as discovered.
struct Path {
  std::string device; ///< kernel name, e.g. "sdb"
  DevT devt;
  std::string wwid; ///< LUN identity, e.g. "36001405..."
  std::string vendor;
  std::string product;
  std::string serial;
  std::uint64_t sizeSectors = 0; ///< 512-byte sectors

  std::string targetIqn;
  Portal portal;
  std::string iface;  ///< iscsiadm iface name, e.g. "iface0"
  std::string netdev; ///< NIC the session is bound to, e.g. "eth1"
  int sessionId = -1;

  PathState state = PathState::Unknown;
  std::optional<std::uint16_t> targetPortGroup; ///< ALUA TPG from VPD 0x83
  AluaState alua = AluaState::None;
  bool aluaPreferred = false;
  /// The scsi_dh handler the kernel attached to the device (sysfs dh_state),
  /// e.g. "alua" or "rdac"; empty when none ("detached") or unknown.
  std::string attachedHandler;
  int priority = 0;
  std::string controller; ///< label such as "upper"; empty when unknown
  bool marginal = false;  ///< flapping; sorted into the last group
  /// service-time relative_throughput, 1..100; policy or estimator sets it
  unsigned relativeThroughput = 1;
};

/// @brief A priority group of a map, in the kernel's terms.
struct PathGroup {
  std::vector<Path> paths;
  std::string controller; ///< set when grouped by controller

  /// @brief multipathd's group priority: the integer mean over usable paths.
  [[nodiscard]] int priority() const;
  [[nodiscard]] int usablePaths() const;
  /// @brief A group is marginal when every path in it is marginal.
  [[nodiscard]] bool marginal() const;
};

/// @brief The kernel's path selectors.
enum class SelectorKind {
  RoundRobin,
  QueueLength,
  ServiceTime,
  HistoricalServiceTime,
};

std::string_view toString(SelectorKind kind);
std::optional<SelectorKind> parseSelectorKind(std::string_view text);

/// @brief The number of per-path table arguments the kernel expects.
unsigned tableArgsPerPath(SelectorKind kind);
/// @brief The number of per-path status fields the kernel prints.
unsigned statusArgsPerPath(SelectorKind kind);

/// @brief How the kernel queues I/O on the map.
enum class QueueMode {
  Default, ///< request-based (blk-mq); nothing in the table
  Bio,
  Rq, ///< accepted by the kernel as a synonym of mq
  Mq,
};

/// @brief The map-level features, with the kernel's semantics.
struct Features {
  /// Queue I/O while no path is usable. multipathd's no_path_retry "queue"
  /// means queue forever; a count means queue, then fail after that many
  /// checker intervals (the daemon drops queue_if_no_path when it expires).
  bool queueIfNoPath = false;
  std::optional<unsigned> pgInitRetries;    ///< 1..50
  std::optional<unsigned> pgInitDelayMsecs; ///< 0..60000
  QueueMode queueMode = QueueMode::Default;
  bool retainAttachedHwHandler = false;

  bool operator==(const Features &) const = default;
};

/// @brief Everything needed to render one multipath map's table.
struct MapSpec {
  std::string alias; ///< dm name, e.g. "xserve-upper" or "mpatha"
  std::string wwid;
  std::uint64_t sizeSectors = 0;
  Features features;
  std::string hwHandler; ///< e.g. "alua"; empty for none
  std::vector<std::string> hwHandlerArgs;
  SelectorKind selector = SelectorKind::ServiceTime;
  std::vector<PathGroup> groups;
  unsigned initialGroup = 0; ///< 1-based; 0 exactly when there are no groups

  /// @brief "mpath-<wwid>", the DM UUID that udev rules and kpartx expect.
  [[nodiscard]] std::string dmUuid() const;
};

} // namespace pathkeeper::selector
