#pragma once

// Publishes pathkeeperd's state on D-Bus and routes the Manager's methods to
// the daemon's Commands. Everything runs on the thread that processes the
// connection (the daemon's sd-event loop, see bus_loop.hpp): publish() emits
// signals there and method handlers call Commands there.

#include "state_model.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace sdbus {
class IConnection;
class Error;
} // namespace sdbus

namespace pathkeeper::dbus {

/// @brief Decides whether a bus peer may call a mutating method.
class Authorizer {
public:
  /// @brief Receives nothing when allowed, else the error to answer with:
  /// AccessDenied, or InteractiveAuthorizationRequired when authenticating
  /// would have allowed it but the caller did not allow interaction.
  using Done = std::function<void(std::optional<sdbus::Error>)>;

  Authorizer() = default;
  Authorizer(const Authorizer &) = delete;
  Authorizer &operator=(const Authorizer &) = delete;
  virtual ~Authorizer() = default;

  /// @brief Checks the unique bus name @p sender for @p method; calls @p done
  /// exactly once, possibly later, from the loop thread. @p interactive: the
  /// call carries the ALLOW_INTERACTIVE_AUTHORIZATION flag, so the caller
  /// waits while a person authenticates (busctl and pathkeeperctl set it;
  /// dbus-send and most scripts' bindings do not).
  virtual void authorize(const std::string &sender, const std::string &method, bool interactive,
                         Done done) = 0;
};

/// @brief Root is allowed; any other uid needs polkit's yes for
/// org.pathkeeper.PathKeeper1.manage, with interactive authentication only
/// when the caller allowed it: a script's call must not wait minutes for a
/// password prompt in somebody's session.
/// Both questions go over the bus, asynchronously: the bus daemon vouches for
/// the caller's uid (GetConnectionUnixUser), and polkit is asked with the
/// caller's unique name as subject (system-bus-name), so a caller cannot
/// claim someone else's identity. Without polkit on the bus, non-root callers
/// are denied.
class BusAuthorizer final : public Authorizer {
public:
  /// @brief @p connection must outlive this object.
  explicit BusAuthorizer(sdbus::IConnection &connection);
  ~BusAuthorizer() override;
  void authorize(const std::string &sender, const std::string &method, bool interactive,
                 Done done) override;

private:
  struct Proxies;
  std::unique_ptr<Proxies> proxies_;
};

/// @brief The object tree under /org/pathkeeper/PathKeeper1 and its signals.
/// Move-only in spirit: it registers objects on the connection, so it is
/// neither copyable nor movable; hold it in a unique_ptr if it must move.
class DbusPublisher {
public:
  /// @brief Registers the Manager and the ObjectManager at kRootPath on
  /// @p connection, with the empty snapshot. @p connection, @p commands and
  /// @p authorizer must outlive the publisher. The caller requests the bus name.
  DbusPublisher(sdbus::IConnection &connection, daemon::Commands &commands, Authorizer &authorizer);
  ~DbusPublisher();
  DbusPublisher(const DbusPublisher &) = delete;
  DbusPublisher &operator=(const DbusPublisher &) = delete;

  /// @brief Makes @p snapshot the published state: adds and removes objects
  /// (InterfacesAdded/InterfacesRemoved) and emits PropertiesChanged for the
  /// properties whose value changed. Keeps @p snapshot (the Path and Map
  /// objects are served from it); null stands for the empty state. The
  /// signals follow diffSnapshots()' order, except that removed paths and
  /// maps go first (they are announced while still served). Call it on the
  /// loop thread only.
  /// @throws sdbus::Error when some change could not be carried out (the bus
  /// went away, an object path was taken); every other change still is, and
  /// @p snapshot is the published state all the same.
  void publish(daemon::SharedSnapshot snapshot);

  /// @brief The state last published.
  [[nodiscard]] const daemon::StateSnapshot &published() const;

private:
  struct Tree;
  std::unique_ptr<Tree> tree_;
};

} // namespace pathkeeper::dbus
