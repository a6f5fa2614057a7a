#pragma once

// The inventory the D-Bus test server publishes: the story's Xserve RAID
// (two controllers, each its own map with one path through each portal),
// plus names that need escaping in object paths. Shared by the server and
// the tests, so that what arrives over the bus can be compared field by field.

#include "state_model.hpp"

#include <fmt/format.h>

namespace pathkeeper::dbus::sample {

inline daemon::PathView samplePath(const std::string &device, const std::string &map,
                                   const std::string &portal, const std::string &nic,
                                   const std::string &controller, int session) {
  daemon::PathView path;
  path.device = device;
  path.devt = fmt::format("8:{}", 16 * session);
  path.map = map;
  path.state = "up";
  path.dmState = map.empty() ? "none" : "active";
  path.checker = "tur: ready";
  path.failures = static_cast<std::uint64_t>(session);
  path.latencyUs = 250 + session;
  path.alua = "active/optimized";
  path.wwid = controller == "upper" ? "36000d31000aa000000000000000000a1"
                                    : "36000d31000aa000000000000000000b2";
  path.target = fmt::format("iqn.1987-05.com.cisco:05.mds.{}", portal.substr(0, 10));
  path.portal = portal + ":3260,1";
  path.netdev = nic;
  path.controller = controller;
  path.sessionId = session;
  return path;
}

inline daemon::StateSnapshot sampleSnapshot() {
  daemon::StateSnapshot s;
  s.version = "0.1.0-test";
  s.mode = "owner";
  s.status = "3 maps, 6 paths, 0 degraded";

  daemon::MapView upper;
  upper.alias = "xserve-upper";
  upper.wwid = "36000d31000aa000000000000000000a1";
  upper.dmUuid = "mpath-" + upper.wwid;
  upper.selector = "service-time";
  upper.state = "ok";
  upper.activeGroup = 1;
  upper.usablePaths = 2;
  upper.totalPaths = 2;
  upper.groups = {{1, 50, {"sdb", "sdc"}}};
  upper.noPathRetry = "12";
  daemon::MapView lower = upper;
  // Only the upper map is adaptive, and has reloaded once for measured weights.
  upper.adaptive = "weights";
  upper.adaptiveReloads = 1;
  upper.adaptiveDecisions = {
      {1764460800, "reload",
       "xserve-upper: weights sdb 100, sdc 25 (measured 4.9 MB/s vs 1.2 MB/s busy capacity); "
       "previous 1/1"}};
  lower.alias = "xserve-lower";
  lower.wwid = "36000d31000aa000000000000000000b2";
  lower.dmUuid = "mpath-" + lower.wwid;
  lower.selector = "round-robin";
  lower.groups = {{1, 50, {"sdd"}}, {2, 10, {"sde"}}};
  // An alias with a space, a dot and UTF-8: must still give a valid object path.
  daemon::MapView odd = upper;
  odd.alias = "1 m\xC3\xA4p.x";
  odd.wwid = "3600000000000000000000000000000ff";
  odd.dmUuid = "mpath-" + odd.wwid;
  odd.groups = {{1, 1, {"sdq"}}};
  odd.usablePaths = 1;
  odd.totalPaths = 1;
  s.maps = {odd, lower, upper}; // sorted by alias

  s.paths = {
      samplePath("sdb", "xserve-upper", "10.10.1.20", "eth1", "upper", 1),
      samplePath("sdc", "xserve-upper", "10.10.1.21", "eth2", "upper", 2),
      samplePath("sdd", "xserve-lower", "10.10.1.20", "eth1", "lower", 3),
      samplePath("sde", "xserve-lower", "10.10.1.21", "eth2", "lower", 4),
      samplePath("sdq", "1 m\xC3\xA4p.x", "10.10.1.21", "", "upper", 5),
      samplePath("sdz", "", "10.10.1.21", "eth2", "", 6),
  };
  s.paths[0].throughputBps = 4900000;
  s.paths[0].capacityBps = 4960000;
  s.paths[0].ioLatencyUs = 12500;
  s.paths[0].confidence = 80;
  s.paths[0].weight = 100;
  s.paths[1].throughputBps = 1200000;
  s.paths[1].capacityBps = 1230000;
  s.paths[1].ioLatencyUs = 51000;
  s.paths[1].confidence = 80;
  s.paths[1].weight = 25;
  s.paths[5].note = "traffic bound to eth2 leaves via eth1";
  s.paths[5].latencyUs = -1;
  s.paths[5].checker = "";

  daemon::PortalView a;
  a.address = "10.10.1.20";
  a.reachability = {{"eth1", "reachable"}, {"eth2", "reachable"}};
  daemon::PortalView b;
  b.address = "10.10.1.21";
  b.reachability = {{"eth1", "reachable"}, {"eth2", "unreachable: no route"}};
  daemon::PortalView v6;
  v6.address = "fd00::21";
  v6.port = 3261;
  v6.reachability = {{"", "unknown"}};
  s.portals = {a, b, v6};
  return s;
}

} // namespace pathkeeper::dbus::sample
