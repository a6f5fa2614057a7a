#pragma once

// The bus name, object paths and interface names of the pathkeeper D-Bus API
// (org.pathkeeper.PathKeeper1.xml), and the escaping that makes any device
// name, alias or portal a valid object path element.

#include "expected.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace pathkeeper::daemon {
struct PortalView;
}

namespace pathkeeper::dbus {

inline constexpr const char *kBusName = "org.pathkeeper.PathKeeper1";
inline constexpr const char *kRootPath = "/org/pathkeeper/PathKeeper1";
inline constexpr const char *kManagerInterface = "org.pathkeeper.PathKeeper1.Manager";
inline constexpr const char *kMapInterface = "org.pathkeeper.PathKeeper1.Map";
inline constexpr const char *kPathInterface = "org.pathkeeper.PathKeeper1.Path";
inline constexpr const char *kPortalInterface = "org.pathkeeper.PathKeeper1.Portal";
inline constexpr const char *kFindingInterface = "org.pathkeeper.PathKeeper1.Finding";
inline constexpr const char *kManageAction = "org.pathkeeper.PathKeeper1.manage";
/// @brief How long the daemon lets polkit decide on kManageAction:
/// interactive authentication waits for a person. A client of the managing
/// methods must wait longer, or it reports a failure for a call the daemon
/// then carries out once the admin has authenticated.
inline constexpr std::chrono::minutes kAuthorizationTimeout{2};

/// @brief Error names; the message always says what went wrong in words.
inline constexpr const char *kErrorNotFound = "org.pathkeeper.PathKeeper1.Error.NotFound";
inline constexpr const char *kErrorInvalidArgument =
    "org.pathkeeper.PathKeeper1.Error.InvalidArgument";
inline constexpr const char *kErrorFailed = "org.pathkeeper.PathKeeper1.Error.Failed";
inline constexpr const char *kErrorAccessDenied = "org.pathkeeper.PathKeeper1.Error.AccessDenied";

/// @brief The kinds of child objects under kRootPath.
enum class ObjectKind { Manager, Map, Path, Portal, Finding };

/// @brief The interface an object of @p kind carries.
[[nodiscard]] const char *interfaceOf(ObjectKind kind);

/// @brief Escapes @p label into one object path element, as systemd's
/// bus_label_escape(): bytes outside [A-Za-z0-9], and a leading digit, become
/// '_' and two lower-case hex digits; the empty label becomes "_".
[[nodiscard]] std::string escapePathLabel(std::string_view label);

/// @brief Reverses escapePathLabel(); fails on an element it cannot produce.
[[nodiscard]] Expected<std::string> unescapePathLabel(std::string_view element);

/// @brief The object path of the Map, Path, Portal or Finding keyed @p key (root for Manager).
[[nodiscard]] std::string objectPathOf(ObjectKind kind, std::string_view key);

/// @brief The key of a portal's object: "ADDRESS:PORT", "[ADDRESS]:PORT" for IPv6.
[[nodiscard]] std::string portalKey(const daemon::PortalView &portal);

} // namespace pathkeeper::dbus
