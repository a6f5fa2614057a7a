#include "kernel_caps.hpp"

#include <sys/utsname.h>

#include <fstream>

namespace pathkeeper::daemon {

namespace {

std::string runningRelease() {
  utsname name{};
  if (uname(&name) != 0) {
    return {};
  }
  return name.release;
}

} // namespace

bool kernelOffersModule(const KernelProbeRoots &roots, const std::string &module) {
  std::error_code ec;
  std::string underscored = module;
  for (auto &c : underscored) {
    c = c == '-' ? '_' : c;
  }
  if (std::filesystem::exists(roots.sys / "module" / underscored, ec)) {
    return true;
  }
  const std::string release = roots.release.empty() ? runningRelease() : roots.release;
  if (release.empty()) {
    return false;
  }
  const auto dir = roots.modules / release;
  for (const char *list : {"modules.builtin", "modules.dep"}) {
    std::ifstream in(dir / list);
    std::string line;
    while (std::getline(in, line)) {
      // Entries look like "kernel/drivers/md/dm-foo.ko[.xz]:" in either file.
      auto slash = line.rfind('/', line.find(".ko"));
      auto name = line.substr(slash == std::string::npos ? 0 : slash + 1);
      if (name.rfind(module + ".ko", 0) == 0) {
        return true;
      }
    }
  }
  return false;
}

selector::KernelCapabilities probeKernel(const KernelProbeRoots &roots) {
  selector::KernelCapabilities caps;
  caps.historicalServiceTime = kernelOffersModule(roots, "dm-historical-service-time");
  return caps;
}

} // namespace pathkeeper::daemon
