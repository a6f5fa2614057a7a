#include "health.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace pathkeeper::daemon {

namespace {

using selector::PathState;
using std::chrono::milliseconds;

/// "30s", "1.5s", "250ms": how durations read in log reasons.
std::string readable(milliseconds duration) {
  const auto count = duration.count();
  if (count % 1000 == 0) {
    return fmt::format("{}s", count / 1000);
  }
  if (count >= 1000) {
    return fmt::format("{:.1f}s", static_cast<double>(count) / 1000.0);
  }
  return fmt::format("{}ms", count);
}

std::string sessionLabel(const PathFacts &facts) {
  return facts.sessionId ? fmt::format("session {}", *facts.sessionId) : std::string{"session"};
}

bool sessionBad(SessionState session) {
  return session == SessionState::Failed || session == SessionState::Free;
}

bool deviceBad(DeviceState device) {
  return device == DeviceState::Offline || device == DeviceState::TransportOffline;
}

std::string_view toString(DeviceState device) {
  switch (device) {
  case DeviceState::Unknown:
    return "unknown";
  case DeviceState::Running:
    return "running";
  case DeviceState::Blocked:
    return "blocked";
  case DeviceState::Offline:
    return "offline";
  case DeviceState::TransportOffline:
    return "transport-offline";
  }
  return "unknown";
}

std::string_view toString(SessionState session) {
  switch (session) {
  case SessionState::Unknown:
    return "unknown";
  case SessionState::LoggedIn:
    return "LOGGED_IN";
  case SessionState::Failed:
    return "FAILED";
  case SessionState::Free:
    return "FREE";
  }
  return "unknown";
}

/// Probes name a portal by address and port; the path's tpgt is irrelevant.
bool samePair(const PathRoute &route, const std::string &netdev, const selector::Portal &portal) {
  return route.netdev == netdev && route.portal.address == portal.address &&
         route.portal.port == portal.port;
}

} // namespace

HealthTracker::HealthTracker(selector::HealthSettings settings, std::uint32_t seed)
    : settings_(std::move(settings)), random_(seed) {}

void HealthTracker::setSettings(const selector::HealthSettings &settings) {
  settings_ = settings;
}

void HealthTracker::setSettings(const selector::HealthSettings &settings, TimePoint now) {
  setSettings(settings);
  for (auto &[device, entry] : paths_) {
    if (entry.inFlight) {
      continue; // its result schedules the next one with the new interval
    }
    const bool failed = entry.shaky || !healthy(entry);
    const auto latest =
        now + jittered(failed ? settings_.failedCheckerInterval : healthyInterval(entry));
    entry.nextCheck = std::min(entry.nextCheck, latest);
  }
}

bool HealthTracker::healthy(const Entry &entry) const {
  return !entry.needsGoodCheck && !sessionBad(entry.facts.session) &&
         !deviceBad(entry.facts.device) && !(settings_.proactiveFailover && entry.probeFailed);
}

HealthTracker::TimePoint HealthTracker::releaseTime(const Entry &entry) const {
  const TimePoint held = entry.holdStart + entry.holdDown;
  if (!entry.healthySince) {
    return held;
  }
  return std::max(held, *entry.healthySince + entry.holdDown);
}

milliseconds HealthTracker::jittered(milliseconds interval) {
  const auto spread = interval.count() / 10;
  std::uniform_int_distribution<milliseconds::rep> offset(-spread, spread);
  return interval + milliseconds(offset(random_));
}

milliseconds HealthTracker::healthyInterval(const Entry &entry) const {
  const milliseconds cap =
      std::max(settings_.checkerInterval, settings_.effectiveMaxCheckerInterval());
  milliseconds interval = settings_.checkerInterval;
  for (unsigned pass = 1; pass < entry.passStreak && interval < cap; ++pass) {
    interval *= 2;
  }
  return std::min(interval, cap);
}

void HealthTracker::scheduleAfterResult(Entry &entry, TimePoint now) {
  const bool failed = entry.shaky || !healthy(entry);
  entry.nextCheck =
      now + jittered(failed ? settings_.failedCheckerInterval : healthyInterval(entry));
}

