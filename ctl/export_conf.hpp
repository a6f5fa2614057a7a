#pragma once

// `pathkeeperctl export multipath-conf`: the multipath.conf that makes
// multipath-tools 0.9.4's multipathd build the maps pathkeeper plans, with
// the same WWIDs, aliases, selector, failback and queueing, and as close a
// grouping as multipathd can express. Pure: plan and config in, text out.

#include "config.hpp"
#include "plan.hpp"

#include <string>

namespace pathkeeper::ctl {

/// @brief A complete multipath.conf for multipath-tools 0.9.4: a defaults
/// section with find_multipaths off, a blacklist of every WWID with an
/// exception per planned map (so that multipathd builds exactly the planned
/// maps), a devices section for the device entries and hardware handlers the
/// maps rely on, and one multipaths entry per map. A map whose groups
/// multipathd cannot reproduce (grouping by controller label without
/// distinct ALUA priorities) gets a comment saying so and the closest policy.
/// @param plan the plan `pathkeeperctl plan` prints for the same inputs.
/// @param config the configuration the plan was made with.
std::string exportMultipathConf(const selector::Plan &plan, const selector::Config &config);

} // namespace pathkeeper::ctl
