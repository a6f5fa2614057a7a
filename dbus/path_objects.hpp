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
// The objects are the paths of the snapshot shown (show()), and their
// properties are read from it: no copy of the views is kept here.
//
// Everything runs on the thread that processes the connection: sd-bus calls
// the vtable from sdbus-c++'s processPendingRequest(), and the emitting
// methods must be called there too.

#include "state_model.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
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

  /// @brief Serves @p snapshot's paths from now on (kept until the next).
  /// Emits nothing: the publisher announces what changed, removals before
  /// (they list the interfaces of an object still served), the rest after.
  void show(daemon::SharedSnapshot snapshot);

  /// @brief Emits InterfacesAdded for @p device, a path of the snapshot shown.
  void add(const std::string &device);
  /// @brief Emits InterfacesRemoved for @p device, a path of the snapshot
  /// shown (so, before the snapshot without it is shown).
  void remove(const std::string &device);
  /// @brief Emits PropertiesChanged for @p properties of @p device (all
  /// properties that emit changes when empty).
  void change(const std::string &device, const std::vector<std::string> &properties);

  /// @brief How many objects there are.
  [[nodiscard]] std::size_t size() const { return byDevice_.size(); }

private:
  struct Slot {
    void operator()(sd_bus_slot *slot) const noexcept;
  };

  struct Callbacks; ///< what sd-bus calls: the vtable's find and the enumerator

  /// @brief The path shown for the object at @p objectPath; null when none.
  [[nodiscard]] const daemon::PathView *find(std::string_view objectPath) const;
  /// @brief The path shown as @p device; null when none.
  [[nodiscard]] const daemon::PathView *findDevice(std::string_view device) const;
  /// @brief Emits for @p device's object; throws sdbus::Error when that fails.
  void emit(const std::string &device, std::string_view what,
            const std::function<int(const char *objectPath)> &send) const;

  sd_bus *bus_;
  std::string prefix_;                             ///< kRootPath/paths
  daemon::SharedSnapshot shown_;                   ///< never null
  std::vector<const daemon::PathView *> byDevice_; ///< shown_'s paths, sorted
  std::unique_ptr<sd_bus_slot, Slot> vtable_;
  std::unique_ptr<sd_bus_slot, Slot> enumerator_;
};

} // namespace pathkeeper::dbus
