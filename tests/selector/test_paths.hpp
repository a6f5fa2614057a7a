#pragma once

// Builders for in-memory paths, so grouping and table tests read like the
// setups they model.

#include "model.hpp"

#include <string>

namespace pathkeeper::selector::testing {

inline Path makePath(std::string device, std::uint32_t minor, std::string wwid = "36001405aaaa",
                     PathState state = PathState::Up) {
  Path path;
  path.device = std::move(device);
  path.devt = DevT{8, minor};
  path.wwid = std::move(wwid);
  path.vendor = "APPLE";
  path.product = "Xserve RAID";
  path.sizeSectors = 2097152;
  path.state = state;
  return path;
}

inline Path withPriority(Path path, int priority) {
  path.priority = priority;
  return path;
}

inline Path withController(Path path, std::string controller) {
  path.controller = std::move(controller);
  return path;
}

inline Path withTpg(Path path, std::uint16_t tpg, AluaState alua) {
  path.targetPortGroup = tpg;
  path.alua = alua;
  path.priority = aluaPriority(alua, false);
  return path;
}

inline Path marginal(Path path) {
  path.marginal = true;
  return path;
}

} // namespace pathkeeper::selector::testing
