#include "lull_gate.hpp"

#include "text.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <utility>

namespace pathkeeper::daemon {

namespace {

// "       3        1\n": reads and writes in flight.
std::optional<std::uint64_t> parseInFlight(std::string_view text) {
  const auto words = selector::splitWords(text);
  if (words.size() != 2) {
    return std::nullopt;
  }
  auto reads = selector::parseUnsigned(words[0]);
  auto writes = selector::parseUnsigned(words[1]);
  if (!reads || !writes) {
    return std::nullopt;
  }
  return *reads + *writes;
}

} // namespace

InFlightReader sysfsInFlight(std::filesystem::path sysfsRoot) {
  return [root = std::move(sysfsRoot)](const std::string &device) -> std::optional<std::uint64_t> {
    const auto path = root / "block" / device / "inflight";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return std::nullopt;
    }
    std::array<char, 64> buffer{};
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    ::close(fd);
    if (n <= 0) {
      return std::nullopt;
    }
    return parseInFlight(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
  };
}

double drainNowMs(const LullGate &gate, const InFlightReader &inFlight) {
  double longest = 0;
  for (const auto &path : gate.paths) {
    if (auto count = inFlight(path.device)) {
      longest = std::max(longest, static_cast<double>(*count) * path.msPerRequest);
    }
  }
  return longest;
}

LullWait waitForLull(const LullGate &gate, const InFlightReader &inFlight,
                     const std::function<void(std::chrono::microseconds)> &sleep,
                     const std::function<std::chrono::steady_clock::time_point()> &now,
                     std::chrono::microseconds poll) {
  LullWait result;
  const auto started = now();
  const auto target = static_cast<double>(gate.target.count());
  for (;;) {
    result.drainMs = drainNowMs(gate, inFlight);
    const auto elapsed = now() - started;
    result.waited = std::chrono::duration_cast<std::chrono::microseconds>(elapsed);
    if (result.drainMs <= target) {
      result.found = true;
      return result;
    }
    if (elapsed >= gate.maxWait) {
      return result;
    }
    sleep(poll);
  }
}

} // namespace pathkeeper::daemon
