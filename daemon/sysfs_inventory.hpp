#pragma once

// The kernel's iSCSI paths as sysfs shows them: sessions, connections, iSCSI
// hosts and the sd devices behind them, turned into selector::Path values for
// the planner. The sysfs root is a constructor argument, so that tests and
// `pathkeeperctl plan --sysfs-root` run on trees captured in the VM lab.
//
// The inventory keeps what it read from each sysfs object, and derives the
// paths from those facts in memory. A udev event therefore re-reads only the
// object it names (and the sd devices whose state the kernel changes without
// an event of their own), then derives the paths again: a full rescan and a
// sequence of events give the same inventory.

#include "expected.hpp"
#include "model.hpp"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief An iSCSI session (class/iscsi_session/sessionN), as read.
struct IscsiSession {
  std::string name; ///< "session1"
  int id = -1;      ///< the N of sessionN
  int hostNo = -1;  ///< the SCSI host it sits under; -1 when the link says none
  std::string targetName;
  std::string state; ///< the kernel's word: LOGGED_IN, FAILED, FREE
  std::string ifaceName;
  std::string initiatorName;
  std::optional<int> recoveryTmo; ///< seconds
  std::optional<std::uint32_t> tpgt;
  std::vector<std::string> problems; ///< attributes that could not be read

  bool operator==(const IscsiSession &) const = default;
};

/// @brief An iSCSI connection (class/iscsi_connection/connectionS:C), as read.
struct IscsiConnection {
  std::string name; ///< "connection1:0"
  int sessionId = -1;
  int cid = -1;
  std::string persistentAddress; ///< the portal the session was configured for
  std::optional<std::uint16_t> persistentPort;
  std::string address; ///< where the connection is now (after a redirect)
  std::optional<std::uint16_t> port;
  std::string state; ///< "up", "down", "failed"; empty on kernels without it
  std::vector<std::string> problems;

  bool operator==(const IscsiConnection &) const = default;
};

/// @brief An iSCSI host (class/iscsi_host/hostN), as read. With iscsi_tcp,
/// every session gets a host of its own.
struct IscsiHost {
  std::string name; ///< "host2"
  int hostNo = -1;
  /// The bound NIC: the kernel's netdev (iface.net_ifacename) or, for an
  /// iface bound by iface.hwaddress, the NIC open-iscsi resolved it to
  /// (nicWithHardwareAddress). Empty when unbound.
  std::string netdev;
  std::string ipAddress; ///< the connection's local address
  std::string hwAddress; ///< iface.hwaddress when the iface is bound by it
  std::string initiatorName;
  std::vector<std::string> problems;

  bool operator==(const IscsiHost &) const = default;
};

/// @brief An sd device and its SCSI device, with the attributes as read.
struct ScsiDisk {
  std::string name;    ///< "sdb"
  std::string devpath; ///< "/devices/.../2:0:0:0/block/sdb", as udev's DEVPATH
  std::string hctl;    ///< "2:0:0:0"
  std::string session; ///< "session1"; empty when not behind an iSCSI session
  int hostNo = -1;
  std::string dev; ///< "8:16"
  std::optional<std::uint64_t> size;
  std::string vendor; ///< as the kernel pads it
  std::string model;
  std::string rev;
  std::string state; ///< "running", "offline", "blocked", "transport-offline"
  std::optional<unsigned> timeout;
  std::string wwid; ///< the kernel's wwid attribute, e.g. "naa.6001405..."
  std::optional<std::vector<std::uint8_t>> vpdPg83;
  std::optional<std::vector<std::uint8_t>> vpdPg80;
  std::string accessState; ///< empty when the device has no ALUA (no TPGS)
  std::optional<bool> preferredPath;
  std::string dhState;
  bool vanished = false; ///< the device went away while it was read
  std::vector<std::string> problems;

  bool operator==(const ScsiDisk &) const = default;
};

/// @brief One iSCSI path derived from a disk, its session, connection and host.
struct InventoryPath {
  selector::Path path;
  /// Why the path is incomplete (device vanished, attribute unreadable,
  /// session gone, no WWID); empty when everything was read.
  std::vector<std::string> problems;

  [[nodiscard]] bool complete() const { return problems.empty(); }
};

/// @brief Field by field, since selector::Path has no comparison of its own.
bool operator==(const InventoryPath &a, const InventoryPath &b);

