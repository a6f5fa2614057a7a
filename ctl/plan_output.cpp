#include "plan_output.hpp"

#include "features.hpp"

#include <nlohmann/json.hpp>

namespace pathkeeper::ctl {

namespace {

using nlohmann::json;
using namespace selector;

json pathJson(const Path &path) {
  return json{
      {"device", path.device},
      {"devt", path.devt.str()},
      {"state", toString(path.state)},
      {"target", path.targetIqn},
      {"portal", path.portal.str()},
      {"iface", path.iface},
      {"netdev", path.netdev},
      {"session", path.sessionId},
      {"controller", path.controller},
      {"priority", path.priority},
      {"alua", toString(path.alua)},
      {"target_port_group", path.targetPortGroup ? json(*path.targetPortGroup) : json(nullptr)},
      {"marginal", path.marginal},
      {"relative_throughput", path.relativeThroughput}};
}

std::string humanSize(std::uint64_t sectors) {
  const char *units[] = {"K", "M", "G", "T", "P"};
  double value = static_cast<double>(sectors) / 2.0; // KiB
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%s", value, units[unit]);
  return buffer;
}

} // namespace

std::string planToJson(const Plan &plan) {
  json maps = json::array();
  for (const auto &map : plan.maps) {
    const auto &spec = map.spec;
    json groups = json::array();
    for (std::size_t g = 0; g < spec.groups.size(); ++g) {
      const auto &group = spec.groups[g];
      json paths = json::array();
      for (const auto &path : group.paths) {
        paths.push_back(pathJson(path));
      }
      groups.push_back(json{{"index", g + 1},
                            {"controller", group.controller},
                            {"priority", group.priority()},
                            {"usable_paths", group.usablePaths()},
                            {"marginal", group.marginal()},
                            {"paths", paths}});
    }
    const Path &first = spec.groups.front().paths.front();
    maps.push_back(json{{"alias", spec.alias},
                        {"wwid", spec.wwid},
                        {"dm_uuid", spec.dmUuid()},
                        {"controller", map.controller},
                        {"vendor", first.vendor},
                        {"product", first.product},
                        {"size_sectors", spec.sizeSectors},
                        {"selector", toString(spec.selector)},
                        {"features", renderFeatures(spec.features)},
                        {"hw_handler", spec.hwHandler},
                        {"hw_handler_reason", map.hwHandlerReason},
                        {"initial_group", spec.initialGroup},
                        {"groups", groups},
                        {"table", map.table},
                        {"notes", map.notes}});
  }
  json skipped = json::array();
  for (const auto &skip : plan.skipped) {
    skipped.push_back(json{{"device", skip.device}, {"wwid", skip.wwid}, {"reason", skip.reason}});
  }
  json doc{{"schema", 1},
           {"maps", maps},
           {"skipped", skipped},
           {"warnings", plan.warnings},
           {"bindings_changed", plan.bindingsChanged}};
  return doc.dump(2) + "\n";
}

std::string planToText(const Plan &plan) {
  std::string out;
  for (const auto &map : plan.maps) {
    const auto &spec = map.spec;
    const Path &first = spec.groups.front().paths.front();
    out += spec.alias + " (" + spec.wwid + ") " + first.vendor + "," + first.product;
    if (!map.controller.empty()) {
      out += " controller " + map.controller;
    }
    out += "\n";
    out += "size=" + humanSize(spec.sizeSectors) + " features='" + renderFeatures(spec.features) +
           "' hwhandler='" + (spec.hwHandler.empty() ? "0" : "1 " + spec.hwHandler) +
           "' selector=" + std::string(toString(spec.selector)) + "\n";
    for (std::size_t g = 0; g < spec.groups.size(); ++g) {
      const auto &group = spec.groups[g];
      const bool lastGroup = g + 1 == spec.groups.size();
      out += std::string(lastGroup ? "`-+- " : "|-+- ") + "group " + std::to_string(g + 1) +
             " prio=" + std::to_string(group.priority()) +
             (group.controller.empty() ? "" : " controller=" + group.controller) +
             (g + 1 == spec.initialGroup ? " initial" : "") + "\n";
      for (std::size_t p = 0; p < group.paths.size(); ++p) {
        const auto &path = group.paths[p];
        out += std::string(lastGroup ? "  " : "| ") +
               (p + 1 == group.paths.size() ? "`- " : "|- ") + path.device + " " + path.devt.str() +
               " " + path.portal.str();
        if (!path.netdev.empty() || !path.iface.empty()) {
          out += " via " + (path.netdev.empty() ? "?" : path.netdev) +
                 (path.iface.empty() ? "" : " (" + path.iface + ")");
        }
        out += " " + std::string(toString(path.state));
        if (path.alua != AluaState::None) {
          out += " alua=" + std::string(toString(path.alua));
        }
        out += "\n";
      }
    }
    out += "table: " + map.table + "\n\n";
  }
  if (plan.maps.empty()) {
    out += "no maps to build\n";
  }
  for (const auto &skip : plan.skipped) {
    out += "skipped " + skip.device + (skip.wwid.empty() ? "" : " (" + skip.wwid + ")") + ": " +
           skip.reason + "\n";
  }
  for (const auto &warning : plan.warnings) {
    out += "warning: " + warning + "\n";
  }
  return out;
}

} // namespace pathkeeper::ctl
