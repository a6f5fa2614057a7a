#pragma once

// Helpers for the per-map trackers (failback, no_path_retry, adaptive): state
// keyed by map alias, each with an optional deadline the daemon's timer must
// know.

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

/// @brief Moves @p from's state, if any, to @p to, replacing what @p to had:
/// the kernel's map was renamed (dmsetup rename), and its state is its own.
template <typename Maps>
void renameMap(Maps &maps, const std::string &from, const std::string &to) {
  auto it = maps.find(from);
  if (it == maps.end() || from == to) {
    return;
  }
  auto node = maps.extract(it);
  node.key() = to;
  maps.erase(to);
  maps.insert(std::move(node));
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
