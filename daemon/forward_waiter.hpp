#pragma once

// Companion mode: an admin command (FailPath, SwitchGroup, DisableQueueing,
// ...) is carried out by multipathd, and its caller should hear multipathd's
// answer, not merely that the command was sent. A ForwardWaiter collects the
// answers to the forwards one command started and hands the outcome to the
// caller once the command has returned and every forward was answered: the
// first refusal, or success.
//
// Pure: no I/O, no clock. The caller's callback runs exactly once; if every
// holder drops the waiter first (multipathd's client destroyed at a switch to
// owner mode, or at exit), the destructor answers with an error.

#include "expected.hpp"

#include <functional>
#include <optional>
#include <string>

namespace pathkeeper::daemon {

class ForwardWaiter {
public:
  using Done = std::function<void(Expected<void>)>;

  explicit ForwardWaiter(Done done) : done_(std::move(done)) {}
  ~ForwardWaiter();
  ForwardWaiter(const ForwardWaiter &) = delete;
  ForwardWaiter &operator=(const ForwardWaiter &) = delete;

  /// @brief A forward to multipathd went out on the command's behalf.
  void sent() { ++outstanding_; }
  /// @brief multipathd's answer to @p command: @p ok, or why not. With
  /// @p retried, pathkeeperd sends it again by itself (path commands), and
  /// the error says so.
  void answered(const std::string &command, const Expected<void> &ok, bool retried = false);
  /// @brief The command itself returned @p result. An error is the outcome
  /// at once; otherwise the outcome waits for the forwards' answers.
  void returned(Expected<void> result);
  /// @brief The command threw: its caller answers, not this waiter.
  void abandon() { done_ = nullptr; }
  /// @brief The outcome was handed out (tests).
  [[nodiscard]] bool finished() const { return !done_; }

private:
  void finish(Expected<void> outcome);

  Done done_;
  unsigned outstanding_ = 0;
  bool returned_ = false;
  std::optional<std::string> error_;
};

} // namespace pathkeeper::daemon
