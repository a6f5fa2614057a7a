#pragma once

// The network check's OS adapter: takes a NetworkSnapshot from the kernel of
// the calling thread's network namespace. Links, addresses, rules and route
// lookups (RTM_GETROUTE, as `ip route get`) come over rtnetlink via
// libnl-route-3; sysctls from <procRoot>/sys/net/ipv4/conf; link speed and
// bonding from <sysfsRoot>/class/net. Both roots are constructor arguments.
//
// Operational state and MTU come from netlink, not sysfs: netlink always
// answers for the caller's namespace, while /sys shows the namespace that
// mounted it (a thread that entered a namespace with setns still sees the
// host's /sys).

#include "netcheck.hpp"

#include <filesystem>
#include <span>

namespace pathkeeper::daemon {

/// @brief Reads the kernel's network state for the network check.
/// Cheap to construct; every snapshot() opens its own netlink socket, so one
/// checker may be used from any thread (each sees its own namespace).
class NetworkChecker {
public:
  /// @brief @p sysfsRoot is "/sys" and @p procRoot "/proc" outside tests.
  explicit NetworkChecker(std::filesystem::path sysfsRoot = "/sys",
                          std::filesystem::path procRoot = "/proc");

  /// @brief Links, addresses, rules, sysctls, bonds, and every lookup
  /// routeQueries() asks for @p bindings.
  /// @throws std::system_error when netlink cannot be opened or dumped.
  [[nodiscard]] NetworkSnapshot snapshot(std::span<const Binding> bindings) const;

  /// @brief One RTM_GETROUTE; a refusal by the kernel is a value (error set).
  /// @throws std::system_error when netlink itself fails.
  [[nodiscard]] RouteLookup lookupRoute(const RouteQuery &query,
                                        const NetworkSnapshot &links) const;

private:
  std::filesystem::path sysfsRoot_;
  std::filesystem::path procRoot_;
};

} // namespace pathkeeper::daemon
