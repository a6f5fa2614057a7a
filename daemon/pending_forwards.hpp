#pragma once

// Companion mode: the path commands multipathd has not confirmed yet, so
// that one lost on the way is sent again.
//
// Owner mode puts dm right at every pass, from the health verdicts. In
// companion mode pathkeeper only forwards "fail path X" or "reinstate path
// X" to multipathd when its verdict on X changes, and a forward that times
// out (multipathd busy or restarting) or is refused would be lost for good.
// A lost reinstate is the worse one: multipathd's "fail path" also stops its
// own checker on the path (cli_fail in 0.9.4), so nothing else brings the
// path back. The path would stay failed in dm while pathkeeper shows it up.
//
// An entry lives from the forward until:
// - multipathd answers "ok";
// - a newer verdict on the path replaces it, or the path goes;
// - for a reinstate: dm reports the path reinstated (whoever did it), or
//   failed again while no send is on its way, by multipathd's checker or
//   the kernel, whose word is then the newest and is followed.
// A fail is settled by multipathd's "ok" alone: besides failing the path in
// dm it stops multipathd's own checker on it, which a failure in dm (an I/O
// error) does not; without it multipathd's checker would reinstate a path
// pathkeeper holds failed (a shaky hold-down, a failed probe).
// A failed forward is sent again after 1 s, then 2, 4, ... up to 30 s.
//
// Pure: time is an argument.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pathkeeper::daemon {

class PendingForwards {
public:
  using Clock = std::chrono::steady_clock;

  static constexpr Clock::duration kFirstRetry = std::chrono::seconds(1);
  static constexpr Clock::duration kLongestRetry = std::chrono::seconds(30);

  /// What a forward asks of multipathd, and which try it is.
  struct Forward {
    std::string device;
    bool fail = false;      ///< "fail path" (true) or "reinstate path"
    unsigned attempt = 1;   ///< 1 for the first send
    std::uint64_t ticket{}; ///< identifies this send's answer
    /// Which device the name stood for (the caller's opaque identity): the
    /// kernel reuses sdX names, and a retry must not reach the next device.
    std::string identity;
  };

  /// @brief A new verdict on @p device is being forwarded; it replaces any
  /// earlier entry for the path. @return the send to pass to answered().
  Forward sent(const std::string &device, bool fail, std::string identity = {});
  /// @brief multipathd's answer to @p forward (@p ok: "ok"). An answer to a
  /// send that a newer one replaced is ignored. A failure schedules the
  /// next try. @return when it is due, after a failure of the current send.
  std::optional<Clock::time_point> answered(const Forward &forward, bool ok, Clock::time_point now);
  /// @brief The kernel reported @p device failed (@p failed) or reinstated;
  /// @p ours: the echo of one of our own commands. @return true when this
  /// ended an entry.
  bool kernelReported(const std::string &device, bool failed, bool ours = false);
  /// @brief The path is gone.
  void forget(const std::string &device) { entries_.erase(device); }
  /// @brief Drops every entry: multipathd no longer owns the maps.
  void clear() { entries_.clear(); }

  /// @brief The entries due for another try at @p now. Each is taken as
  /// sent again: the caller either sends it (resent()) or drops it
  /// (forget(), e.g. when dm already shows what it asks).
  [[nodiscard]] std::vector<Forward> due(Clock::time_point now) const;
  /// @brief @p forward, one due() returned, is being sent again.
  /// @return the new send; nullopt when the entry ended or was replaced.
  std::optional<Forward> resent(const Forward &forward);
  /// @brief The earliest try that is due, if any.
  [[nodiscard]] std::optional<Clock::time_point> nextDeadline() const;

  /// @brief The unconfirmed entry of @p device, for tests and logs.
  [[nodiscard]] std::optional<Forward> pending(const std::string &device) const;
  [[nodiscard]] std::size_t size() const { return entries_.size(); }

private:
  struct Entry {
    Forward forward;
    bool inFlight = true;                     ///< sent, no answer yet
    std::optional<Clock::time_point> retryAt; ///< after a failed send
  };
  std::map<std::string, Entry> entries_;
  std::uint64_t nextTicket_ = 1;
};

} // namespace pathkeeper::daemon
