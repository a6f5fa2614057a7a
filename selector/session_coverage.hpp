#pragma once

// Which (target, portal, NIC) paths SendTargets says should exist but the
// kernel has no session for. A probe from NIC n that reached portal p proves
// that p answers through n; the other portals a target advertises are only
// claims until a probe reaches them, so they are not counted here.

#include "model.hpp"

#include <compare>
#include <span>
#include <string>
#include <vector>

namespace pathkeeper::selector {

/// @brief One target a SendTargets reply listed, and how the probe got there.
struct DiscoveredTarget {
  std::string targetIqn; ///< validated iSCSI name
  Portal portal;         ///< the TargetAddress as advertised (canonical address)
  Portal probedPortal;   ///< the portal that answered SendTargets
  std::string netdev;    ///< NIC the probe was bound to; empty when routing chose

  /// @brief True when the advertised portal is the one the probe reached.
  [[nodiscard]] bool provenReachable() const;
  auto operator<=>(const DiscoveredTarget &) const = default;
};

/// @brief A path that discovery proves possible but no kernel session covers.
struct MissingPath {
  std::string targetIqn;
  Portal portal;
  std::string netdev; ///< empty when the probe was not bound to a NIC

  /// @brief "iqn...:t1 via 10.10.1.20:3260,1 from eth1", for messages.
  [[nodiscard]] std::string str() const;
  auto operator<=>(const MissingPath &) const = default;
};

/// @brief The proven-reachable discovered paths that no kernel session covers.
///
/// A kernel path covers a discovered one when its target name matches
/// (case-insensitively), its portal has the same address (compared in
/// canonical form) and port, and, when the probe was bound to a NIC, the
/// session is bound to that same NIC. The portal group tag is not compared:
/// a session to the same address and port serves the path whatever tag the
/// target now reports. The result is sorted and has no duplicates.
std::vector<MissingPath> findMissingPaths(std::span<const DiscoveredTarget> discovered,
                                          std::span<const Path> kernelPaths);

} // namespace pathkeeper::selector
