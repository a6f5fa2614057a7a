#pragma once

// Where the network check's bindings come from when the admin names none:
// the kernel's iSCSI sessions (each host's netdev and ipaddress, each
// connection's portal) and open-iscsi's records under /etc/iscsi (iface
// records: iface.net_ifacename, iface.ipaddress; node records:
// node.conn[0].address/port and the iface they use). Records are simple
// "key = value" files; the /etc/iscsi root is injectable for tests.

#include "expected.hpp"
#include "netcheck.hpp"
#include "sysfs_inventory.hpp"

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief An open-iscsi record: "key = value" lines, '#' comments ignored.
using IscsiRecord = std::map<std::string, std::string>;

/// @brief Parses one record file's text. Lines without '=' are ignored; the
/// value "<empty>" becomes "".
IscsiRecord parseIscsiRecord(std::string_view text);

/// @brief One node record: which portal, through which iface.
struct NodeRecord {
  std::string target;
  selector::Portal portal;
  std::string iface; ///< iface.iscsi_ifacename; "default" when unbound
  IscsiRecord values;
};

/// @brief What open-iscsi's records say.
struct IscsiRecords {
  std::map<std::string, IscsiRecord> ifaces; ///< by file name (= iface name)
  std::vector<NodeRecord> nodes;
  std::vector<std::string> warnings; ///< unreadable or unusable records
};

/// @brief Reads <etcIscsi>/ifaces/* and <etcIscsi>/nodes/<iqn>/<portal>[/<iface>].
/// A missing directory gives no records, not an error.
IscsiRecords readIscsiRecords(const std::filesystem::path &etcIscsi);

/// @brief Which NIC has a hardware address, for ifaces bound by
/// iface.hwaddress ("" when none has it).
using NicOfHardwareAddress = std::function<std::string(std::string_view)>;

/// @brief One binding per node record whose iface names a NIC (by
/// iface.net_ifacename, or by iface.hwaddress through @p nicOf) or an
/// address; records on the "default" iface (kernel routing decides) give none.
/// An iface whose iface.hwaddress @p nicOf finds on no NIC gives none either
/// (iscsid cannot log in through it), and one line in @p warnings.
std::vector<Binding> bindingsFromRecords(const IscsiRecords &records,
                                         const NicOfHardwareAddress &nicOf = {},
                                         std::vector<std::string> *warnings = nullptr);

/// @brief One binding per kernel session: its host's netdev and ipaddress,
/// its connection's persistent portal, and the sd devices and WWIDs behind it.
std::vector<Binding> bindingsFromSessions(const Inventory &inventory);

} // namespace pathkeeper::daemon
