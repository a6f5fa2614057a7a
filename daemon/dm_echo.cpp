#include "dm_echo.hpp"

#include <algorithm>

namespace pathkeeper::daemon {

void DmEchoFilter::expect(const std::string &device, bool failed, Clock::time_point now) {
  auto &sent = pending_[device];
  expire(sent, now);
  sent.push_back({failed, now});
}

void DmEchoFilter::cancel(const std::string &device, bool failed) {
  auto it = pending_.find(device);
  if (it == pending_.end()) {
    return;
  }
  auto &sent = it->second;
  auto newest = std::find_if(sent.rbegin(), sent.rend(),
                             [failed](const Sent &s) { return s.failed == failed; });
  if (newest != sent.rend()) {
    sent.erase(std::next(newest).base());
  }
  if (sent.empty()) {
    pending_.erase(it);
  }
}

bool DmEchoFilter::isEcho(const std::string &device, bool failed, Clock::time_point now) {
  auto it = pending_.find(device);
  if (it == pending_.end()) {
    return false;
  }
  auto &sent = it->second;
  expire(sent, now);
  auto match = std::find_if(sent.begin(), sent.end(),
                            [failed](const Sent &s) { return s.failed == failed; });
  const bool echo = match != sent.end();
  if (echo) {
    // Earlier records of the other kind changed nothing (no event of
    // their own), or their events were missed: either way, done.
    sent.erase(sent.begin(), std::next(match));
  }
  if (sent.empty()) {
    pending_.erase(it);
  }
  return echo;
}

std::size_t DmEchoFilter::pending(const std::string &device) const {
  auto it = pending_.find(device);
  return it == pending_.end() ? 0 : it->second.size();
}

void DmEchoFilter::expire(std::deque<Sent> &sent, Clock::time_point now) const {
  while (!sent.empty() && now - sent.front().at > expiry_) {
    sent.pop_front();
  }
}

} // namespace pathkeeper::daemon
