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
                            {"no_path_retry", map.noPathRetry},
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
  // Invalid UTF-8 would throw; snapshots are cleaned (replaceInvalidUtf8),
  // and whatever slips through is replaced rather than fatal.
  return json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

// The length of the valid UTF-8 sequence at @p text's start (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF); 0 when invalid.
std::size_t validSequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    return 1;
  }
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    low = lead == 0xE0 ? 0xA0 : 0x80;  // overlong
    high = lead == 0xED ? 0x9F : 0xBF; // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    low = lead == 0xF0 ? 0x90 : 0x80;  // overlong
    high = lead == 0xF4 ? 0x8F : 0xBF; // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) {
      return 0;
    }
  }
  return length;
}

// Runs at every publication over every string: valid text (all of it, in
// practice) is only scanned, never copied.
void fix(std::string &text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t length = validSequence(std::string_view(text).substr(i));
    if (length == 0) {
      break;
    }
    i += length;
  }
  if (i == text.size()) {
    return;
  }
  std::string out = text.substr(0, i);
  while (i < text.size()) {
    const std::size_t length = validSequence(std::string_view(text).substr(i));
    if (length == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  text = std::move(out);
}

void fix(std::vector<std::string> &texts) {
  for (auto &text : texts) {
    fix(text);
  }
}

} // namespace

void replaceInvalidUtf8(StateSnapshot &snapshot) {
  for (auto *text : {&snapshot.version, &snapshot.mode, &snapshot.status}) {
    fix(*text);
  }
  for (auto &map : snapshot.maps) {
    for (auto *text :
         {&map.alias, &map.wwid, &map.dmUuid, &map.selector, &map.state, &map.adaptive}) {
      fix(*text);
    }
    for (auto &group : map.groups) {
      fix(group.paths);
    }
    for (auto &decision : map.adaptiveDecisions) {
      fix(decision.action);
      fix(decision.reason);
    }
  }
  for (auto &path : snapshot.paths) {
    for (auto *text : {&path.device, &path.devt, &path.map, &path.state, &path.dmState,
                       &path.checker, &path.alua, &path.wwid, &path.target, &path.portal,
                       &path.netdev, &path.controller, &path.note}) {
      fix(*text);
    }
  }
  for (auto &portal : snapshot.portals) {
    fix(portal.address);
    std::map<std::string, std::string> reachability;
    for (const auto &[nic, text] : portal.reachability) {
      std::string key = nic;
      std::string value = text;
      fix(key);
      fix(value);
      reachability.emplace(std::move(key), std::move(value));
    }
    portal.reachability = std::move(reachability);
  }
  for (auto &finding : snapshot.findings) {
    for (auto *text :
         {&finding.key, &finding.id, &finding.severity, &finding.summary, &finding.explanation}) {
      fix(*text);
    }
    fix(finding.nics);
    fix(finding.portals);
    fix(finding.paths);
    fix(finding.fix);
  }
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
