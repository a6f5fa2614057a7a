#pragma once

// A TCP listener on 127.0.0.1 standing in for a portal that accepts each
// connection and closes it at once: it counts the connections made to it
// (SendTargets probes'), and every probe that reaches it fails. Traffic
// stays on loopback.

#include "loopback_listener.hpp"

#include <cstdint>

#include <unistd.h>

namespace pathkeeper::daemon::fakes {

class ClosingPortal {
public:
  [[nodiscard]] std::uint16_t port() const { return listener_.port(); }

  /// Accepts and closes what is waiting. @return the connections so far.
  unsigned connections() {
    for (int c; (c = listener_.accept()) >= 0;) {
      ::close(c);
      ++count_;
    }
    return count_;
  }

private:
  LoopbackListener listener_;
  unsigned count_ = 0;
};

} // namespace pathkeeper::daemon::fakes
