#include "path_objects.hpp"

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

// The node the Path objects hang under: the parent of any Path object's path,
// so that bus_names.cpp stays the one place that lays the tree out.
std::string pathsPrefix() {
  auto path = objectPathOf(ObjectKind::Path, "");
  path.resize(path.rfind('/'));
  return path;
}

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
  } else {
    static_assert(std::is_same_v<T, std::uint32_t>, "a PathView field D-Bus has no type for");
    return "u";
  }
}

// sd-bus hands the getter what find() found: the object's PathView.
template <auto Field>
int get(sd_bus * /*bus*/, const char * /*path*/, const char * /*interface*/,
        const char * /*property*/, sd_bus_message *reply, void *userdata,
        sd_bus_error * /*error*/) noexcept {
  return append(reply, static_cast<const PathView *>(userdata)->*Field);
}

constexpr std::uint64_t kEmitsChange = SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE;
constexpr std::uint64_t kConst = SD_BUS_VTABLE_PROPERTY_CONST;

template <auto Field, std::uint64_t Flags> sd_bus_vtable property(const char *name) {
  using T = std::remove_cvref_t<decltype(std::declval<const PathView &>().*Field)>;
  return SD_BUS_PROPERTY(name, signatureOf<T>(), get<Field>, 0, Flags);
}

// org.pathkeeper.PathKeeper1.Path as in the XML, with the flags the generated
// adaptor gave it: the interface emits changes; Device, the key, is const.
const sd_bus_vtable kPathVtable[] = {
    SD_BUS_VTABLE_START(kEmitsChange),
    property<&PathView::device, kConst>("Device"),
    property<&PathView::devt, kEmitsChange>("DevT"),
    property<&PathView::map, kEmitsChange>("Map"),
    property<&PathView::state, kEmitsChange>("State"),
    property<&PathView::dmState, kEmitsChange>("DmState"),
    property<&PathView::checker, kEmitsChange>("Checker"),
    property<&PathView::failures, kEmitsChange>("Failures"),
    property<&PathView::shaky, kEmitsChange>("Shaky"),
    property<&PathView::latencyUs, kEmitsChange>("LatencyUs"),
    property<&PathView::alua, kEmitsChange>("Alua"),
    property<&PathView::wwid, kEmitsChange>("Wwid"),
    property<&PathView::target, kEmitsChange>("Target"),
    property<&PathView::portal, kEmitsChange>("Portal"),
    property<&PathView::netdev, kEmitsChange>("NetDev"),
    property<&PathView::controller, kEmitsChange>("Controller"),
    property<&PathView::sessionId, kEmitsChange>("SessionId"),
    property<&PathView::note, kEmitsChange>("Note"),
    property<&PathView::throughputBps, kEmitsChange>("ThroughputBytesPerSecond"),
    property<&PathView::capacityBps, kEmitsChange>("CapacityBytesPerSecond"),
    property<&PathView::ioLatencyUs, kEmitsChange>("IoLatencyUs"),
    property<&PathView::confidence, kEmitsChange>("Confidence"),
    property<&PathView::weight, kEmitsChange>("Weight"),
    SD_BUS_VTABLE_END,
};

void throwIfFailed(int result, std::string_view what, std::string_view path) {
  if (result < 0) {
    throw sdbus::createError(-result, fmt::format("Failed to {} for {}", what, path));
  }
}

} // namespace

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

struct PathObjects::Callbacks {
  static int find(sd_bus * /*bus*/, const char *path, const char * /*interface*/, void *userdata,
                  void **found, sd_bus_error * /*error*/) noexcept {
    const auto *view = static_cast<const PathObjects *>(userdata)->find(path);
    if (view == nullptr) {
      return 0;
    }
    *found = const_cast<PathView *>(view); // the getters only read it
    return 1;
  }

