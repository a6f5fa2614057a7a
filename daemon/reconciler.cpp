#include "reconciler.hpp"

#include "features.hpp"
#include "names.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <system_error>
#include <thread>

namespace pathkeeper::daemon {

std::string_view toString(ReloadReason reason) {
  switch (reason) {
  case ReloadReason::Size:
    return "size";
  case ReloadReason::Paths:
    return "paths";
  case ReloadReason::Groups:
    return "groups";
  case ReloadReason::Selector:
    return "selector";
  case ReloadReason::PathArgs:
    return "path weights";
  case ReloadReason::Features:
    return "features";
  case ReloadReason::HwHandler:
    return "hardware handler";
  case ReloadReason::Unreadable:
    return "unreadable live table";
  }
  return "?";
}

std::string Action::describe() const {
  switch (kind) {
  case ActionKind::Create:
    return fmt::format("create {} ({}, {} sectors)", map, uuid, sizeSectors);
  case ActionKind::Reload: {
    std::vector<std::string_view> words;
    for (auto reason : reasons) {
      words.push_back(toString(reason));
    }
    return fmt::format("reload {} ({})", map, fmt::join(words, ", "));
  }
  case ActionKind::Message:
    return fmt::format("message {} {}", map, message);
  case ActionKind::Rename:
    return fmt::format("rename {} to {}", oldName, map);
  }
  return "?";
}

namespace {

/// A device as the kernel prints it ("8:16"); /dev paths stay as they are.
std::string canonicalDevice(const std::string &device) {
  auto devt = selector::parseDevT(device);
  return devt ? devt->str() : device;
}

std::vector<std::string> sortedDevices(const selector::DmTableGroup &group) {
  std::vector<std::string> devices;
  for (const auto &path : group.paths) {
    devices.push_back(canonicalDevice(path.device));
  }
  std::ranges::sort(devices);
  return devices;
}

std::vector<ReloadReason> compareTables(const selector::DmTable &want,
                                        const selector::DmTable &have) {
  std::vector<ReloadReason> reasons;
  if (want.length != have.length) {
    reasons.push_back(ReloadReason::Size);
  }

  std::set<std::string> wantPaths;
  std::set<std::string> havePaths;
  for (const auto &group : want.groups) {
    for (const auto &device : sortedDevices(group)) {
      wantPaths.insert(device);
    }
  }
  for (const auto &group : have.groups) {
    for (const auto &device : sortedDevices(group)) {
      havePaths.insert(device);
    }
  }
  if (wantPaths != havePaths) {
    reasons.push_back(ReloadReason::Paths);
  } else {
    bool regrouped = want.groups.size() != have.groups.size();
    for (std::size_t g = 0; !regrouped && g < want.groups.size(); ++g) {
      regrouped = sortedDevices(want.groups[g]) != sortedDevices(have.groups[g]);
    }
    if (regrouped) {
      reasons.push_back(ReloadReason::Groups);
    }
  }

  // Selectors group by group, and the per-path args of every path both
  // tables carry (e.g. service-time's relative_throughput).
  bool selectorChanged = false;
  bool pathArgsChanged = false;
  std::map<std::string, std::vector<std::string>> haveArgs;
  for (std::size_t g = 0; g < have.groups.size(); ++g) {
    for (const auto &path : have.groups[g].paths) {
      haveArgs[canonicalDevice(path.device)] = path.args;
    }
  }
  for (std::size_t g = 0; g < std::min(want.groups.size(), have.groups.size()); ++g) {
    const auto &w = want.groups[g];
    const auto &h = have.groups[g];
    if (w.selector != h.selector || w.selectorArgs != h.selectorArgs ||
        w.argsPerPath != h.argsPerPath) {
      selectorChanged = true;
    }
  }
  for (const auto &group : want.groups) {
    for (const auto &path : group.paths) {
      auto found = haveArgs.find(canonicalDevice(path.device));
      if (found != haveArgs.end() && found->second != path.args) {
        pathArgsChanged = true;
      }
    }
  }
  if (selectorChanged) {
    reasons.push_back(ReloadReason::Selector);
  } else if (pathArgsChanged) {
    reasons.push_back(ReloadReason::PathArgs); // e.g. adaptive weights, same selector
  }

  auto wantFeatures = selector::kernelEffective(want.features);
  auto haveFeatures = selector::kernelEffective(have.features);
  wantFeatures.queueIfNoPath = false; // runtime state: messages, not reloads
  haveFeatures.queueIfNoPath = false;
  if (wantFeatures != haveFeatures) {
    reasons.push_back(ReloadReason::Features);
  }

  if (!want.hwHandler.empty() &&
      (want.hwHandler != have.hwHandler || want.hwHandlerArgs != have.hwHandlerArgs)) {
    reasons.push_back(ReloadReason::HwHandler);
  }
  return reasons;
}

/// The table line without "<start> <length> multipath", as libdevmapper
/// takes it.
std::string paramsOf(const std::string &line) {
  auto words = selector::splitWords(line);
  std::string out;
  for (std::size_t i = 3; i < words.size(); ++i) {
    if (!out.empty()) {
      out += ' ';
    }
    out += words[i];
  }
  return out;
}

Action messageAction(const std::string &map, const std::string &uuid, std::string text) {
  Action action;
  action.kind = ActionKind::Message;
  action.map = map;
  action.uuid = uuid;
  action.message = std::move(text);
  return action;
}

/// What the kernel holds for a map's runtime state, as the messages see it.
struct RuntimeState {
  std::map<std::string, bool> active; ///< device -> 'A'; empty when unknown
  bool knownPaths = false;
  unsigned group = 0; ///< 1-based; 0 when unknown
  bool queueIfNoPath = false;
};

/// The messages that take a map from @p now to what the input asks.
/// Reinstatements go first, so that failing a path never leaves the map
/// with no usable path while another one is about to come back.
void planMessages(const ReconcileInput &input, const selector::MapSpec &spec,
                  const std::string &map, const RuntimeState &now, std::vector<Action> &out) {
  std::vector<Action> reinstate;
  std::vector<Action> failPaths;
  if (now.knownPaths) {
    for (const auto &group : spec.groups) {
      for (const auto &path : group.paths) {
        auto wanted = input.usable.find(path.devt);
        auto live = now.active.find(path.devt.str());
        if (wanted == input.usable.end() || live == now.active.end()) {
          continue;
        }
        if (wanted->second && !live->second) {
          reinstate.push_back(
              messageAction(map, spec.dmUuid(), "reinstate_path " + path.devt.str()));
        } else if (!wanted->second && live->second) {
          failPaths.push_back(messageAction(map, spec.dmUuid(), "fail_path " + path.devt.str()));
        }
      }
    }
  }
  std::ranges::move(reinstate, std::back_inserter(out));
  std::ranges::move(failPaths, std::back_inserter(out));

  if (auto group = input.activeGroup.find(spec.alias); group != input.activeGroup.end()) {
    if (group->second >= 1 && group->second <= spec.groups.size() && group->second != now.group) {
      out.push_back(
          messageAction(map, spec.dmUuid(), "switch_group " + std::to_string(group->second)));
    }
  }

  bool queue = spec.features.queueIfNoPath;
  if (auto found = input.queueIfNoPath.find(spec.alias); found != input.queueIfNoPath.end()) {
    queue = found->second;
  }
  if (queue != now.queueIfNoPath) {
    out.push_back(
        messageAction(map, spec.dmUuid(), queue ? "queue_if_no_path" : "fail_if_no_path"));
  }
}

/// A table to load for @p alias without queue_if_no_path when the input says
/// the map must not queue now (its no_path_retry ran out, or the admin
/// disabled queueing): the new table would otherwise queue I/O until the
/// fail_if_no_path that follows it, or for good if that message failed.
/// Re-renders @p line when it changes @p want.
void dropUnwantedQueueing(const ReconcileInput &input, const std::string &alias,
                          selector::DmTable &want, std::string &line) {
  auto found = input.queueIfNoPath.find(alias);
  if (found == input.queueIfNoPath.end() || found->second || !want.features.queueIfNoPath) {
    return;
  }
  std::erase(want.featureArgs, std::string("queue_if_no_path"));
  want.features.queueIfNoPath = false;
  line = selector::renderDmTable(want);
}

/// The group of @p want (1-based) that holds most of the paths of the group
/// @p live uses now; 0 when that is unknown or shares no path with any.
unsigned groupToKeep(const selector::DmTable &want, const LiveMap &live) {
  if (!live.status || !live.table) {
    return 0;
  }
  const unsigned inUse = live.status->groupInUse();
  if (inUse == 0 || inUse > live.table->groups.size()) {
    return 0;
  }
  const auto current = sortedDevices(live.table->groups[inUse - 1]);
  unsigned keep = 0;
  std::size_t mostShared = 0;
  for (std::size_t g = 0; g < want.groups.size(); ++g) {
    std::size_t shared = 0;
    for (const auto &device : sortedDevices(want.groups[g])) {
      shared += std::ranges::binary_search(current, device) ? 1U : 0U;
    }
    if (shared > mostShared) { // ties keep the lower number
      mostShared = shared;
      keep = static_cast<unsigned>(g + 1);
    }
  }
  return keep;
}

/// A freshly loaded table: every path active, the initial group, the
/// table's own queue_if_no_path.
RuntimeState freshState(const selector::MapSpec &spec) {
  RuntimeState state;
  state.knownPaths = true;
  for (const auto &group : spec.groups) {
    for (const auto &path : group.paths) {
      state.active[path.devt.str()] = true;
    }
  }
  state.group = spec.initialGroup;
  state.queueIfNoPath = selector::kernelEffective(spec.features).queueIfNoPath;
  return state;
}

RuntimeState liveState(const LiveMap &live) {
  RuntimeState state;
  if (live.status) {
    state.knownPaths = true;
    for (const auto &group : live.status->groups) {
      for (const auto &path : group.paths) {
        state.active[canonicalDevice(path.device)] = path.active;
      }
    }
    // The kernel prints the group it will use next, or the current one.
    state.group = live.status->nextGroup;
  }
  if (live.table) {
    state.queueIfNoPath = live.table->features.queueIfNoPath;
  }
  return state;
}

} // namespace

std::vector<selector::Path> pathsForTables(std::vector<selector::Path> paths) {
  for (auto &path : paths) {
    if (path.state != selector::PathState::Removed) {
      path.state = selector::PathState::Up;
    }
  }
  return paths;
}

ReconcilePlan planReconcile(const ReconcileInput &input) {
  ReconcilePlan plan;
  const bool owner = input.mode == ReconcileMode::Owner;
  std::map<std::string, const LiveMap *> byName;
  std::map<std::string, const LiveMap *> byUuid;
  for (const auto &live : input.live) {
    byName[live.info.name] = &live;
    if (!live.info.uuid.empty()) {
      byUuid[live.info.uuid] = &live;
    }
  }
  std::set<std::string> claimed; // live maps some desired map accounts for

  for (const auto &planned : input.desired) {
    const auto &spec = planned.spec;
    const std::string uuid = spec.dmUuid();
    std::string line = planned.table;
    if (line.empty()) {
      auto rendered = selector::renderDmTable(spec);
      if (!rendered) {
        plan.refused.push_back({spec.alias, "cannot render its table: " + rendered.error()});
        continue;
      }
      line = *rendered;
    }
    auto want = selector::parseDmTable(line);
    if (!want) {
      plan.refused.push_back({spec.alias, "its planned table does not parse: " + want.error()});
      continue;
    }

    const LiveMap *live = nullptr;
    if (auto found = byName.find(spec.alias); found != byName.end()) {
      live = found->second;
    }
    if (!owner && (live == nullptr || live->info.uuid != uuid)) {
      auto found = byUuid.find(uuid);
      live = found != byUuid.end() ? found->second : nullptr;
      if (live == nullptr) {
        plan.refused.push_back(
            {spec.alias, "companion mode: multipathd has no map with DM UUID " + uuid});
        continue;
      }
    }

    if (live == nullptr) {
      if (auto other = byUuid.find(uuid); other != byUuid.end()) {
        claimed.insert(other->second->info.name);
        plan.refused.push_back(
            {spec.alias, fmt::format("WWID {} is mapped as '{}' (DM UUID {}), which was not "
                                     "renamed to it yet; the rename is retried at every pass "
                                     "(its error, if any, is in the log)",
                                     spec.wwid, other->second->info.name, uuid)});
        continue;
      }
      dropUnwantedQueueing(input, spec.alias, *want, line);
      Action create;
      create.kind = ActionKind::Create;
      create.map = spec.alias;
      create.uuid = uuid;
      create.sizeSectors = want->length;
      create.params = paramsOf(line);
      plan.actions.push_back(std::move(create));
      RuntimeState fresh = freshState(spec);
      fresh.queueIfNoPath = want->features.queueIfNoPath;
      planMessages(input, spec, spec.alias, fresh, plan.actions);
      continue;
    }

    claimed.insert(live->info.name);
    const std::string &name = live->info.name;
    if (live->info.uuid != uuid) {
      plan.refused.push_back(
          {spec.alias, fmt::format("the name is taken by a map with DM UUID '{}', not {}; "
                                   "it is not ours and is left alone",
                                   live->info.uuid, uuid)});
      continue;
    }
    if (live->targetCount != 1 || !live->target || live->target->targetType != "multipath") {
      plan.refused.push_back(
          {spec.alias, fmt::format("the live map is not a single multipath target ({} "
                                   "targets, first '{}'); left alone",
                                   live->targetCount, live->info.targetType)});
      continue;
    }

    std::vector<ReloadReason> reasons;
    if (!live->table) {
      reasons.push_back(ReloadReason::Unreadable);
    } else {
      reasons = compareTables(*want, *live->table);
    }
    if (reasons.empty()) {
      plan.adopted.push_back(name);
      planMessages(input, spec, name, liveState(*live), plan.actions);
    } else if (owner) {
      // A new table starts on its initial group. Which group a map uses is
      // failback's and the admin's business, not the table's: the reload
      // keeps the map on the group holding the paths it uses now.
      const unsigned keep = groupToKeep(*want, *live);
      if (keep != 0 && keep != want->initialGroup) {
        want->initialGroup = keep;
        line = selector::renderDmTable(*want);
      }
      dropUnwantedQueueing(input, spec.alias, *want, line);
      Action reload;
      reload.kind = ActionKind::Reload;
      reload.map = name;
      reload.sizeSectors = want->length;
      reload.params = paramsOf(line);
      reload.reasons = std::move(reasons);
      plan.actions.push_back(std::move(reload));
      RuntimeState fresh = freshState(spec);
      fresh.group = want->initialGroup;
      fresh.queueIfNoPath = want->features.queueIfNoPath;
      planMessages(input, spec, name, fresh, plan.actions);
    } else {
      // Companion: the table is multipathd's business; path states still
      // follow pathkeeper's checks.
      planMessages(input, spec, name, liveState(*live), plan.actions);
    }
  }

  if (owner) {
    for (const auto &live : input.live) {
      if (claimed.contains(live.info.name) || !live.info.uuid.starts_with(kMultipathUuidPrefix)) {
        continue;
      }
      plan.stale.push_back(
          {live.info.name, live.info.uuid, live.status ? live.status->activePaths() : 0U});
    }
  }
  return plan;
}

std::vector<Action> planRenames(const std::vector<selector::PlannedMap> &desired,
                                const std::vector<LiveMap> &live) {
  std::set<std::string> names;
  std::map<std::string, std::string> nameOfUuid;
  for (const auto &map : live) {
    names.insert(map.info.name);
    if (map.info.uuid.starts_with(kMultipathUuidPrefix)) {
      nameOfUuid[map.info.uuid] = map.info.name;
    }
  }
  std::vector<const selector::MapSpec *> waiting;
  for (const auto &planned : desired) {
    auto found = nameOfUuid.find(planned.spec.dmUuid());
    if (found != nameOfUuid.end() && found->second != planned.spec.alias) {
      waiting.push_back(&planned.spec);
    }
  }
  std::vector<Action> renames;
  const auto renameTo = [&](std::string &current, const std::string &name) {
    Action rename;
    rename.kind = ActionKind::Rename;
    rename.map = name;
    rename.oldName = current;
    names.erase(current);
    names.insert(name);
    current = name;
    renames.push_back(std::move(rename));
  };
  for (;;) {
    for (bool progress = true; progress;) {
      progress = false;
      for (auto it = waiting.begin(); it != waiting.end();) {
        if (names.contains((*it)->alias)) {
          ++it;
          continue;
        }
        renameTo(nameOfUuid.at((*it)->dmUuid()), (*it)->alias);
        it = waiting.erase(it);
        progress = true;
      }
    }
    // Stalled: every name wanted is taken. Where the holders of the wanted
    // names, followed from one map, lead back to it, the maps form a cycle
    // (two aliases swapped): the holder of its name steps aside to a free
    // temporary name, which ends the cycle. A map whose chain ends at a
    // name held by something else stays where it is.
    const auto holderOf = [&](const std::string &name) -> const selector::MapSpec * {
      auto holder = std::ranges::find_if(waiting, [&](const selector::MapSpec *other) {
        return nameOfUuid.at(other->dmUuid()) == name;
      });
      return holder == waiting.end() ? nullptr : *holder;
    };
    const selector::MapSpec *aside = nullptr;
    for (const auto *wanting : waiting) {
      const selector::MapSpec *step = holderOf(wanting->alias);
      for (std::size_t hops = 0; step != nullptr && step != wanting && hops < waiting.size();
           ++hops) {
        step = holderOf(step->alias);
      }
      if (step == wanting) {
        aside = holderOf(wanting->alias);
        break;
      }
    }
    if (aside == nullptr) {
      return renames; // what is left waits for names other devices hold
    }
    std::string &current = nameOfUuid.at(aside->dmUuid());
    // "<name>.pathkeeper-swap", then with '_'s while a device holds that;
    // a long name is cut short, so that the rename fits DM_NAME_LEN.
    std::string temporary;
    for (std::size_t extra = 0;; ++extra) {
      if (kSwapSuffix.size() + extra >= selector::kMaxMapNameLength) {
        return renames; // not one temporary name free: the cycle waits
      }
      const std::size_t keep =
          std::min(current.size(), selector::kMaxMapNameLength - kSwapSuffix.size() - extra);
      temporary = current.substr(0, keep) + std::string(kSwapSuffix) + std::string(extra, '_');
      if (!names.contains(temporary)) {
        break;
      }
    }
    renameTo(current, temporary);
    renames.back().stepAside = true;
  }
}

LiveMap makeLiveMap(DmMapInfo info, const std::vector<DmTargetLine> &table,
                    const std::vector<DmTargetLine> &status) {
  LiveMap live;
  live.info = std::move(info);
  live.targetCount = table.size();
  if (table.size() != 1 || table.front().targetType != "multipath") {
    return live;
  }
  live.target = table.front();
  auto parsed = selector::parseDmTable(live.target->params, false);
  if (parsed) {
    parsed->start = live.target->start;
    parsed->length = live.target->length;
    live.table = std::move(*parsed);
  } else {
    live.parseError = "table: " + parsed.error();
  }
  if (status.size() == 1 && status.front().targetType == "multipath") {
    auto parsedStatus = selector::parseDmStatus(status.front().params, false);
    if (parsedStatus) {
      parsedStatus->start = status.front().start;
      parsedStatus->length = status.front().length;
      live.status = std::move(*parsedStatus);
    } else {
      live.parseError +=
          (live.parseError.empty() ? "" : "; ") + ("status: " + parsedStatus.error());
    }
  }
  return live;
}

std::vector<LiveMap> readLiveMaps(DeviceMapper &dm) {
  std::vector<LiveMap> maps;
  for (auto &info : dm.list()) {
    auto table = dm.table(info.name);
    auto status = dm.status(info.name);
    if (!table || !status) {
      continue; // removed while we read it
    }
    maps.push_back(makeLiveMap(std::move(info), *table, *status));
  }
  return maps;
}

namespace {

/// The reload's table with the initial group that holds what the kernel
/// uses right now. The pass read the map before it planned, and a
/// switch_group on the message lane (failback, the admin) may have moved it
/// since; the reload must not undo that.
std::string paramsKeepingGroup(DeviceMapper &dm, const Action &reload) {
  auto table = dm.table(reload.map);
  auto status = dm.status(reload.map);
  auto want = selector::parseDmTable(reload.params, false);
  if (!table || !status || !want) {
    return reload.params;
  }
  DmMapInfo info;
  info.name = reload.map;
  const unsigned keep = groupToKeep(*want, makeLiveMap(std::move(info), *table, *status));
  if (keep == 0 || keep == want->initialGroup) {
    return reload.params;
  }
  want->initialGroup = keep;
  return paramsOf(selector::renderDmTable(*want));
}

} // namespace

std::vector<ActionOutcome> applyActions(const std::vector<Action> &actions, DeviceMapper &dm,
                                        const InFlightReader &inFlight) {
  // One udev round for the whole list (many new maps at cold start), waited
  // for before returning, so every created map has its node by then.
  struct Batch {
    DeviceMapper &dm;
    explicit Batch(DeviceMapper &d) : dm(d) { dm.beginUdevBatch(); }
    ~Batch() { dm.endUdevBatch(); }
    Batch(const Batch &) = delete;
    Batch &operator=(const Batch &) = delete;
  } batch(dm);
  // New maps in two rounds: every device and its table first, then the
  // resumes. A table load is nearly all of a create's kernel CPU (the map's
  // request queue), and only a resume makes a map live, with the uevent
  // that sets udev to work on it (its rules open and read the new map).
  // Made one by one, each load shares the CPU with udev's work on the maps
  // made before it; in rounds, the loads run while udev has only their
  // "add" uevents, which its rules pass over (DeviceMapper::prepareCreate).
  struct Prepared {
    CreateReport report;
    std::exception_ptr failure;
    std::chrono::microseconds took{0};
    bool finishing = false; ///< finishCreate() called: it removes the device if it fails
  };
  // A device prepared and then not finished (its create skipped, or an
  // exception on the way) is removed, as a failed create's is: nothing of
  // a pass is left half-made while the process lives. One taken over is
  // left as it was found.
  struct Unfinished {
    DeviceMapper &dm;
    const std::vector<Action> &actions;
    std::map<std::size_t, Prepared> halves; // by index in actions
    Unfinished(DeviceMapper &d, const std::vector<Action> &a) : dm(d), actions(a) {}
    Unfinished(const Unfinished &) = delete;
    Unfinished &operator=(const Unfinished &) = delete;
    ~Unfinished() {
      for (const auto &[i, half] : halves) {
        if (!half.failure && !half.finishing && !half.report.tookOver) {
          try {
            dm.remove(actions[i].map, false);
          } catch (...) {
            // Left for the next start (removeUnfinishedMaps).
          }
        }
      }
    }
  } unfinished(dm, actions);
  auto &prepared = unfinished.halves;
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action &action = actions[i];
    if (action.kind != ActionKind::Create) {
      continue;
    }
    const auto started = std::chrono::steady_clock::now();
    Prepared &half = prepared[i];
    try {
      half.report = dm.prepareCreate(action.map, action.uuid, action.sizeSectors, action.params);
    } catch (...) {
      half.failure = std::current_exception();
    }
    half.took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - started);
  }
  std::vector<ActionOutcome> outcomes;
  std::set<std::string> broken; // maps whose create or reload failed
  std::optional<std::chrono::steady_clock::time_point> gateDeadline; // the first lull gate's
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action &action = actions[i];
    ActionOutcome outcome;
    outcome.action = action;
    if (broken.contains(action.map)) {
      outcome.skipped = true;
      outcome.error = "skipped: an earlier table action on " + action.map + " failed";
      outcomes.push_back(std::move(outcome));
      continue;
    }
    auto started = std::chrono::steady_clock::now();
    std::chrono::microseconds held{0};
    try {
      switch (action.kind) {
      case ActionKind::Create: {
        Prepared &half = prepared.at(i);
        started -= half.took; // elapsed: both halves
        if (half.failure) {
          std::rethrow_exception(half.failure);
        }
        half.finishing = true;
        outcome.tookOver =
            dm.finishCreate(action.map, action.uuid, action.sizeSectors, action.params, half.report)
                .tookOver;
        break;
      }
      case ActionKind::Reload:
        if (action.lull && inFlight) {
          // Before the group is read and the table loaded, which take
          // milliseconds: a message sent meanwhile reaches the old table
          // and is read back into the new one. The pass's gates share one
          // budget: the table worker waits no longer than one gate would.
          LullGate gate = *action.lull;
          const auto now = std::chrono::steady_clock::now();
          if (!gateDeadline) {
            gateDeadline = now + gate.maxWait;
          }
          gate.maxWait =
              std::max(std::chrono::milliseconds{0},
                       std::chrono::duration_cast<std::chrono::milliseconds>(*gateDeadline - now));
          outcome.lull = waitForLull(
              gate, inFlight, [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); },
              [] { return std::chrono::steady_clock::now(); });
        }
        held = dm.reload(action.map, action.sizeSectors, paramsKeepingGroup(dm, action));
        break;
      case ActionKind::Message:
        if (action.uuid.empty()) {
          dm.message(action.map, action.message);
        } else {
          dm.messageUuid(action.uuid, action.map, action.message);
        }
        break;
      case ActionKind::Rename:
        // The plan saw multipath maps only: a device of another kind
        // (LVM, crypt) may have the name. Say whose it is.
        if (auto taken = dm.info(action.map)) {
          throw std::system_error(
              EBUSY, std::generic_category(),
              fmt::format("the name {} is taken by another device (DM UUID '{}', target {})",
                          action.map, taken->uuid,
                          taken->targetType.empty() ? "none" : taken->targetType));
        }
        if (auto report = dm.rename(action.oldName, action.map); report.reloadedFirst) {
          outcome.reloadedFirst = true;
          held = *report.reloadedFirst;
        }
        break;
      }
      outcome.ok = true;
      outcome.held = held;
      outcome.elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::steady_clock::now() - started);
    } catch (const RenameError &e) {
      outcome.error = e.what();
      outcome.reloadedFirst = true;
      outcome.held = e.reloadHeld();
      broken.insert(action.map);
    } catch (const std::exception &e) {
      outcome.error = e.what();
      if (action.kind != ActionKind::Message) {
        broken.insert(action.map);
      }
    }
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

} // namespace pathkeeper::daemon
