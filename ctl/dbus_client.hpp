#pragma once

// pathkeeperctl's side of the D-Bus API: the generated proxies for the
// Manager and the ObjectManager, the conversion of their answers back into
// the published StateSnapshot, and readable messages for bus errors.

#include "state_model.hpp"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sdbus-c++/Types.h>

namespace sdbus {
class IConnection;
class Error;
} // namespace sdbus

namespace pathkeeper::ctl {

using PropertyMap = std::map<std::string, sdbus::Variant>;
using InterfaceMap = std::map<std::string, PropertyMap>;
using ManagedObjects = std::map<sdbus::ObjectPath, InterfaceMap>;

/// @brief One change seen on the bus while watching.
struct BusChange {
  enum class Type { Added, Removed, PropertiesChanged };
  Type type = Type::PropertiesChanged;
  std::string objectPath;
  std::string interface;  ///< for Added/Removed: the pathkeeper interface concerned
  PropertyMap properties; ///< Added: all; PropertiesChanged: the changed ones
  std::vector<std::string> invalidated;
};

/// @brief A talk with pathkeeperd over the generated proxies. Calls throw
/// sdbus::Error; describeBusError() turns one into a message.
class DaemonClient {
public:
  /// @brief @p connection must outlive the client.
  explicit DaemonClient(sdbus::IConnection &connection);
  ~DaemonClient();
  DaemonClient(const DaemonClient &) = delete;
  DaemonClient &operator=(const DaemonClient &) = delete;

  /// @brief Manager properties plus GetManagedObjects, as one snapshot.
  [[nodiscard]] daemon::StateSnapshot snapshot();
  /// @brief GetManagedObjects as sent.
  [[nodiscard]] ManagedObjects managedObjects();

  /// @brief Whether the managing calls below let polkit ask the caller for
  /// a password (D-Bus ALLOW_INTERACTIVE_AUTHORIZATION); on by default, as
  /// for systemctl. Without it, a call that needs authentication fails
  /// with InteractiveAuthorizationRequired instead of waiting on a prompt.
  void allowInteractiveAuthorization(bool allow) { interactive_ = allow; }

  void reconfigure();
  void failPath(const std::string &device);
  void reinstatePath(const std::string &device);
  void switchGroup(const std::string &map, unsigned group);
  void disableQueueing(const std::string &map);
  void restoreQueueing(const std::string &map);
  void setSelector(const std::string &map, const std::string &selector);
  void rescan();

  /// @brief Calls @p onChange for every InterfacesAdded, InterfacesRemoved
  /// and PropertiesChanged of pathkeeperd's objects from now on; the
  /// connection's loop (enterEventLoop or processPendingRequest) delivers them.
  void watch(std::function<void(const BusChange &)> onChange);

private:
  struct Proxies;
  std::unique_ptr<Proxies> proxies_;
  bool interactive_ = true;
};

/// @brief Rebuilds the published state from GetManagedObjects' answer and the
/// Manager's properties; unknown interfaces and properties are ignored.
[[nodiscard]] daemon::StateSnapshot snapshotFromBus(const ManagedObjects &objects,
                                                    const PropertyMap &manager);

/// @brief A property value as one line of text: strings bare, arrays and
/// dicts in brackets, groups as "1(prio 50): sdb sdc".
[[nodiscard]] std::string variantToText(const sdbus::Variant &value);

/// @brief What to tell the user about a failed bus call.
struct ClientFailure {
  int status = 1; ///< pathkeeperctl's exit status: 3 not running, 4 not allowed, 1 otherwise
  std::string message;
};
/// @brief Maps a bus error to a message: daemon not running, access denied,
/// not found, invalid argument, or the daemon's own words.
[[nodiscard]] ClientFailure describeBusError(const sdbus::Error &error);

} // namespace pathkeeper::ctl
