#include "adaptive_controller.hpp"

#include "dm_table.hpp"
#include "per_map_state.hpp"

#include <array>
#include <cmath>

namespace pathkeeper::daemon {

using selector::AdaptiveDecision;

std::string firstUnsettledPath(const std::vector<PathSettling> &paths) {
  for (const auto &path : paths) {
    const bool usable = path.state && (*path.state == selector::PathState::Up ||
                                       *path.state == selector::PathState::Ghost);
    if (!usable || path.failedInDm.value_or(true)) {
      return path.device;
    }
  }
  return {};
}

AdaptiveController::AdaptiveController(selector::AdaptiveSettings settings) : settings_(settings) {}

void AdaptiveController::setSettings(const selector::AdaptiveSettings &settings) {
  if (settings == settings_) {
    return;
  }
  bool estimatorChanged = selector::estimatorSettings(settings).halfLife !=
                              selector::estimatorSettings(settings_).halfLife ||
                          settings.idleIops != settings_.idleIops;
  settings_ = settings;
  if (estimatorChanged) {
    estimators_.clear();
  }
  for (auto &[alias, map] : maps_) {
    map.governor.setSettings(settings_);
  }
}

std::map<std::string_view, std::string_view> parseDiskstats(std::string_view text) {
  std::map<std::string_view, std::string_view> lines;
  const auto isSpace = [](char c) { return c == ' ' || c == '\t'; };
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    // major, minor, name, then the counters.
    std::array<std::string_view, 3> words{};
    std::size_t at = 0;
    bool complete = true;
    for (auto &word : words) {
      while (at < line.size() && isSpace(line[at])) {
        ++at;
      }
      const std::size_t start = at;
      while (at < line.size() && !isSpace(line[at])) {
        ++at;
      }
      word = line.substr(start, at - start);
      complete = complete && !word.empty();
    }
    if (!complete) {
      continue;
    }
    while (at < line.size() && isSpace(line[at])) {
      ++at;
    }
    lines.insert_or_assign(words[2], line.substr(at));
  }
  return lines;
}

void AdaptiveController::sample(const std::string &device, std::string_view statText,
                                TimePoint now) {
  auto stat = selector::parseBlockStat(statText);
  if (!stat) {
    return;
  }
  auto it = estimators_.find(device);
  if (it == estimators_.end()) {
    it =
        estimators_.emplace(device, selector::PathEstimator(selector::estimatorSettings(settings_)))
            .first;
  }
  it->second.add(selector::StatSample{now, *stat});
}

void AdaptiveController::forgetPath(const std::string &device) {
  estimators_.erase(device);
  published_.erase(device);
}

namespace {

// True when @p now is outside the dead band around @p shown.
bool movedBeyond(double shown, double now, double percent) {
  if (shown <= 0) {
    return now > 0;
  }
  return std::abs(now - shown) * 100.0 > percent * shown;
}

} // namespace

bool AdaptiveController::refreshPublished() {
  bool changed = false;
  for (auto it = published_.begin(); it != published_.end();) {
    if (!estimators_.contains(it->first)) {
      it = published_.erase(it); // restarted or forgotten: unmeasured again
      changed = true;
    } else {
      ++it;
    }
  }
  for (const auto &[device, estimator] : estimators_) {
    const selector::PathEstimate &estimate = estimator.estimate();
    PublishedEstimate &shown = published_[device];
    if (estimate.busySamples == 0) {
      if (shown != PublishedEstimate{}) {
        shown = PublishedEstimate{}; // reset: nothing measured since
        changed = true;
      }
      continue;
    }
    PublishedEstimate next = shown;
    if (movedBeyond(static_cast<double>(shown.throughputBps), estimate.throughputBytesPerSecond,
                    kPublishDeadBandPercent)) {
      next.throughputBps =
          static_cast<std::uint64_t>(std::llround(estimate.throughputBytesPerSecond));
    }
    if (movedBeyond(static_cast<double>(shown.capacityBps), estimate.capacityBytesPerSecond,
                    kPublishDeadBandPercent)) {
      next.capacityBps = static_cast<std::uint64_t>(std::llround(estimate.capacityBytesPerSecond));
    }
    const double latencyUs = estimate.latencyMs * 1000.0;
    if (shown.latencyUs < 0 ||
        movedBeyond(static_cast<double>(shown.latencyUs), latencyUs, kPublishDeadBandPercent)) {
      next.latencyUs = std::llround(latencyUs);
    }
    next.confidencePercent =
        static_cast<unsigned>(std::floor(estimate.confidence * 10.0 + 1e-9)) * 10U;
    if (next != shown) {
      shown = next;
      changed = true;
    }
  }
  return changed;
}

PublishedEstimate AdaptiveController::published(const std::string &device) const {
  auto it = published_.find(device);
  return it == published_.end() ? PublishedEstimate{} : it->second;
}

