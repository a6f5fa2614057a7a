#pragma once

// An inventory written down as TOML: one [[path]] table per SCSI path. It
// lets `pathkeeperctl plan --inventory` answer "what would pathkeeper build
// for these paths" without a kernel, and gives tests and bug reports a
// readable way to describe a setup.

#include "expected.hpp"
#include "model.hpp"

#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief Parses an inventory file. Errors read "file:line:column: path[N].key: message".
Expected<std::vector<selector::Path>> parseInventory(std::string_view text,
                                                     std::string_view origin);

/// @brief Parses "10.10.1.20:3260,1", "[fd00::1]:3260,2" or "10.10.1.20" (port
/// 3260, tpgt 1), as iscsiadm prints portals.
Expected<selector::Portal> parsePortal(std::string_view text);

} // namespace pathkeeper::daemon
