#pragma once

// The Path objects (/org/pathkeeper/PathKeeper1/paths/<device>) and the Map
// objects (.../maps/<alias>), the objects counted in hundreds and thousands,
// each kind served by one sd-bus fallback vtable.
//
// Why not a generated sdbus-c++ adaptor per object, like the Portal and
// Finding objects: sdbus-c++ 1.2 (Debian 12's) registers a vtable per object,
// and at 1000 paths that registration alone was 10.6 MiB of pathkeeperd's
// 15.4 MiB live heap (a map node per property in sdbus-c++, an sd-bus member
// entry per property and path; bench/README.md), and the 250 Map objects'
// another 1.2 MiB. sd-bus can serve a whole subtree from one vtable
// (sd_bus_add_fallback_vtable) with a node enumerator, which sdbus-c++ 1.2
// does not offer, so this class registers them on the connection's own
// sd_bus. The interfaces are org.pathkeeper.PathKeeper1.Path and .Map exactly
// as in the XML, which the D-Bus host tests compare them against; what a
// client sees (introspection, Properties, GetManagedObjects, the
// ObjectManager's and PropertiesChanged signals) is unchanged.
//
// The objects are the paths (maps) of the snapshot shown (show()), and their
// properties are read from it: no copy of the views is kept here.
//
// Everything runs on the thread that processes the connection: sd-bus calls
// the vtable from sdbus-c++'s processPendingRequest(), and the emitting
// methods must be called there too.

#include "bus_names.hpp"
#include "state_model.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct sd_bus;
struct sd_bus_message;
struct sd_bus_slot;
struct sd_bus_vtable;

namespace sdbus {
class IConnection;
class Message;
} // namespace sdbus

namespace pathkeeper::dbus {

/// @brief The sd_bus under @p connection (sdbus-c++ 1.x). Throws
/// sdbus::Error when the bus found is not the connection's.
[[nodiscard]] sd_bus *sdBusOf(sdbus::IConnection &connection);

/// @brief The sd_bus_message under @p message (sdbus-c++ 1.x), for what
/// sdbus-c++ 1.2 does not offer: the ALLOW_INTERACTIVE_AUTHORIZATION flag.
[[nodiscard]] sd_bus_message *sdBusMessageOf(const sdbus::Message &message);

/// @brief What SnapshotObjects needs to know of the Path objects.
struct PathKind {
  using View = daemon::PathView;
  static constexpr ObjectKind kKind = ObjectKind::Path;
  static const std::vector<View> &views(const daemon::StateSnapshot &snapshot) {
    return snapshot.paths;
  }
  static const std::string &key(const View &view) { return view.device; }
  static const sd_bus_vtable *vtable();
};

/// @brief What SnapshotObjects needs to know of the Map objects.
struct MapKind {
  using View = daemon::MapView;
  static constexpr ObjectKind kKind = ObjectKind::Map;
  static const std::vector<View> &views(const daemon::StateSnapshot &snapshot) {
    return snapshot.maps;
  }
  static const std::string &key(const View &view) { return view.alias; }
  static const sd_bus_vtable *vtable();
};

/// @brief One kind's objects, served from the snapshot shown. Not copyable
/// or movable: sd-bus holds its address.
template <typename Kind> class SnapshotObjects {
public:
  using View = typename Kind::View;

  /// @brief Registers the vtable and the enumerator under the kind's node
  /// (kRootPath/paths, kRootPath/maps) on @p bus, which must outlive this
  /// object. Throws sdbus::Error on failure.
  explicit SnapshotObjects(sd_bus *bus);
  ~SnapshotObjects();
  SnapshotObjects(const SnapshotObjects &) = delete;
  SnapshotObjects &operator=(const SnapshotObjects &) = delete;

  /// @brief Serves @p snapshot's objects from now on (kept until the next).
  /// Emits nothing: the publisher announces what changed, removals before
  /// (they list the interfaces of an object still served), the rest after.
  void show(daemon::SharedSnapshot snapshot);

  /// @brief Emits InterfacesAdded for @p key, an object of the snapshot shown.
  void add(const std::string &key);
  /// @brief Emits InterfacesRemoved for @p key, an object of the snapshot
  /// shown (so, before the snapshot without it is shown).
  void remove(const std::string &key);
  /// @brief Emits PropertiesChanged for @p properties of @p key (all
  /// properties that emit changes when empty).
  void change(const std::string &key, const std::vector<std::string> &properties);

  /// @brief How many objects there are.
  [[nodiscard]] std::size_t size() const { return byKey_.size(); }

private:
  struct Slot {
    void operator()(sd_bus_slot *slot) const noexcept;
  };

  struct Callbacks; ///< what sd-bus calls: the vtable's find and the enumerator

  /// @brief The view shown for the object at @p objectPath; null when none.
  [[nodiscard]] const View *find(std::string_view objectPath) const;
  /// @brief The view shown under @p key; null when none.
  [[nodiscard]] const View *findKey(std::string_view key) const;
  /// @brief Emits for @p key's object; throws sdbus::Error when that fails.
  void emit(const std::string &key, std::string_view what,
            const std::function<int(const char *objectPath)> &send) const;

  sd_bus *bus_;
  std::string prefix_;              ///< kRootPath/paths or kRootPath/maps
  daemon::SharedSnapshot shown_;    ///< never null
  std::vector<const View *> byKey_; ///< shown_'s objects, sorted by key
  std::unique_ptr<sd_bus_slot, Slot> vtable_;
  std::unique_ptr<sd_bus_slot, Slot> enumerator_;
};

using PathObjects = SnapshotObjects<PathKind>;
using MapObjects = SnapshotObjects<MapKind>;

extern template class SnapshotObjects<PathKind>;
extern template class SnapshotObjects<MapKind>;

} // namespace pathkeeper::dbus
