#pragma once

// What the running kernel offers, read from sysfs and the module tree.

#include "plan.hpp"

#include <filesystem>
#include <string>

namespace pathkeeper::daemon {

/// @brief Where to look; main and tests choose the roots.
struct KernelProbeRoots {
  std::filesystem::path sys{"/sys"};
  std::filesystem::path modules{"/lib/modules"};
  std::string release; ///< uname -r; empty = the running kernel's
};

/// @brief A path selector is offered when its module is loaded, built in, or
/// installed for the kernel (device-mapper loads selectors on demand).
bool kernelOffersModule(const KernelProbeRoots &roots, const std::string &module);

/// @brief The capabilities the planner needs.
selector::KernelCapabilities probeKernel(const KernelProbeRoots &roots);

} // namespace pathkeeper::daemon
