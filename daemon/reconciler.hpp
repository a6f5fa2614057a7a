#pragma once

// The reconciler: the desired maps (from the planner) against the live maps
// (read from the kernel), as the minimum list of device-mapper actions.
//
// planReconcile() is pure: values in, a plan out. readLiveMaps() and
// applyActions() are the only parts that touch a DeviceMapper.
//
// Decisions, stated once:
// - Tables are compared semantically: the live table is parsed with the
//   selector's grammar and compared, field by field, with the desired spec
//   as the kernel will hold it (kernelEffective features). Path states (A/F),
//   group states and the kernel's current/initial group are runtime state,
//   never a reason to reload.
// - A reload keeps the group in use: the new table's initial group is the
//   one holding the paths of the group the kernel uses now (most of them,
//   when the groups changed). A table's initial group would otherwise fail
//   a map back on every reload (new paths, weights, selector), whatever
//   the failback policy or the admin's SwitchGroup said; failback decides
//   separately, after the reload, as it does on any path event. The plan
//   takes the group from the pass's read; applyActions looks again just
//   before the load, since a switch_group on the message lane may have
//   moved the map in between.
// - queue_if_no_path is runtime state too: the kernel's echo follows the
//   queue_if_no_path/fail_if_no_path messages (no_path_retry expiry), so a
//   difference becomes a message, not a reload.
// - The order of the paths inside one group does not matter: it only decides
//   where round-robin starts and how ties are broken, and a reload for it
//   would disturb I/O for nothing. The order of the groups does matter
//   (it is their priority).
// - A hardware handler the kernel attached by itself (the desired spec names
//   none) is not a difference: the kernel reports the attached handler and
//   no table can detach it.
// - A live map with our DM UUID (mpath-<wwid>) whose table matches is
//   adopted as it is: no load, so the kernel's event counter stays put.
// - In owner mode a planned map whose WWID the kernel maps under another
//   name (its alias changed in the configuration, or a dmsetup rename) is
//   renamed to the planned alias when that name is free (planRenames), as
//   multipathd does: the kernel keeps the device, so nothing using it is
//   disturbed. Renames run in a step of their own before the pass plans, so
//   that the pass sees the maps under their planned names.
// - Nothing is removed automatically. A live mpath- map that is no longer
//   desired is reported as stale; removing a map under a mounted filesystem
//   or an LVM volume is the admin's decision.
// - A desired alias held by a map with another DM UUID, or not a multipath
//   map, is refused and never touched.

#include "dm_adapter.hpp"
#include "dm_status.hpp"
#include "dm_table.hpp"
#include "lull_gate.hpp"
#include "plan.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief Who owns the maps.
enum class ReconcileMode {
  Owner,     ///< pathkeeper creates and reloads the maps
  Companion, ///< multipathd owns them: messages only, never a table load
};

/// @brief One live map as read from the kernel.
struct LiveMap {
  DmMapInfo info;
  std::optional<DmTargetLine> target;     ///< the single target line, if there is exactly one
  std::size_t targetCount = 0;            ///< lines in the table
  std::optional<selector::DmTable> table; ///< target parsed; nullopt on a parse error
  std::optional<selector::DmStatus> status;
  std::string parseError; ///< why table or status did not parse
};

/// @brief What the caller wants besides the tables.
struct ReconcileInput {
  std::vector<selector::PlannedMap> desired;
  std::vector<LiveMap> live;
  ReconcileMode mode = ReconcileMode::Owner;
  /// Per path (dm device number): true = should carry I/O, false = should be
  /// failed in dm. Paths absent here are left as the kernel has them.
  std::map<selector::DevT, bool> usable;
  /// Per alias: the 1-based group the map should use now (failback policy).
  std::map<std::string, unsigned> activeGroup;
  /// Per alias: queue_if_no_path as it should be now, when it differs from
  /// the spec's features (no_path_retry counting down to fail).
  std::map<std::string, bool> queueIfNoPath;
};

/// @brief The inventory's paths as the planner must see them for tables: every
/// path that is not Removed counts as Up. A path's health is runtime state
/// (fail/reinstate messages, failback's switch_group); if it reached the plan,
/// a group whose paths are all down would sort last (its priority is the mean
/// over usable paths), so an ALUA map would be reloaded with its groups
/// renumbered each time its preferred group failed or came back, and that
/// reload's initial group would fail back whatever the failback policy says.
std::vector<selector::Path> pathsForTables(std::vector<selector::Path> paths);

/// @brief Why a reload is needed; a set of these.
enum class ReloadReason {
  Size,
  Paths,     ///< a path was added or removed
  Groups,    ///< same paths, grouped or ordered differently
  Selector,  ///< selector name or selector args (or both)
  PathArgs,  ///< same selector, other per-path args (service-time weights)
  Features,  ///< any feature but queue_if_no_path
  HwHandler, ///< handler name or args
  Unreadable ///< the live table did not parse
};

std::string_view toString(ReloadReason reason);

/// @brief The kinds of actions the reconciler emits.
enum class ActionKind { Create, Reload, Message, Rename };

