#include "adaptive.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace pathkeeper::selector {

namespace {

constexpr unsigned kMaxWeight = 100;

unsigned scaled(double value, double fastest) {
  if (fastest <= 0) {
    return kMaxWeight;
  }
  auto weight = static_cast<unsigned>(std::lround(kMaxWeight * value / fastest));
  return std::clamp(weight, 1U, kMaxWeight);
}

// Current weights on the same scale as computed ones (fastest = 100), so
// that "1 1" (equal) and "100 100" compare as the same table.
std::vector<unsigned> normalised(const std::vector<unsigned> &weights) {
  unsigned top = weights.empty() ? 0 : *std::ranges::max_element(weights);
  std::vector<unsigned> out;
  out.reserve(weights.size());
  for (unsigned w : weights) {
    out.push_back(scaled(w, top));
  }
  return out;
}

std::string joinWeights(const std::vector<unsigned> &weights) {
  std::string out;
  for (unsigned w : weights) {
    out += out.empty() ? "" : "/";
    out += std::to_string(w);
  }
  return out;
}

std::string describeCapacities(const std::vector<PathCapacity> &paths) {
  std::string out;
  for (const auto &path : paths) {
    out += out.empty() ? "" : " vs ";
    out += path.capacity ? formatRate(*path.capacity) : path.device + " unmeasured";
  }
  return out + " busy capacity";
}

std::size_t confidentCount(const std::vector<PathCapacity> &paths) {
  return static_cast<std::size_t>(
      std::ranges::count_if(paths, [](const PathCapacity &p) { return p.capacity.has_value(); }));
}

} // namespace

EstimatorSettings estimatorSettings(const AdaptiveSettings &settings) {
  return EstimatorSettings{settings.halfLife, static_cast<double>(settings.idleIops)};
}

std::optional<double> confidentCapacity(const PathEstimate &estimate,
                                        const AdaptiveSettings &settings) {
  if (estimate.busySamples == 0 ||
      estimate.confidence * 100.0 < static_cast<double>(settings.minConfidencePercent)) {
    return std::nullopt;
  }
  return estimate.capacityBytesPerSecond;
}

std::optional<double> msPerRequest(const PathEstimate &estimate) {
  if (estimate.capacityBytesPerSecond > 0 && estimate.iops > 0 &&
      estimate.throughputBytesPerSecond > 0) {
    const double bytesPerRequest = estimate.throughputBytesPerSecond / estimate.iops;
    return 1000.0 * bytesPerRequest / estimate.capacityBytesPerSecond;
  }
  return std::nullopt;
}

std::optional<double> expectedDrainMs(const PathEstimate &estimate) {
  if (estimate.inFlight == 0) {
    return 0.0;
  }
  if (auto perRequest = msPerRequest(estimate)) {
    return static_cast<double>(estimate.inFlight) * *perRequest;
  }
  return std::nullopt;
}

std::vector<unsigned> computeWeights(const std::vector<PathCapacity> &paths) {
  double fastest = 0;
  std::vector<unsigned> current;
  for (const auto &path : paths) {
    fastest = std::max(fastest, path.capacity.value_or(0.0));
    current.push_back(path.currentWeight);
  }
  if (fastest <= 0) {
    return current;
  }
  // An unmeasured path keeps its nominal share on the 1..100 scale, i.e.
  // relative to the fastest nominal path, as if that were the fastest
  // measured one: equal nominal weights mean "assume as fast".
  std::vector<unsigned> nominal = normalised(current);
  std::vector<unsigned> out;
  out.reserve(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    out.push_back(paths[i].capacity ? scaled(*paths[i].capacity, fastest) : nominal[i]);
  }
  return out;
}

