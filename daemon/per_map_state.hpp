#pragma once

// Helpers for the per-map trackers (failback, no_path_retry, adaptive): state
// keyed by map alias, each with an optional deadline the daemon's timer must
// know.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pathkeeper::daemon {

/// @brief Drops @p alias's state, if any.
template <typename State>
void forgetMap(std::map<std::string, State, std::less<>> &maps, std::string_view alias) {
  if (auto it = maps.find(alias); it != maps.end()) {
    maps.erase(it);
  }
}

/// @brief Old alias -> new alias of the maps the kernel renamed in one go
/// (dmsetup rename; a swap through a third name may be among them).
using MapRenames = std::map<std::string, std::string>;

/// @brief Moves each renamed map's state, if any, to its new alias, all at
/// once so that a swap lands right; what a new alias had (a map gone) is
/// replaced. The state is the kernel map's, not its name's.
template <typename Maps> void renameMaps(Maps &maps, const MapRenames &renames) {
  std::vector<std::pair<std::string, typename Maps::node_type>> moved;
  for (const auto &[from, to] : renames) {
    if (auto it = maps.find(from); it != maps.end()) {
      moved.emplace_back(to, maps.extract(it));
    }
  }
  for (auto &[to, node] : moved) {
    maps.erase(to);
    node.key() = to;
    maps.insert(std::move(node));
  }
}

/// @brief The earliest `deadline` among the maps' states, if any is set.
template <typename State>
auto earliestDeadline(const std::map<std::string, State, std::less<>> &maps)
    -> decltype(State{}.deadline) {
  decltype(State{}.deadline) earliest;
  for (const auto &[alias, state] : maps) {
    if (state.deadline && (!earliest || *state.deadline < *earliest)) {
      earliest = state.deadline;
    }
  }
  return earliest;
}

} // namespace pathkeeper::daemon
