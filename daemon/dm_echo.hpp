#pragma once

// Telling the kernel's path events apart from the echoes of our own
// messages.
//
// The kernel raises DM_ACTION=PATH_FAILED / PATH_REINSTATED uevents both
// when it fails a path on its own (an I/O error) and when a fail_path or
// reinstate_path message changed the path. The echo reaches the daemon
// through udev, which under load can take seconds: by then the daemon may
// have decided the opposite. Read as the kernel's verdict, the late echo of
// an old fail_path marks a path that was just reinstated down again, and the
// echo of the reinstatement then looks like the kernel reinstating a down
// path, which is failed once more (seen in the VM lab: the path stayed
// failed until the next check of failed paths).
//
// So every message sent is recorded, and an event is an echo when it matches
// one (the first recorded message of the same kind for that path; older
// records of the other kind before it are dropped: a message that changed
// nothing raises no event). Records expire after a while, so a message that
// raised no event cannot hide a real kernel failure for long.
//
// Pure: time is an argument.

#include <chrono>
#include <deque>
#include <map>
#include <string>

namespace pathkeeper::daemon {

class DmEchoFilter {
public:
  using Clock = std::chrono::steady_clock;

  explicit DmEchoFilter(Clock::duration expiry = std::chrono::seconds(30)) : expiry_(expiry) {}

  /// @brief A fail_path (@p failed) or reinstate_path for @p device is being sent.
  void expect(const std::string &device, bool failed, Clock::time_point now);
  /// @brief That message failed: it raises no event. Drops the newest
  /// matching record.
  void cancel(const std::string &device, bool failed);
  /// @brief A PATH_FAILED (@p failed) or PATH_REINSTATED event for @p device
  /// arrived: true when it is the echo of a recorded message (consumed).
  bool isEcho(const std::string &device, bool failed, Clock::time_point now);
  /// @brief The path is gone: forget its records.
  void forget(const std::string &device) { pending_.erase(device); }

  /// @brief Records waiting for @p device, for tests and logs.
  [[nodiscard]] std::size_t pending(const std::string &device) const;

private:
  struct Sent {
    bool failed;
    Clock::time_point at;
  };
  void expire(std::deque<Sent> &sent, Clock::time_point now) const;

  Clock::duration expiry_;
  std::map<std::string, std::deque<Sent>> pending_;
};

} // namespace pathkeeper::daemon