bool weightsMoved(const std::vector<unsigned> &current, const std::vector<unsigned> &proposed,
                  unsigned hysteresisPercent) {
  if (current.size() != proposed.size()) {
    return true;
  }
  std::vector<unsigned> from = normalised(current);
  std::vector<unsigned> to = normalised(proposed);
  for (std::size_t i = 0; i < from.size(); ++i) {
    auto diff =
        static_cast<unsigned>(std::abs(static_cast<int>(to[i]) - static_cast<int>(from[i])));
    if (diff > 1 && diff * 100 > hysteresisPercent * from[i]) {
      return true;
    }
  }
  return false;
}

std::optional<SelectorKind> chooseAutoSelector(const std::vector<PathCapacity> &paths,
                                               SelectorKind current,
                                               unsigned equalTolerancePercent) {
  if (confidentCount(paths) < 2) {
    return std::nullopt;
  }
  double slowest = 0;
  double fastest = 0;
  bool first = true;
  for (const auto &path : paths) {
    if (!path.capacity) {
      continue;
    }
    slowest = first ? *path.capacity : std::min(slowest, *path.capacity);
    fastest = first ? *path.capacity : std::max(fastest, *path.capacity);
    first = false;
  }
  if (fastest <= 0) {
    return std::nullopt;
  }
  double spreadPercent = 100.0 * (1.0 - slowest / fastest);
  double tolerance = static_cast<double>(equalTolerancePercent);
  bool equalNow = current == SelectorKind::ServiceTime ? spreadPercent <= tolerance / 2
                                                       : spreadPercent <= tolerance;
  return equalNow ? SelectorKind::QueueLength : SelectorKind::ServiceTime;
}

std::string_view toString(AdaptiveDecision::Action action) {
  switch (action) {
  case AdaptiveDecision::Action::Keep:
    return "keep";
  case AdaptiveDecision::Action::Reload:
    return "reload";
  case AdaptiveDecision::Action::Deferred:
    return "deferred";
  case AdaptiveDecision::Action::Held:
    return "held";
  case AdaptiveDecision::Action::Waiting:
    return "waiting";
  case AdaptiveDecision::Action::Lull:
    return "lull";
  }
  return "keep";
}