bool HealthTracker::afterBad(Entry &entry, bool wasHealthy, TimePoint now, std::string &reason) {
  entry.needsGoodCheck = true;
  entry.passStreak = 0;
  if (!entry.inFlight) {
    entry.nextCheck = std::min(entry.nextCheck, now + jittered(settings_.failedCheckerInterval));
  }
  if (!wasHealthy) {
    return false;
  }
  const bool wasShaky = entry.shaky;
  recordBad(entry, now, reason);
  return wasShaky || entry.shaky;
}

void HealthTracker::requestCheckNow(Entry &entry, TimePoint now) {
  entry.passStreak = 0; // whatever made the path suspect, watch it closely again
  if (entry.inFlight) {
    entry.recheckAfterFlight = true;
  } else {
    entry.nextCheck = now;
  }
}

void HealthTracker::recordBad(Entry &entry, TimePoint now, std::string &reason) {
  ++entry.failures;
  entry.healthySince.reset();
  auto &recent = entry.recentFailures;
  recent.erase(recent.begin(), std::find_if(recent.begin(), recent.end(), [&](TimePoint failedAt) {
                 return failedAt + settings_.flapWindow >= now;
               }));
  recent.push_back(now);
  if (!settings_.flapDamping) {
    return;
  }
  const auto cap = settings_.flapRecoveryMax;
  if (entry.shaky) {
    entry.holdDown = std::min(entry.holdDown * 2, cap);
    entry.holdStart = now;
    reason +=
        fmt::format("; failed again while shaky: held failed for {}", readable(entry.holdDown));
    return;
  }
  const auto threshold = std::max(settings_.flapThreshold, 1U);
  if (entry.recentFailures.size() < threshold) {
    return;
  }
  // A path that flaps again soon after its last release keeps growing its
  // hold-down instead of starting over.
  const bool recentlyReleased =
      entry.lastRelease && now - *entry.lastRelease <= settings_.flapWindow;
  entry.holdDown =
      std::min(recentlyReleased ? entry.lastHoldDown * 2 : settings_.flapRecovery, cap);
  entry.holdStart = now;
  entry.shaky = true;
  reason +=
      fmt::format("; failed {} times in {}: shaky, held failed for {}", entry.recentFailures.size(),
                  readable(settings_.flapWindow), readable(entry.holdDown));
}

HealthTracker::Decisions HealthTracker::evaluate(const std::string &device, Entry &entry,
                                                 TimePoint now, std::string reason, bool force) {
  const bool isHealthy = healthy(entry);
  if (!isHealthy) {
    entry.healthySince.reset();
  } else if (!entry.healthySince) {
    entry.healthySince = now;
  }
  if (entry.shaky && isHealthy && now >= releaseTime(entry)) {
    reason = fmt::format("stable for {} after flapping: hold-down over", readable(entry.holdDown));
    entry.shaky = false;
    entry.lastResort = false; // the caller marks it again if it turns shaky again
    entry.lastRelease = now;
    entry.lastHoldDown = entry.holdDown;
    entry.recentFailures.clear();
    entry.passStreak = 0; // just flapped: the closest watch of a working path
  }

  PathState next = PathState::Up;
  if (entry.shaky) {
    next = PathState::Shaky;
  } else if (!isHealthy) {
    next = PathState::Down;
  } else if (!entry.checked) {
    next = entry.standby ? PathState::Ghost
                         : (entry.inFlight ? PathState::Pending : PathState::Unknown);
  } else if (entry.standby) {
    next = PathState::Ghost;
  }

  std::optional<bool> wantFailed;
  if (next == PathState::Shaky && isHealthy && entry.lastResort) {
    wantFailed = false; // held failed, it would leave its map without a path
  } else if (next == PathState::Shaky || next == PathState::Down) {
    wantFailed = true;
  } else if (entry.checked && (next == PathState::Up || next == PathState::Ghost)) {
    wantFailed = false;
  }
  DmAction action = DmAction::None;
  if (wantFailed && *wantFailed != entry.failedInDm) {
    action = *wantFailed ? DmAction::Fail : DmAction::Reinstate;
    entry.failedInDm = *wantFailed;
  }

  if (next == entry.state && action == DmAction::None && !force) {
    return {};
  }
  if (next == PathState::Shaky && action == DmAction::Reinstate) {
    reason += "; shaky, but no other path of its map is usable: reinstated to carry the I/O until "
              "one is";
  }
  entry.state = next;
  return {HealthDecision{device, action, next, std::move(reason)}};
}