/// @brief Everything the scanner knows, keyed by sysfs name.
struct Inventory {
  std::map<std::string, IscsiSession> sessions;
  std::map<std::string, IscsiConnection> connections;
  std::map<std::string, IscsiHost> hosts;
  std::map<std::string, ScsiDisk> disks; ///< every sd device, iSCSI or not
  /// Derived from the above; iSCSI disks only, keyed by device name.
  std::map<std::string, InventoryPath> paths;
  /// sd devices that are not behind an iSCSI session, with the reason.
  std::map<std::string, std::string> ignored;

  /// @brief The paths for selector::planMaps, in device order (sda, ..., sdz, sdaa).
  [[nodiscard]] std::vector<selector::Path> plannerPaths() const;

  bool operator==(const Inventory &) const = default;
};

/// @brief What a udev event says, as the monitor adapter (daemon) or a test
/// builds it.
struct UdevEvent {
  enum class Action { Add, Change, Remove, Other };
  Action action = Action::Change;
  std::string subsystem; ///< block, scsi, scsi_device, iscsi_session, iscsi_connection, iscsi_host
  std::string devpath;   ///< DEVPATH: relative to the sysfs root, with a leading '/'
};

/// @brief "add", "change", "remove"; anything else (bind, move, ...) is Other.
UdevEvent::Action parseUdevAction(std::string_view text);

/// @brief The kernel's sysfs wwid attribute as a multipath WWID: "naa.<hex>"
/// gives "3<hex>", "eui.<hex>" "2<hex>", "t10.<text>" "1<text>" (blank runs
/// become one '_'), lowercase hex; nullopt for anything else.
std::optional<std::string> wwidFromSysfsAttribute(std::string_view attribute);

/// @brief Up when the session is LOGGED_IN and the device is running; Down
/// otherwise (a blocked device is waiting for its session to recover).
selector::PathState pathStateFromSysfs(std::string_view sessionState, std::string_view deviceState);

/// @brief Derives the paths (and the ignored list) from the objects read.
/// Pure: no file access.
void derivePaths(Inventory &inventory);

/// @brief Reads the iSCSI inventory from a sysfs tree.
///
/// @brief The NIC open-iscsi binds a session to for iface.hwaddress
/// @p address (usr/io.c, net_get_netdev_from_hwaddress): the first Ethernet
/// interface by ifindex with that address, compared without case. A bond
/// and its slaves share one address; open-iscsi takes the lowest index, and
/// so does this. Reads @p sysfsRoot/class/net; "" when none has it.
[[nodiscard]] std::string nicWithHardwareAddress(const std::filesystem::path &sysfsRoot,
                                                 std::string_view address);

/// Reads go through class/iscsi_session, class/iscsi_connection,
/// class/iscsi_host and block/sd*. Only an unusable root is an error: a device
/// that disappears mid-scan, or an attribute that cannot be read, becomes a
/// value (an incomplete path with its reason). Not thread-safe; cheap to copy.
class SysfsInventory {
public:
  /// @brief @p sysfsRoot is "/sys" in the daemon, a captured tree in tests.
  explicit SysfsInventory(std::filesystem::path sysfsRoot);

  /// @brief Reads everything. Fails only when the root is not a directory.
  /// Many disks (from 128 on) are read on a few threads of its own, which
  /// are gone when it returns.
  [[nodiscard]] Expected<Inventory> scan() const;

  /// @brief Applies one udev event by re-reading the objects it concerns.
  /// @return the names of the paths that were added, changed or removed.
  std::vector<std::string> apply(Inventory &inventory, const UdevEvent &event) const;

  /// @brief The DEVPATH of an object below the root, e.g. of "block/sdb".
  /// Empty when @p classLink is not a symlink.
  [[nodiscard]] std::string devpathOf(const std::filesystem::path &classLink) const;

private:
  void refreshSession(Inventory &inventory, const std::string &name) const;
  void refreshConnection(Inventory &inventory, const std::string &name) const;
  void refreshHost(Inventory &inventory, const std::string &name) const;
  void refreshDisk(Inventory &inventory, const std::string &name) const;
  /// block/@p name as read now; nullopt when it is not there.
  [[nodiscard]] std::optional<ScsiDisk> readDisk(const std::string &name) const;
  /// readDisk of every name, in order, read on a few threads when there
  /// are many.
  [[nodiscard]] std::vector<std::optional<ScsiDisk>>
  readDisks(const std::vector<std::string> &names) const;

  std::filesystem::path root_;
};

} // namespace pathkeeper::daemon
