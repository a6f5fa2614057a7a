#pragma once

// What a new snapshot changes on the bus, as a pure function: objects that
// appear (InterfacesAdded), objects that go (InterfacesRemoved) and, for the
// objects that stay, the D-Bus properties whose value changed
// (PropertiesChanged). The publisher only carries the list out, so the rules
// are tested here without a bus.

#include "bus_names.hpp"
#include "state_model.hpp"

#include <string>
#include <vector>

namespace pathkeeper::dbus {

/// @brief One thing the bus must hear about.
struct ObjectChange {
  enum class Type { Added, Removed, PropertiesChanged };
  Type type = Type::PropertiesChanged;
  ObjectKind kind = ObjectKind::Manager;
  std::string key;                     ///< alias, device or portalKey(); "" for the Manager
  std::vector<std::string> properties; ///< D-Bus names, for PropertiesChanged only

  bool operator==(const ObjectChange &) const = default;
};

/// @brief The changes that turn @p before into @p after on the bus. Order:
/// for maps, then paths, then portals, then findings: removals, additions, property changes
/// (each by key); the Manager's properties last, so that Status follows the
/// details it summarises. Empty when nothing a client can see changed.
[[nodiscard]] std::vector<ObjectChange> diffSnapshots(const daemon::StateSnapshot &before,
                                                      const daemon::StateSnapshot &after);

/// @brief The D-Bus properties in which two views of one map differ.
[[nodiscard]] std::vector<std::string> changedProperties(const daemon::MapView &before,
                                                         const daemon::MapView &after);
/// @brief The D-Bus properties in which two views of one path differ.
[[nodiscard]] std::vector<std::string> changedProperties(const daemon::PathView &before,
                                                         const daemon::PathView &after);
/// @brief The D-Bus properties in which two views of one portal differ.
[[nodiscard]] std::vector<std::string> changedProperties(const daemon::PortalView &before,
                                                         const daemon::PortalView &after);
/// @brief The D-Bus properties in which two views of one finding differ.
[[nodiscard]] std::vector<std::string> changedProperties(const daemon::FindingView &before,
                                                         const daemon::FindingView &after);

} // namespace pathkeeper::dbus