HealthTracker::Decisions HealthTracker::addPath(const std::string &device, const PathFacts &facts,
                                                TimePoint now) {
  Entry entry;
  entry.facts = facts;
  entry.standby = facts.alua == selector::AluaState::Standby;
  entry.failedInDm = facts.failedInDm;
  entry.nextCheck = now;
  std::string reason = "added: waiting for the first check";
  if (sessionBad(facts.session) || deviceBad(facts.device)) {
    // The first passing check after the session is back must reinstate it.
    entry.needsGoodCheck = true;
    reason = fmt::format("added with {} {} and sd device {}", sessionLabel(facts),
                         toString(facts.session), toString(facts.device));
  } else if (entry.standby) {
    reason = "added: ALUA standby, usable as a last resort";
  }
  auto [it, inserted] = paths_.insert_or_assign(device, std::move(entry));
  (void)inserted;
  return evaluate(device, it->second, now, std::move(reason), true);
}

HealthTracker::Decisions HealthTracker::removePath(const std::string &device, TimePoint) {
  if (paths_.erase(device) == 0) {
    return {};
  }
  return {HealthDecision{device, DmAction::None, PathState::Removed, "device removed"}};
}

HealthTracker::Decisions HealthTracker::kernelFailed(const std::string &device, TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  Entry &entry = it->second;
  const bool wasHealthy = healthy(entry);
  entry.failedInDm = true;
  std::string reason = "kernel failed the path (PATH_FAILED)";
  const bool dampingChanged = afterBad(entry, wasHealthy, now, reason);
  return evaluate(device, entry, now, std::move(reason), dampingChanged);
}

HealthTracker::Decisions HealthTracker::kernelReinstated(const std::string &device, TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  Entry &entry = it->second;
  entry.failedInDm = false;
  // dm had it failed (another tool, or our own message): watch it closely
  // again, from the next check on.
  entry.passStreak = 0;
  if (!entry.inFlight) {
    entry.nextCheck = std::min(entry.nextCheck, now + jittered(settings_.checkerInterval));
  }
  std::string reason = "kernel reinstated the path";
  if (entry.shaky) {
    reason = "kernel reinstated a shaky path during its hold-down: failing it again";
  } else if (!healthy(entry)) {
    reason = "kernel reinstated a path that is down: failing it again until a check passes";
    requestCheckNow(entry, now);
  }
  return evaluate(device, entry, now, std::move(reason));
}

HealthTracker::Decisions HealthTracker::markCheckStarted(const std::string &device, TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  it->second.inFlight = true;
  it->second.checkStarted = now;
  return evaluate(device, it->second, now, "first check started");
}