AdaptiveDecision ReloadGovernor::evaluate(const AdaptiveInput &input, TimePoint now) {
  AdaptiveDecision decision;
  decision.selector = input.currentSelector;
  std::vector<unsigned> current;
  for (const auto &path : input.paths) {
    current.push_back(path.currentWeight);
  }
  decision.weights = current;
  std::string prefix = input.map + ": ";

  std::size_t confident = confidentCount(input.paths);
  bool selectorWanted = input.autoSelector;
  if (confident < 2) {
    lullSince_.reset();
    decision.action = AdaptiveDecision::Action::Waiting;
    decision.reason = prefix + "waiting for measurements (" + std::to_string(confident) + " of " +
                      std::to_string(input.paths.size()) + " paths measured with confidence)";
    return decision;
  }

  SelectorKind selector = input.currentSelector;
  std::string selectorWhy;
  if (selectorWanted) {
    selector =
        chooseAutoSelector(input.paths, input.currentSelector, settings_.equalTolerancePercent)
            .value_or(input.currentSelector);
    selectorWhy =
        selector == SelectorKind::QueueLength
            ? "paths equal within " + std::to_string(settings_.equalTolerancePercent) + "%"
            : "paths unequal";
  }
  std::vector<unsigned> proposed =
      selector == SelectorKind::ServiceTime ? computeWeights(input.paths) : current;
  bool selectorChanged = selector != input.currentSelector;
  bool weightsChanged = selector == SelectorKind::ServiceTime &&
                        weightsMoved(current, proposed, settings_.hysteresisPercent);
  decision.selector = selector;
  decision.weights = proposed;

  std::string what;
  if (selector == SelectorKind::ServiceTime) {
    what = "weights " + describeWeights(input.paths, proposed);
  }
  if (selectorWanted) {
    what = "selector " + std::string(toString(selector)) + (what.empty() ? "" : ", " + what);
  }
  std::string measured = " (" + (selectorWhy.empty() ? "" : selectorWhy + ": ") + "measured " +
                         describeCapacities(input.paths) + ")";
  std::string previous = "; previous ";
  if (selectorWanted) {
    previous += std::string(toString(input.currentSelector)) + " ";
  }
  previous += joinWeights(current);

  if (!selectorChanged && !weightsChanged) {
    lullSince_.reset();
    decision.action = AdaptiveDecision::Action::Keep;
    decision.weights = current;
    decision.reason = prefix + "keeping " + what + measured + ": within " +
                      std::to_string(settings_.hysteresisPercent) + "% hysteresis";
    return decision;
  }
  if (input.pathTransition) {
    lullSince_.reset();
    decision.action = AdaptiveDecision::Action::Held;
    decision.reason = prefix + "holding " + what + measured + " while " +
                      (input.transitionDevice.empty() ? "a path" : input.transitionDevice) +
                      " is failing or being reinstated";
    return decision;
  }
  if (lastReload_ && now - *lastReload_ < settings_.minReloadInterval) {
    auto since = std::chrono::duration_cast<std::chrono::seconds>(now - *lastReload_);
    auto interval = std::chrono::duration_cast<std::chrono::seconds>(settings_.minReloadInterval);
    lullSince_.reset();
    decision.action = AdaptiveDecision::Action::Deferred;
    decision.reason = prefix + "deferring " + what + measured + ": last reload " +
                      std::to_string(since.count()) + "s ago, minimum interval " +
                      std::to_string(interval.count()) + "s";
    return decision;
  }
  std::string held;
  bool atLull = settings_.reloadHoldWait.count() > 0;
  if (atLull) {
    // The longest drain decides: the paths drain side by side.
    const PathCapacity *slowest = nullptr;
    for (const auto &path : input.paths) {
      if (path.drainMs && (slowest == nullptr || *path.drainMs > *slowest->drainMs)) {
        slowest = &path;
      }
    }
    const auto target = static_cast<double>(settings_.reloadHoldTarget.count());
    if (slowest != nullptr && *slowest->drainMs > target) {
      if (!lullSince_) {
        lullSince_ = now;
      }
      const auto waited = now - *lullSince_;
      const auto drain =
          std::to_string(std::lround(*slowest->drainMs)) + " ms (" + slowest->device + ")";
      if (waited < settings_.reloadHoldWait) {
        decision.action = AdaptiveDecision::Action::Lull;
        decision.reason = prefix + "waiting for a lull to load " + what + measured +
                          ": the I/O in flight would hold the map about " + drain + ", over the " +
                          std::to_string(settings_.reloadHoldTarget.count()) +
                          " ms reload_hold_target; " + "reloading regardless after " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                             settings_.reloadHoldWait)
                                             .count()) +
                          "s";
        return decision;
      }
      atLull = false;
      held = "; no lull in " +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(waited).count()) +
             "s, the I/O in flight holds the map about " + drain;
    }
  }
  lullSince_.reset();
  lastReload_ = now;
  ++reloads_;
  decision.action = AdaptiveDecision::Action::Reload;
  decision.reason = prefix + what + measured + previous + held;
  decision.atLull = atLull;
  return decision;
}

std::string describeWeights(const std::vector<PathCapacity> &paths,
                            const std::vector<unsigned> &weights) {
  std::string out;
  for (std::size_t i = 0; i < paths.size() && i < weights.size(); ++i) {
    out += out.empty() ? "" : ", ";
    out += paths[i].device + " " + std::to_string(weights[i]);
  }
  return out;
}

std::string formatRate(double bytesPerSecond) {
  char buffer[32];
  double megabytes = bytesPerSecond / 1e6;
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), megabytes,
                                 std::chars_format::fixed, megabytes < 10 ? 1 : 0);
  if (ec != std::errc()) {
    return "? MB/s";
  }
  return std::string(buffer, end) + " MB/s";
}

} // namespace pathkeeper::selector
