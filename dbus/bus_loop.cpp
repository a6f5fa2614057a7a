#include "bus_loop.hpp"

#include "log.hpp"

#include <poll.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <system_error>

#include <sdbus-c++/sdbus-c++.h>
#include <systemd/sd-event.h>

namespace pathkeeper::dbus {
namespace {

// Messages handled per wake-up before other sources get a turn; the timer
// (timeout 0 while sd-bus has more queued) brings the loop straight back.
constexpr int kMaxMessagesPerWakeup = 64;

unsigned toEpoll(short pollEvents) {
  unsigned events = 0;
  if ((pollEvents & POLLIN) != 0) {
    events |= EPOLLIN;
  }
  if ((pollEvents & POLLOUT) != 0) {
    events |= EPOLLOUT;
  }
  return events;
}

} // namespace

BusLoopAttachment::BusLoopAttachment(sdbus::IConnection &connection, daemon::EventLoop &loop)
    : connection_(connection), loop_(loop) {
  const auto data = connection_.getEventLoopPollData();
  ioEvents_ = toEpoll(data.events);
  io_ = loop_.addIo(data.fd, ioEvents_, [this](unsigned) { process(); });
  timer_ = loop_.addTimer(daemon::EventLoop::Clock::now(), [this] { process(); });
  sd_event_source *post = nullptr;
  const int rc = sd_event_add_post(
      loop_.get(), &post,
      [](sd_event_source *, void *self) {
        static_cast<BusLoopAttachment *>(self)->rearm();
        return 0;
      },
      this);
  if (rc < 0) {
    throw std::system_error(-rc, std::generic_category(), "sd_event_add_post for D-Bus");
  }
  post_ = daemon::EventSource(post);
}

BusLoopAttachment::~BusLoopAttachment() = default;

void BusLoopAttachment::dispatch() {
  process();
  rearm();
}

void BusLoopAttachment::process() {
  try {
    for (int i = 0; i < kMaxMessagesPerWakeup && connection_.processPendingRequest(); ++i) {
    }
  } catch (const std::exception &error) {
    // Without the bus the daemon is deaf; systemd restarts it.
    daemon::log::error(std::string("D-Bus connection failed: ") + error.what());
    loop_.exit(1);
  }
}

void BusLoopAttachment::rearm() {
  try {
    const auto data = connection_.getEventLoopPollData();
    const unsigned events = toEpoll(data.events);
    if (events != ioEvents_) {
      daemon::EventLoop::setIoEvents(io_, events);
      ioEvents_ = events;
    }
    if (data.timeout_usec == std::numeric_limits<std::uint64_t>::max()) {
      sd_event_source_set_enabled(timer_.get(), SD_EVENT_OFF);
    } else {
      daemon::EventLoop::rearm(
          timer_, daemon::EventLoop::Clock::time_point{
                      std::chrono::microseconds(static_cast<std::int64_t>(data.timeout_usec))});
    }
  } catch (const std::exception &error) {
    daemon::log::error(std::string("D-Bus connection failed: ") + error.what());
    loop_.exit(1);
  }
}

} // namespace pathkeeper::dbus
