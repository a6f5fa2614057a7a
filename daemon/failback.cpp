#include "failback.hpp"

#include "per_map_state.hpp"

#include <fmt/format.h>

namespace pathkeeper::daemon {

unsigned bestGroup(std::span<const FailbackGroup> groups) {
  const FailbackGroup *best = nullptr;
  for (const auto &group : groups) {
    if (group.usable == 0) {
      continue;
    }
    // Strictly greater, and ties to the lower number: the kernel also takes
    // the first group when priorities are equal.
    if (best == nullptr || group.priority > best->priority ||
        (group.priority == best->priority && group.number < best->number)) {
      best = &group;
    }
  }
  return best == nullptr ? 0 : best->number;
}

std::optional<SwitchDecision> FailbackTracker::evaluate(std::string_view alias,
                                                        const selector::Failback &policy,
                                                        std::span<const FailbackGroup> groups,
                                                        unsigned active, TimePoint now) {
  auto it = maps_.find(alias);
  if (it == maps_.end()) {
    it = maps_.emplace(std::string(alias), MapState{}).first;
  }
  MapState &state = it->second;

  const unsigned best = bestGroup(groups);
  const FailbackGroup *bestInfo = nullptr;
  std::map<unsigned, unsigned> usable;
  for (const auto &group : groups) {
    usable[group.number] = group.usable;
    if (group.number == best) {
      bestInfo = &group;
    }
  }
  const auto previous = state.usable.find(best);
  const bool cameBack =
      state.seen && best != 0 && (previous == state.usable.end() || previous->second == 0);
  state.usable = std::move(usable);
  state.seen = true;

  if (state.requested != 0 && (active == state.requested || best != state.requested)) {
    state.requested = 0;
  }
  state.deadline.reset();
  if (best == 0 || best == active) {
    state.candidate = 0;
    return std::nullopt;
  }
  if (state.candidate != best) {
    state.candidate = best;
    state.candidateSince = now;
  }
  if (state.requested == best) {
    return std::nullopt;
  }

  std::string reason;
  const std::string preferred =
      fmt::format("group {} (priority {}, {} usable path{}) is preferred over {}", best,
                  bestInfo->priority, bestInfo->usable, bestInfo->usable == 1 ? "" : "s",
                  active == 0 ? std::string{"no active group"} : fmt::format("group {}", active));
  switch (policy.kind) {
  case selector::Failback::Kind::Manual:
    return std::nullopt;
  case selector::Failback::Kind::Immediate:
    reason = fmt::format("{}: immediate failback", preferred);
    break;
  case selector::Failback::Kind::Followover:
    if (!cameBack) {
      return std::nullopt;
    }
    reason = fmt::format("{} and its first path came back: followover failback", preferred);
    break;
  case selector::Failback::Kind::Deferred: {
    const TimePoint due = state.candidateSince + policy.delay;
    if (now < due) {
      state.deadline = due;
      return std::nullopt;
    }
    reason = fmt::format(
        "{} and has been usable for {}s: deferred failback", preferred,
        std::chrono::duration_cast<std::chrono::seconds>(now - state.candidateSince).count());
    break;
  }
  }
  state.requested = best;
  state.candidate = 0;
  return SwitchDecision{best, std::move(reason)};
}

void FailbackTracker::switchFailed(std::string_view alias) {
  if (auto it = maps_.find(alias); it != maps_.end()) {
    it->second.requested = 0;
  }
}

void FailbackTracker::forgetIf(const std::function<bool(std::string_view)> &gone) {
  std::erase_if(maps_, [&](const auto &entry) { return gone(entry.first); });
}

void FailbackTracker::forget(std::string_view alias) {
  forgetMap(maps_, alias);
}

void FailbackTracker::rename(const MapRenames &renames) {
  renameMaps(maps_, renames);
}

std::optional<FailbackTracker::TimePoint> FailbackTracker::nextDeadline() const {
  return earliestDeadline(maps_);
}

} // namespace pathkeeper::daemon
