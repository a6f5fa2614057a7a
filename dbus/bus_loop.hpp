#pragma once

// Runs an sdbus-c++ connection on the daemon's sd-event loop, so that method
// handlers, replies and signals all happen on the loop thread and no
// sdbus-c++ thread exists.
//
// sdbus-c++ 1.2 exposes the connection as poll data: an fd, the poll events
// sd-bus wants and an absolute CLOCK_MONOTONIC timeout. The events include
// POLLOUT only while sd-bus has a queued, partly written message (a long
// GetManagedObjects reply, a burst of signals); if the loop does not watch
// POLLOUT then, the rest of the message waits until the next incoming
// message. So the attachment re-reads the poll data after every loop
// iteration (an sd-event post source) and watches what sd-bus asks for.

#include "event_loop.hpp"

namespace sdbus {
class IConnection;
}

namespace pathkeeper::dbus {

/// @brief Attaches @p connection to @p loop for as long as it lives.
/// Neither copyable nor movable: the sources point back at it.
class BusLoopAttachment {
public:
  /// @brief @p connection and @p loop must outlive the attachment.
  /// @throws sdbus::Error, std::system_error when the sources cannot be set up.
  BusLoopAttachment(sdbus::IConnection &connection, daemon::EventLoop &loop);
  ~BusLoopAttachment();
  BusLoopAttachment(const BusLoopAttachment &) = delete;
  BusLoopAttachment &operator=(const BusLoopAttachment &) = delete;

  /// @brief Processes what is pending and re-reads the poll data now; the
  /// loop does this by itself, this is for callers outside any loop callback.
  void dispatch();

private:
  void process();
  void rearm();

  sdbus::IConnection &connection_;
  daemon::EventLoop &loop_;
  daemon::EventSource io_;
  daemon::EventSource timer_;
  daemon::EventSource post_;
  unsigned ioEvents_ = 0;
};

} // namespace pathkeeper::dbus
