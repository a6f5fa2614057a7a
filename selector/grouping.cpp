#include "grouping.hpp"

#include <algorithm>
#include <map>

namespace pathkeeper::selector {

namespace {

template <typename Key, typename KeyOf>
std::vector<PathGroup> groupBy(std::vector<Path> paths, KeyOf keyOf) {
  // Groups appear in the order of their first path, so ties in sortGroups
  // keep a deterministic, discovery-independent order (paths are sorted).
  std::vector<std::pair<Key, PathGroup>> groups;
  for (auto &path : paths) {
    Key key = keyOf(path);
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto &entry) { return entry.first == key; });
    if (it == groups.end()) {
      groups.emplace_back(key, PathGroup{});
      it = std::prev(groups.end());
    }
    it->second.paths.push_back(std::move(path));
  }
  std::vector<PathGroup> out;
  out.reserve(groups.size());
  for (auto &entry : groups) {
    out.push_back(std::move(entry.second));
  }
  return out;
}

} // namespace

std::string controllerKey(const Path &path) {
  if (!path.controller.empty()) {
    return path.controller;
  }
  if (path.targetPortGroup) {
    return "tpg" + std::to_string(*path.targetPortGroup);
  }
  return {};
}

void sortGroups(std::vector<PathGroup> &groups) {
  std::stable_sort(groups.begin(), groups.end(), [](const PathGroup &a, const PathGroup &b) {
    if (a.marginal() != b.marginal()) {
      return !a.marginal();
    }
    if (a.priority() != b.priority()) {
      return a.priority() > b.priority();
    }
    return a.usablePaths() > b.usablePaths();
  });
}

std::vector<PathGroup> groupPaths(std::vector<Path> paths, GroupingPolicy policy) {
  std::stable_sort(paths.begin(), paths.end(), [](const Path &a, const Path &b) {
    return std::tie(a.devt, a.device) < std::tie(b.devt, b.device);
  });

  std::vector<PathGroup> groups;
  switch (policy) {
  case GroupingPolicy::Multibus:
    // Marginal paths still get their own group: multipathd keeps them out of
    // the main group so they carry I/O only when nothing else can.
    groups = groupBy<bool>(std::move(paths), [](const Path &p) { return p.marginal; });
    break;
  case GroupingPolicy::Failover:
    for (auto &path : paths) {
      groups.push_back(PathGroup{{std::move(path)}, {}});
    }
    break;
  case GroupingPolicy::GroupByController:
    groups = groupBy<std::pair<std::string, bool>>(std::move(paths), [](const Path &p) {
      return std::make_pair(controllerKey(p), p.marginal);
    });
    break;
  case GroupingPolicy::GroupByPrio:
    groups = groupBy<std::pair<int, bool>>(
        std::move(paths), [](const Path &p) { return std::make_pair(p.priority, p.marginal); });
    break;
  }
  for (auto &group : groups) {
    if (policy == GroupingPolicy::GroupByController) {
      group.controller = controllerKey(group.paths.front());
    }
  }
  sortGroups(groups);
  return groups;
}

} // namespace pathkeeper::selector
