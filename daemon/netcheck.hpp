#pragma once

// The network check (issue #8), pure part: a NetworkSnapshot value (what the
// kernel's links, addresses, rules and route lookups said, plus the sysctls
// and bonding state) and the iSCSI bindings (NIC, source address, portal)
// go in; Findings come out, each with its explanation and the exact fix.
//
// No I/O here: NetworkChecker (net_netlink.hpp) takes the snapshot, and the
// daemon or `pathkeeperctl doctor` calls analyse() on it. The daemon can
// re-run both on every netlink link/address/route change.

#include "model.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief One address on a NIC, as the kernel lists it.
struct NicAddress {
  std::string address; ///< "10.0.1.10" or "fd00::10", no prefix
  int prefixLength = 0;
  int family = 0; ///< AF_INET or AF_INET6
  bool operator==(const NicAddress &) const = default;
};

/// @brief The per-NIC IPv4 sysctls that matter for iface binding; nullopt
/// when unreadable. The effective value is the larger of "all" and the NIC's.
struct NicSysctls {
  std::optional<int> arpIgnore;
  std::optional<int> arpAnnounce;
  std::optional<int> rpFilter;
  bool operator==(const NicSysctls &) const = default;
};

/// @brief A bond master's state, from /sys/class/net/<bond>/bonding.
struct BondInfo {
  std::string mode; ///< first word of bonding/mode, e.g. "balance-alb"
  std::vector<std::string> slaves;
  bool operator==(const BondInfo &) const = default;
};

/// @brief One network interface.
struct Nic {
  std::string name;
  int ifindex = 0;
  std::vector<NicAddress> addresses;
  std::string operstate;             ///< RFC 2863 word, lower case: "up", "down", "unknown", ...
  std::optional<unsigned> speedMbps; ///< nullopt when the driver does not say
  std::optional<unsigned> mtu;
  NicSysctls sysctls;
  std::optional<BondInfo> bond; ///< set when this NIC is a bond master
  std::string master;           ///< the bond (or bridge) this NIC is enslaved to
  bool operator==(const Nic &) const = default;
};

/// @brief One RTM_GETROUTE question and the kernel's answer, as
/// `ip route get DESTINATION [from SOURCE] [oif OIF]`.
struct RouteLookup {
  std::string destination;
  std::string source; ///< empty: the kernel chooses
  std::string oif;    ///< empty: no output interface given
  std::string error;  ///< the kernel's refusal ("Network is unreachable"); empty on success
  std::string egress; ///< the NIC the traffic leaves by
  std::string preferredSource;
  std::string gateway; ///< empty when the destination is on-link
  std::uint32_t table = 0;
  bool operator==(const RouteLookup &) const = default;
};

/// @brief One policy routing rule (`ip rule`).
struct PolicyRule {
  std::uint32_t priority = 0;
  int family = 0;
  std::string source; ///< "from" address, empty for "all"
  int sourceLength = 0;
  std::uint32_t table = 0; ///< 0 when the rule does not look up a table
  std::string iif;
  std::string oif;
  bool operator==(const PolicyRule &) const = default;
};

/// @brief Everything the analysis reads.
struct NetworkSnapshot {
  std::vector<Nic> nics;
  NicSysctls all; ///< net.ipv4.conf.all
  std::vector<PolicyRule> rules;
  std::vector<RouteLookup> routes;

  [[nodiscard]] const Nic *nic(std::string_view name) const;
  /// @brief The NIC holding @p address, or nullptr.
  [[nodiscard]] const Nic *owner(std::string_view address) const;
  [[nodiscard]] const RouteLookup *route(std::string_view destination, std::string_view source,
                                         std::string_view oif) const;
};

