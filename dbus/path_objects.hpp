#pragma once

// The Path objects (/org/pathkeeper/PathKeeper1/paths/<device>), the only
// objects counted in thousands, served by one sd-bus fallback vtable.
//
// Why not a generated sdbus-c++ adaptor per path, like the Map, Portal and
// Finding objects: sdbus-c++ 1.2 (Debian 12's) registers a vtable per object,
// and at 1000 paths that registration alone was 10.6 MiB of pathkeeperd's
// 15.4 MiB live heap (a map node per property in sdbus-c++, an sd-bus member
// entry per property and path; bench/README.md). sd-bus can serve a whole
// subtree from one vtable (sd_bus_add_fallback_vtable) with a node enumerator,
// which sdbus-c++ 1.2 does not offer, so this class registers them on the
// connection's own sd_bus. The interface is org.pathkeeper.PathKeeper1.Path
// exactly as in the XML, which the D-Bus host tests compare it against; what
// a client sees (introspection, Properties, GetManagedObjects, the
// ObjectManager's and PropertiesChanged signals) is unchanged.
//
// Everything runs on the thread that processes the connection: sd-bus calls
// the vtable from sdbus-c++'s processPendingRequest(), and the emitting
// methods must be called there too.

#include "state_model.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

struct sd_bus;
struct sd_bus_slot;

namespace sdbus {
class IConnection;
}

namespace pathkeeper::dbus {

/// @brief The sd_bus under @p connection (sdbus-c++ 1.x). Throws
/// sdbus::Error when the bus found is not the connection's.
[[nodiscard]] sd_bus *sdBusOf(sdbus::IConnection &connection);

/// @brief The Path objects. Not copyable or movable: sd-bus holds its address.
class PathObjects {
public:
  /// @brief Registers the vtable and the enumerator under kRootPath/paths on
  /// @p bus, which must outlive this object. Throws sdbus::Error on failure.
  explicit PathObjects(sd_bus *bus);
  ~PathObjects();
  PathObjects(const PathObjects &) = delete;
  PathObjects &operator=(const PathObjects &) = delete;

  /// @brief Adds @p view's object and emits InterfacesAdded.
  void add(const daemon::PathView &view);
  /// @brief Emits InterfacesRemoved for @p device's object and removes it.
  void remove(const std::string &device);
  /// @brief Makes @p view the object's state and emits PropertiesChanged for
  /// @p properties (all properties that emit changes when empty).
  void change(const daemon::PathView &view, const std::vector<std::string> &properties);

  /// @brief How many objects there are.
  [[nodiscard]] std::size_t size() const { return views_.size(); }

private:
  struct Slot {
    void operator()(sd_bus_slot *slot) const noexcept;
  };

  struct Callbacks; ///< what sd-bus calls: the vtable's find and the enumerator

  sd_bus *bus_;
  std::string prefix_;                                         ///< kRootPath/paths
  std::map<std::string, daemon::PathView, std::less<>> views_; ///< by object path
  std::unique_ptr<sd_bus_slot, Slot> vtable_;
  std::unique_ptr<sd_bus_slot, Slot> enumerator_;
};

} // namespace pathkeeper::dbus
