#include "snapshot_objects.hpp"

#include "bus_names.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <sdbus-c++/sdbus-c++.h>
#include <systemd/sd-bus.h>

namespace pathkeeper::dbus {
namespace {

using daemon::PathView;

// sdbus-c++ 1.2 keeps its sd_bus to itself. A Message holds its
// sd_bus_message as the protected member msg_ (a void *); a pointer to that
// member, formed in a derived class, reads it from any Message
// ([class.protected]). Should a later sdbus-c++ rename the member or change
// its type, this stops compiling. What it points to is sdbus-c++'s to
// decide: pathkeeper builds against sdbus-c++ 1.x (dbus/CMakeLists.txt),
// where it is the sd_bus_message.
struct MessageHandle : sdbus::Message {
  static_assert(std::is_same_v<decltype(MessageHandle::msg_), void *>,
                "sdbus::Message no longer holds its sd_bus_message as void *msg_");
  static sd_bus_message *of(const sdbus::Message &message) {
    return static_cast<sd_bus_message *>(message.*(&MessageHandle::msg_));
  }
};

// The node a kind's objects hang under: the parent of any of their paths,
// so that bus_names.cpp stays the one place that lays the tree out.
std::string nodeOf(ObjectKind kind) {
  auto path = objectPathOf(kind, "");
  path.resize(path.rfind('/'));
  return path;
}

using daemon::DecisionView;
using daemon::GroupView;
using daemon::MapView;

int append(sd_bus_message *reply, const std::string &value) {
  return sd_bus_message_append_basic(reply, 's', value.c_str());
}
int append(sd_bus_message *reply, bool value) {
  const int boolean = value ? 1 : 0; // D-Bus booleans travel as int
  return sd_bus_message_append_basic(reply, 'b', &boolean);
}
int append(sd_bus_message *reply, std::uint64_t value) {
  return sd_bus_message_append_basic(reply, 't', &value);
}
int append(sd_bus_message *reply, std::int64_t value) {
  return sd_bus_message_append_basic(reply, 'x', &value);
}
int append(sd_bus_message *reply, std::int32_t value) {
  return sd_bus_message_append_basic(reply, 'i', &value);
}
int append(sd_bus_message *reply, std::uint32_t value) {
  return sd_bus_message_append_basic(reply, 'u', &value);
}

// An array of @p signature elements, each appended by @p element; stops at
// the first error.
template <typename T, typename Element>
int appendArray(sd_bus_message *reply, const char *signature, const std::vector<T> &values,
                Element element) {
  int result = sd_bus_message_open_container(reply, 'a', signature);
  for (auto it = values.begin(); result >= 0 && it != values.end(); ++it) {
    result = element(*it);
  }
  return result < 0 ? result : sd_bus_message_close_container(reply);
}

int append(sd_bus_message *reply, const std::vector<std::string> &values) {
  return appendArray(reply, "s", values,
                     [reply](const std::string &value) { return append(reply, value); });
}

// A struct of @p fields, in order; stops at the first error.
template <typename... Fields>
int appendStruct(sd_bus_message *reply, const char *signature, const Fields &...fields) {
  int result = sd_bus_message_open_container(reply, 'r', signature);
  ((result = result < 0 ? result : append(reply, fields)), ...);
  return result < 0 ? result : sd_bus_message_close_container(reply);
}

// (number, priority, devices): a(uias).
int append(sd_bus_message *reply, const std::vector<GroupView> &groups) {
  return appendArray(reply, "(uias)", groups, [reply](const GroupView &group) {
    return appendStruct(reply, "uias", std::uint32_t{group.number}, std::int32_t{group.priority},
                        group.paths);
  });
}

// (seconds since the epoch, action, reason): a(xss).
int append(sd_bus_message *reply, const std::vector<DecisionView> &decisions) {
  return appendArray(reply, "(xss)", decisions, [reply](const DecisionView &decision) {
    return appendStruct(reply, "xss", std::int64_t{decision.at}, decision.action, decision.reason);
  });
}

template <typename T> constexpr const char *signatureOf() {
  if constexpr (std::is_same_v<T, std::string>) {
    return "s";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "b";
  } else if constexpr (std::is_same_v<T, std::uint64_t>) {
    return "t";
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return "x";
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return "i";
  } else if constexpr (std::is_same_v<T, std::vector<GroupView>>) {
    return "a(uias)";
  } else if constexpr (std::is_same_v<T, std::vector<DecisionView>>) {
    return "a(xss)";
  } else {
    static_assert(std::is_same_v<T, std::uint32_t>, "a view field D-Bus has no type for");
    return "u";
  }
}

template <typename Member> struct MemberOf;
template <typename Owner, typename T> struct MemberOf<T Owner::*> {
  using Class = Owner;
  using Type = T;
};

// sd-bus hands the getter what find() found: the object's view.
template <auto Field>
int get(sd_bus * /*bus*/, const char * /*path*/, const char * /*interface*/,
        const char * /*property*/, sd_bus_message *reply, void *userdata,
        sd_bus_error * /*error*/) noexcept {
  using Owner = typename MemberOf<decltype(Field)>::Class;
  return append(reply, static_cast<const Owner *>(userdata)->*Field);
}

constexpr std::uint64_t kEmitsChange = SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE;
constexpr std::uint64_t kConst = SD_BUS_VTABLE_PROPERTY_CONST;

// A property of a @p View: get<Field> reads the object find() found as
// one, so a field of another view must not compile into its vtable.
template <typename View, auto Field, std::uint64_t Flags> sd_bus_vtable property(const char *name) {
  static_assert(std::is_same_v<typename MemberOf<decltype(Field)>::Class, View>,
                "a field of another view in this vtable");
  using T = typename MemberOf<decltype(Field)>::Type;
  return SD_BUS_PROPERTY(name, signatureOf<T>(), get<Field>, 0, Flags);
}
template <auto Field, std::uint64_t Flags> sd_bus_vtable pathProperty(const char *name) {
  return property<PathView, Field, Flags>(name);
}
template <auto Field, std::uint64_t Flags> sd_bus_vtable mapProperty(const char *name) {
  return property<MapView, Field, Flags>(name);
}

// org.pathkeeper.PathKeeper1.Path as in the XML, with the flags the generated
// adaptor gave it: the interface emits changes; Device, the key, is const.
const sd_bus_vtable kPathVtable[] = {
    SD_BUS_VTABLE_START(kEmitsChange),
    pathProperty<&PathView::device, kConst>("Device"),
    pathProperty<&PathView::devt, kEmitsChange>("DevT"),
    pathProperty<&PathView::map, kEmitsChange>("Map"),
    pathProperty<&PathView::state, kEmitsChange>("State"),
    pathProperty<&PathView::dmState, kEmitsChange>("DmState"),
    pathProperty<&PathView::checker, kEmitsChange>("Checker"),
    pathProperty<&PathView::failures, kEmitsChange>("Failures"),
    pathProperty<&PathView::shaky, kEmitsChange>("Shaky"),
    pathProperty<&PathView::latencyUs, kEmitsChange>("LatencyUs"),
    pathProperty<&PathView::alua, kEmitsChange>("Alua"),
    pathProperty<&PathView::wwid, kEmitsChange>("Wwid"),
    pathProperty<&PathView::target, kEmitsChange>("Target"),
    pathProperty<&PathView::portal, kEmitsChange>("Portal"),
    pathProperty<&PathView::netdev, kEmitsChange>("NetDev"),
    pathProperty<&PathView::controller, kEmitsChange>("Controller"),
    pathProperty<&PathView::sessionId, kEmitsChange>("SessionId"),
    pathProperty<&PathView::note, kEmitsChange>("Note"),
    pathProperty<&PathView::throughputBps, kEmitsChange>("ThroughputBytesPerSecond"),
    pathProperty<&PathView::capacityBps, kEmitsChange>("CapacityBytesPerSecond"),
    pathProperty<&PathView::ioLatencyUs, kEmitsChange>("IoLatencyUs"),
    pathProperty<&PathView::confidence, kEmitsChange>("Confidence"),
    pathProperty<&PathView::weight, kEmitsChange>("Weight"),
    SD_BUS_VTABLE_END,
};

// org.pathkeeper.PathKeeper1.Map as in the XML: the interface emits
// changes; Alias, the key, is const.
const sd_bus_vtable kMapVtable[] = {
    SD_BUS_VTABLE_START(kEmitsChange),
    mapProperty<&MapView::alias, kConst>("Alias"),
    mapProperty<&MapView::wwid, kEmitsChange>("Wwid"),
    mapProperty<&MapView::dmUuid, kEmitsChange>("DmUuid"),
    mapProperty<&MapView::selector, kEmitsChange>("Selector"),
    mapProperty<&MapView::state, kEmitsChange>("State"),
    mapProperty<&MapView::activeGroup, kEmitsChange>("ActiveGroup"),
    mapProperty<&MapView::usablePaths, kEmitsChange>("UsablePaths"),
    mapProperty<&MapView::totalPaths, kEmitsChange>("TotalPaths"),
    mapProperty<&MapView::queueing, kEmitsChange>("Queueing"),
    mapProperty<&MapView::noPathRetry, kEmitsChange>("NoPathRetry"),
    mapProperty<&MapView::groups, kEmitsChange>("Groups"),
    mapProperty<&MapView::adaptive, kEmitsChange>("Adaptive"),
    mapProperty<&MapView::adaptiveReloads, kEmitsChange>("AdaptiveReloads"),
    mapProperty<&MapView::adaptiveDecisions, kEmitsChange>("AdaptiveDecisions"),
    SD_BUS_VTABLE_END,
};

void throwIfFailed(int result, std::string_view what, std::string_view path) {
  if (result < 0) {
    throw sdbus::createError(-result, fmt::format("Failed to {} for {}", what, path));
  }
}

} // namespace

sd_bus_message *sdBusMessageOf(const sdbus::Message &message) {
  return MessageHandle::of(message);
}

sd_bus *sdBusOf(sdbus::IConnection &connection) {
  // An unregistered object and a signal that is never sent: just a message
  // made on the connection's bus.
  auto probe = sdbus::createObject(connection, kRootPath);
  auto signal = probe->createSignal(kManagerInterface, "Unsent");
  sd_bus *bus = sd_bus_message_get_bus(MessageHandle::of(signal));
  const char *unique = nullptr;
  if (bus == nullptr || sd_bus_get_unique_name(bus, &unique) < 0 || unique == nullptr ||
      connection.getUniqueName() != unique) {
    throw sdbus::Error(kErrorFailed,
                       "cannot reach the sd_bus under this sdbus-c++ connection (pathkeeperd is "
                       "built for sdbus-c++ 1.2)");
  }
  return bus;
}

const sd_bus_vtable *PathKind::vtable() {
  return kPathVtable;
}

const sd_bus_vtable *MapKind::vtable() {
  return kMapVtable;
}

template <typename Kind> struct SnapshotObjects<Kind>::Callbacks {
  // What throws here (only allocation can) must not unwind through sd-bus.
  static int find(sd_bus * /*bus*/, const char *path, const char * /*interface*/, void *userdata,
                  void **found, sd_bus_error * /*error*/) noexcept {
    try {
      const auto *view = static_cast<const SnapshotObjects *>(userdata)->find(path);
      if (view == nullptr) {
        return 0;
      }
      *found = const_cast<View *>(view); // the getters only read it
      return 1;
    } catch (...) {
      return -ENOMEM;
    }
  }

  // sd-bus asks for the children of @p prefix: every object when it is the
  // kind's node or one of its parents (GetManagedObjects, busctl tree), none
  // below it (introspecting one object). It frees the list (a
  // NULL-terminated, malloc'd strv).
  static int enumerate(sd_bus * /*bus*/, const char *prefix, void *userdata, char ***nodes,
                       sd_bus_error * /*error*/) noexcept {
    const auto &self = *static_cast<const SnapshotObjects *>(userdata);
    const std::string_view asked{prefix};
    const bool parent = asked == "/" || asked == self.prefix_ ||
                        (self.prefix_.starts_with(asked) && self.prefix_[asked.size()] == '/');
    const std::size_t size = parent ? self.byKey_.size() : 0;
    // NOLINTBEGIN(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory)
    auto **list = static_cast<char **>(std::calloc(size + 1, sizeof(char *)));
    if (list == nullptr) {
      return -ENOMEM;
    }
    for (std::size_t i = 0; i < size; ++i) {
      try {
        list[i] = strdup(objectPathOf(Kind::kKind, Kind::key(*self.byKey_[i])).c_str());
      } catch (...) {
        list[i] = nullptr;
      }
      if (list[i] == nullptr) {
        for (std::size_t j = 0; j < i; ++j) {
          std::free(list[j]);
        }
        std::free(list);
        return -ENOMEM;
      }
    }
    // NOLINTEND(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory)
    *nodes = list;
    return 0;
  }
};

template <typename Kind>
void SnapshotObjects<Kind>::Slot::operator()(sd_bus_slot *slot) const noexcept {
  sd_bus_slot_unref(slot);
}

template <typename Kind>
SnapshotObjects<Kind>::SnapshotObjects(sd_bus *bus)
    : bus_(bus), prefix_(nodeOf(Kind::kKind)),
      shown_(std::make_shared<const daemon::StateSnapshot>()) {
  const auto &prefix = prefix_;
  const char *interface = interfaceOf(Kind::kKind);
  sd_bus_slot *slot = nullptr;
  throwIfFailed(sd_bus_add_fallback_vtable(bus_, &slot, prefix.c_str(), interface, Kind::vtable(),
                                           &Callbacks::find, this),
                fmt::format("register {}", interface), prefix);
  vtable_.reset(slot);
  slot = nullptr;
  throwIfFailed(
      sd_bus_add_node_enumerator(bus_, &slot, prefix.c_str(), &Callbacks::enumerate, this),
      "register the objects' enumerator", prefix);
  enumerator_.reset(slot);
}

template <typename Kind> SnapshotObjects<Kind>::~SnapshotObjects() = default;

template <typename Kind> void SnapshotObjects<Kind>::show(daemon::SharedSnapshot snapshot) {
  if (!snapshot) {
    snapshot = std::make_shared<const daemon::StateSnapshot>();
  }
  // Built aside and swapped in with the snapshot: a throw (out of memory)
  // leaves the old snapshot served whole.
  const auto &views = Kind::views(*snapshot);
  std::vector<const View *> byKey;
  byKey.reserve(views.size());
  for (const auto &view : views) {
    byKey.push_back(&view);
  }
  // The daemon's are sorted already; stable, so that of two equal keys (a
  // bug) the first is served, as diffSnapshots() takes the first.
  std::ranges::stable_sort(
      byKey, {}, [](const View *view) -> const std::string & { return Kind::key(*view); });
  shown_ = std::move(snapshot);
  byKey_ = std::move(byKey);
}

template <typename Kind>
auto SnapshotObjects<Kind>::findKey(std::string_view key) const -> const View * {
  const auto it = std::ranges::lower_bound(
      byKey_, key, {}, [](const View *view) -> const std::string & { return Kind::key(*view); });
  return it != byKey_.end() && Kind::key(**it) == key ? *it : nullptr;
}

template <typename Kind>
auto SnapshotObjects<Kind>::find(std::string_view objectPath) const -> const View * {
  if (objectPath.size() <= prefix_.size() + 1 || !objectPath.starts_with(prefix_) ||
      objectPath[prefix_.size()] != '/') {
    return nullptr;
  }
  const auto element = objectPath.substr(prefix_.size() + 1);
  const auto key = unescapePathLabel(element);
  if (!key) {
    return nullptr; // below an object, or not an escaped name
  }
  const auto *view = findKey(*key);
  // One object path per key: another spelling of it is no object.
  return view != nullptr && escapePathLabel(Kind::key(*view)) == element ? view : nullptr;
}

template <typename Kind>
void SnapshotObjects<Kind>::emit(const std::string &key, std::string_view what,
                                 const std::function<int(const char *objectPath)> &send) const {
  if (findKey(key) == nullptr) {
    return; // not shown: there is no such object to announce
  }
  const auto path = objectPathOf(Kind::kKind, key);
  throwIfFailed(send(path.c_str()), what, path);
}

template <typename Kind> void SnapshotObjects<Kind>::add(const std::string &key) {
  emit(key, "emit InterfacesAdded",
       [this](const char *path) { return sd_bus_emit_object_added(bus_, path); });
}

template <typename Kind> void SnapshotObjects<Kind>::remove(const std::string &key) {
  emit(key, "emit InterfacesRemoved",
       [this](const char *path) { return sd_bus_emit_object_removed(bus_, path); });
}

template <typename Kind>
void SnapshotObjects<Kind>::change(const std::string &key,
                                   const std::vector<std::string> &properties) {
  std::vector<char *> names;
  names.reserve(properties.size() + 1);
  for (const auto &name : properties) {
    names.push_back(const_cast<char *>(name.c_str())); // sd-bus only reads them
  }
  names.push_back(nullptr);
  emit(key, "emit PropertiesChanged", [&](const char *path) {
    return sd_bus_emit_properties_changed_strv(bus_, path, interfaceOf(Kind::kKind),
                                               properties.empty() ? nullptr : names.data());
  });
}

template class SnapshotObjects<PathKind>;
template class SnapshotObjects<MapKind>;

} // namespace pathkeeper::dbus