AdaptiveDecision AdaptiveController::evaluate(const AdaptiveMapInput &input, TimePoint now,
                                              WallTime wall) {
  auto [it, inserted] = maps_.try_emplace(
      input.alias, MapState{selector::ReloadGovernor(settings_), std::nullopt, {}, {}});
  MapState &map = it->second;
  selector::AdaptiveInput governed;
  governed.map = input.alias;
  governed.currentSelector = input.currentSelector;
  governed.autoSelector = input.autoSelector;
  governed.pathTransition = !input.transitionDevice.empty();
  governed.transitionDevice = input.transitionDevice;
  for (const auto &path : input.paths) {
    selector::PathCapacity capacity;
    capacity.device = path.device;
    capacity.currentWeight = path.weight;
    if (const auto *estimate = this->estimate(path.device)) {
      capacity.capacity = selector::confidentCapacity(*estimate, settings_);
      capacity.drainMs = selector::expectedDrainMs(*estimate);
    }
    governed.paths.push_back(std::move(capacity));
  }
  AdaptiveDecision decision = map.governor.evaluate(governed, now);

  bool record = false;
  switch (decision.action) {
  case AdaptiveDecision::Action::Reload:
    record = true;
    if (input.autoSelector) {
      map.selector = decision.selector;
    }
    if (decision.selector == selector::SelectorKind::ServiceTime) {
      for (std::size_t i = 0; i < governed.paths.size() && i < decision.weights.size(); ++i) {
        map.weights[governed.paths[i].device] = decision.weights[i];
      }
    }
    break;
  case AdaptiveDecision::Action::Held:
  case AdaptiveDecision::Action::Deferred:
  case AdaptiveDecision::Action::Lull:
    // Once per run: the sampling timer asks every few seconds.
    record = map.history.empty() || map.history.back().action != decision.action;
    break;
  case AdaptiveDecision::Action::Keep:
  case AdaptiveDecision::Action::Waiting:
    break;
  }
  if (record) {
    map.history.push_back(AdaptiveRecord{wall, decision.action, decision.reason});
    while (map.history.size() > kHistoryLength) {
      map.history.pop_front();
    }
  }
  return decision;
}

bool AdaptiveController::applyTo(selector::PlannedMap &planned) const {
  auto it = maps_.find(planned.spec.alias);
  if (it == maps_.end()) {
    return false;
  }
  const MapState &map = it->second;
  bool changed = false;
  if (map.selector && planned.autoSelector && planned.spec.selector != *map.selector) {
    planned.spec.selector = *map.selector;
    changed = true;
  }
  for (auto &group : planned.spec.groups) {
    for (auto &path : group.paths) {
      auto weight = map.weights.find(path.device);
      if (weight != map.weights.end() && path.relativeThroughput != weight->second) {
        path.relativeThroughput = weight->second;
        changed = true;
      }
    }
  }
  if (!changed) {
    return false;
  }
  auto table = selector::renderDmTable(planned.spec);
  if (table) {
    planned.table = *table;
  } else {
    planned.table.clear(); // the reconciler renders it and reports the problem
  }
  std::string weights;
  for (const auto &group : planned.spec.groups) {
    for (const auto &path : group.paths) {
      weights += (weights.empty() ? "" : ", ") + path.device + " " +
                 std::to_string(path.relativeThroughput);
    }
  }
  planned.notes.push_back("adaptive: selector " + std::string(toString(planned.spec.selector)) +
                          (planned.spec.selector == selector::SelectorKind::ServiceTime
                               ? ", measured weights " + weights
                               : std::string()));
  return true;
}

void AdaptiveController::forgetMap(const std::string &alias) {
  maps_.erase(alias);
}

void AdaptiveController::forgetMapsIf(const std::function<bool(std::string_view)> &gone) {
  std::erase_if(maps_, [&](const auto &entry) { return gone(entry.first); });
}

void AdaptiveController::renameMaps(const MapRenames &renames) {
  daemon::renameMaps(maps_, renames);
}

const selector::PathEstimate *AdaptiveController::estimate(const std::string &device) const {
  auto it = estimators_.find(device);
  return it == estimators_.end() ? nullptr : &it->second.estimate();
}

std::optional<unsigned> AdaptiveController::decidedWeight(const std::string &device) const {
  for (const auto &[alias, map] : maps_) {
    auto it = map.weights.find(device);
    if (it != map.weights.end()) {
      return it->second;
    }
  }
  return std::nullopt;
}

const std::deque<AdaptiveRecord> &AdaptiveController::history(const std::string &alias) const {
  static const std::deque<AdaptiveRecord> none;
  auto it = maps_.find(alias);
  return it == maps_.end() ? none : it->second.history;
}

unsigned AdaptiveController::reloads(const std::string &alias) const {
  auto it = maps_.find(alias);
  return it == maps_.end() ? 0 : it->second.governor.reloads();
}

} // namespace pathkeeper::daemon
