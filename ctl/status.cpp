#include "status.hpp"

#include "bus_names.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace pathkeeper::ctl {
namespace {

const char *colourOf(const std::string &state) {
  if (state == "up" || state == "active" || state == "ok" || state == "reachable") {
    return "\033[32m"; // green
  }
  if (state == "down" || state == "failed" || state.starts_with("unreachable")) {
    return "\033[31m"; // red
  }
  if (state == "shaky" || state == "degraded" || state == "pending" || state == "ghost" ||
      state == "stale" || state.starts_with("refused")) {
    return "\033[33m"; // yellow
  }
  return "";
}

std::string paint(const std::string &text, bool colour) {
  const char *code = colour ? colourOf(text) : "";
  if (*code == '\0') {
    return text;
  }
  return fmt::format("{}{}\033[0m", code, text);
}

std::string latency(std::int64_t us) {
  if (us < 0) {
    return "-";
  }
  if (us < 1000) {
    return fmt::format("{}us", us);
  }
  return fmt::format("{:.1f}ms", static_cast<double>(us) / 1000.0);
}

// Decimal megabytes, as the adaptive log lines print them.
std::string rate(std::uint64_t bytesPerSecond) {
  const double megabytes = static_cast<double>(bytesPerSecond) / 1e6;
  return megabytes < 10 ? fmt::format("{:.1f}MB/s", megabytes)
                        : fmt::format("{:.0f}MB/s", megabytes);
}

std::string pathLine(const daemon::PathView &path, bool colour) {
  std::string line = fmt::format(
      "{} {} {} {} ctrl={} {} -> {}", path.device, path.devt, paint(path.state, colour),
      paint(path.dmState, colour), path.controller.empty() ? "-" : path.controller,
      path.netdev.empty() ? "(routed)" : path.netdev, path.portal.empty() ? "-" : path.portal);
  if (!path.alua.empty()) {
    line += " alua=" + path.alua;
  }
  line += " latency=" + latency(path.latencyUs);
  if (path.weight > 0) {
    line += fmt::format(" weight={}", path.weight);
  }
  // Only once measured: an unmeasured path has nothing to say here.
  if (path.ioLatencyUs >= 0) {
    line += fmt::format(" tput={} capacity={} io={} conf={}%", rate(path.throughputBps),
                        rate(path.capacityBps), latency(path.ioLatencyUs), path.confidence);
  }
  if (path.failures > 0) {
    line += fmt::format(" failures={}", path.failures);
  }
  if (path.shaky) {
    line += " " + paint("shaky", colour);
  }
  if (!path.note.empty()) {
    line += " (" + path.note + ")";
  }
  return line;
}

std::string kindOf(const std::string &objectPath) {
  const std::string root = std::string(dbus::kRootPath) + "/";
  if (!objectPath.starts_with(root)) {
    return objectPath == dbus::kRootPath ? "manager" : objectPath;
  }
  std::string rest = objectPath.substr(root.size());
  const auto slash = rest.find('/');
  if (slash == std::string::npos) {
    return rest;
  }
  std::string kind = rest.substr(0, slash); // "maps" -> "map"
  if (kind.ends_with('s')) {
    kind.pop_back();
  }
  auto key = dbus::unescapePathLabel(rest.substr(slash + 1));
  return fmt::format("{} {}", kind, key ? *key : rest.substr(slash + 1));
}

nlohmann::json variantToJson(const sdbus::Variant &value) {
  const std::string type = value.peekValueType();
  if (type == "s") {
    return value.get<std::string>();
  }
  if (type == "b") {
    return value.get<bool>();
  }
  if (type == "u") {
    return value.get<std::uint32_t>();
  }
  if (type == "t") {
    return value.get<std::uint64_t>();
  }
  if (type == "x") {
    return value.get<std::int64_t>();
  }
  if (type == "i") {
    return value.get<std::int32_t>();
  }
  if (type == "q") {
    return value.get<std::uint16_t>();
  }
  if (type == "a{ss}") {
    return value.get<std::map<std::string, std::string>>();
  }
  if (type == "as") {
    return value.get<std::vector<std::string>>();
  }
  if (type == "a(uias)") {
    nlohmann::json groups = nlohmann::json::array();
    for (const auto &group :
         value.get<
             std::vector<sdbus::Struct<std::uint32_t, std::int32_t, std::vector<std::string>>>>()) {
      groups.push_back({{"number", std::get<0>(group)},
                        {"priority", std::get<1>(group)},
                        {"paths", std::get<2>(group)}});
    }
    return groups;
  }
  if (type == "a(xss)") {
    nlohmann::json decisions = nlohmann::json::array();
    for (const auto &decision :
         value.get<std::vector<sdbus::Struct<std::int64_t, std::string, std::string>>>()) {
      decisions.push_back({{"at", std::get<0>(decision)},
                           {"action", std::get<1>(decision)},
                           {"reason", std::get<2>(decision)}});
    }
    return decisions;
  }
  return variantToText(value);
}

} // namespace

