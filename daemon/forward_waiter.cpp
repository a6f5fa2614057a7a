#include "forward_waiter.hpp"

#include "log.hpp"

#include <fmt/format.h>

#include <utility>

namespace pathkeeper::daemon {

ForwardWaiter::~ForwardWaiter() {
  if (done_) {
    // A forward's callback was dropped unanswered. (A command that threw
    // was abandon()ed.)
    finish(fail(error_.value_or("multipathd's answer was lost: pathkeeperd stopped forwarding "
                                "to it (it left companion mode, or is exiting)")));
  }
}

void ForwardWaiter::answered(const std::string &command, const Expected<void> &ok, bool retried) {
  if (outstanding_ > 0) {
    --outstanding_;
  }
  if (!ok && !error_) {
    error_ = fmt::format("multipathd: {}: {}{}", command, ok.error(),
                         retried ? "; pathkeeperd sends it again until multipathd takes it" : "");
  }
  if (returned_ && outstanding_ == 0) {
    finish(error_ ? Expected<void>(fail(*error_)) : Expected<void>{});
  }
}

void ForwardWaiter::returned(Expected<void> result) {
  if (!result) {
    finish(std::move(result));
    return;
  }
  returned_ = true;
  if (outstanding_ == 0) {
    finish(error_ ? Expected<void>(fail(*error_)) : Expected<void>{});
  }
}

void ForwardWaiter::finish(Expected<void> outcome) {
  if (auto done = std::exchange(done_, nullptr)) {
    try {
      done(std::move(outcome));
    } catch (const std::exception &error) {
      // From the loop or a destructor, where nothing may throw.
      log::error(fmt::format("answering an admin's command: {}", error.what()));
    }
  }
}

} // namespace pathkeeper::daemon
