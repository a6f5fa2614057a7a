#include "no_path_retry.hpp"

#include "per_map_state.hpp"

#include <fmt/format.h>

namespace pathkeeper::daemon {

namespace {

std::string seconds(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  return ms % 1000 == 0 ? fmt::format("{}s", ms / 1000) : fmt::format("{}ms", ms);
}

} // namespace

std::optional<QueueDecision> NoPathRetryTracker::evaluate(std::string_view alias,
                                                          const selector::NoPathRetry &policy,
                                                          unsigned usable, unsigned unknown,
                                                          std::chrono::milliseconds interval,
                                                          TimePoint now) {
  using Kind = selector::NoPathRetry::Kind;
  auto it = maps_.find(alias);
  if (it == maps_.end()) {
    it = maps_.emplace(std::string(alias), MapState{}).first;
  }
  MapState &state = it->second;
  state.policy = policy;

  if (policy.kind != Kind::Count || usable > 0) {
    state.deadline.reset();
    if (!state.expired) {
      return std::nullopt;
    }
    state.expired = false;
    if (policy.kind == Kind::Fail) {
      return std::nullopt; // its table does not queue: nothing to restore
    }
    return QueueDecision{
        true, usable > 0 ? fmt::format("{} usable path{} again", usable, usable == 1 ? "" : "s")
                         : std::string{"no_path_retry is now \"queue\""}};
  }
  if (state.expired) {
    return std::nullopt;
  }
  if (unknown > 0) {
    state.deadline.reset(); // a path not checked yet may carry I/O
    return std::nullopt;
  }
  const auto limit = interval * policy.count;
  if (!state.deadline) {
    state.deadline = now + limit;
  }
  if (now < *state.deadline) {
    return std::nullopt;
  }
  state.deadline.reset();
  state.expired = true;
  return QueueDecision{false,
                       fmt::format("no usable path for {} (no_path_retry {} x checker_interval {})",
                                   seconds(limit), policy.count, seconds(interval))};
}

std::optional<selector::NoPathRetry> NoPathRetryTracker::lastPolicy(std::string_view alias) const {
  auto it = maps_.find(alias);
  return it != maps_.end() ? it->second.policy : std::nullopt;
}

bool NoPathRetryTracker::expired(std::string_view alias) const {
  auto it = maps_.find(alias);
  return it != maps_.end() && it->second.expired;
}

void NoPathRetryTracker::adoptExpired(std::string_view alias) {
  MapState &state = maps_[std::string(alias)];
  state.deadline.reset();
  state.expired = true;
}

void NoPathRetryTracker::sendFailed(std::string_view alias, TimePoint retryAt) {
  auto it = maps_.find(alias);
  if (it == maps_.end()) {
    return;
  }
  MapState &state = it->second;
  if (state.expired) {
    // fail_if_no_path did not reach the kernel: try again at retryAt.
    state.expired = false;
    state.deadline = retryAt;
  } else {
    // queue_if_no_path did not: the next evaluation with a usable path
    // asks again.
    state.expired = true;
  }
}

void NoPathRetryTracker::forget(std::string_view alias) {
  forgetMap(maps_, alias);
}

void NoPathRetryTracker::rename(const MapRenames &renames) {
  renameMaps(maps_, renames);
}

void NoPathRetryTracker::forgetIf(const std::function<bool(std::string_view)> &gone) {
  std::erase_if(maps_, [&](const auto &entry) { return gone(entry.first); });
}

std::optional<NoPathRetryTracker::TimePoint> NoPathRetryTracker::nextDeadline() const {
  return earliestDeadline(maps_);
}

} // namespace pathkeeper::daemon