std::string statusToText(const daemon::StateSnapshot &snapshot, bool colour) {
  std::string out = fmt::format("pathkeeperd {} ({} mode): {}\n", snapshot.version,
                                snapshot.mode.empty() ? "unknown" : snapshot.mode, snapshot.status);
  std::map<std::string, const daemon::PathView *> paths;
  for (const auto &path : snapshot.paths) {
    paths.emplace(path.device, &path);
  }
  for (const auto &map : snapshot.maps) {
    out += fmt::format("{} ({}) {} selector={} paths={}/{}{}", map.alias, map.wwid,
                       paint(map.state, colour), map.selector, map.usablePaths, map.totalPaths,
                       map.queueing ? " queueing" : "");
    if (map.noPathRetry == "expired") {
      out += " no_path_retry=expired"; // I/O fails until a path is usable
    } else if (map.noPathRetry == "disabled") {
      out += " queueing-disabled"; // the admin's, until restore-queueing
    }
    if (map.adaptive != "off" && !map.adaptive.empty()) {
      out += fmt::format(" adaptive={} reloads={}", map.adaptive, map.adaptiveReloads);
    }
    out += "\n";
    if (map.state == "stale") {
      // What an admin needs to know about a map whose LUN is gone.
      out += fmt::format("|  no planned map names it (are its devices gone? the log says if "
                         "its alias changed): left in place, not maintained; once nothing uses "
                         "it: dmsetup remove {}\n",
                         map.alias);
    }
    if (!map.adaptiveDecisions.empty()) {
      const auto &last = map.adaptiveDecisions.back();
      out += fmt::format("|  last decision ({}): {}\n", last.action, last.reason);
    }
    for (std::size_t g = 0; g < map.groups.size(); ++g) {
      const auto &group = map.groups[g];
      const bool lastGroup = g + 1 == map.groups.size();
      out += fmt::format("{}-+- group {} prio={}{}\n", lastGroup ? "`" : "|", group.number,
                         group.priority, group.number == map.activeGroup ? " active" : "");
      for (std::size_t p = 0; p < group.paths.size(); ++p) {
        const bool lastPath = p + 1 == group.paths.size();
        auto it = paths.find(group.paths[p]);
        out += fmt::format("{}  {}- {}\n", lastGroup ? " " : "|", lastPath ? "`" : "|",
                           it == paths.end() ? group.paths[p] + " (not published)"
                                             : pathLine(*it->second, colour));
      }
    }
  }
  std::vector<const daemon::PathView *> loose;
  for (const auto &path : snapshot.paths) {
    if (path.map.empty()) {
      loose.push_back(&path);
    }
  }
  if (!loose.empty()) {
    out += "paths in no map:\n";
    for (const auto *path : loose) {
      out += "  " + pathLine(*path, colour) + "\n";
    }
  }
  if (!snapshot.portals.empty()) {
    out += "portals:\n";
    for (const auto &portal : snapshot.portals) {
      std::vector<std::string> nics;
      for (const auto &[nic, verdict] : portal.reachability) {
        nics.push_back(
            fmt::format("{} {}", nic.empty() ? "(routed)" : nic, paint(verdict, colour)));
      }
      out += fmt::format("  {} {}\n", dbus::portalKey(portal),
                         nics.empty() ? std::string("no NIC checked")
                                      : fmt::format("{}", fmt::join(nics, ", ")));
    }
  }
  return out;
}

std::string statusToJson(const daemon::StateSnapshot &snapshot) {
  return daemon::snapshotToJson(snapshot);
}

std::string changeToText(const BusChange &change) {
  const std::string what = kindOf(change.objectPath);
  switch (change.type) {
  case BusChange::Type::Added:
    return fmt::format("+ {}", what);
  case BusChange::Type::Removed:
    return fmt::format("- {}", what);
  case BusChange::Type::PropertiesChanged:
    break;
  }
  std::vector<std::string> items;
  for (const auto &[name, value] : change.properties) {
    items.push_back(fmt::format("{}={}", name, variantToText(value)));
  }
  for (const auto &name : change.invalidated) {
    items.push_back(name + " changed");
  }
  return fmt::format("{}: {}", what, fmt::join(items, " "));
}

std::string changeToJson(const BusChange &change) {
  nlohmann::ordered_json json;
  json["event"] = change.type == BusChange::Type::Added     ? "added"
                  : change.type == BusChange::Type::Removed ? "removed"
                                                            : "changed";
  json["object"] = change.objectPath;
  json["interface"] = change.interface;
  nlohmann::ordered_json properties = nlohmann::ordered_json::object();
  for (const auto &[name, value] : change.properties) {
    properties[name] = variantToJson(value);
  }
  json["properties"] = properties;
  if (!change.invalidated.empty()) {
    json["invalidated"] = change.invalidated;
  }
  return json.dump();
}

} // namespace pathkeeper::ctl
