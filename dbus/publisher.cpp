#include "publisher.hpp"

#include "bus_names.hpp"
#include "log.hpp"
#include "method_checks.hpp"
#include "snapshot_diff.hpp"
#include "snapshot_objects.hpp"

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <sdbus-c++/sdbus-c++.h>
#include <systemd/sd-bus.h>

#include "pathkeeper1_adaptor.h"

namespace pathkeeper::dbus {
namespace {

namespace gen = org::pathkeeper::PathKeeper1;
using daemon::FindingView;
using daemon::PortalView;
using daemon::StateSnapshot;

// CheckAuthorization's flags (polkit's PolkitCheckAuthorizationFlags).
constexpr std::uint32_t kPolkitNoInteraction = 0;
constexpr std::uint32_t kPolkitAllowUserInteraction = 1;
// The D-Bus specification's answer to a call that interactive
// authorization would allow, made without ALLOW_INTERACTIVE_AUTHORIZATION:
// the client may ask again with the flag (systemctl does).
constexpr const char *kErrorInteractiveAuthorizationRequired =
    "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired";

// The adaptor bases' destructors are protected and non-virtual; this final
// class is owned as itself, never deleted through a base.
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class PortalObject final
    : public sdbus::AdaptorInterfaces<gen::Portal_adaptor, sdbus::ManagedObject_adaptor,
                                      sdbus::Properties_adaptor> {
public:
  PortalObject(sdbus::IConnection &connection, PortalView view)
      : AdaptorInterfaces(connection, objectPathOf(ObjectKind::Portal, portalKey(view))),
        view_(std::move(view)) {
    registerAdaptor();
  }
  ~PortalObject() { unregisterAdaptor(); }
  PortalObject(const PortalObject &) = delete;
  PortalObject &operator=(const PortalObject &) = delete;

  void set(const PortalView &view) { view_ = view; }

private:
  std::string Address() override { return view_.address; }
  std::uint16_t Port() override { return view_.port; }
  std::map<std::string, std::string> Reachability() override { return view_.reachability; }

  PortalView view_;
};

// The adaptor bases' destructors are protected and non-virtual; this final
// class is owned as itself, never deleted through a base.
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class FindingObject final
    : public sdbus::AdaptorInterfaces<gen::Finding_adaptor, sdbus::ManagedObject_adaptor,
                                      sdbus::Properties_adaptor> {
public:
  FindingObject(sdbus::IConnection &connection, FindingView view)
      : AdaptorInterfaces(connection, objectPathOf(ObjectKind::Finding, view.key)),
        view_(std::move(view)) {
    registerAdaptor();
  }
  ~FindingObject() { unregisterAdaptor(); }
  FindingObject(const FindingObject &) = delete;
  FindingObject &operator=(const FindingObject &) = delete;

  void set(const FindingView &view) { view_ = view; }

private:
  std::string Id() override { return view_.id; }
  std::string Severity() override { return view_.severity; }
  std::string Summary() override { return view_.summary; }
  std::string Explanation() override { return view_.explanation; }
  std::vector<std::string> NetDevs() override { return view_.nics; }
  std::vector<std::string> Portals() override { return view_.portals; }
  std::vector<std::string> Paths() override { return view_.paths; }
  std::vector<std::string> Fix() override { return view_.fix; }

  FindingView view_;
};

// The root object: Manager properties and methods, and the ObjectManager.
// The adaptor bases' destructors are protected and non-virtual; this final
// class is owned as itself, never deleted through a base.
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class ManagerObject final
    : public sdbus::AdaptorInterfaces<gen::Manager_adaptor, sdbus::ObjectManager_adaptor,
                                      sdbus::Properties_adaptor> {
public:
  ManagerObject(sdbus::IConnection &connection, const daemon::SharedSnapshot &current,
                daemon::Commands &commands, Authorizer &authorizer)
      : AdaptorInterfaces(connection, kRootPath), current_(current), commands_(commands),
        authorizer_(authorizer) {
    registerAdaptor();
  }
  ~ManagerObject() { unregisterAdaptor(); }
  ManagerObject(const ManagerObject &) = delete;
  ManagerObject &operator=(const ManagerObject &) = delete;

private:
  using Check = std::function<std::optional<MethodError>()>;
  using Run = std::function<Expected<void>()>;

  std::string Version() override { return current_->version; }
  std::string Mode() override { return current_->mode; }
  std::string Status() override { return current_->status; }

  void Reconfigure(sdbus::Result<> &&result) override {
    guarded(std::move(result), "Reconfigure", nullptr, [this] { return commands_.reconfigure(); });
  }
  void FailPath(sdbus::Result<> &&result, std::string device) override {
    guarded(
        std::move(result), "FailPath",
        [this, device] { return checkPathExists(*current_, device); },
        [this, device] { return commands_.failPath(device); });
  }
  void ReinstatePath(sdbus::Result<> &&result, std::string device) override {
    guarded(
        std::move(result), "ReinstatePath",
        [this, device] { return checkPathExists(*current_, device); },
        [this, device] { return commands_.reinstatePath(device); });
  }
  void SwitchGroup(sdbus::Result<> &&result, std::string map, std::uint32_t group) override {
    guarded(
        std::move(result), "SwitchGroup",
        [this, map, group] { return checkGroup(*current_, map, group); },
        [this, map, group] { return commands_.switchGroup(map, group); });
  }
  void DisableQueueing(sdbus::Result<> &&result, std::string map) override {
    guarded(
        std::move(result), "DisableQueueing",
        [this, map] { return checkMapExists(*current_, map); },
        [this, map] { return commands_.disableQueueing(map); });
  }
  void RestoreQueueing(sdbus::Result<> &&result, std::string map) override {
    guarded(
        std::move(result), "RestoreQueueing",
        [this, map] { return checkMapExists(*current_, map); },
        [this, map] { return commands_.restoreQueueing(map); });
  }
  void SetSelector(sdbus::Result<> &&result, std::string map, std::string selector) override {
    guarded(
        std::move(result), "SetSelector",
        [this, map, selector] { return checkSelector(*current_, map, selector); },
        [this, map, selector] { return commands_.setSelector(map, selector); });
  }
  void Rescan(sdbus::Result<> &&result) override {
    guarded(std::move(result), "Rescan", nullptr, [this] { return commands_.rescan(); });
  }

  // Authorization may answer later (polkit); the arguments are checked
  // against the state published by then, and the command runs on the loop.
  void guarded(sdbus::Result<> &&result, const std::string &method, Check check, Run run) {
    auto reply = std::make_shared<sdbus::Result<>>(std::move(result));
    const sdbus::Message *call = getObject().getCurrentlyProcessedMessage();
    const std::string sender = call != nullptr ? call->getSender() : std::string{};
    const bool interactive = call != nullptr && sd_bus_message_get_allow_interactive_authorization(
                                                    sdBusMessageOf(*call)) > 0;
    std::weak_ptr<int> alive = alive_;
    authorizer_.authorize(
        sender, method, interactive,
        [this, alive, reply, method, check = std::move(check),
         run = std::move(run)](std::optional<sdbus::Error> denied) {
          if (alive.expired()) {
            reply->returnError(sdbus::Error(kErrorFailed, "pathkeeperd is shutting down"));
            return;
          }
          if (denied) {
            reply->returnError(*denied);
            return;
          }
          try {
            if (check) {
              if (auto error = check()) {
                reply->returnError(sdbus::Error(error->name, error->message));
                return;
              }
            }
            // In companion mode the answer is multipathd's, later. The
            // reply stays this object's until then: one still owed at exit
            // dies with the publisher, while its bus still exists.
            owed_.insert(reply);
            std::weak_ptr<sdbus::Result<>> owed = reply;
            commands_.answerWhenDone(run, [this, alive, owed, method](Expected<void> done) {
              if (alive.expired()) {
                return; // exiting: the publisher and its bus are gone
              }
              auto pending = owed.lock();
              if (!pending) {
                return;
              }
              owed_.erase(pending);
              answer(*pending, method, done);
            });
          } catch (const std::exception &error) {
            // A throwing command must not unwind through sd-bus's C frames.
            owed_.erase(reply); // answered here, not by answerWhenDone
            auto failed = commandFailed(method, error.what());
            reply->returnError(sdbus::Error(failed.name, failed.message));
          }
        });
  }

  // Runs from the loop (a multipathd reply, a timer), where nothing catches:
  // a reply that cannot be sent (the bus went away) is logged, not thrown.
  static void answer(sdbus::Result<> &reply, const std::string &method,
                     const Expected<void> &done) noexcept {
    try {
      if (!done) {
        auto error = commandFailed(method, done.error());
        reply.returnError(sdbus::Error(error.name, error.message));
        return;
      }
      reply.returnResults();
    } catch (const std::exception &error) {
      daemon::log::error(fmt::format("D-Bus: cannot answer {}: {}", method, error.what()));
    }
  }

  const daemon::SharedSnapshot &current_; ///< the Tree's, never null
  daemon::Commands &commands_;
  Authorizer &authorizer_;
  std::set<std::shared_ptr<sdbus::Result<>>> owed_; ///< answers still to come (answerWhenDone)
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

bool isServiceMissing(const sdbus::Error &error) {
  return error.getName() == "org.freedesktop.DBus.Error.ServiceUnknown" ||
         error.getName() == "org.freedesktop.DBus.Error.NameHasNoOwner";
}

template <typename Key, typename View>
std::map<Key, const View *> byKey(const std::vector<View> &views, auto keyOf) {
  std::map<Key, const View *> index;
  for (const auto &view : views) {
    index.emplace(keyOf(view), &view);
  }
  return index;
}

} // namespace

struct BusAuthorizer::Proxies {
  std::unique_ptr<sdbus::IProxy> bus;
  std::unique_ptr<sdbus::IProxy> polkit;
};

BusAuthorizer::BusAuthorizer(sdbus::IConnection &connection)
    : proxies_(std::make_unique<Proxies>(
          Proxies{sdbus::createProxy(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus"),
                  sdbus::createProxy(connection, "org.freedesktop.PolicyKit1",
                                     "/org/freedesktop/PolicyKit1/Authority")})) {}

BusAuthorizer::~BusAuthorizer() = default;

void BusAuthorizer::authorize(const std::string &sender, const std::string &method,
                              bool interactive, Done done) {
  const auto deny = [](std::string message) {
    return sdbus::Error(kErrorAccessDenied, std::move(message));
  };
  if (sender.empty()) {
    done(deny(fmt::format("{} needs root: the caller has no bus name", method)));
    return;
  }
  proxies_->bus->callMethodAsync("GetConnectionUnixUser")
      .onInterface("org.freedesktop.DBus")
      .withArguments(sender)
      .uponReplyInvoke([this, sender, method, interactive, deny, done](const sdbus::Error *error,
                                                                       std::uint32_t uid) {
        if (error != nullptr) {
          done(deny(fmt::format("cannot tell who called {}: {}", method, error->getMessage())));
          return;
        }
        if (uid == 0) {
          done(std::nullopt);
          return;
        }
        using Subject = sdbus::Struct<std::string, std::map<std::string, sdbus::Variant>>;
        Subject subject{"system-bus-name", {{"name", sdbus::Variant(sender)}}};
        proxies_->polkit->callMethodAsync("CheckAuthorization")
            .onInterface("org.freedesktop.PolicyKit1.Authority")
            .withTimeout(kAuthorizationTimeout)
            .withArguments(
                subject, std::string{kManageAction}, std::map<std::string, std::string>{},
                interactive ? kPolkitAllowUserInteraction : kPolkitNoInteraction, std::string{})
            .uponReplyInvoke(
                [method, uid, interactive, deny,
                 done](const sdbus::Error *polkitError,
                       sdbus::Struct<bool, bool, std::map<std::string, std::string>> result) {
                  if (polkitError != nullptr) {
                    done(deny(isServiceMissing(*polkitError)
                                  ? fmt::format("{} needs root or the polkit action {}, and "
                                                "polkit is not running (no "
                                                "org.freedesktop.PolicyKit1 on the bus)",
                                                method, kManageAction)
                                  : fmt::format("{} needs root or the polkit action {}; polkit "
                                                "could not decide: {}",
                                                method, kManageAction, polkitError->getMessage())));
                    return;
                  }
                  if (std::get<0>(result)) {
                    done(std::nullopt);
                    return;
                  }
                  if (!std::get<1>(result)) {
                    done(deny(fmt::format("uid {} may not call {}: it needs root or the polkit "
                                          "action {}",
                                          uid, method, kManageAction)));
                  } else if (interactive) {
                    done(deny(fmt::format("{} needs authentication for {}; run it as root or "
                                          "from a session with a polkit agent",
                                          method, kManageAction)));
                  } else {
                    done(sdbus::Error(kErrorInteractiveAuthorizationRequired,
                                      fmt::format("{} needs authentication for {}, and the call "
                                                  "did not allow interactive authorization; "
                                                  "call it with the flag (pathkeeperctl and "
                                                  "busctl set it) or as root",
                                                  method, kManageAction)));
                  }
                });
      });
}

struct DbusPublisher::Tree {
  Tree(sdbus::IConnection &bus, daemon::Commands &commands, Authorizer &authorizer)
      : connection(bus), manager(bus, current, commands, authorizer), sdBus(sdBusOf(bus)),
        maps(sdBus), paths(sdBus) {}

  sdbus::IConnection &connection;
  daemon::SharedSnapshot current = std::make_shared<const StateSnapshot>();
  ManagerObject manager;
  sd_bus *sdBus; ///< connection's, for the objects served from the snapshot
  MapObjects maps;
  PathObjects paths;
  std::map<std::string, std::unique_ptr<PortalObject>> portals;
  std::map<std::string, std::unique_ptr<FindingObject>> findings;
};

DbusPublisher::DbusPublisher(sdbus::IConnection &connection, daemon::Commands &commands,
                             Authorizer &authorizer)
    : tree_(std::make_unique<Tree>(connection, commands, authorizer)) {}

DbusPublisher::~DbusPublisher() = default;

const StateSnapshot &DbusPublisher::published() const {
  return *tree_->current;
}

namespace {

// Carries one kind's changes out on its objects.
template <typename Object, typename View>
void apply(sdbus::IConnection &connection, const ObjectChange &change,
           std::map<std::string, std::unique_ptr<Object>> &objects,
           const std::map<std::string, const View *> &views) {
  const char *interface = interfaceOf(change.kind);
  switch (change.type) {
  case ObjectChange::Type::Removed:
    // Every interface of the object, the standard ones too, as
    // GetManagedObjects lists them: an ObjectManager client that loaded the
    // tree must see the whole object go (and come).
    // The object goes even when the signal cannot: it is gone from the
    // state, and a later one with its key must be able to register.
    if (auto it = objects.find(change.key); it != objects.end()) {
      const auto object = std::move(it->second);
      objects.erase(it);
      object->emitInterfacesRemovedSignal();
    }
    break;
  case ObjectChange::Type::Added: {
    // Served even when the signal cannot go: it is in the state.
    auto object = std::make_unique<Object>(connection, *views.at(change.key));
    auto &served = objects[change.key] = std::move(object);
    served->emitInterfacesAddedSignal();
    break;
  }
  case ObjectChange::Type::PropertiesChanged:
    if (auto it = objects.find(change.key); it != objects.end()) {
      it->second->set(*views.at(change.key));
      it->second->emitPropertiesChangedSignal(interface, change.properties);
    }
    break;
  }
}

// The same for the Map and Path objects, which are served from the snapshot.
template <typename Kind> void apply(SnapshotObjects<Kind> &objects, const ObjectChange &change) {
  switch (change.type) {
  case ObjectChange::Type::Removed:
    objects.remove(change.key);
    break;
  case ObjectChange::Type::Added:
    objects.add(change.key);
    break;
  case ObjectChange::Type::PropertiesChanged:
    objects.change(change.key, change.properties);
    break;
  }
}

// Changes that could not be carried out: each is tried, and the publication
// ends with one error that counts them and quotes the first.
class Failures {
public:
  void run(const ObjectChange &change, const std::function<void()> &carryOut) {
    try {
      carryOut();
    } catch (const sdbus::Error &e) {
      if (count_++ == 0) {
        first_ = fmt::format("{} {}: {}", objectPathOf(change.kind, change.key),
                             change.type == ObjectChange::Type::Added     ? "added"
                             : change.type == ObjectChange::Type::Removed ? "removed"
                                                                          : "changed",
                             e.getMessage());
      }
    }
  }
  void throwIfAny(std::size_t of) const {
    if (count_ > 0) {
      throw sdbus::Error(kErrorFailed, fmt::format("{} of {} changes not announced, the first: {}",
                                                   count_, of, first_));
    }
  }

private:
  std::size_t count_ = 0;
  std::string first_;
};

} // namespace

void DbusPublisher::publish(daemon::SharedSnapshot snapshot) {
  if (!snapshot) {
    snapshot = std::make_shared<const StateSnapshot>();
  }
  auto &tree = *tree_;
  const auto changes = diffSnapshots(*tree.current, *snapshot);
  Failures failures;
  const auto isServedRemoval = [](const ObjectChange &change) {
    return (change.kind == ObjectKind::Map || change.kind == ObjectKind::Path) &&
           change.type == ObjectChange::Type::Removed;
  };
  // InterfacesRemoved lists the interfaces the object has: a Map or Path
  // object's goes out while the old snapshot still serves it.
  for (const auto &change : changes) {
    if (isServedRemoval(change)) {
      failures.run(change, [&] {
        if (change.kind == ObjectKind::Map) {
          apply(tree.maps, change);
        } else {
          apply(tree.paths, change);
        }
      });
    }
  }
  tree.current = std::move(snapshot);
  tree.maps.show(tree.current);
  tree.paths.show(tree.current);
  const auto &now = *tree.current;
  const auto portals =
      byKey<std::string>(now.portals, [](const PortalView &v) { return portalKey(v); });
  const auto findings =
      byKey<std::string>(now.findings, [](const FindingView &v) { return v.key; });
  for (const auto &change : changes) {
    if (isServedRemoval(change)) {
      continue;
    }
    failures.run(change, [&] {
      switch (change.kind) {
      case ObjectKind::Map:
        apply(tree.maps, change);
        break;
      case ObjectKind::Path:
        apply(tree.paths, change);
        break;
      case ObjectKind::Portal:
        apply(tree.connection, change, tree.portals, portals);
        break;
      case ObjectKind::Finding:
        apply(tree.connection, change, tree.findings, findings);
        break;
      case ObjectKind::Manager:
        tree.manager.emitPropertiesChangedSignal(kManagerInterface, change.properties);
        break;
      }
    });
  }
  failures.throwIfAny(changes.size());
}

} // namespace pathkeeper::dbus
