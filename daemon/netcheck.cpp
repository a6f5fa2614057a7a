#include "netcheck.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace pathkeeper::daemon {

namespace {

// The kernel's reserved table ids: default, main, local.
constexpr std::uint32_t kTableDefault = 253;
constexpr std::uint32_t kTableMain = 254;
constexpr std::uint32_t kTableLocal = 255;

struct IpBytes {
  int family = 0;
  std::array<unsigned char, 16> bytes{};
  int bits = 0;
};

std::optional<IpBytes> parseIp(std::string_view text) {
  const std::string copy(text);
  IpBytes ip;
  if (inet_pton(AF_INET, copy.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET;
    ip.bits = 32;
    return ip;
  }
  if (inet_pton(AF_INET6, copy.c_str(), ip.bytes.data()) == 1) {
    ip.family = AF_INET6;
    ip.bits = 128;
    return ip;
  }
  return std::nullopt;
}

int familyOf(std::string_view address) {
  auto ip = parseIp(address);
  return ip ? ip->family : 0;
}

IpBytes masked(IpBytes ip, int prefixLength) {
  for (int bit = std::max(prefixLength, 0); bit < ip.bits; ++bit) {
    ip.bytes[static_cast<std::size_t>(bit / 8)] &=
        static_cast<unsigned char>(~(0x80U >> (bit % 8)));
  }
  return ip;
}

std::string formatIp(const IpBytes &ip) {
  std::array<char, INET6_ADDRSTRLEN> text{};
  if (inet_ntop(ip.family, ip.bytes.data(), text.data(), text.size()) == nullptr) {
    return {};
  }
  return text.data();
}

/// "10.0.1.0/24" for 10.0.1.10/24.
std::string networkOf(const NicAddress &address) {
  auto ip = parseIp(address.address);
  if (!ip) {
    return {};
  }
  return fmt::format("{}/{}", formatIp(masked(*ip, address.prefixLength)), address.prefixLength);
}

bool covers(std::string_view network, int length, std::string_view address) {
  auto net = parseIp(network);
  auto ip = parseIp(address);
  if (!net || !ip || net->family != ip->family || length <= 0) {
    return false;
  }
  return masked(*net, length).bytes == masked(*ip, length).bytes;
}

bool usableAddress(const NicAddress &address) {
  auto ip = parseIp(address.address);
  if (!ip) {
    return false;
  }
  if (ip->family == AF_INET6 && ip->bytes[0] == 0xfe && (ip->bytes[1] & 0xc0) == 0x80) {
    return false; // link-local: never a source for iSCSI
  }
  return address.prefixLength > 0 && address.prefixLength < ip->bits;
}

std::string portalText(const selector::Portal &portal) {
  if (familyOf(portal.address) == AF_INET6) {
    return fmt::format("[{}]:{}", portal.address, portal.port);
  }
  return fmt::format("{}:{}", portal.address, portal.port);
}

template <typename T> void addUnique(std::vector<T> &into, const T &value) {
  if (std::find(into.begin(), into.end(), value) == into.end()) {
    into.push_back(value);
  }
}

template <typename T> void addAll(std::vector<T> &into, const std::vector<T> &values) {
  for (const auto &value : values) {
    addUnique(into, value);
  }
}

std::optional<int> effective(std::optional<int> all, std::optional<int> nic) {
  if (!all || !nic) {
    return std::nullopt;
  }
  return std::max(*all, *nic);
}

bool hasPolicyRouting(const NetworkSnapshot &snapshot, const NicAddress &address) {
  return std::any_of(snapshot.rules.begin(), snapshot.rules.end(), [&](const PolicyRule &rule) {
    return rule.sourceLength > 0 && rule.table != 0 && rule.table != kTableDefault &&
           rule.table != kTableMain && rule.table != kTableLocal &&
           covers(rule.source, rule.sourceLength, address.address);
  });
}

std::string ipCommand(int family) {
  return family == AF_INET6 ? "ip -6" : "ip";
}

/// Per-NIC routing for @p nic: its subnets (and @p gateway as default) in
/// its own table, and a rule sending traffic from its addresses there.
std::vector<FixStep> policyRoutingSteps(const Nic &nic, std::string_view gateway) {
  std::vector<FixStep> steps;
  const std::uint32_t table = policyTableFor(nic);
  for (const auto &address : nic.addresses) {
    if (!usableAddress(address)) {
      continue;
    }
    const std::string ip = ipCommand(address.family);
    steps.push_back({fmt::format("{} route replace {} dev {} src {} table {}", ip,
                                 networkOf(address), nic.name, address.address, table),
                     {}});
    if (!gateway.empty() && familyOf(gateway) == address.family) {
      steps.push_back({fmt::format("{} route replace default via {} dev {} table {}", ip, gateway,
                                   nic.name, table),
                       {}});
    }
    steps.push_back(
        {fmt::format("{} rule add from {} table {} priority {}", ip, address.address, table, table),
         fmt::format("{} rule show | grep -qwF 'from {} lookup {}'", ip, address.address, table)});
  }
  return steps;
}

const std::vector<std::string> kPolicyRoutingNotes = {
    "make it persistent: with ifupdown as post-up lines of each NIC in "
    "/etc/network/interfaces, with systemd-networkd as [Route] Table= and "
    "[RoutingPolicyRule] From= Table= in the NIC's .network file"};

FixStep sysctlStep(std::string_view nic, std::string_view key, int value) {
  return {fmt::format("sysctl -qw net.ipv4.conf.{}.{}={}", nic, key, value), {}};
}

std::string sysctlNote(std::string_view what) {
  return fmt::format("make it persistent: put the same {} lines (without 'sysctl -qw') in "
                     "/etc/sysctl.d/90-pathkeeper.conf",
                     what);
}

/// The order findings of one severity are listed in: causes before symptoms.
int rank(std::string_view id) {
  static constexpr std::array<std::string_view, 15> kOrder = {
      "nic-missing",     "link-down",        "no-route",      "wrong-egress", "foreign-source",
      "rp-filter",       "unbound-egress",   "shared-subnet", "arp-flux",     "bond-no-slaves",
      "bond-slave-down", "bond-slave-bound", "bond-mode",     "mtu-mismatch", "speed-mismatch"};
  const auto *it = std::find(kOrder.begin(), kOrder.end(), id);
  return static_cast<int>(it - kOrder.begin());
}

/// Collects findings keyed by id and a discriminator, so that one problem
/// seen from several bindings becomes one finding with all of them.
class FindingSet {
public:
  Finding &at(const std::string &id, const std::string &key, Severity severity) {
    auto [it, inserted] = byKey_.try_emplace(std::make_pair(id, key));
    if (inserted) {
      it->second.id = id;
      it->second.severity = severity;
    }
    it->second.severity = std::max(it->second.severity, severity);
    return it->second;
  }

  std::vector<Finding> take() {
    std::vector<Finding> findings;
    for (auto &[key, finding] : byKey_) {
      findings.push_back(std::move(finding));
    }
    std::stable_sort(findings.begin(), findings.end(), [](const Finding &a, const Finding &b) {
      const int rankA = rank(a.id);
      const int rankB = rank(b.id);
      return std::tie(b.severity, rankA, a.nics) < std::tie(a.severity, rankB, b.nics);
    });
    return findings;
  }

private:
  std::map<std::pair<std::string, std::string>, Finding> byKey_;
};

void noteBinding(Finding &finding, const Binding &binding) {
  addUnique(finding.portals, portalText(binding.portal));
  addAll(finding.paths, binding.paths);
}

void checkRoutes(const NetworkSnapshot &snapshot, const Binding &binding, const Nic &nic,
                 FindingSet &findings) {
  const std::string portal = portalText(binding.portal);
  const RouteLookup *bound = snapshot.route(binding.portal.address, binding.source, nic.name);
  const RouteLookup *unbound =
      binding.source.empty() ? nullptr : snapshot.route(binding.portal.address, binding.source, "");
  const std::string gateway = bound != nullptr ? bound->gateway : std::string{};

  auto noRoute = [&](const RouteLookup &lookup) {
    Finding &f = findings.at("no-route", nic.name, Severity::Error);
    addUnique(f.nics, nic.name);
    noteBinding(f, binding);
    f.summary = fmt::format("the kernel has no route to the portals from {}", nic.name);
    f.explanation = fmt::format(
        "Asked which way traffic from {} to {} goes{}, the kernel answered \"{}\". The "
        "sessions bound to {} cannot reach their portal. Add an address in the portal's "
        "subnet to {}, or a route to the portal via a gateway on {}.",
        lookup.source.empty() ? "(any source)" : lookup.source, portal,
        lookup.oif.empty() ? "" : fmt::format(" through {}", lookup.oif), lookup.error, nic.name,
        nic.name, nic.name);
  };
  auto wrongWay = [&](const RouteLookup &lookup, bool deviceBound) {
    const bool error = deviceBound || !binding.boundByDevice;
    const std::string id = error ? "wrong-egress" : "unbound-egress";
    Finding &f = findings.at(id, nic.name + ">" + lookup.egress,
                             error ? Severity::Error : Severity::Warning);
    addUnique(f.nics, nic.name);
    addUnique(f.nics, lookup.egress);
    noteBinding(f, binding);
    f.summary = fmt::format("traffic bound to {} leaves via {}", nic.name, lookup.egress);
    if (deviceBound) {
      f.explanation = fmt::format(
          "Even with the output interface forced to {}, the kernel routes traffic from {} "
          "to the portals ({}) out of {}. iSCSI sessions bound to {} therefore use the "
          "other NIC's link, so the paths share one wire and flap together.",
          nic.name, binding.source, fmt::join(f.portals, ", "), lookup.egress, nic.name);
    } else if (binding.boundByDevice) {
      f.explanation = fmt::format(
          "The sessions bind their sockets to {}, but everything that is not bound to the "
          "device and carries {}'s address {} (ARP, replies, discovery without an iface, "
          "tools) leaves via {}: both NICs sit in one subnet and the main table's first "
          "route wins. The switch and the target then see {}'s address behind two ports, "
          "which is what makes NOP-outs time out and paths flap. Give each NIC its own "
          "routing table with a rule for its source address.",
          nic.name, nic.name, binding.source, lookup.egress, nic.name);
    } else {
      f.explanation = fmt::format(
          "These sessions are bound by source address {} (of {}) only, and the kernel "
          "sends that traffic to the portals ({}) out of {}: both NICs sit in one subnet "
          "and the main table's first route wins. Paths meant for {} share {}'s link, so "
          "they flap together and reads run at a fraction of what the links carry. Give "
          "each NIC its own routing table with a rule for its source address.",
          binding.source, nic.name, fmt::join(f.portals, ", "), lookup.egress, nic.name,
          lookup.egress);
    }
    f.fix = policyRoutingSteps(nic, gateway);
    f.notes = kPolicyRoutingNotes;
  };

  if (bound != nullptr) {
    if (!bound->error.empty()) {
      noRoute(*bound);
    } else if (bound->egress != nic.name) {
      wrongWay(*bound, true);
    }
  }
  if (unbound != nullptr) {
    if (!unbound->error.empty()) {
      if (!binding.boundByDevice) {
        noRoute(*unbound);
      }
    } else if (unbound->egress != nic.name) {
      wrongWay(*unbound, false);
    }
  }

  // Strict reverse-path filtering drops what comes back on a NIC whose
  // reverse route points elsewhere: exactly the case just looked up.
  const auto rp = effective(snapshot.all.rpFilter, nic.sysctls.rpFilter);
  if (familyOf(binding.portal.address) == AF_INET && rp == 1 && unbound != nullptr &&
      unbound->error.empty() && unbound->egress != nic.name) {
    Finding &f = findings.at("rp-filter", nic.name, Severity::Error);
    addUnique(f.nics, nic.name);
    noteBinding(f, binding);
    f.summary = fmt::format("strict rp_filter on {} drops its sessions' replies", nic.name);
    f.explanation = fmt::format(
        "rp_filter is 1 (strict) on {} (net.ipv4.conf.all: {}, {}: {}), and the kernel's "
        "route back to the portals ({}) leaves via {}. Strict reverse-path filtering "
        "drops every packet from a portal that arrives on {}, so a session bound to {} "
        "gets no answers. Use loose mode (2), or 0, on {}; per-NIC policy routing makes "
        "the reverse route agree as well.",
        nic.name, snapshot.all.rpFilter.value_or(-1), nic.name, nic.sysctls.rpFilter.value_or(-1),
        fmt::join(f.portals, ", "), unbound->egress, nic.name, nic.name, nic.name);
    f.fix = {sysctlStep(nic.name, "rp_filter", 2)};
    if (snapshot.all.rpFilter == 1 && nic.sysctls.rpFilter != 1) {
      f.notes = {"net.ipv4.conf.all.rp_filter is 1; the larger of 'all' and the NIC's "
                 "value counts, so 2 on the NIC is enough"};
    }
    f.notes.push_back(sysctlNote("rp_filter"));
  }
}

void checkNic(const NetworkSnapshot &snapshot, const Binding &binding, const Nic &nic,
              FindingSet &findings) {
  if (nic.operstate == "down" || nic.operstate == "lowerlayerdown" ||
      nic.operstate == "notpresent") {
    Finding &f = findings.at("link-down", nic.name, Severity::Error);
    addUnique(f.nics, nic.name);
    noteBinding(f, binding);
    f.summary = fmt::format("{} is {}", nic.name, nic.operstate);
    f.explanation = fmt::format(
        "The kernel reports {}'s operational state as \"{}\", so every path bound to it is "
        "down. Check the cable, the switch port and `ip link show {}`; an administratively "
        "down link comes up with the command below.",
        nic.name, nic.operstate, nic.name);
    f.fix = {{fmt::format("ip link set dev {} up", nic.name), {}}};
  }
  if (!nic.master.empty()) {
    const Nic *master = snapshot.nic(nic.master);
    if (master != nullptr && master->bond) {
      Finding &f = findings.at("bond-slave-bound", nic.name, Severity::Warning);
      addUnique(f.nics, nic.name);
      addUnique(f.nics, master->name);
      noteBinding(f, binding);
      f.summary = fmt::format("iSCSI is bound to {}, a slave of {}", nic.name, master->name);
      f.explanation = fmt::format(
          "{} is enslaved to bond {} ({}); its traffic is the bond's, and a session bound to "
          "the slave bypasses the bond's failover. Bind the iSCSI iface to {} instead "
          "(iscsiadm -m iface -I IFACE -o update -n iface.net_ifacename -v {}).",
          nic.name, master->name, master->bond->mode, master->name, master->name);
    }
  }
  if (nic.bond) {
    const BondInfo &bond = *nic.bond;
    if (bond.slaves.empty()) {
      Finding &f = findings.at("bond-no-slaves", nic.name, Severity::Error);
      addUnique(f.nics, nic.name);
      noteBinding(f, binding);
      f.summary = fmt::format("bond {} has no slaves", nic.name);
      f.explanation =
          fmt::format("Bond {} (mode {}) has no slave interfaces, so it carries no traffic at all. "
                      "Enslave the NICs meant for it (ip link set dev NIC master {}).",
                      nic.name, bond.mode, nic.name);
    }
    for (const auto &slaveName : bond.slaves) {
      const Nic *slave = snapshot.nic(slaveName);
      if (slave != nullptr && slave->operstate != "up") {
        Finding &f = findings.at("bond-slave-down", nic.name, Severity::Warning);
        addUnique(f.nics, nic.name);
        addUnique(f.nics, slaveName);
        noteBinding(f, binding);
        f.summary = fmt::format("bond {} has a slave that is not up", nic.name);
        f.explanation = fmt::format(
            "Slave {} of bond {} (mode {}) is {}. The bond still works on its other slaves, "
            "but with less bandwidth and no redundancy.",
            slaveName, nic.name, bond.mode,
            slave->operstate.empty() ? "unknown" : slave->operstate);
      }
    }
    if (bond.mode == "balance-rr" || bond.mode == "broadcast") {
      Finding &f = findings.at("bond-mode", nic.name, Severity::Warning);
      addUnique(f.nics, nic.name);
      noteBinding(f, binding);
      f.summary = fmt::format("bond {} uses mode {}", nic.name, bond.mode);
      f.explanation =
          bond.mode == "balance-rr"
              ? fmt::format("balance-rr sprays one TCP stream over every slave, so iSCSI "
                            "segments arrive out of order and TCP retransmits. Use "
                            "balance-alb or 802.3ad, or no bond and one session per NIC "
                            "with multipath spreading the load.")
              : fmt::format("broadcast sends every frame on every slave: it doubles the "
                            "traffic and gives no bandwidth. Use balance-alb or 802.3ad.");
    }
  }
}

/// NICs whose usable addresses share one subnet, keyed by that subnet.
std::map<std::string, std::vector<std::pair<const Nic *, const NicAddress *>>>
sharedSubnets(const NetworkSnapshot &snapshot, const std::set<std::string> &scope) {
  std::map<std::string, std::vector<std::pair<const Nic *, const NicAddress *>>> bySubnet;
  for (const auto &nic : snapshot.nics) {
    if (nic.name == "lo") {
      continue;
    }
    for (const auto &address : nic.addresses) {
      if (usableAddress(address)) {
        bySubnet[networkOf(address)].emplace_back(&nic, &address);
      }
    }
  }
  std::erase_if(bySubnet, [&](const auto &entry) {
    std::set<std::string> nics;
    bool inScope = scope.empty();
    for (const auto &[nic, address] : entry.second) {
      nics.insert(nic->name);
      inScope = inScope || scope.contains(nic->name);
    }
    return nics.size() < 2 || !inScope;
  });
  return bySubnet;
}

void checkSubnets(const NetworkSnapshot &snapshot, std::span<const Binding> bindings,
                  const std::set<std::string> &scope, FindingSet &findings) {
  // The gateway each NIC's bound lookups used, for its own table.
  std::map<std::string, std::string> gateways;
  for (const auto &binding : bindings) {
    if (const RouteLookup *lookup =
            snapshot.route(binding.portal.address, binding.source, binding.nic);
        lookup != nullptr && !lookup->gateway.empty() && lookup->egress == binding.nic) {
      gateways.try_emplace(binding.nic, lookup->gateway);
    }
  }
  for (const auto &[subnet, members] : sharedSubnets(snapshot, scope)) {
    std::vector<std::string> nics;
    std::vector<std::string> unrouted;
    std::vector<std::string> fluxing;
    for (const auto &[nic, address] : members) {
      addUnique(nics, nic->name);
      if (!hasPolicyRouting(snapshot, *address)) {
        addUnique(unrouted, nic->name);
      }
      if (address->family == AF_INET) {
        const auto ignore = effective(snapshot.all.arpIgnore, nic->sysctls.arpIgnore);
        const auto announce = effective(snapshot.all.arpAnnounce, nic->sysctls.arpAnnounce);
        if (ignore == 0 || announce == 0) {
          addUnique(fluxing, nic->name);
        }
      }
    }
    auto attach = [&](Finding &f) {
      for (const auto &binding : bindings) {
        if (std::find(nics.begin(), nics.end(), binding.nic) != nics.end()) {
          noteBinding(f, binding);
        }
      }
    };
    if (!unrouted.empty()) {
      Finding &f = findings.at("shared-subnet", subnet, Severity::Warning);
      f.nics = nics;
      attach(f);
      f.summary = fmt::format("{} share subnet {} without per-NIC policy routing",
                              fmt::join(nics, ", "), subnet);
      f.explanation = fmt::format(
          "{} all have addresses in {}, and {} {} no rule sending traffic from {} "
          "address{} to a table of {} own. The kernel then picks the egress NIC by the main "
          "table alone, so traffic with one NIC's source address can leave by another, and "
          "the two links do not carry their own sessions. The fix gives each NIC a routing "
          "table with its subnet and a rule for its source address.",
          fmt::join(nics, ", "), subnet, fmt::join(unrouted, ", "),
          unrouted.size() == 1 ? "has" : "have", unrouted.size() == 1 ? "its" : "their",
          unrouted.size() == 1 ? "" : "es", unrouted.size() == 1 ? "its" : "their");
      for (const auto &name : unrouted) {
        const Nic *nic = snapshot.nic(name);
        const auto gateway = gateways.find(name);
        for (auto &step :
             policyRoutingSteps(*nic, gateway == gateways.end() ? "" : gateway->second)) {
          f.fix.push_back(std::move(step));
        }
      }
      f.notes = kPolicyRoutingNotes;
    }
    if (!fluxing.empty()) {
      Finding &f = findings.at("arp-flux", subnet, Severity::Warning);
      f.nics = fluxing;
      attach(f);
      f.summary = fmt::format("ARP flux on {} (arp_ignore/arp_announce 0 in {})",
                              fmt::join(fluxing, ", "), subnet);
      f.explanation = fmt::format(
          "{} share subnet {}, and with arp_ignore=0 and arp_announce=0 Linux answers ARP "
          "for any of its addresses on any NIC and announces addresses on the wrong one. "
          "The target and the switch then learn one NIC's address at the other's MAC, and "
          "sessions bound to one NIC are answered on the other. arp_ignore=1 answers only "
          "on the NIC holding the address; arp_announce=2 always uses the best local "
          "address for the NIC.",
          fmt::join(nics, ", "), subnet);
      for (const auto &name : fluxing) {
        f.fix.push_back(sysctlStep(name, "arp_ignore", 1));
        f.fix.push_back(sysctlStep(name, "arp_announce", 2));
      }
      f.notes = {sysctlNote("arp_ignore/arp_announce")};
    }
  }
}

void checkAcrossNics(const NetworkSnapshot &snapshot, std::span<const Binding> bindings,
                     FindingSet &findings) {
  // Speed: the service-time selector's relative throughput should follow it.
  std::map<std::string, unsigned> speeds;
  for (const auto &binding : bindings) {
    const Nic *nic = snapshot.nic(binding.nic);
    if (nic != nullptr && nic->speedMbps) {
      speeds.emplace(nic->name, *nic->speedMbps);
    }
  }
  std::set<unsigned> distinctSpeeds;
  for (const auto &[name, speed] : speeds) {
    distinctSpeeds.insert(speed);
  }
  if (distinctSpeeds.size() > 1) {
    Finding &f = findings.at("speed-mismatch", "", Severity::Info);
    std::vector<std::string> described;
    for (const auto &[name, speed] : speeds) {
      f.nics.push_back(name);
      described.push_back(fmt::format("{} {} Mb/s", name, speed));
    }
    for (const auto &binding : bindings) {
      if (speeds.contains(binding.nic)) {
        noteBinding(f, binding);
      }
    }
    f.summary =
        fmt::format("the iSCSI NICs run at different speeds ({})", fmt::join(described, ", "));
    f.explanation = fmt::format(
        "The NICs carrying iSCSI paths have different link speeds ({}). Round-robin over "
        "them is limited by the slowest; service-time with relative throughput set in "
        "proportion to the link speeds spreads the load to match.",
        fmt::join(described, ", "));
  }

  // MTU: every NIC that serves one map should carry the same frame size.
  std::map<std::string, std::map<std::string, unsigned>> mtuByMap;
  for (const auto &binding : bindings) {
    const Nic *nic = snapshot.nic(binding.nic);
    if (nic == nullptr || !nic->mtu) {
      continue;
    }
    if (binding.maps.empty()) {
      mtuByMap[""].emplace(nic->name, *nic->mtu);
    }
    for (const auto &map : binding.maps) {
      mtuByMap[map].emplace(nic->name, *nic->mtu);
    }
  }
  for (const auto &[map, mtus] : mtuByMap) {
    unsigned largest = 0;
    unsigned smallest = ~0U;
    std::vector<std::string> described;
    for (const auto &[name, mtu] : mtus) {
      largest = std::max(largest, mtu);
      smallest = std::min(smallest, mtu);
      described.push_back(fmt::format("{} {}", name, mtu));
    }
    if (largest == smallest) {
      continue;
    }
    Finding &f = findings.at("mtu-mismatch", fmt::format("{}", fmt::join(described, ",")),
                             Severity::Warning);
    for (const auto &[name, mtu] : mtus) {
      addUnique(f.nics, name);
    }
    for (const auto &binding : bindings) {
      if (mtus.contains(binding.nic) &&
          (map.empty()
               ? binding.maps.empty()
               : std::find(binding.maps.begin(), binding.maps.end(), map) != binding.maps.end())) {
        noteBinding(f, binding);
      }
    }
    f.summary = fmt::format("MTU differs between NICs serving {} ({})",
                            map.empty() ? std::string("the same storage") : map,
                            fmt::join(described, ", "));
    f.explanation = fmt::format(
        "The NICs whose paths serve {} use different MTUs ({}). Paths of one map should "
        "behave alike; with mixed frame sizes one path fragments or, where the switch "
        "drops jumbo frames, stalls while the others work, which looks like a flapping "
        "path. Set one MTU on every NIC (and switch port and target port) of the map.",
        map.empty() ? std::string("the same storage") : map, fmt::join(described, ", "));
    for (const auto &[name, mtu] : mtus) {
      if (mtu != largest) {
        f.notes.push_back(fmt::format("to use jumbo frames everywhere: ip link set dev {} mtu {} "
                                      "(only if the switch and target carry them; otherwise "
                                      "lower the others to {})",
                                      name, largest, smallest));
      }
    }
  }
}

} // namespace

const Nic *NetworkSnapshot::nic(std::string_view name) const {
  auto it = std::find_if(nics.begin(), nics.end(), [&](const Nic &n) { return n.name == name; });
  return it == nics.end() ? nullptr : &*it;
}

const Nic *NetworkSnapshot::owner(std::string_view address) const {
  const auto wanted = parseIp(address);
  if (!wanted) {
    return nullptr;
  }
  for (const auto &n : nics) {
    for (const auto &a : n.addresses) {
      auto ip = parseIp(a.address);
      if (ip && ip->family == wanted->family && ip->bytes == wanted->bytes) {
        return &n;
      }
    }
  }
  return nullptr;
}

const RouteLookup *NetworkSnapshot::route(std::string_view destination, std::string_view source,
                                          std::string_view oif) const {
  auto it = std::find_if(routes.begin(), routes.end(), [&](const RouteLookup &r) {
    return r.destination == destination && r.source == source && r.oif == oif;
  });
  return it == routes.end() ? nullptr : &*it;
}

Binding resolveBinding(const NetworkSnapshot &snapshot, const Binding &binding) {
  Binding resolved = binding;
  if (resolved.nic.empty() && !resolved.source.empty()) {
    if (const Nic *owner = snapshot.owner(resolved.source); owner != nullptr) {
      resolved.nic = owner->name;
    }
  }
  if (resolved.source.empty() && !resolved.nic.empty()) {
    // Bound to the device alone: the source is the kernel's choice for the
    // portal through that device (sourceQueries), which need not be the
    // NIC's first address. Without that lookup, as the kernel would for a
    // portal on-link: an address in the portal's subnet, else the first.
    const RouteLookup *chosen = snapshot.route(binding.portal.address, "", resolved.nic);
    if (chosen != nullptr && chosen->error.empty() && !chosen->preferredSource.empty()) {
      resolved.source = chosen->preferredSource;
      return resolved;
    }
    const int family = familyOf(binding.portal.address);
    if (const Nic *nic = snapshot.nic(resolved.nic); nic != nullptr) {
      for (const auto &address : nic->addresses) {
        if (address.family != family || !usableAddress(address)) {
          continue;
        }
        if (resolved.source.empty()) {
          resolved.source = address.address;
        }
        if (covers(address.address, address.prefixLength, binding.portal.address)) {
          resolved.source = address.address;
          break;
        }
      }
    }
  }
  return resolved;
}

std::vector<RouteQuery> sourceQueries(std::span<const Binding> bindings) {
  std::vector<RouteQuery> queries;
  for (const auto &binding : bindings) {
    if (!binding.nic.empty() && binding.source.empty() && !binding.portal.address.empty()) {
      addUnique(queries, RouteQuery{binding.portal.address, "", binding.nic});
    }
  }
  return queries;
}

std::vector<RouteQuery> routeQueries(const NetworkSnapshot &snapshot,
                                     std::span<const Binding> bindings) {
  std::vector<RouteQuery> queries;
  for (const auto &original : bindings) {
    const Binding binding = resolveBinding(snapshot, original);
    if (binding.portal.address.empty()) {
      continue;
    }
    if (!binding.nic.empty()) {
      addUnique(queries, RouteQuery{binding.portal.address, binding.source, binding.nic});
    }
    if (!binding.source.empty()) {
      addUnique(queries, RouteQuery{binding.portal.address, binding.source, ""});
    }
  }
  return queries;
}

std::string_view toString(Severity severity) {
  switch (severity) {
  case Severity::Info:
    return "info";
  case Severity::Warning:
    return "warning";
  case Severity::Error:
    return "error";
  }
  return "error";
}

std::uint32_t policyTableFor(const Nic &nic) {
  return 1000U + static_cast<std::uint32_t>(nic.ifindex);
}

std::vector<Finding> analyse(const NetworkSnapshot &snapshot, std::span<const Binding> bindings) {
  FindingSet findings;
  std::vector<Binding> resolved;
  std::set<std::string> scope;
  for (const auto &original : bindings) {
    resolved.push_back(resolveBinding(snapshot, original));
  }
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    const Binding &binding = resolved[i];
    const bool sourceChosenByKernel = bindings[i].source.empty();
    const std::string portal = portalText(binding.portal);
    if (binding.nic.empty()) {
      continue; // bound to nothing: the kernel's default routing is the intent
    }
    scope.insert(binding.nic);
    const Nic *nic = snapshot.nic(binding.nic);
    if (nic == nullptr) {
      Finding &f = findings.at("nic-missing", binding.nic, Severity::Error);
      addUnique(f.nics, binding.nic);
      noteBinding(f, binding);
      f.summary = fmt::format("iSCSI is bound to {}, which does not exist", binding.nic);
      f.explanation = fmt::format(
          "{} names {} as the NIC for {}, but the kernel has no such interface. Fix the "
          "iface record (iface.net_ifacename) or bring the NIC back.",
          fmt::join(binding.origins, ", "), binding.nic, portal);
      continue;
    }
    if (!binding.source.empty()) {
      const Nic *owner = snapshot.owner(binding.source);
      if (owner == nullptr || owner->name != nic->name) {
        Finding &f = findings.at("foreign-source", nic->name, Severity::Error);
        addUnique(f.nics, nic->name);
        if (owner != nullptr) {
          addUnique(f.nics, owner->name);
        }
        noteBinding(f, binding);
        f.summary = owner == nullptr ? fmt::format("{} uses source {}, which no NIC holds",
                                                   nic->name, binding.source)
                                     : fmt::format("{} uses source {}, which belongs to {}",
                                                   nic->name, binding.source, owner->name);
        const std::string whose = owner == nullptr
                                      ? std::string("which is on no NIC")
                                      : fmt::format("which belongs to {}", owner->name);
        const std::string repliesOn = owner == nullptr ? std::string("no NIC") : owner->name;
        const int family = familyOf(binding.portal.address);
        const bool hasOwn = std::ranges::any_of(nic->addresses, [&](const NicAddress &address) {
          return address.family == family && usableAddress(address);
        });
        if (!sourceChosenByKernel) {
          f.explanation = fmt::format(
              "Sessions bound to {} send with source address {}, {}. The portals answer that "
              "address, so the replies arrive on {} and the NIC binding is defeated. Set the "
              "iface's iface.ipaddress to an address of {} (or clear it), then log the "
              "sessions in again.",
              nic->name, binding.source, whose, repliesOn, nic->name);
        } else if (!hasOwn) {
          // Bound to the device alone: the kernel picked another NIC's
          // address, as this one has none of the family.
          f.explanation = fmt::format(
              "Sessions bound to {} send with source address {}, {}: {} has no {} address, so "
              "the kernel takes another NIC's. The portals answer that address, so the replies "
              "arrive on {} and the NIC binding is defeated. Give {} an address in {}'s subnet "
              "(ip address add ADDRESS/PREFIX dev {}), then log the sessions in again.",
              nic->name, binding.source, whose, nic->name, family == AF_INET6 ? "IPv6" : "IPv4",
              repliesOn, nic->name, binding.portal.address, nic->name);
        } else {
          f.explanation = fmt::format(
              "Sessions bound to {} send with source address {}, {}: the kernel prefers it for "
              "{} over {}'s own addresses (a route's preferred source). The portals answer that "
              "address, so the replies arrive on {} and the NIC binding is defeated. Set the "
              "iface's iface.ipaddress to {}'s address in {}'s subnet, or fix the route's "
              "source, then log the sessions in again.",
              nic->name, binding.source, whose, binding.portal.address, nic->name, repliesOn,
              nic->name, binding.portal.address);
        }
      }
    }
    checkRoutes(snapshot, binding, *nic, findings);
    checkNic(snapshot, binding, *nic, findings);
  }
  checkSubnets(snapshot, resolved, scope, findings);
  checkAcrossNics(snapshot, resolved, findings);
  return findings.take();
}