/// @brief One device-mapper action.
struct Action {
  ActionKind kind = ActionKind::Message;
  std::string map;
  std::string uuid;                  ///< Create; Message: the map's, which it is sent by
  std::uint64_t sizeSectors = 0;     ///< Create and Reload
  std::string params;                ///< Create and Reload: the table without "0 <size> multipath"
  std::vector<ReloadReason> reasons; ///< Reload only
  std::string message;               ///< Message only, e.g. "fail_path 8:16"
  std::string oldName;               ///< Rename only: the live name; map is the new one
  bool stepAside = false;            ///< Rename only: to a temporary name, out of a swap's way
  /// Reload only: wait for a lull before the swap (adaptive selection).
  std::optional<LullGate> lull;

  /// @brief One line for logs, e.g. "reload xserve-upper (paths, selector)".
  [[nodiscard]] std::string describe() const;
  bool operator==(const Action &) const = default;
};

/// @brief A desired map the reconciler will not touch, and why.
struct Refusal {
  std::string map;
  std::string reason;
};

/// @brief A live map of ours that no desired map names.
struct StaleMap {
  std::string map;
  std::string uuid;
  unsigned activePaths = 0; ///< per its status; 0 when all paths are gone or failed
};

/// @brief The reconciler's answer.
struct ReconcilePlan {
  std::vector<Action> actions;      ///< in execution order
  std::vector<std::string> adopted; ///< live maps that already match (no load)
  std::vector<Refusal> refused;
  std::vector<StaleMap> stale;
};

/// @brief The pure planner. In companion mode the plan holds messages only
/// (the daemon forwards them to multipathd), and desired maps are matched to
/// live ones by DM UUID as well as by alias, since multipathd names them.
ReconcilePlan planReconcile(const ReconcileInput &input);

/// @brief The suffix of the temporary name a map steps aside to in a swap.
inline constexpr std::string_view kSwapSuffix = ".pathkeeper-swap";

/// @brief Owner mode: the renames that put every planned map whose DM UUID is
/// live under another name onto its planned alias. A rename is planned only
/// into a name no map has (counting the renames before it), so a chain
/// (a to b, b to c) comes out in the order that works, and a cycle (two
/// aliases swapped) goes through a temporary name ("<name>.pathkeeper-swap",
/// '_'s added while another device holds it, the name cut short to fit
/// DM_NAME_LEN).
/// A name held by a map or device that is not planned elsewhere is never
/// taken: that map waits, and planReconcile refuses it.
std::vector<Action> planRenames(const std::vector<selector::PlannedMap> &desired,
                                const std::vector<LiveMap> &live);

/// @brief Parses one map's table and status lines into a LiveMap.
LiveMap makeLiveMap(DmMapInfo info, const std::vector<DmTargetLine> &table,
                    const std::vector<DmTargetLine> &status);

/// @brief Reads every multipath map from @p dm. A map that disappears while
/// it is read is skipped. Throws what @p dm throws.
std::vector<LiveMap> readLiveMaps(DeviceMapper &dm);

/// @brief How one action went.
struct ActionOutcome {
  Action action;
  bool ok = false;
  bool skipped = false; ///< not tried: an earlier action on the same map failed
  std::string error;
  /// How long the call took, udev's processing included.
  std::chrono::microseconds elapsed{0};
  /// Reload only: how long the map was suspended, from the suspend call to
  /// the return of the resume ioctl (DeviceMapper::reload). New I/O waits
  /// that long; adaptive selection must keep it short.
  std::chrono::microseconds held{0};
  /// Rename only: the map's table was reloaded (the same table) first, to
  /// keep the kernel safe (LibDevmapper::rename); held is that reload's.
  /// Set on a failed rename too: the reload happened all the same.
  bool reloadedFirst = false;
  /// Reload with a lull gate only: how the wait before the swap went.
  std::optional<LullWait> lull;
  /// Create only: CreateReport::tookOver.
  bool tookOver = false;
};

/// @brief Executes the actions in order, except that every create's first
/// half (DeviceMapper::prepareCreate: the device and its table) runs before
/// the first action, and its finishCreate() in the create's place; a failed
/// first half fails the create there. planReconcile() puts a map's create
/// before its other actions, so none of them runs before the map is live.
/// A device prepared and never finished (its create skipped) is removed
/// before returning. A failure does not stop the other
/// maps; the remaining actions of the failed map are skipped, since they
/// were planned against a table that is not there. A failed reload leaves
/// the old table live and the map resumed (DeviceMapper::reload). The
/// actions share one udev batch (DeviceMapper::beginUdevBatch), ended before
/// returning. A reload with a lull gate first waits for it (waitForLull),
/// reading @p inFlight, while the old table carries the I/O; the gates of
/// one call share the first one's maxWait. Without a reader nothing waits.
std::vector<ActionOutcome> applyActions(const std::vector<Action> &actions, DeviceMapper &dm,
                                        const InFlightReader &inFlight = {});

} // namespace pathkeeper::daemon
