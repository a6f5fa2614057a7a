#pragma once

// Splitting one LUN's paths into priority groups, and ordering the groups the
// way multipathd does so that both daemons agree on the active group.

#include "config.hpp"
#include "model.hpp"

#include <vector>

namespace pathkeeper::selector {

/// @brief Splits the paths of one map into groups by @p policy, then orders
/// the groups (see sortGroups). Paths within a group are ordered by dev_t so
/// the table is stable across rescans.
std::vector<PathGroup> groupPaths(std::vector<Path> paths, GroupingPolicy policy);

/// @brief multipathd's group order, stable for ties: non-marginal groups
/// first, then higher group priority, then more usable paths.
void sortGroups(std::vector<PathGroup> &groups);

/// @brief The key group_by_controller uses for a path: its configured
/// controller label, else its ALUA target port group ("tpg<N>"), else "".
std::string controllerKey(const Path &path);

} // namespace pathkeeper::selector
