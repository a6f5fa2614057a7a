#pragma once

// pathkeeperctl's D-Bus commands: status, watch, fail-path, reinstate-path,
// switch-group, set-selector, reconfigure and rescan. They talk to
// pathkeeperd on the system bus (DBUS_SYSTEM_BUS_ADDRESS overrides it).

#include <cstddef>
#include <string>
#include <vector>

namespace pathkeeper::ctl {

/// @brief The usage text of the D-Bus commands, for pathkeeperctl help.
extern const char *const kDbusCommandsUsage;

/// @brief True for the commands runDbusCommand() handles.
[[nodiscard]] bool isDbusCommand(const std::string &command);

/// @brief Runs @p command with the options args[i...]; returns the exit
/// status: 0 done, 1 failed, 2 bad usage, 3 daemon not running or no bus,
/// 4 not allowed.
int runDbusCommand(const std::string &command, const std::vector<std::string> &args, std::size_t i);

} // namespace pathkeeper::ctl
