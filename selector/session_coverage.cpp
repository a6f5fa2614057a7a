#include "session_coverage.hpp"

#include "iscsi_names.hpp"
#include "text.hpp"

#include <algorithm>

namespace pathkeeper::selector {

namespace {

// Kernel sysfs and SendTargets may spell one IPv6 address differently;
// addresses that do not parse are compared as they are.
std::string canonicalOrRaw(const std::string &address) {
  auto canonical = canonicalIpAddress(address);
  return canonical ? *std::move(canonical) : address;
}

bool samePortal(const Portal &a, const Portal &b) {
  return a.port == b.port && canonicalOrRaw(a.address) == canonicalOrRaw(b.address);
}

} // namespace

bool DiscoveredTarget::provenReachable() const {
  return samePortal(portal, probedPortal);
}

std::string MissingPath::str() const {
  std::string out = targetIqn + " via " + portal.str();
  if (!netdev.empty()) {
    out += " from " + netdev;
  }
  return out;
}

std::vector<MissingPath> findMissingPaths(std::span<const DiscoveredTarget> discovered,
                                          std::span<const Path> kernelPaths) {
  std::vector<MissingPath> missing;
  for (const auto &target : discovered) {
    if (!target.provenReachable()) {
      continue;
    }
    const bool covered = std::any_of(kernelPaths.begin(), kernelPaths.end(), [&](const Path &path) {
      return iequals(path.targetIqn, target.targetIqn) && samePortal(path.portal, target.portal) &&
             (target.netdev.empty() || path.netdev == target.netdev);
    });
    if (!covered) {
      missing.push_back({target.targetIqn, target.portal, target.netdev});
    }
  }
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  return missing;
}

} // namespace pathkeeper::selector
