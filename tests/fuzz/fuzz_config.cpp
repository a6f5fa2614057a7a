// Fuzzes the pathkeeper.conf parser: any bytes must give a Config or an error
// message, never a crash, a sanitizer report or an exception.
#include "config.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto config =
      pathkeeper::selector::parseConfig(text, "fuzz.conf", pathkeeper::selector::builtinConfig());
  if (config) {
    auto valid = pathkeeper::selector::validateConfig(*config);
    (void)valid;
    // Exercise the matchers on what was parsed, as the daemon would.
    pathkeeper::selector::Path path;
    path.targetIqn = "iqn.1987-05.com.cisco:05.mds-a.02-01.2000000393aa0001";
    path.portal.address = "10.10.1.20";
    path.vendor = "APPLE   ";
    path.product = "Xserve RAID     ";
    path.serial = "XR0012345";
    (void)pathkeeper::selector::controllerFor(*config, path);
    (void)pathkeeper::selector::policyFor(*config, "3600a", path.vendor, path.product);
  }
  return 0;
}
