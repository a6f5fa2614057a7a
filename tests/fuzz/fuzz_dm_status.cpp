// Fuzzes the status parser: any input must give a status or an error, and
// the accessors must be safe on whatever parsed.
#include "dm_status.hpp"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace pathkeeper::selector;
  std::string_view text(reinterpret_cast<const char *>(data), size);
  for (bool withPrefix : {true, false}) {
    auto status = parseDmStatus(text, withPrefix);
    if (!status) {
      continue;
    }
    (void)status->activePaths();
    for (const auto &group : status->groups) {
      for (const auto &path : group.paths) {
        for (auto kind : {SelectorKind::RoundRobin, SelectorKind::QueueLength,
                          SelectorKind::ServiceTime, SelectorKind::HistoricalServiceTime}) {
          (void)inFlightCount(kind, path);
          (void)inFlightSize(kind, path);
          (void)relativeThroughput(kind, path);
        }
        (void)status->findPath(path.device);
      }
    }
  }
  return 0;
}
