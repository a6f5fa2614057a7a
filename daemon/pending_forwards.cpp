#include "pending_forwards.hpp"

#include <algorithm>

namespace pathkeeper::daemon {

PendingForwards::Forward PendingForwards::sent(const std::string &device, bool fail,
                                               std::string identity) {
  Entry &entry = entries_[device];
  entry = Entry{Forward{device, fail, 1, nextTicket_++, std::move(identity)}, true, std::nullopt};
  return entry.forward;
}

std::optional<PendingForwards::Clock::time_point>
PendingForwards::answered(const Forward &forward, bool ok, Clock::time_point now) {
  auto it = entries_.find(forward.device);
  if (it == entries_.end() || it->second.forward.ticket != forward.ticket) {
    return std::nullopt; // replaced, or settled by the kernel's report
  }
  if (ok) {
    entries_.erase(it);
    return std::nullopt;
  }
  Entry &entry = it->second;
  entry.inFlight = false;
  // 1 s, 2 s, 4 s, ... capped: a multipathd that restarts is back within
  // seconds, one that refuses for good is asked again twice a minute.
  Clock::duration delay = kFirstRetry;
  for (unsigned i = 1; i < entry.forward.attempt && delay < kLongestRetry; ++i) {
    delay *= 2;
  }
  entry.retryAt = now + std::min(delay, kLongestRetry);
  return entry.retryAt;
}

bool PendingForwards::kernelReported(const std::string &device, bool failed, bool ours) {
  auto it = entries_.find(device);
  if (it == entries_.end() || it->second.forward.fail) {
    return false; // a fail waits for multipathd's "ok" (see the header)
  }
  // A reinstate: done, by whoever did it. A failure while a send is on its
  // way, or the echo of our own earlier fail, is older news: the send
  // decides. Otherwise someone acted after ours was lost: theirs is the
  // newest word.
  if (!failed || (!it->second.inFlight && !ours)) {
    entries_.erase(it);
    return true;
  }
  return false;
}

std::vector<PendingForwards::Forward> PendingForwards::due(Clock::time_point now) const {
  std::vector<Forward> out;
  for (const auto &[device, entry] : entries_) {
    if (!entry.inFlight && entry.retryAt && *entry.retryAt <= now) {
      out.push_back(entry.forward);
    }
  }
  return out;
}

std::optional<PendingForwards::Forward> PendingForwards::resent(const Forward &forward) {
  auto it = entries_.find(forward.device);
  if (it == entries_.end() || it->second.forward.ticket != forward.ticket) {
    return std::nullopt;
  }
  Entry &entry = it->second;
  entry.forward.attempt += 1;
  entry.forward.ticket = nextTicket_++;
  entry.inFlight = true;
  entry.retryAt.reset();
  return entry.forward;
}

std::optional<PendingForwards::Clock::time_point> PendingForwards::nextDeadline() const {
  std::optional<Clock::time_point> next;
  for (const auto &[device, entry] : entries_) {
    if (!entry.inFlight && entry.retryAt && (!next || *entry.retryAt < *next)) {
      next = entry.retryAt;
    }
  }
  return next;
}

std::optional<PendingForwards::Forward> PendingForwards::pending(const std::string &device) const {
  auto it = entries_.find(device);
  if (it == entries_.end()) {
    return std::nullopt;
  }
  return it->second.forward;
}

} // namespace pathkeeper::daemon