HealthTracker::Decisions HealthTracker::checkCompleted(const std::string &device,
                                                       const CheckResult &result, TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  Entry &entry = it->second;
  const bool recheck = entry.recheckAfterFlight;
  entry.inFlight = false;
  entry.recheckAfterFlight = false;
  entry.lastCheck = result.status;
  entry.lastCheckReason = result.reason;
  entry.lastCheckLatency = result.latency;
  if (result.status != CheckStatus::Transitioning) {
    entry.transitioningSince.reset();
  } else {
    if (!entry.transitioningSince) {
      entry.transitioningSince = now;
    }
    entry.passStreak = 0;
    if (now - *entry.transitioningSince < kTransitionLimit) {
      // The array is moving the LU between its ports, and scsi_dh_alua
      // holds the path's I/O meanwhile: not a failure (failing it would
      // count towards flap damping). The path keeps its state, and the
      // check after the transition decides.
      entry.nextCheck = recheck ? now
                                : now + std::min<milliseconds>(settings_.failedCheckerInterval,
                                                               kTransitionRecheck);
      return {};
    }
  }
  entry.checked = true;

  std::string reason;
  bool dampingChanged = false;
  if (result.status == CheckStatus::Ok || result.status == CheckStatus::Standby) {
    const bool standby = result.status == CheckStatus::Standby;
    if (standby != entry.standby) {
      entry.passStreak = 0; // up <-> ghost: a change of state starts the backoff over
    }
    entry.standby = standby;
    const auto &facts = entry.facts;
    if (sessionBad(facts.session)) {
      reason = fmt::format("TUR passed but {} is {}: not reinstating", sessionLabel(facts),
                           toString(facts.session));
    } else if (deviceBad(facts.device)) {
      reason = fmt::format("TUR passed but the sd device is {}: not reinstating",
                           toString(facts.device));
    } else if (settings_.proactiveFailover && entry.probeFailed) {
      reason = "TUR passed but the probe of its NIC and portal fails: not reinstating";
    } else {
      entry.needsGoodCheck = false;
      // A shaky path's passes (every failed_checker_interval during its
      // hold-down) do not count: once released it starts at checkerInterval.
      if (!entry.shaky &&
          entry.passStreak < std::numeric_limits<decltype(entry.passStreak)>::max()) {
        ++entry.passStreak;
      }
      const std::string passed =
          entry.standby ? fmt::format("TUR reports standby ({}): ghost, a last resort",
                                      result.reason.empty() ? "not ready" : result.reason)
                        : std::string{"TUR passed"};
      reason = facts.session == SessionState::LoggedIn
                   ? fmt::format("{} logged in and {}", sessionLabel(facts), passed)
                   : passed;
    }
  } else {
    const bool wasHealthy = healthy(entry);
    if (result.status == CheckStatus::TimedOut) {
      reason = fmt::format("TUR timed out after {}",
                           readable(std::chrono::duration_cast<milliseconds>(result.latency)));
    } else if (result.status == CheckStatus::Transitioning) {
      reason = fmt::format("TUR reports an ALUA transition for over {}: {}",
                           readable(std::chrono::duration_cast<milliseconds>(kTransitionLimit)),
                           result.reason.empty() ? "no reason given" : result.reason);
    } else {
      reason =
          fmt::format("TUR failed: {}", result.reason.empty() ? "no reason given" : result.reason);
    }
    dampingChanged = afterBad(entry, wasHealthy, now, reason);
  }
  scheduleAfterResult(entry, now);
  if (recheck && !healthy(entry)) {
    // The session logged in while this check was in flight; its failure may
    // predate the login, so look again at once.
    entry.nextCheck = now;
  }
  return evaluate(device, entry, now, std::move(reason), dampingChanged);
}

HealthTracker::Decisions HealthTracker::sessionChanged(const std::string &device,
                                                       SessionState session, TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  Entry &entry = it->second;
  if (entry.facts.session == session) {
    return {};
  }
  const bool wasHealthy = healthy(entry);
  const bool wasBad = sessionBad(entry.facts.session);
  entry.facts.session = session;
  std::string reason =
      fmt::format("{} is {}", sessionLabel(entry.facts), toString(entry.facts.session));
  bool dampingChanged = false;
  if (sessionBad(session)) {
    dampingChanged = afterBad(entry, wasHealthy, now, reason);
  } else if (session == SessionState::LoggedIn && (wasBad || entry.needsGoodCheck)) {
    // Never reinstate on the session event alone: a TUR must confirm first.
    requestCheckNow(entry, now);
  }
  return evaluate(device, entry, now, std::move(reason), dampingChanged);
}

