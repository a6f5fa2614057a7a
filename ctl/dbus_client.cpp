#include "dbus_client.hpp"

#include "bus_names.hpp"
#include "snapshot_objects.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sdbus-c++/sdbus-c++.h>
#include <systemd/sd-bus.h>

#include "pathkeeper1_proxy.h"

namespace pathkeeper::ctl {
namespace {

namespace gen = org::pathkeeper::PathKeeper1;
using GroupsValue =
    std::vector<sdbus::Struct<std::uint32_t, std::int32_t, std::vector<std::string>>>;
using DecisionsValue = std::vector<sdbus::Struct<std::int64_t, std::string, std::string>>;

// The proxy bases' destructors are protected and non-virtual; this final
// class is owned as itself, never deleted through a base.
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class RootProxy final
    : public sdbus::ProxyInterfaces<gen::Manager_proxy, sdbus::ObjectManager_proxy> {
public:
  explicit RootProxy(sdbus::IConnection &connection)
      : ProxyInterfaces(connection, dbus::kBusName, dbus::kRootPath) {
    registerProxy();
  }
  ~RootProxy() { unregisterProxy(); }
  RootProxy(const RootProxy &) = delete;
  RootProxy &operator=(const RootProxy &) = delete;

  std::function<void(const BusChange &)> onChange;
  /// For calls the generated methods cannot make (a timeout of their own).
  sdbus::IProxy &proxy() { return getProxy(); }

private:
  void onInterfacesAdded(const sdbus::ObjectPath &objectPath,
                         const std::map<std::string, PropertyMap> &interfaces) override {
    if (!onChange) {
      return;
    }
    for (const auto &[interface, properties] : interfaces) {
      if (interface.starts_with(dbus::kBusName)) {
        onChange({BusChange::Type::Added, objectPath, interface, properties, {}});
      }
    }
  }
  void onInterfacesRemoved(const sdbus::ObjectPath &objectPath,
                           const std::vector<std::string> &interfaces) override {
    if (!onChange) {
      return;
    }
    for (const auto &interface : interfaces) {
      if (interface.starts_with(dbus::kBusName)) {
        onChange({BusChange::Type::Removed, objectPath, interface, {}, {}});
      }
    }
  }
};

template <typename T> T get(const PropertyMap &properties, const char *name, T fallback = T{}) {
  auto it = properties.find(name);
  if (it == properties.end() || !it->second.containsValueOfType<T>()) {
    return fallback;
  }
  return it->second.get<T>();
}

daemon::MapView mapFrom(const PropertyMap &p) {
  daemon::MapView map;
  map.alias = get<std::string>(p, "Alias");
  map.wwid = get<std::string>(p, "Wwid");
  map.dmUuid = get<std::string>(p, "DmUuid");
  map.selector = get<std::string>(p, "Selector");
  map.state = get<std::string>(p, "State");
  map.activeGroup = get<std::uint32_t>(p, "ActiveGroup");
  map.usablePaths = get<std::uint32_t>(p, "UsablePaths");
  map.totalPaths = get<std::uint32_t>(p, "TotalPaths");
  map.queueing = get<bool>(p, "Queueing");
  map.noPathRetry = get<std::string>(p, "NoPathRetry");
  for (const auto &group : get<GroupsValue>(p, "Groups")) {
    map.groups.push_back({std::get<0>(group), std::get<1>(group), std::get<2>(group)});
  }
  map.adaptive = get<std::string>(p, "Adaptive", "off");
  map.adaptiveReloads = get<std::uint32_t>(p, "AdaptiveReloads");
  for (const auto &decision : get<DecisionsValue>(p, "AdaptiveDecisions")) {
    map.adaptiveDecisions.push_back(
        {std::get<0>(decision), std::get<1>(decision), std::get<2>(decision)});
  }
  return map;
}

daemon::PathView pathFrom(const PropertyMap &p) {
  daemon::PathView path;
  path.device = get<std::string>(p, "Device");
  path.devt = get<std::string>(p, "DevT");
  path.map = get<std::string>(p, "Map");
  path.state = get<std::string>(p, "State");
  path.dmState = get<std::string>(p, "DmState");
  path.checker = get<std::string>(p, "Checker");
  path.failures = get<std::uint64_t>(p, "Failures");
  path.shaky = get<bool>(p, "Shaky");
  path.latencyUs = get<std::int64_t>(p, "LatencyUs", -1);
  path.alua = get<std::string>(p, "Alua");
  path.wwid = get<std::string>(p, "Wwid");
  path.target = get<std::string>(p, "Target");
  path.portal = get<std::string>(p, "Portal");
  path.netdev = get<std::string>(p, "NetDev");
  path.controller = get<std::string>(p, "Controller");
  path.sessionId = get<std::int32_t>(p, "SessionId", -1);
  path.note = get<std::string>(p, "Note");
  path.throughputBps = get<std::uint64_t>(p, "ThroughputBytesPerSecond");
  path.capacityBps = get<std::uint64_t>(p, "CapacityBytesPerSecond");
  path.ioLatencyUs = get<std::int64_t>(p, "IoLatencyUs", -1);
  path.confidence = get<std::uint32_t>(p, "Confidence");
  path.weight = get<std::uint32_t>(p, "Weight");
  return path;
}

daemon::PortalView portalFrom(const PropertyMap &p) {
  daemon::PortalView portal;
  portal.address = get<std::string>(p, "Address");
  portal.port = get<std::uint16_t>(p, "Port", 3260);
  portal.reachability = get<std::map<std::string, std::string>>(p, "Reachability");
  return portal;
}

/// @brief A Finding object's view; its key is the object path's last
/// element, unescaped ("" when that element is not one the daemon makes).
daemon::FindingView findingFrom(const std::string &objectPath, const PropertyMap &p) {
  daemon::FindingView finding;
  const auto element = std::string_view(objectPath).substr(objectPath.rfind('/') + 1);
  if (auto key = dbus::unescapePathLabel(element)) {
    finding.key = *key;
  }
  finding.id = get<std::string>(p, "Id");
  finding.severity = get<std::string>(p, "Severity");
  finding.summary = get<std::string>(p, "Summary");
  finding.explanation = get<std::string>(p, "Explanation");
  finding.nics = get<std::vector<std::string>>(p, "NetDevs");
  finding.portals = get<std::vector<std::string>>(p, "Portals");
  finding.paths = get<std::vector<std::string>>(p, "Paths");
  finding.fix = get<std::vector<std::string>>(p, "Fix");
  return finding;
}

} // namespace

struct DaemonClient::Proxies {
  explicit Proxies(sdbus::IConnection &bus) : connection(bus), root(bus) {}
  sdbus::IConnection &connection;
  RootProxy root;
  sdbus::Slot propertiesMatch;
};

DaemonClient::DaemonClient(sdbus::IConnection &connection)
    : proxies_(std::make_unique<Proxies>(connection)) {}

DaemonClient::~DaemonClient() = default;

ManagedObjects DaemonClient::managedObjects() {
  return proxies_->root.GetManagedObjects();
}

daemon::StateSnapshot DaemonClient::snapshot() {
  PropertyMap manager;
  manager["Version"] = sdbus::Variant(proxies_->root.Version());
  manager["Mode"] = sdbus::Variant(proxies_->root.Mode());
  manager["Status"] = sdbus::Variant(proxies_->root.Status());
  return snapshotFromBus(managedObjects(), manager);
}

namespace {

// The managing methods may wait for polkit, and polkit for a person typing
// a password: the daemon allows dbus::kAuthorizationTimeout. sd-bus's default
// of 25 s would give up first and report a failure for a call the daemon
// then carries out.
constexpr auto kManageTimeout = dbus::kAuthorizationTimeout + std::chrono::seconds(30);

template <typename... Args>
void manage(sdbus::IProxy &proxy, bool interactive, const char *method, const Args &...args) {
  auto call = proxy.createMethodCall(dbus::kManagerInterface, method);
  if constexpr (sizeof...(args) > 0) {
    (call << ... << args);
  }
  // Whoever runs pathkeeperctl can answer polkit's password prompt (an
  // agent in their session), so unless told otherwise (--no-ask-password)
  // the daemon may have polkit ask, as for systemctl; without the flag it
  // answers InteractiveAuthorizationRequired.
  if (const int r = sd_bus_message_set_allow_interactive_authorization(dbus::sdBusMessageOf(call),
                                                                       interactive ? 1 : 0);
      r < 0) {
    throw sdbus::createError(-r, "cannot allow interactive authorization on the call");
  }
  static_cast<void>(proxy.callMethod(call, kManageTimeout));
}

} // namespace

void DaemonClient::reconfigure() {
  manage(proxies_->root.proxy(), interactive_, "Reconfigure");
}
void DaemonClient::failPath(const std::string &device) {
  manage(proxies_->root.proxy(), interactive_, "FailPath", device);
}
void DaemonClient::reinstatePath(const std::string &device) {
  manage(proxies_->root.proxy(), interactive_, "ReinstatePath", device);
}
void DaemonClient::switchGroup(const std::string &map, unsigned group) {
  manage(proxies_->root.proxy(), interactive_, "SwitchGroup", map,
         static_cast<std::uint32_t>(group));
}
void DaemonClient::disableQueueing(const std::string &map) {
  manage(proxies_->root.proxy(), interactive_, "DisableQueueing", map);
}
void DaemonClient::restoreQueueing(const std::string &map) {
  manage(proxies_->root.proxy(), interactive_, "RestoreQueueing", map);
}
void DaemonClient::setSelector(const std::string &map, const std::string &selector) {
  manage(proxies_->root.proxy(), interactive_, "SetSelector", map, selector);
}
void DaemonClient::rescan() {
  manage(proxies_->root.proxy(), interactive_, "Rescan");
}

void DaemonClient::watch(std::function<void(const BusChange &)> onChange) {
  proxies_->root.onChange = onChange;
  // Children's PropertiesChanged: one match for the whole tree, since the
  // objects come and go; the sender filter keeps other services out.
  const std::string rule =
      fmt::format("type='signal',sender='{}',interface='org.freedesktop.DBus.Properties',"
                  "member='PropertiesChanged',path_namespace='{}'",
                  dbus::kBusName, dbus::kRootPath);
  proxies_->propertiesMatch = proxies_->connection.addMatch(
      rule, [onChange = std::move(onChange)](sdbus::Message &message) {
        std::string interface;
        PropertyMap changed;
        std::vector<std::string> invalidated;
        message >> interface >> changed >> invalidated;
        onChange({BusChange::Type::PropertiesChanged, message.getPath(), interface,
                  std::move(changed), std::move(invalidated)});
      });
}

daemon::StateSnapshot snapshotFromBus(const ManagedObjects &objects, const PropertyMap &manager) {
  daemon::StateSnapshot snapshot;
  snapshot.version = get<std::string>(manager, "Version");
  snapshot.mode = get<std::string>(manager, "Mode");
  snapshot.status = get<std::string>(manager, "Status");
  // ManagedObjects is ordered by object path, and the escaping keeps
  // letters and digits in place, so keys come out nearly sorted; sort by key
  // to give the snapshot's promised order.
  for (const auto &[path, interfaces] : objects) {
    if (auto it = interfaces.find(dbus::kMapInterface); it != interfaces.end()) {
      snapshot.maps.push_back(mapFrom(it->second));
    }
    if (auto it = interfaces.find(dbus::kPathInterface); it != interfaces.end()) {
      snapshot.paths.push_back(pathFrom(it->second));
    }
    if (auto it = interfaces.find(dbus::kPortalInterface); it != interfaces.end()) {
      snapshot.portals.push_back(portalFrom(it->second));
    }
    if (auto it = interfaces.find(dbus::kFindingInterface); it != interfaces.end()) {
      snapshot.findings.push_back(findingFrom(path, it->second));
    }
  }
  std::ranges::sort(snapshot.maps, {}, &daemon::MapView::alias);
  std::ranges::sort(snapshot.paths, {}, &daemon::PathView::device);
  std::ranges::sort(snapshot.portals, {}, [](const daemon::PortalView &portal) {
    return std::pair{portal.address, portal.port};
  });
  std::ranges::sort(snapshot.findings, {}, &daemon::FindingView::key);
  return snapshot;
}

std::string variantToText(const sdbus::Variant &value) {
  const std::string type = value.peekValueType();
  if (type == "s") {
    return value.get<std::string>();
  }
  if (type == "b") {
    return value.get<bool>() ? "true" : "false";
  }
  if (type == "u") {
    return fmt::to_string(value.get<std::uint32_t>());
  }
  if (type == "t") {
    return fmt::to_string(value.get<std::uint64_t>());
  }
  if (type == "x") {
    return fmt::to_string(value.get<std::int64_t>());
  }
  if (type == "i") {
    return fmt::to_string(value.get<std::int32_t>());
  }
  if (type == "q") {
    return fmt::to_string(value.get<std::uint16_t>());
  }
  if (type == "as") {
    return fmt::format("[{}]", fmt::join(value.get<std::vector<std::string>>(), ", "));
  }
  if (type == "a{ss}") {
    std::vector<std::string> items;
    for (const auto &[key, text] : value.get<std::map<std::string, std::string>>()) {
      items.push_back(fmt::format("{}={}", key.empty() ? "(unbound)" : key, text));
    }
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  if (type == "a(uias)") {
    std::vector<std::string> items;
    for (const auto &group : value.get<GroupsValue>()) {
      items.push_back(fmt::format("{}(prio {}): {}", std::get<0>(group), std::get<1>(group),
                                  fmt::join(std::get<2>(group), " ")));
    }
    return fmt::format("[{}]", fmt::join(items, "; "));
  }
  if (type == "a(xss)") {
    std::vector<std::string> items;
    for (const auto &decision : value.get<DecisionsValue>()) {
      items.push_back(fmt::format("{} {}: {}", std::get<0>(decision), std::get<1>(decision),
                                  std::get<2>(decision)));
    }
    return fmt::format("[{}]", fmt::join(items, "; "));
  }
  return fmt::format("<{}>", type);
}

ClientFailure describeBusError(const sdbus::Error &error) {
  const std::string &name = error.getName();
  if (name == "org.freedesktop.DBus.Error.ServiceUnknown" ||
      name == "org.freedesktop.DBus.Error.NameHasNoOwner") {
    return {3, fmt::format("pathkeeperd is not running: nothing owns {} on the bus (it "
                           "takes the name once ready, after its first pass over the maps; "
                           "systemctl status pathkeeperd)",
                           dbus::kBusName)};
  }
  if (name == dbus::kErrorAccessDenied || name == "org.freedesktop.DBus.Error.AccessDenied") {
    return {4, fmt::format("not allowed: {}", error.getMessage())};
  }
  if (name == "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired") {
    // Only a call made without the flag gets this: --no-ask-password. The
    // daemon's own advice is for any client; this one is for the user.
    return {4, fmt::format("not allowed without asking for a password: run it as root, or "
                           "without --no-ask-password where a polkit agent can ask (pathkeeperd: "
                           "{})",
                           error.getMessage())};
  }
  if (name == dbus::kErrorNotFound || name == dbus::kErrorInvalidArgument ||
      name == dbus::kErrorFailed) {
    return {1, error.getMessage()};
  }
  if (name == "org.freedesktop.DBus.Error.NoReply" ||
      name == "org.freedesktop.DBus.Error.Timeout") {
    return {1, fmt::format("pathkeeperd did not answer in time: {}", error.getMessage())};
  }
  return {1, fmt::format("D-Bus call failed: {}: {}", name, error.getMessage())};
}

} // namespace pathkeeper::ctl
