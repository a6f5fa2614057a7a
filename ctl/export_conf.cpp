#include "export_conf.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <vector>

namespace pathkeeper::ctl {

namespace {

using namespace selector;

/// @brief A multipath.conf string value in double quotes. The 0.9.4 parser
/// reads "" inside a quoted string as one quote character.
std::string quoted(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    out += c;
    if (c == '"') {
      out += '"';
    }
  }
  return out + "\"";
}

/// @brief @p text as a POSIX extended regex matching exactly itself.
std::string anchoredRegex(std::string_view text) {
  std::string out = "^";
  for (char c : text) {
    if (std::string_view{".[]()*+?{}|^$\\"}.find(c) != std::string_view::npos) {
      out += '\\';
    }
    out += c;
  }
  return out + "$";
}

std::string_view pgpolicyName(GroupingPolicy policy) {
  switch (policy) {
  case GroupingPolicy::Multibus:
    return "multibus";
  case GroupingPolicy::Failover:
    return "failover";
  case GroupingPolicy::GroupByPrio:
  case GroupingPolicy::GroupByController:
    break;
  }
  return "group_by_prio";
}

std::string_view queueModeName(QueueMode mode) {
  switch (mode) {
  case QueueMode::Bio:
    return "bio";
  case QueueMode::Rq:
    return "rq";
  case QueueMode::Mq:
    return "mq";
  case QueueMode::Default:
    break;
  }
  return "";
}

/// @brief multipath.conf's features value for what no_path_retry does not
/// cover (queue_if_no_path comes from no_path_retry); empty when none.
std::string featuresValue(const Features &features) {
  std::vector<std::string> words;
  if (features.pgInitRetries) {
    words.push_back("pg_init_retries");
    words.push_back(std::to_string(*features.pgInitRetries));
  }
  if (features.pgInitDelayMsecs) {
    words.push_back("pg_init_delay_msecs");
    words.push_back(std::to_string(*features.pgInitDelayMsecs));
  }
  if (features.queueMode != QueueMode::Default) {
    words.push_back("queue_mode");
    words.push_back(std::string(queueModeName(features.queueMode)));
  }
  if (words.empty()) {
    return "";
  }
  return fmt::format("{} {}", words.size(), fmt::join(words, " "));
}

/// @brief How multipathd 0.9.4 can group one planned map.
struct Grouping {
  std::string_view pgpolicy;
  bool aluaPrio = false;  ///< needs "prio alua"
  std::string difference; ///< why the groups may differ; empty when exact
};

bool allAlua(const MapSpec &spec) {
  return std::ranges::all_of(spec.groups, [](const PathGroup &group) {
    return std::ranges::all_of(group.paths,
                               [](const Path &path) { return path.alua != AluaState::None; });
  });
}

/// @brief True when every group's paths share one priority and no two
/// groups share one: then group_by_prio splits the paths the same way.
bool distinctGroupPriorities(const MapSpec &spec) {
  std::set<int> seen;
  for (const auto &group : spec.groups) {
    const int prio = group.paths.front().priority;
    if (!std::ranges::all_of(group.paths,
                             [prio](const Path &path) { return path.priority == prio; }) ||
        !seen.insert(prio).second) {
      return false;
    }
  }
  return true;
}

Grouping groupingFor(const PlannedMap &map, GroupingPolicy policy) {
  const MapSpec &spec = map.spec;
  switch (policy) {
  case GroupingPolicy::Multibus:
  case GroupingPolicy::Failover:
    return {pgpolicyName(policy), false, ""};
  case GroupingPolicy::GroupByPrio:
    if (allAlua(spec)) {
      return {"group_by_prio", true, ""};
    }
    if (spec.groups.size() <= 1) {
      return {"group_by_prio", false, ""};
    }
    return {"group_by_prio", false,
            "its priorities do not come from ALUA, so multipathd's prioritizer may rank the "
            "paths differently"};
  case GroupingPolicy::GroupByController:
    break;
  }
  if (spec.groups.size() <= 1) {
    return {"multibus", false, ""};
  }
  // multipath-tools 0.9.4 has no group_by_tpg (0.9.6 added it) and no notion
  // of a controller label; group_by_prio with the alua prioritizer splits the
  // paths the same way while each target port group has its own ALUA state.
  if (allAlua(spec) && distinctGroupPriorities(spec)) {
    return {"group_by_prio", true, ""};
  }
  return {"failover", false,
          fmt::format("pathkeeper groups it by controller ({} groups{}), which multipath-tools "
                      "0.9.4 cannot express; failover keeps I/O on one path at a time instead",
                      spec.groups.size(),
                      map.controller.empty() ? "" : ", controller " + map.controller)};
}

/// @brief One devices entry: the vendor/product regexes and what the
/// matched maps need from it.
struct DeviceSection {
  std::string vendor;
  std::string product;
  const DeviceEntry *entry = nullptr; ///< pathkeeper's entry, if one matched
  std::set<std::string> hwHandlers;   ///< the planned handlers of its maps
  std::vector<std::string> aliases;
};

void appendDevice(std::string &out, const DeviceSection &device) {
  out += "\tdevice {\n";
  out += "\t\tvendor " + quoted(device.vendor) + "\n";
  out += "\t\tproduct " + quoted(device.product) + "\n";
  if (device.entry != nullptr) {
    const PolicyOverrides &policy = device.entry->policy;
    if (policy.grouping && *policy.grouping != GroupingPolicy::GroupByController) {
      out += fmt::format("\t\tpath_grouping_policy {}\n", pgpolicyName(*policy.grouping));
    }
    if (policy.selector) {
      out += fmt::format("\t\tpath_selector \"{} 0\"\n", toString(*policy.selector));
    }
    if (policy.noPathRetry) {
      out += "\t\tno_path_retry " + toString(*policy.noPathRetry) + "\n";
    }
  }
  if (device.hwHandlers.size() == 1) {
    const std::string &handler = *device.hwHandlers.begin();
    out += "\t\thardware_handler " + quoted(handler.empty() ? "0" : "1 " + handler) + "\n";
  }
  out += "\t}\n";
}

} // namespace