  // sd-bus asks for the children of @p prefix: every path object when it is
  // the paths node or one of its parents (GetManagedObjects, busctl tree),
  // none below it (introspecting one path). It frees the list (a
  // NULL-terminated, malloc'd strv).
  static int enumerate(sd_bus * /*bus*/, const char *prefix, void *userdata, char ***nodes,
                       sd_bus_error * /*error*/) noexcept {
    const auto &self = *static_cast<const PathObjects *>(userdata);
    const std::string_view asked{prefix};
    const bool parent = asked == "/" || asked == self.prefix_ ||
                        (self.prefix_.starts_with(asked) && self.prefix_[asked.size()] == '/');
    const std::size_t size = parent ? self.byDevice_.size() : 0;
    // NOLINTBEGIN(cppcoreguidelines-no-malloc,cppcoreguidelines-owning-memory)
    auto **list = static_cast<char **>(std::calloc(size + 1, sizeof(char *)));
    if (list == nullptr) {
      return -ENOMEM;
    }
    for (std::size_t i = 0; i < size; ++i) {
      list[i] = strdup(objectPathOf(ObjectKind::Path, self.byDevice_[i]->device).c_str());
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

void PathObjects::Slot::operator()(sd_bus_slot *slot) const noexcept {
  sd_bus_slot_unref(slot);
}

PathObjects::PathObjects(sd_bus *bus)
    : bus_(bus), prefix_(pathsPrefix()), shown_(std::make_shared<const daemon::StateSnapshot>()) {
  const auto &prefix = prefix_;
  sd_bus_slot *slot = nullptr;
  throwIfFailed(sd_bus_add_fallback_vtable(bus_, &slot, prefix.c_str(), kPathInterface, kPathVtable,
                                           &Callbacks::find, this),
                "register the Path interface", prefix);
  vtable_.reset(slot);
  slot = nullptr;
  throwIfFailed(
      sd_bus_add_node_enumerator(bus_, &slot, prefix.c_str(), &Callbacks::enumerate, this),
      "register the Path objects' enumerator", prefix);
  enumerator_.reset(slot);
}

PathObjects::~PathObjects() = default;

void PathObjects::show(daemon::SharedSnapshot snapshot) {
  shown_ = snapshot ? std::move(snapshot) : std::make_shared<const daemon::StateSnapshot>();
  byDevice_.clear();
  byDevice_.reserve(shown_->paths.size());
  for (const auto &view : shown_->paths) {
    byDevice_.push_back(&view);
  }
  std::ranges::sort(byDevice_, {}, &PathView::device); // the daemon's are sorted already
}

const PathView *PathObjects::findDevice(std::string_view device) const {
  const auto it = std::ranges::lower_bound(byDevice_, device, {}, &PathView::device);
  return it != byDevice_.end() && (*it)->device == device ? *it : nullptr;
}

const PathView *PathObjects::find(std::string_view objectPath) const {
  if (objectPath.size() <= prefix_.size() + 1 || !objectPath.starts_with(prefix_) ||
      objectPath[prefix_.size()] != '/') {
    return nullptr;
  }
  const auto element = objectPath.substr(prefix_.size() + 1);
  const auto device = unescapePathLabel(element);
  if (!device) {
    return nullptr; // below a path object, or not an escaped name
  }
  const auto *view = findDevice(*device);
  // One object path per device: another spelling of its name is no object.
  return view != nullptr && escapePathLabel(view->device) == element ? view : nullptr;
}

void PathObjects::emit(const std::string &device, std::string_view what,
                       const std::function<int(const char *objectPath)> &send) const {
  if (findDevice(device) == nullptr) {
    return; // not shown: there is no such object to announce
  }
  const auto path = objectPathOf(ObjectKind::Path, device);
  throwIfFailed(send(path.c_str()), what, path);
}

void PathObjects::add(const std::string &device) {
  emit(device, "emit InterfacesAdded",
       [this](const char *path) { return sd_bus_emit_object_added(bus_, path); });
}

void PathObjects::remove(const std::string &device) {
  emit(device, "emit InterfacesRemoved",
       [this](const char *path) { return sd_bus_emit_object_removed(bus_, path); });
}

void PathObjects::change(const std::string &device, const std::vector<std::string> &properties) {
  std::vector<char *> names;
  names.reserve(properties.size() + 1);
  for (const auto &name : properties) {
    names.push_back(const_cast<char *>(name.c_str())); // sd-bus only reads them
  }
  names.push_back(nullptr);
  emit(device, "emit PropertiesChanged", [&](const char *path) {
    return sd_bus_emit_properties_changed_strv(bus_, path, kPathInterface,
                                               properties.empty() ? nullptr : names.data());
  });
}

} // namespace pathkeeper::dbus
