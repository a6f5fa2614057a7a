#include "model.hpp"

#include "name_table.hpp"

#include <array>
#include <charconv>
#include <utility>

namespace pathkeeper::selector {

namespace {

constexpr std::array<std::pair<PathState, std::string_view>, 7> pathStateNames{{
    {PathState::Unknown, "unknown"},
    {PathState::Up, "up"},
    {PathState::Down, "down"},
    {PathState::Shaky, "shaky"},
    {PathState::Ghost, "ghost"},
    {PathState::Pending, "pending"},
    {PathState::Removed, "removed"},
}};

// The spellings of the kernel's sysfs access_state attribute.
constexpr std::array<std::pair<AluaState, std::string_view>, 8> aluaStateNames{{
    {AluaState::None, "none"},
    {AluaState::ActiveOptimized, "active/optimized"},
    {AluaState::ActiveNonOptimized, "active/non-optimized"},
    {AluaState::Standby, "standby"},
    {AluaState::Unavailable, "unavailable"},
    {AluaState::LbaDependent, "lba-dependent"},
    {AluaState::Offline, "offline"},
    {AluaState::Transitioning, "transitioning"},
}};

constexpr std::array<std::pair<SelectorKind, std::string_view>, 4> selectorNames{{
    {SelectorKind::RoundRobin, "round-robin"},
    {SelectorKind::QueueLength, "queue-length"},
    {SelectorKind::ServiceTime, "service-time"},
    {SelectorKind::HistoricalServiceTime, "historical-service-time"},
}};

std::optional<std::uint32_t> parseU32(std::string_view text) {
  std::uint32_t value = 0;
  const auto *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end) {
    return std::nullopt;
  }
  return value;
}

} // namespace

std::string DevT::str() const {
  return std::to_string(major) + ":" + std::to_string(minor);
}

std::optional<DevT> parseDevT(std::string_view text) {
  auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  auto major = parseU32(text.substr(0, colon));
  auto minor = parseU32(text.substr(colon + 1));
  if (!major || !minor) {
    return std::nullopt;
  }
  return DevT{*major, *minor};
}

std::string_view toString(PathState state) {
  return nameOf(pathStateNames, state);
}
std::optional<PathState> parsePathState(std::string_view text) {
  return lookup(pathStateNames, text);
}

bool isUsable(PathState state) {
  // multipathd counts ghost paths as enabled: standby ports still take I/O
  // once the handler activates them.
  return state == PathState::Up || state == PathState::Ghost;
}

std::string_view toString(AluaState state) {
  return nameOf(aluaStateNames, state);
}
std::optional<AluaState> parseAluaState(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  return lookup(aluaStateNames, text);
}

int aluaPriority(AluaState state, bool preferred) {
  // The same scale as multipath-tools' alua prioritizer, so that mixed setups
  // order groups identically.
  int priority = 0;
  switch (state) {
  case AluaState::ActiveOptimized:
    priority = 50;
    break;
  case AluaState::ActiveNonOptimized:
    priority = 10;
    break;
  case AluaState::LbaDependent:
    priority = 5;
    break;
  case AluaState::Standby:
    priority = 1;
    break;
  case AluaState::None:
  case AluaState::Unavailable:
  case AluaState::Offline:
  case AluaState::Transitioning:
    priority = 0;
    break;
  }
  if (preferred && state != AluaState::ActiveOptimized) {
    priority += 80;
  }
  return priority;
}

std::string Portal::str() const {
  const bool v6 = address.find(':') != std::string::npos;
  std::string out = v6 ? "[" + address + "]" : address;
  out += ":" + std::to_string(port) + "," + std::to_string(tpgt);
  return out;
}

int PathGroup::priority() const {
  int sum = 0;
  int usable = 0;
  for (const auto &path : paths) {
    if (isUsable(path.state)) {
      sum += path.priority;
      ++usable;
    }
  }
  return usable == 0 ? 0 : sum / usable;
}

int PathGroup::usablePaths() const {
  int usable = 0;
  for (const auto &path : paths) {
    usable += isUsable(path.state) ? 1 : 0;
  }
  return usable;
}

bool PathGroup::marginal() const {
  if (paths.empty()) {
    return false;
  }
  for (const auto &path : paths) {
    if (!path.marginal) {
      return false;
    }
  }
  return true;
}

std::string_view toString(SelectorKind kind) {
  return nameOf(selectorNames, kind);
}
std::optional<SelectorKind> parseSelectorKind(std::string_view text) {
  return lookup(selectorNames, text);
}

unsigned tableArgsPerPath(SelectorKind kind) {
  switch (kind) {
  case SelectorKind::RoundRobin:
  case SelectorKind::QueueLength:
  case SelectorKind::HistoricalServiceTime:
    return 1; // repeat_count
  case SelectorKind::ServiceTime:
    return 2; // repeat_count relative_throughput
  }
  return 0;
}

unsigned statusArgsPerPath(SelectorKind kind) {
  switch (kind) {
  case SelectorKind::RoundRobin:
    return 0;
  case SelectorKind::QueueLength:
    return 1; // in-flight count
  case SelectorKind::ServiceTime:
    return 2; // in-flight size, relative_throughput
  case SelectorKind::HistoricalServiceTime:
    return 3; // historical service time, outstanding, stale_after
  }
  return 0;
}

std::string MapSpec::dmUuid() const {
  return "mpath-" + wwid;
}

} // namespace pathkeeper::selector
