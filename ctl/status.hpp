#pragma once

// pathkeeperctl status and watch: the published state as a topology (like
// multipath -ll) or JSON, and changes as one line each. Pure functions over
// the snapshot, so they are tested without a bus.

#include "dbus_client.hpp"
#include "state_model.hpp"

#include <string>

namespace pathkeeper::ctl {

/// @brief Maps, their groups and paths (state, dm state, controller,
/// NIC -> portal), then paths outside any map, then portals per NIC.
/// @p colour adds ANSI colours for states (only for a terminal).
[[nodiscard]] std::string statusToText(const daemon::StateSnapshot &snapshot, bool colour);

/// @brief The snapshot as JSON, schema 1 ({"schema":1,"maps":[...],...}).
[[nodiscard]] std::string statusToJson(const daemon::StateSnapshot &snapshot);

/// @brief One watch line: "+ path sdb", "- map mpatha", "path sdb: State=down DmState=failed".
[[nodiscard]] std::string changeToText(const BusChange &change);

/// @brief One watch event as a JSON line (for watch --json).
[[nodiscard]] std::string changeToJson(const BusChange &change);

} // namespace pathkeeper::ctl
