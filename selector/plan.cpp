#include "plan.hpp"

#include "dm_table.hpp"
#include "features.hpp"
#include "grouping.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

namespace pathkeeper::selector {

namespace {

constexpr std::string_view kMdsPrefix = "iqn.1987-05.com.cisco:05.";

bool isHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

char lowerHex(char c) {
  return (c >= 'A' && c <= 'F') ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string join(const std::set<std::string> &items, std::string_view separator) {
  std::string out;
  for (const auto &item : items) {
    if (!out.empty()) {
      out += separator;
    }
    out += item;
  }
  return out;
}

/// Keeps the paths whose size matches the first (lowest dev_t) path's and
/// reports the rest, the way multipathd refuses a path with a size mismatch.
std::vector<Path> dropSizeMismatches(std::vector<Path> paths, Plan &plan) {
  std::stable_sort(paths.begin(), paths.end(),
                   [](const Path &a, const Path &b) { return a.devt < b.devt; });
  const std::uint64_t size = paths.front().sizeSectors;
  std::vector<Path> kept;
  for (auto &path : paths) {
    if (path.sizeSectors != size) {
      plan.skipped.push_back({path.device, path.wwid,
                              "size " + std::to_string(path.sizeSectors) +
                                  " sectors differs from the LUN's " + std::to_string(size)});
      continue;
    }
    kept.push_back(std::move(path));
  }
  return kept;
}

} // namespace

std::optional<std::string> mdsControllerFromIqn(std::string_view iqn) {
  if (iqn.substr(0, kMdsPrefix.size()) != kMdsPrefix) {
    return std::nullopt;
  }
  auto rest = iqn.substr(kMdsPrefix.size());
  auto dot = rest.rfind('.');
  // Needs at least <switch>.<slot-port>.<pwwn> after the prefix.
  if (dot == std::string_view::npos || rest.substr(0, dot).find('.') == std::string_view::npos) {
    return std::nullopt;
  }
  auto pwwn = rest.substr(dot + 1);
  if (pwwn.size() != 16 || !std::all_of(pwwn.begin(), pwwn.end(), isHex)) {
    return std::nullopt;
  }
  std::string out;
  std::transform(pwwn.begin(), pwwn.end(), std::back_inserter(out), lowerHex);
  return out;
}

std::vector<std::optional<std::string>> labelControllers(std::vector<Path> &paths,
                                                         const Config &config) {
  std::vector<std::optional<std::string>> aliases(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    auto &path = paths[i];
    if (auto rule = controllerFor(config, path)) {
      path.controller = (*rule)->label;
      aliases[i] = (*rule)->alias;
    } else if (path.controller.empty()) {
      if (auto pwwn = mdsControllerFromIqn(path.targetIqn)) {
        path.controller = *pwwn;
      }
    }
  }
  return aliases;
}

Plan planMaps(std::vector<Path> paths, const Config &config, Bindings bindings,
              KernelCapabilities kernel) {
  Plan plan;
  plan.bindings = std::move(bindings);
  auto ruleAliases = labelControllers(paths, config);

  struct Lun {
    std::vector<Path> paths;
    std::set<std::string> ruleAliases;
  };
  std::map<std::string, Lun> luns; // by WWID, so the output order is stable
  for (std::size_t i = 0; i < paths.size(); ++i) {
    auto &path = paths[i];
    if (path.state == PathState::Removed) {
      plan.skipped.push_back({path.device, path.wwid, "device was removed"});
      continue;
    }
    if (path.wwid.empty()) {
      plan.skipped.push_back({path.device, "", "no WWID (no VPD page 0x83, 0x80 or wwid)"});
      continue;
    }
    if (path.devt == DevT{}) {
      plan.skipped.push_back({path.device, path.wwid, "no device number"});
      continue;
    }
    auto &lun = luns[path.wwid];
    if (ruleAliases[i]) {
      lun.ruleAliases.insert(*ruleAliases[i]);
    }
    lun.paths.push_back(std::move(path));
  }
  // Only moved-from shells are left, as large as the paths themselves.
  std::vector<Path>().swap(paths);

  std::vector<std::string> aliasesInUse;
  for (auto &[wwid, lun] : luns) {
    const Path &first = lun.paths.front();
    const auto policy = policyFor(config, wwid, first.vendor, first.product);

    std::set<std::string> controllers;
    for (const auto &path : lun.paths) {
      if (!path.controller.empty()) {
        controllers.insert(path.controller);
      }
    }
    // One LUN seen through two controllers is normal only for ALUA arrays
    // grouped by controller; anywhere else it means two LUNs share an
    // identifier (LIO derives NAA IDs from serial hex digits, for one).
    if (controllers.size() > 1 && policy.grouping != GroupingPolicy::GroupByController) {
      plan.warnings.push_back("WWID " + wwid + " is reported by controllers " +
                              join(controllers, " and ") + "; map not built: give the LUNs " +
                              "distinct identifiers or fix the controller rules");
      for (const auto &path : lun.paths) {
        plan.skipped.push_back({path.device, wwid, "WWID conflict between controllers"});
      }
      continue;
    }

    PlannedMap planned;
    planned.controller = join(controllers, ",");
    auto &spec = planned.spec;
    spec.wwid = wwid;

    // Alias precedence: [[map]] alias, then the controller rule's alias,
    // then a user-friendly name from the bindings, then the WWID.
    if (policy.alias) {
      spec.alias = *policy.alias;
      planned.notes.push_back("alias from the [[map]] entry for " + wwid);
    } else if (lun.ruleAliases.size() == 1) {
      spec.alias = *lun.ruleAliases.begin();
      planned.notes.push_back("alias from the controller rule for " + planned.controller);
    } else if (config.defaults.userFriendlyNames) {
      if (lun.ruleAliases.size() > 1) {
        plan.warnings.push_back("WWID " + wwid + ": controller rules ask for aliases " +
                                join(lun.ruleAliases, " and ") + "; using a user-friendly name");
      }
      if (auto bound = plan.bindings.aliasFor(wwid)) {
        spec.alias = *bound;
      } else {
        auto allocated = plan.bindings.allocate(wwid, kDefaultAliasPrefix, aliasesInUse);
        if (!allocated) {
          plan.warnings.push_back("WWID " + wwid + ": " + allocated.error() +
                                  "; using the WWID as the map name");
          spec.alias = wwid;
        } else {
          spec.alias = *allocated;
          plan.bindingsChanged = true;
        }
      }
    } else {
      spec.alias = wwid;
    }
    if (auto valid = validateMapName(spec.alias); !valid) {
      plan.warnings.push_back("WWID " + wwid + ": alias '" + spec.alias + "' " + valid.error() +
                              "; map not built");
      continue;
    }
    if (std::find(aliasesInUse.begin(), aliasesInUse.end(), spec.alias) != aliasesInUse.end()) {
      plan.warnings.push_back("WWID " + wwid + ": alias '" + spec.alias +
                              "' is already used by another map; map not built");
      continue;
    }
    aliasesInUse.push_back(spec.alias);

    auto usable = dropSizeMismatches(std::move(lun.paths), plan);
    spec.sizeSectors = usable.front().sizeSectors;

    bool alua = false;
    for (auto &path : usable) {
      if (path.alua != AluaState::None) {
        alua = true;
        if (path.priority == 0) {
          path.priority = aluaPriority(path.alua, path.aluaPreferred);
        }
      }
    }
    // A handler the kernel attached stays attached whatever the table
    // names (dm-mpath retains it when another cannot attach): asking for
    // another would be a difference on every pass, and a reload for it.
    // scsi_dh_rdac fills access_state too, so ALUA states alone do not
    // mean alua.
    std::string attached = usable.front().attachedHandler;
    for (const auto &path : usable) {
      if (path.attachedHandler != attached) {
        attached.clear();
      }
    }
    if (policy.hwHandler == kAutoHwHandler && !attached.empty()) {
      spec.hwHandler = attached;
      planned.hwHandlerReason = "the kernel attached " + attached + " to every path";
    } else if (policy.hwHandler == kAutoHwHandler) {
      spec.hwHandler = alua ? "alua" : "";
      planned.hwHandlerReason = alua ? "the paths report ALUA" : "no path reports ALUA";
    } else {
      spec.hwHandler = policy.hwHandler;
      planned.hwHandlerReason = "configured";
    }

    Features features;
    features.pgInitRetries = policy.pgInitRetries;
    features.pgInitDelayMsecs = policy.pgInitDelayMsecs;
    features.queueMode = policy.queueMode;
    features.retainAttachedHwHandler = policy.retainAttachedHwHandler;
    auto reconciled = reconcileFeatures(features, policy.noPathRetry);
    planned.noPathRetry = policy.noPathRetry;
    // What the kernel will report back, so a live map compares equal.
    spec.features = kernelEffective(reconciled.features);
    for (auto &note : reconciled.notes) {
      planned.notes.push_back(std::move(note));
    }

    spec.selector = policy.selector;
    if (spec.selector == SelectorKind::HistoricalServiceTime && !kernel.historicalServiceTime) {
      spec.selector = SelectorKind::ServiceTime;
      planned.notes.emplace_back("historical-service-time is not offered by this kernel; "
                                 "using service-time");
    }
    spec.groups = groupPaths(std::move(usable), policy.grouping);
    spec.initialGroup = spec.groups.empty() ? 0 : 1;
    planned.notes.push_back("grouping " + std::string(toString(policy.grouping)) + ", selector " +
                            std::string(toString(spec.selector)));
    planned.autoSelector = policy.autoSelector;
    if (policy.autoSelector) {
      // The kernel has no "auto": the daemon measures the paths and picks
      // queue-length or weighted service-time later; until then, this.
      planned.notes.emplace_back("selector auto: " + std::string(toString(spec.selector)) +
                                 " until pathkeeperd has measured the paths");
    }

    auto table = renderDmTable(spec);
    if (!table) {
      plan.warnings.push_back("map " + spec.alias + ": " + table.error() + "; map not built");
      continue;
    }
    planned.table = std::move(*table);
    plan.maps.push_back(std::move(planned));
  }
  std::sort(plan.maps.begin(), plan.maps.end(),
            [](const PlannedMap &a, const PlannedMap &b) { return a.spec.alias < b.spec.alias; });
  return plan;
}

bool applyLinkSpeedWeights(PlannedMap &map,
                           const std::map<std::string, unsigned, std::less<>> &speedMbpsByNetdev) {
  if (map.spec.selector != SelectorKind::ServiceTime &&
      map.spec.selector != SelectorKind::HistoricalServiceTime) {
    return false;
  }
  unsigned fastest = 0;
  unsigned slowest = std::numeric_limits<unsigned>::max();
  for (const auto &group : map.spec.groups) {
    for (const auto &path : group.paths) {
      auto speed = speedMbpsByNetdev.find(path.netdev);
      if (path.netdev.empty() || speed == speedMbpsByNetdev.end() || speed->second == 0) {
        return false; // one unknown speed makes every weight a guess
      }
      fastest = std::max(fastest, speed->second);
      slowest = std::min(slowest, speed->second);
    }
  }
  if (fastest == 0 || fastest == slowest) {
    return false;
  }
  std::string weights;
  for (auto &group : map.spec.groups) {
    for (auto &path : group.paths) {
      const unsigned speed = speedMbpsByNetdev.find(path.netdev)->second;
      const auto weight = static_cast<unsigned>(
          (static_cast<std::uint64_t>(speed) * kMaxRelativeThroughput + fastest / 2) / fastest);
      path.relativeThroughput = std::max(1U, weight);
      weights += (weights.empty() ? "" : ", ") + path.device + " " +
                 std::to_string(path.relativeThroughput) + " (" + path.netdev + " " +
                 std::to_string(speed) + " Mb/s)";
    }
  }
  auto table = renderDmTable(map.spec);
  if (!table) {
    return false;
  }
  map.table = *table;
  map.notes.push_back("relative_throughput from link speeds: " + weights);
  return true;
}

} // namespace pathkeeper::selector