HealthTracker::Decisions HealthTracker::deviceChanged(const std::string &device, DeviceState state,
                                                      TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  Entry &entry = it->second;
  if (entry.facts.device == state) {
    return {};
  }
  const bool wasHealthy = healthy(entry);
  const DeviceState before = entry.facts.device;
  entry.facts.device = state;
  std::string reason = fmt::format("sd device is {}", toString(state));
  bool dampingChanged = false;
  if (deviceBad(state)) {
    dampingChanged = afterBad(entry, wasHealthy, now, reason);
  } else if (state == DeviceState::Running &&
             (before == DeviceState::Blocked || deviceBad(before) || entry.needsGoodCheck)) {
    requestCheckNow(entry, now);
  }
  return evaluate(device, entry, now, std::move(reason), dampingChanged);
}

HealthTracker::Decisions HealthTracker::aluaChanged(const std::string &device,
                                                    selector::AluaState alua, TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end()) {
    return {};
  }
  Entry &entry = it->second;
  if (entry.facts.alua != alua) {
    // Called for every path at every sync: only a real change restarts the
    // backoff and brings the next check forward.
    entry.passStreak = 0;
    if (!entry.inFlight) {
      entry.nextCheck = std::min(entry.nextCheck, now + jittered(settings_.checkerInterval));
    }
  }
  entry.facts.alua = alua;
  entry.standby = alua == selector::AluaState::Standby;
  return evaluate(device, entry, now, fmt::format("ALUA state is {}", selector::toString(alua)));
}

HealthTracker::Decisions HealthTracker::setLastResort(const std::string &device, bool lastResort,
                                                      TimePoint now) {
  auto it = paths_.find(device);
  if (it == paths_.end() || it->second.lastResort == lastResort) {
    return {};
  }
  it->second.lastResort = lastResort;
  return evaluate(device, it->second, now,
                  lastResort ? "its map has no stable path left"
                             : "another path of its map is usable again; held failed until "
                               "stable");
}

bool HealthTracker::inUseAsLastResort(const std::string &device) const {
  auto it = paths_.find(device);
  return it != paths_.end() && it->second.shaky && it->second.lastResort && healthy(it->second);
}

void HealthTracker::setRoute(const std::string &device, PathRoute route) {
  if (auto it = paths_.find(device); it != paths_.end()) {
    it->second.facts.route = std::move(route);
  }
}

namespace {
std::string pairKey(const std::string &netdev, const selector::Portal &portal) {
  return fmt::format("{}|{}:{}", netdev, portal.address, portal.port);
}
} // namespace

unsigned HealthTracker::probeFailuresInARow(const std::string &netdev,
                                            const selector::Portal &portal) const {
  auto it = probeFailures_.find(pairKey(netdev, portal));
  return it == probeFailures_.end() ? 0U : it->second;
}

HealthTracker::Decisions HealthTracker::probeResult(const std::string &netdev,
                                                    const selector::Portal &portal, bool ok,
                                                    std::string_view reason, TimePoint now) {
  unsigned inARow = 0;
  if (ok) {
    probeFailures_.erase(pairKey(netdev, portal));
  } else {
    inARow = ++probeFailures_[pairKey(netdev, portal)];
  }
  if (!settings_.proactiveFailover ||
      (!ok && inARow < std::max(1U, settings_.proactiveFailoverProbes))) {
    return {};
  }
  Decisions decisions;
  for (auto &[device, entry] : paths_) {
    if (!samePair(entry.facts.route, netdev, portal)) {
      continue;
    }
    const std::string pair = fmt::format("{}:{} via {}", portal.address, portal.port,
                                         netdev.empty() ? "any NIC" : netdev);
    Decisions one;
    if (ok) {
      if (!entry.probeFailed) {
        continue;
      }
      entry.probeFailed = false;
      requestCheckNow(entry, now);
      one = evaluate(device, entry, now, fmt::format("probe of {} passed again", pair));
    } else {
      const bool wasHealthy = healthy(entry);
      entry.probeFailed = true;
      std::string why = inARow == 1 ? fmt::format("probe of {} failed: {}", pair, reason)
                                    : fmt::format("probe of {} failed {} times in a row: {}", pair,
                                                  inARow, reason);
      const bool dampingChanged = afterBad(entry, wasHealthy, now, why);
      one = evaluate(device, entry, now, std::move(why), dampingChanged);
    }
    decisions.insert(decisions.end(), std::make_move_iterator(one.begin()),
                     std::make_move_iterator(one.end()));
  }
  return decisions;
}

