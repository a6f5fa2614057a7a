#pragma once

// Helpers for the per-map trackers (failback, no_path_retry): state keyed by
// map alias, each with an optional deadline the daemon's timer must know.

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace pathkeeper::daemon {

/// @brief Drops @p alias's state, if any.
template <typename State>
void forgetMap(std::map<std::string, State, std::less<>> &maps, std::string_view alias) {
  if (auto it = maps.find(alias); it != maps.end()) {
    maps.erase(it);
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
