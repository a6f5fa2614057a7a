#include "state_model.hpp"

#include <cstdlib>

#include <nlohmann/json.hpp>

namespace pathkeeper::daemon {

std::string snapshotToJson(const StateSnapshot &snapshot, std::optional<bool> ready) {
  nlohmann::ordered_json json;
  json["schema"] = 1;
  if (ready) {
    json["ready"] = *ready;
  }
  json["version"] = snapshot.version;
  json["mode"] = snapshot.mode;
  json["status"] = snapshot.status;
  json["maps"] = nlohmann::ordered_json::array();
  for (const auto &map : snapshot.maps) {
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const auto &group : map.groups) {
      groups.push_back(
          {{"number", group.number}, {"priority", group.priority}, {"paths", group.paths}});
    }
    nlohmann::ordered_json decisions = nlohmann::ordered_json::array();
    for (const auto &decision : map.adaptiveDecisions) {
      decisions.push_back(
          {{"at", decision.at}, {"action", decision.action}, {"reason", decision.reason}});
    }
    json["maps"].push_back({{"alias", map.alias},
                            {"wwid", map.wwid},
                            {"dm_uuid", map.dmUuid},
                            {"selector", map.selector},
                            {"state", map.state},
                            {"active_group", map.activeGroup},
                            {"usable_paths", map.usablePaths},
                            {"total_paths", map.totalPaths},
                            {"queueing", map.queueing},
                            {"groups", groups},
                            {"adaptive", map.adaptive},
                            {"adaptive_reloads", map.adaptiveReloads},
                            {"adaptive_decisions", decisions}});
  }
  json["paths"] = nlohmann::ordered_json::array();
  for (const auto &path : snapshot.paths) {
    json["paths"].push_back({{"device", path.device},
                             {"devt", path.devt},
                             {"map", path.map},
                             {"state", path.state},
                             {"dm_state", path.dmState},
                             {"checker", path.checker},
                             {"failures", path.failures},
                             {"shaky", path.shaky},
                             {"latency_us", path.latencyUs},
                             {"alua", path.alua},
                             {"wwid", path.wwid},
                             {"target", path.target},
                             {"portal", path.portal},
                             {"netdev", path.netdev},
                             {"controller", path.controller},
                             {"session_id", path.sessionId},
                             {"note", path.note},
                             {"throughput_bps", path.throughputBps},
                             {"capacity_bps", path.capacityBps},
                             {"io_latency_us", path.ioLatencyUs},
                             {"confidence", path.confidence},
                             {"weight", path.weight}});
  }
  json["portals"] = nlohmann::ordered_json::array();
  for (const auto &portal : snapshot.portals) {
    json["portals"].push_back({{"address", portal.address},
                               {"port", portal.port},
                               {"reachability", portal.reachability}});
  }
  json["findings"] = nlohmann::ordered_json::array();
  for (const auto &finding : snapshot.findings) {
    json["findings"].push_back({{"key", finding.key},
                                {"id", finding.id},
                                {"severity", finding.severity},
                                {"summary", finding.summary},
                                {"explanation", finding.explanation},
                                {"nics", finding.nics},
                                {"portals", finding.portals},
                                {"paths", finding.paths},
                                {"fix", finding.fix}});
  }
  return json.dump(2) + "\n";
}

bool holdLatencyJitter(StateSnapshot &next, const StateSnapshot &published, bool holdEveryMove) {
  bool moved = false;
  // Both are sorted by device: one merge walk.
  auto old = published.paths.begin();
  for (auto &path : next.paths) {
    while (old != published.paths.end() && old->device < path.device) {
      ++old;
    }
    if (old == published.paths.end()) {
      break;
    }
    if (old->device != path.device || old->latencyUs < 0 || path.latencyUs < 0) {
      continue;
    }
    const std::int64_t was = old->latencyUs;
    const std::int64_t now = path.latencyUs;
    const bool small = std::abs(now - was) < 1000 || (3 * now >= 2 * was && 2 * now <= 3 * was);
    if (holdEveryMove || small) {
      path.latencyUs = was;
    } else {
      moved = true;
    }
  }
  return moved;
}

} // namespace pathkeeper::daemon