std::string exportMultipathConf(const Plan &plan, const Config &config) {
  std::string out;
  out += "# multipath.conf for multipath-tools 0.9.4, from pathkeeper's plan\n"
         "# (pathkeeperctl export multipath-conf). multipathd builds the maps below\n"
         "# and no others.\n";
  for (const auto &skip : plan.skipped) {
    out += "# not exported: " + skip.device + (skip.wwid.empty() ? "" : " (" + skip.wwid + ")") +
           ": " + skip.reason + "\n";
  }
  for (const auto &warning : plan.warnings) {
    out += "# warning: " + warning + "\n";
  }
  if (plan.maps.empty()) {
    out += "# pathkeeper plans no map: every WWID is blacklisted.\n";
  }

  // find_multipaths off: 0.9.4's default ("strict") would build maps only
  // for WWIDs already in /etc/multipath/wwids. The blacklist below limits
  // multipathd to the planned WWIDs instead.
  out += "\ndefaults {\n\tfind_multipaths off\n}\n";
  out += "\nblacklist {\n\twwid \".*\"\n}\n";
  if (!plan.maps.empty()) {
    out += "\nblacklist_exceptions {\n";
    for (const auto &map : plan.maps) {
      out += "\twwid " + quoted(anchoredRegex(map.spec.wwid)) + "\n";
    }
    out += "}\n";
  }

  // A devices entry per pathkeeper device entry the maps matched, and per
  // vendor/product whose maps need a hardware handler: multipath.conf sets
  // hardware_handler only there, not in multipaths.
  std::vector<DeviceSection> devices;
  std::vector<std::string> mapBlocks;
  for (const auto &map : plan.maps) {
    const MapSpec &spec = map.spec;
    const Path &first = spec.groups.front().paths.front();
    const EffectivePolicy policy = policyFor(config, spec.wwid, first.vendor, first.product);
    const auto entry = deviceFor(config, first.vendor, first.product);
    if (entry || !spec.hwHandler.empty()) {
      const std::string vendor = entry ? (*entry)->vendor : anchoredRegex(first.vendor);
      const std::string product = entry ? (*entry)->product : anchoredRegex(first.product);
      auto found = std::ranges::find_if(devices, [&](const DeviceSection &device) {
        return device.vendor == vendor && device.product == product;
      });
      if (found == devices.end()) {
        devices.push_back({vendor, product, entry.value_or(nullptr), {}, {}});
        found = std::prev(devices.end());
      }
      found->hwHandlers.insert(spec.hwHandler);
      found->aliases.push_back(spec.alias);
    }

    const Grouping grouping = groupingFor(map, policy.grouping);
    std::string block;
    if (!grouping.difference.empty()) {
      block +=
          "\t# " + spec.alias + ": groups not reproduced exactly: " + grouping.difference + ".\n";
    }
    block += "\tmultipath {\n";
    block += "\t\twwid " + quoted(spec.wwid) + "\n";
    block += "\t\talias " + quoted(spec.alias) + "\n";
    block += fmt::format("\t\tpath_grouping_policy {}\n", grouping.pgpolicy);
    if (grouping.aluaPrio) {
      block += "\t\tprio alua\n";
    }
    block += fmt::format("\t\tpath_selector \"{} 0\"\n", toString(spec.selector));
    block += "\t\tfailback " + toString(config.defaults.failback) + "\n";
    block += "\t\tno_path_retry " + toString(policy.noPathRetry) + "\n";
    if (const std::string features = featuresValue(spec.features); !features.empty()) {
      block += "\t\tfeatures " + quoted(features) + "\n";
    }
    block += "\t}\n";
    mapBlocks.push_back(std::move(block));
  }

  if (!devices.empty()) {
    out += "\ndevices {\n";
    for (const auto &device : devices) {
      if (device.hwHandlers.size() > 1) {
        out += fmt::format("\t# {}: the maps {} need different hardware handlers; multipathd "
                           "keeps the one the kernel attached.\n",
                           device.vendor + " " + device.product, fmt::join(device.aliases, ", "));
      }
      appendDevice(out, device);
    }
    out += "}\n";
  }
  if (!mapBlocks.empty()) {
    out += "\nmultipaths {\n";
    for (const auto &block : mapBlocks) {
      out += block;
    }
    out += "}\n";
  }
  return out;
}

} // namespace pathkeeper::ctl
