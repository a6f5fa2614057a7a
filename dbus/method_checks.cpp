#include "method_checks.hpp"

#include "bus_names.hpp"
#include "model.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pathkeeper::dbus {
namespace {

const daemon::MapView *findMap(const daemon::StateSnapshot &snapshot, const std::string &alias) {
  auto it = std::ranges::find(snapshot.maps, alias, &daemon::MapView::alias);
  return it == snapshot.maps.end() ? nullptr : &*it;
}

MethodError mapNotFound(const std::string &map) {
  return {kErrorNotFound, fmt::format("no map named '{}'", map)};
}

} // namespace

std::optional<MethodError> checkPathExists(const daemon::StateSnapshot &snapshot,
                                           const std::string &device) {
  if (std::ranges::find(snapshot.paths, device, &daemon::PathView::device) ==
      snapshot.paths.end()) {
    return MethodError{kErrorNotFound, fmt::format("no path '{}' (give a device name such as "
                                                   "\"sdb\"; pathkeeperctl status lists them)",
                                                   device)};
  }
  return std::nullopt;
}

std::optional<MethodError> checkMapExists(const daemon::StateSnapshot &snapshot,
                                          const std::string &map) {
  if (findMap(snapshot, map) == nullptr) {
    return mapNotFound(map);
  }
  return std::nullopt;
}

std::optional<MethodError> checkGroup(const daemon::StateSnapshot &snapshot, const std::string &map,
                                      std::uint32_t group) {
  const auto *view = findMap(snapshot, map);
  if (view == nullptr) {
    return mapNotFound(map);
  }
  if (std::ranges::find(view->groups, group, &daemon::GroupView::number) == view->groups.end()) {
    return MethodError{kErrorInvalidArgument,
                       fmt::format("map '{}' has no group {} (groups are numbered 1 to {})", map,
                                   group, view->groups.size())};
  }
  return std::nullopt;
}

std::optional<MethodError> checkSelector(const daemon::StateSnapshot &snapshot,
                                         const std::string &map, const std::string &selector) {
  if (findMap(snapshot, map) == nullptr) {
    return mapNotFound(map);
  }
  if (!selector::parseSelectorKind(selector)) {
    return MethodError{kErrorInvalidArgument,
                       fmt::format("unknown path selector '{}' (round-robin, queue-length, "
                                   "service-time or historical-service-time)",
                                   selector)};
  }
  return std::nullopt;
}

MethodError commandFailed(const std::string &what, const std::string &reason) {
  return {kErrorFailed, fmt::format("{} failed: {}", what, reason)};
}

} // namespace pathkeeper::dbus