HealthTracker::Decisions HealthTracker::tick(TimePoint now, const std::set<std::string> &queued) {
  Decisions decisions;
  for (auto &[device, entry] : paths_) {
    Decisions one;
    if (entry.inFlight && queued.contains(device)) {
      // Waiting for a worker says nothing about the path: a dead portal's
      // hung checks must not fail the paths queued behind them.
      entry.checkStarted = now;
    }
    if (entry.inFlight && now >= entry.checkStarted + 2 * settings_.checkerTimeout) {
      const auto waited =
          std::chrono::duration_cast<std::chrono::microseconds>(now - entry.checkStarted);
      one = checkCompleted(device,
                           CheckResult{CheckStatus::TimedOut,
                                       "the checker did not report within twice checker_timeout",
                                       waited},
                           now);
    } else if (entry.shaky) {
      one = evaluate(device, entry, now, {});
    }
    decisions.insert(decisions.end(), std::make_move_iterator(one.begin()),
                     std::make_move_iterator(one.end()));
  }
  return decisions;
}

std::optional<HealthTracker::TimePoint> HealthTracker::dueOf(const Entry &entry) {
  if (entry.inFlight || entry.facts.device == DeviceState::Blocked) {
    return std::nullopt;
  }
  return entry.nextCheck;
}

// dueChecks() and nextDeadline() run after every batch of check results: at
// 1000 paths that is a few hundred walks a second, so they must not look
// each path up again by name.
std::vector<std::string> HealthTracker::dueChecks(TimePoint now) const {
  std::vector<std::string> due;
  for (const auto &[device, entry] : paths_) {
    if (const auto when = dueOf(entry); when && *when <= now) {
      due.push_back(device);
    }
  }
  return due;
}

std::optional<HealthTracker::TimePoint>
HealthTracker::nextCheckDue(const std::string &device) const {
  const auto it = paths_.find(device);
  return it == paths_.end() ? std::nullopt : dueOf(it->second);
}

std::optional<HealthTracker::TimePoint> HealthTracker::nextDeadline() const {
  std::optional<TimePoint> earliest;
  const auto consider = [&earliest](TimePoint when) {
    if (!earliest || when < *earliest) {
      earliest = when;
    }
  };
  for (const auto &[device, entry] : paths_) {
    if (const auto due = dueOf(entry)) {
      consider(*due);
    }
    if (entry.inFlight) {
      consider(entry.checkStarted + 2 * settings_.checkerTimeout);
    }
    if (entry.shaky && healthy(entry)) {
      consider(releaseTime(entry));
    }
  }
  return earliest;
}

std::optional<selector::PathState> HealthTracker::state(const std::string &device) const {
  const auto it = paths_.find(device);
  if (it == paths_.end()) {
    return std::nullopt;
  }
  return it->second.state;
}

std::optional<PathHealth> HealthTracker::health(const std::string &device) const {
  const auto it = paths_.find(device);
  if (it == paths_.end()) {
    return std::nullopt;
  }
  const Entry &entry = it->second;
  PathHealth health;
  health.state = entry.state;
  health.failures = entry.failures;
  health.shaky = entry.shaky;
  if (entry.shaky) {
    health.holdDownUntil = releaseTime(entry);
  }
  health.lastCheck = entry.lastCheck;
  health.lastCheckReason = entry.lastCheckReason;
  health.lastCheckLatency = entry.lastCheckLatency;
  health.checkInFlight = entry.inFlight;
  health.failedInDm = entry.failedInDm;
  return health;
}

std::vector<std::string> HealthTracker::devices() const {
  std::vector<std::string> names;
  names.reserve(paths_.size());
  for (const auto &[device, entry] : paths_) {
    names.push_back(device);
  }
  return names;
}

} // namespace pathkeeper::daemon
