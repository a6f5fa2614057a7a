#pragma once

// How `pathkeeperctl plan` shows a plan: a multipath -ll style listing for
// people, and JSON (schema in pathkeeperctl(8) and README) for scripts.

#include "plan.hpp"

#include <string>

namespace pathkeeper::ctl {

/// @brief The JSON document `plan --json` prints; "schema": 1.
std::string planToJson(const selector::Plan &plan);

/// @brief The human listing, one block per map.
std::string planToText(const selector::Plan &plan);

} // namespace pathkeeper::ctl