std::optional<Severity> worstSeverity(std::span<const Finding> findings) {
  std::optional<Severity> worst;
  for (const auto &finding : findings) {
    if (!worst || finding.severity > *worst) {
      worst = finding.severity;
    }
  }
  return worst;
}

std::string renderFixScript(std::span<const Finding> findings) {
  std::string script = "#!/bin/sh\n"
                       "# Written by `pathkeeperctl doctor --fix-script`. Read it, then run it "
                       "as root.\n"
                       "# pathkeeper never applies it itself. Each step is skipped where it is "
                       "already done.\n"
                       "set -e\n";
  std::set<std::string> emitted;
  std::size_t fixes = 0;
  for (const auto &finding : findings) {
    if (finding.fix.empty() && finding.notes.empty()) {
      continue;
    }
    script +=
        fmt::format("\n# [{}] {}: {}\n", toString(finding.severity), finding.id, finding.summary);
    for (const auto &note : finding.notes) {
      script += fmt::format("# note: {}\n", note);
    }
    for (const auto &step : finding.fix) {
      if (!emitted.insert(step.command).second) {
        script += fmt::format("# (done above) {}\n", step.command);
        continue;
      }
      ++fixes;
      if (step.doneTest.empty()) {
        script += step.command + "\n";
      } else {
        script += fmt::format("if ! {}; then\n  {}\nfi\n", step.doneTest, step.command);
      }
    }
  }
  if (fixes == 0) {
    script += "\n# Nothing to apply.\n";
  }
  script += "exit 0\n";
  return script;
}

std::vector<Binding> mergeBindings(std::vector<Binding> bindings) {
  std::vector<Binding> merged;
  for (auto &binding : bindings) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const Binding &b) {
      return b.nic == binding.nic && b.source == binding.source &&
             b.portal.address == binding.portal.address && b.portal.port == binding.portal.port;
    });
    if (it == merged.end()) {
      merged.push_back(std::move(binding));
      continue;
    }
    it->boundByDevice = it->boundByDevice || binding.boundByDevice;
    addAll(it->paths, binding.paths);
    addAll(it->maps, binding.maps);
    addAll(it->origins, binding.origins);
  }
  return merged;
}

} // namespace pathkeeper::daemon
