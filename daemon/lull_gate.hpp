#pragma once

// The last step of reloading at a lull (adaptive selection, issue #9). A
// reload's suspend holds every new request of the map until the requests
// in flight have completed, so the governor (selector/adaptive.hpp) orders
// a reload only at a sample where little is in flight. Samples are seconds
// apart, and a reconcile pass takes a few hundred ms more before the swap:
// a bursty workload's next burst may have begun by then. So the reload
// looks once more, just before it reads the map's group and loads the new
// table (milliseconds before the swap), and waits (polling
// /sys/block/<dev>/inflight every few ms) for the I/O in flight to drain
// within the target, for at most maxWait; then it reloads regardless. I/O
// keeps flowing through the old table meanwhile.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pathkeeper::daemon {

/// @brief What a reload waits for before its swap.
struct LullGate {
  struct Path {
    std::string device;      ///< e.g. "sdb"
    double msPerRequest = 0; ///< how long one request in flight takes at the path's busy rate
    bool operator==(const Path &) const = default;
  };
  std::vector<Path> paths;
  std::chrono::milliseconds target{50};    ///< the longest drain to swap on
  std::chrono::milliseconds maxWait{2000}; ///< then swap regardless
  bool operator==(const LullGate &) const = default;
};

/// @brief Requests in flight on a device now; nullopt when unreadable.
using InFlightReader = std::function<std::optional<std::uint64_t>(const std::string &device)>;

/// @brief Reads <sysfsRoot>/block/<dev>/inflight ("reads writes").
[[nodiscard]] InFlightReader sysfsInFlight(std::filesystem::path sysfsRoot);

/// @brief The drain the I/O in flight now needs: the longest over the
/// gate's paths of in flight x msPerRequest (the paths drain side by side).
/// A path that cannot be read counts 0.
[[nodiscard]] double drainNowMs(const LullGate &gate, const InFlightReader &inFlight);

/// @brief How the wait went.
struct LullWait {
  bool found = false;                  ///< the drain came within the target
  std::chrono::microseconds waited{0}; ///< from the first look to the last
  double drainMs = 0;                  ///< at the last look
};

/// @brief Polls every @p poll until the drain is within the target or
/// maxWait has passed. @p sleep and @p now are the clock (fakes in tests).
LullWait waitForLull(const LullGate &gate, const InFlightReader &inFlight,
                     const std::function<void(std::chrono::microseconds)> &sleep,
                     const std::function<std::chrono::steady_clock::time_point()> &now,
                     std::chrono::microseconds poll = std::chrono::milliseconds{5});

} // namespace pathkeeper::daemon
