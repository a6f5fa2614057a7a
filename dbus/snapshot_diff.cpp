#include "snapshot_diff.hpp"

#include <map>

namespace pathkeeper::dbus {
namespace {

using daemon::FindingView;
using daemon::MapView;
using daemon::PathView;
using daemon::PortalView;
using daemon::StateSnapshot;

// Collects the names of differing fields; the names are the XML's.
class Differ {
public:
  template <typename T> Differ &field(const char *name, const T &before, const T &after) {
    if (!(before == after)) {
      names_.emplace_back(name);
    }
    return *this;
  }
  std::vector<std::string> take() { return std::move(names_); }

private:
  std::vector<std::string> names_;
};

std::string keyOf(const MapView &map) {
  return map.alias;
}
std::string keyOf(const PathView &path) {
  return path.device;
}
std::string keyOf(const PortalView &portal) {
  return portalKey(portal);
}
std::string keyOf(const FindingView &finding) {
  return finding.key;
}

template <typename View>
void diffObjects(ObjectKind kind, const std::vector<View> &before, const std::vector<View> &after,
                 std::vector<ObjectChange> &changes) {
  // The snapshot promises sorted vectors; keying by map does not rely on it.
  std::map<std::string, const View *> old;
  std::map<std::string, const View *> now;
  for (const auto &view : before) {
    old.emplace(keyOf(view), &view);
  }
  for (const auto &view : after) {
    now.emplace(keyOf(view), &view);
  }
  for (const auto &[key, view] : old) {
    if (!now.contains(key)) {
      changes.push_back({ObjectChange::Type::Removed, kind, key, {}});
    }
  }
  for (const auto &[key, view] : now) {
    if (!old.contains(key)) {
      changes.push_back({ObjectChange::Type::Added, kind, key, {}});
    }
  }
  for (const auto &[key, view] : now) {
    auto it = old.find(key);
    if (it == old.end()) {
      continue;
    }
    auto names = changedProperties(*it->second, *view);
    if (!names.empty()) {
      changes.push_back({ObjectChange::Type::PropertiesChanged, kind, key, std::move(names)});
    }
  }
}

} // namespace

std::vector<std::string> changedProperties(const MapView &before, const MapView &after) {
  return Differ{}
      .field("Wwid", before.wwid, after.wwid)
      .field("DmUuid", before.dmUuid, after.dmUuid)
      .field("Selector", before.selector, after.selector)
      .field("State", before.state, after.state)
      .field("ActiveGroup", before.activeGroup, after.activeGroup)
      .field("UsablePaths", before.usablePaths, after.usablePaths)
      .field("TotalPaths", before.totalPaths, after.totalPaths)
      .field("Queueing", before.queueing, after.queueing)
      .field("NoPathRetry", before.noPathRetry, after.noPathRetry)
      .field("Groups", before.groups, after.groups)
      .field("Adaptive", before.adaptive, after.adaptive)
      .field("AdaptiveReloads", before.adaptiveReloads, after.adaptiveReloads)
      .field("AdaptiveDecisions", before.adaptiveDecisions, after.adaptiveDecisions)
      .take();
}

std::vector<std::string> changedProperties(const PathView &before, const PathView &after) {
  return Differ{}
      .field("DevT", before.devt, after.devt)
      .field("Map", before.map, after.map)
      .field("State", before.state, after.state)
      .field("DmState", before.dmState, after.dmState)
      .field("Checker", before.checker, after.checker)
      .field("Failures", before.failures, after.failures)
      .field("Shaky", before.shaky, after.shaky)
      .field("LatencyUs", before.latencyUs, after.latencyUs)
      .field("Alua", before.alua, after.alua)
      .field("Wwid", before.wwid, after.wwid)
      .field("Target", before.target, after.target)
      .field("Portal", before.portal, after.portal)
      .field("NetDev", before.netdev, after.netdev)
      .field("Controller", before.controller, after.controller)
      .field("SessionId", before.sessionId, after.sessionId)
      .field("Note", before.note, after.note)
      .field("ThroughputBytesPerSecond", before.throughputBps, after.throughputBps)
      .field("CapacityBytesPerSecond", before.capacityBps, after.capacityBps)
      .field("IoLatencyUs", before.ioLatencyUs, after.ioLatencyUs)
      .field("Confidence", before.confidence, after.confidence)
      .field("Weight", before.weight, after.weight)
      .take();
}

std::vector<std::string> changedProperties(const PortalView &before, const PortalView &after) {
  return Differ{}.field("Reachability", before.reachability, after.reachability).take();
}

std::vector<std::string> changedProperties(const FindingView &before, const FindingView &after) {
  return Differ{}
      .field("Id", before.id, after.id)
      .field("Severity", before.severity, after.severity)
      .field("Summary", before.summary, after.summary)
      .field("Explanation", before.explanation, after.explanation)
      .field("NetDevs", before.nics, after.nics)
      .field("Portals", before.portals, after.portals)
      .field("Paths", before.paths, after.paths)
      .field("Fix", before.fix, after.fix)
      .take();
}

std::vector<ObjectChange> diffSnapshots(const StateSnapshot &before, const StateSnapshot &after) {
  std::vector<ObjectChange> changes;
  diffObjects(ObjectKind::Map, before.maps, after.maps, changes);
  diffObjects(ObjectKind::Path, before.paths, after.paths, changes);
  diffObjects(ObjectKind::Portal, before.portals, after.portals, changes);
  diffObjects(ObjectKind::Finding, before.findings, after.findings, changes);
  auto manager = Differ{}
                     .field("Version", before.version, after.version)
                     .field("Mode", before.mode, after.mode)
                     .field("Status", before.status, after.status)
                     .take();
  if (!manager.empty()) {
    changes.push_back(
        {ObjectChange::Type::PropertiesChanged, ObjectKind::Manager, "", std::move(manager)});
  }
  return changes;
}

} // namespace pathkeeper::dbus
