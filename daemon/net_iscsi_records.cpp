#include "net_iscsi_records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>

namespace pathkeeper::daemon {

namespace {

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) {
    return {};
  }
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

Expected<std::string> readText(const std::filesystem::path &file) {
  std::ifstream in(file);
  if (!in) {
    return fail(fmt::format("{}: cannot read", file.string()));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<std::uint16_t> parsePort(std::string_view text) {
  std::uint16_t port = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc{} || ptr != text.data() + text.size() || port == 0) {
    return std::nullopt;
  }
  return port;
}

std::string value(const IscsiRecord &record, const std::string &key) {
  auto it = record.find(key);
  return it == record.end() ? std::string{} : it->second;
}

/// The directory name "10.0.1.20,3260,1" (address may contain ':' for IPv6).
selector::Portal portalFromName(const std::string &name) {
  selector::Portal portal;
  const auto firstComma = name.find(',');
  portal.address = name.substr(0, firstComma);
  if (firstComma != std::string::npos) {
    const auto rest = std::string_view(name).substr(firstComma + 1);
    if (auto port = parsePort(rest.substr(0, rest.find(',')))) {
      portal.port = *port;
    }
  }
  return portal;
}

void addNode(IscsiRecords &records, const std::string &target, const std::string &portalName,
             const std::filesystem::path &file, const std::string &ifaceFromPath) {
  auto text = readText(file);
  if (!text) {
    records.warnings.push_back(text.error());
    return;
  }
  NodeRecord node;
  node.values = parseIscsiRecord(*text);
  node.target = value(node.values, "node.name");
  if (node.target.empty()) {
    node.target = target;
  }
  node.portal = portalFromName(portalName);
  if (auto address = value(node.values, "node.conn[0].address"); !address.empty()) {
    node.portal.address = address;
  }
  if (auto port = parsePort(value(node.values, "node.conn[0].port"))) {
    node.portal.port = *port;
  }
  node.iface = value(node.values, "iface.iscsi_ifacename");
  if (node.iface.empty()) {
    node.iface = ifaceFromPath.empty() ? "default" : ifaceFromPath;
  }
  records.nodes.push_back(std::move(node));
}

std::vector<std::filesystem::directory_entry> sortedEntries(const std::filesystem::path &dir) {
  std::vector<std::filesystem::directory_entry> entries;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(*it);
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

} // namespace

IscsiRecord parseIscsiRecord(std::string_view text) {
  IscsiRecord record;
  while (!text.empty()) {
    const auto end = text.find('\n');
    std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const auto equals = line.find('=');
    if (equals == std::string_view::npos) {
      continue;
    }
    std::string key(trim(line.substr(0, equals)));
    std::string val(trim(line.substr(equals + 1)));
    if (val == "<empty>") {
      val.clear();
    }
    if (!key.empty()) {
      record[std::move(key)] = std::move(val);
    }
  }
  return record;
}

IscsiRecords readIscsiRecords(const std::filesystem::path &etcIscsi) {
  IscsiRecords records;
  for (const auto &entry : sortedEntries(etcIscsi / "ifaces")) {
    std::error_code ec;
    if (!entry.is_regular_file(ec)) {
      continue;
    }
    auto text = readText(entry.path());
    if (!text) {
      records.warnings.push_back(text.error());
      continue;
    }
    records.ifaces[entry.path().filename().string()] = parseIscsiRecord(*text);
  }
  for (const auto &targetDir : sortedEntries(etcIscsi / "nodes")) {
    std::error_code ec;
    if (!targetDir.is_directory(ec)) {
      continue;
    }
    const std::string target = targetDir.path().filename().string();
    for (const auto &portalEntry : sortedEntries(targetDir.path())) {
      const std::string portalName = portalEntry.path().filename().string();
      if (portalEntry.is_regular_file(ec)) {
        // Old layout: the portal is the record, on the default iface.
        addNode(records, target, portalName, portalEntry.path(), "");
      } else if (portalEntry.is_directory(ec)) {
        for (const auto &ifaceEntry : sortedEntries(portalEntry.path())) {
          if (ifaceEntry.is_regular_file(ec)) {
            addNode(records, target, portalName, ifaceEntry.path(),
                    ifaceEntry.path().filename().string());
          }
        }
      }
    }
  }
  return records;
}

std::vector<Binding> bindingsFromRecords(const IscsiRecords &records,
                                         const NicOfHardwareAddress &nicOf,
                                         std::vector<std::string> *warnings) {
  std::vector<Binding> bindings;
  std::set<std::string> unknownAddresses; // iface names, each warned about once
  for (const auto &node : records.nodes) {
    if (node.iface == "default" || node.portal.address.empty()) {
      continue;
    }
    // The iface record is the source of truth; the copy in the node record
    // is what iscsiadm saw at discovery time.
    const auto iface = records.ifaces.find(node.iface);
    const IscsiRecord &from = iface == records.ifaces.end() ? node.values : iface->second;
    const std::string transport = value(from, "iface.transport_name");
    if (!transport.empty() && transport != "tcp") {
      continue; // offload and iSER do not use the kernel's routing
    }
    Binding binding;
    binding.nic = value(from, "iface.net_ifacename");
    if (const std::string hw = value(from, "iface.hwaddress"); !hw.empty() && hw != "default") {
      // iscsid binds to the NIC with that address, before net_ifacename.
      if (auto nic = nicOf ? nicOf(hw) : std::string(); !nic.empty()) {
        binding.nic = std::move(nic);
      } else if (nicOf) {
        // iscsid finds no NIC either (net_get_netdev_from_hwaddress), and
        // fails the login rather than use net_ifacename.
        if (warnings != nullptr && unknownAddresses.insert(node.iface).second) {
          warnings->push_back(fmt::format(
              "iface {}: no network interface has its iface.hwaddress {}, so iscsid cannot log "
              "in through it (node {}{}); fix the address, or bind the iface by "
              "iface.net_ifacename",
              node.iface, hw, node.target,
              std::ranges::count(records.nodes, node.iface, &NodeRecord::iface) > 1
                  ? " and the other nodes on this iface"
                  : ""));
        }
        continue;
      }
    }
    binding.source = value(from, "iface.ipaddress");
    if (binding.nic.empty() && binding.source.empty()) {
      continue;
    }
    binding.boundByDevice = !binding.nic.empty();
    binding.portal = node.portal;
    binding.origins.push_back(fmt::format("node {} via iface {}", node.target, node.iface));
    bindings.push_back(std::move(binding));
  }
  return bindings;
}

std::vector<Binding> bindingsFromSessions(const Inventory &inventory) {
  std::vector<Binding> bindings;
  for (const auto &[name, session] : inventory.sessions) {
    auto connection =
        std::find_if(inventory.connections.begin(), inventory.connections.end(),
                     [&](const auto &entry) { return entry.second.sessionId == session.id; });
    if (connection == inventory.connections.end()) {
      continue;
    }
    const IscsiConnection &conn = connection->second;
    Binding binding;
    binding.portal.address = conn.persistentAddress.empty() ? conn.address : conn.persistentAddress;
    binding.portal.port = conn.persistentPort.value_or(conn.port.value_or(3260));
    if (binding.portal.address.empty()) {
      continue;
    }
    auto host =
        std::find_if(inventory.hosts.begin(), inventory.hosts.end(),
                     [&](const auto &entry) { return entry.second.hostNo == session.hostNo; });
    if (host != inventory.hosts.end()) {
      binding.nic = host->second.netdev;
      binding.source = host->second.ipAddress;
    }
    binding.boundByDevice = !binding.nic.empty();
    for (const auto &[device, path] : inventory.paths) {
      if (path.path.sessionId == session.id) {
        binding.paths.push_back(device);
        if (!path.path.wwid.empty() && std::find(binding.maps.begin(), binding.maps.end(),
                                                 path.path.wwid) == binding.maps.end()) {
          binding.maps.push_back(path.path.wwid);
        }
      }
    }
    binding.origins.push_back(name);
    bindings.push_back(std::move(binding));
  }
  return bindings;
}

} // namespace pathkeeper::daemon