/// @brief One (NIC, source address, portal) that iSCSI traffic is bound to.
struct Binding {
  std::string nic;    ///< may be empty when only the source address is known
  std::string source; ///< empty: the NIC's first address of the portal's family
  selector::Portal portal;
  /// true when open-iscsi binds the socket to the device (iface.net_ifacename,
  /// SO_BINDTODEVICE); false when only the source address is bound.
  bool boundByDevice = true;
  std::vector<std::string> paths;   ///< sd devices over this binding, when known
  std::vector<std::string> maps;    ///< WWIDs of the LUNs these paths reach
  std::vector<std::string> origins; ///< "session3", "iface iface0", "--nic"

  bool operator==(const Binding &) const = default;
};

/// @brief The two lookups each binding needs: with the output interface
/// (what a device-bound socket does) and without (where everything not bound
/// to the device goes: replies, ARP, traffic bound by address only).
struct RouteQuery {
  std::string destination;
  std::string source;
  std::string oif;
  bool operator==(const RouteQuery &) const = default;
};

/// @brief The NIC and source address @p binding really uses in @p snapshot:
/// a missing NIC is the owner of the source; a missing source is the one the
/// kernel chose for the portal through the NIC (sourceQueries), else the
/// NIC's address in the portal's subnet, else its first of the portal's
/// family. Either may stay empty.
Binding resolveBinding(const NetworkSnapshot &snapshot, const Binding &binding);

/// @brief The lookups that tell which source address the kernel gives
/// traffic bound to a NIC alone (no iface.ipaddress): the portal through
/// that NIC, with no source. Asked before routeQueries(), whose source
/// resolveBinding() takes from their answers.
std::vector<RouteQuery> sourceQueries(std::span<const Binding> bindings);

/// @brief The route lookups analyse() wants for @p bindings, deduplicated.
std::vector<RouteQuery> routeQueries(const NetworkSnapshot &snapshot,
                                     std::span<const Binding> bindings);

enum class Severity { Info, Warning, Error };
std::string_view toString(Severity severity);

/// @brief One step of a fix: a command, and an optional shell test that is
/// true when the step is already done (the fix script then skips it).
struct FixStep {
  std::string command;
  std::string doneTest;
  bool operator==(const FixStep &) const = default;
};

/// @brief One problem found, with what it affects and how to fix it.
struct Finding {
  /// Stable identifier for scripts: wrong-egress, unbound-egress,
  /// foreign-source, no-route, shared-subnet, arp-flux, rp-filter,
  /// link-down, nic-missing, speed-mismatch, mtu-mismatch, bond-no-slaves,
  /// bond-slave-down, bond-mode, bond-slave-bound.
  std::string id;
  Severity severity = Severity::Warning;
  std::vector<std::string> nics;
  std::vector<std::string> portals; ///< "ADDR:PORT"
  std::vector<std::string> paths;
  std::string summary;     ///< one line
  std::string explanation; ///< one paragraph
  std::vector<FixStep> fix;
  std::vector<std::string> notes; ///< persistence hints, caveats
};

/// @brief Runs every check on @p bindings against @p snapshot. Pure.
/// Findings are ordered by severity (errors first), then causes before
/// symptoms (egress and source before subnets, ARP and speed).
std::vector<Finding> analyse(const NetworkSnapshot &snapshot, std::span<const Binding> bindings);

/// @brief The worst severity in @p findings, nullopt when there are none.
std::optional<Severity> worstSeverity(std::span<const Finding> findings);

/// @brief A POSIX sh script that applies every finding's fix, idempotently
/// where the commands allow, with each finding's summary and notes as
/// comments. Never run by pathkeeper itself.
std::string renderFixScript(std::span<const Finding> findings);

/// @brief The per-NIC routing table the fixes use for @p nic: 1000 + ifindex
/// (stable while the NIC exists, and outside the ranges distributions use).
std::uint32_t policyTableFor(const Nic &nic);

/// @brief Merges bindings for the same NIC, source and portal address/port,
/// joining their paths, maps and origins. Keeps first-seen order.
std::vector<Binding> mergeBindings(std::vector<Binding> bindings);

} // namespace pathkeeper::daemon
