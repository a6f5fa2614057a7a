#pragma once

// The checks a Manager method's arguments get against the published state
// before the daemon sees them, so that callers get NotFound or
// InvalidArgument with a precise message rather than a generic failure.
// Pure functions, tested without a bus.

#include "state_model.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace pathkeeper::dbus {

/// @brief A D-Bus error to return: its name (bus_names.hpp) and a readable message.
struct MethodError {
  std::string name;
  std::string message;

  bool operator==(const MethodError &) const = default;
};

/// @brief NotFound unless @p device is a published path.
[[nodiscard]] std::optional<MethodError> checkPathExists(const daemon::StateSnapshot &snapshot,
                                                         const std::string &device);
/// @brief NotFound unless @p map is a published map.
[[nodiscard]] std::optional<MethodError> checkMapExists(const daemon::StateSnapshot &snapshot,
                                                        const std::string &map);
/// @brief NotFound for an unknown map, InvalidArgument for a group it lacks.
[[nodiscard]] std::optional<MethodError> checkGroup(const daemon::StateSnapshot &snapshot,
                                                    const std::string &map, std::uint32_t group);
/// @brief NotFound for an unknown map, InvalidArgument for a name that is no
/// selector. A selector this kernel lacks is the daemon's to refuse (Failed,
/// from Commands::setSelector).
[[nodiscard]] std::optional<MethodError> checkSelector(const daemon::StateSnapshot &snapshot,
                                                       const std::string &map,
                                                       const std::string &selector);
/// @brief The error for a command the daemon refused: Failed, with its message.
[[nodiscard]] MethodError commandFailed(const std::string &what, const std::string &reason);

} // namespace pathkeeper::dbus
