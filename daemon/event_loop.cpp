#include "event_loop.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <system_error>
#include <utility>

#include <systemd/sd-event.h>

namespace pathkeeper::daemon {
namespace {

void check(int rc, const char *what) {
  if (rc < 0) {
    throw std::system_error(-rc, std::generic_category(), what);
  }
}

std::uint64_t toUsec(EventLoop::Clock::time_point when) {
  // steady_clock is CLOCK_MONOTONIC on Linux, the clock sd-event uses here.
  auto usec = std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch());
  return usec.count() > 0 ? static_cast<std::uint64_t>(usec.count()) : 0;
}

// Callbacks live on the heap, owned by the source through its destroy callback.
template <typename F> F *own(sd_event_source *source, F handler) {
  auto *box = new F(std::move(handler));
  sd_event_source_set_userdata(source, box);
  sd_event_source_set_destroy_callback(source,
                                       [](void *userdata) { delete static_cast<F *>(userdata); });
  return box;
}

} // namespace

EventSource::EventSource(sd_event_source *source) : source_(source) {}
EventSource::~EventSource() {
  reset();
}
EventSource::EventSource(EventSource &&other) noexcept
    : source_(std::exchange(other.source_, nullptr)) {}
EventSource &EventSource::operator=(EventSource &&other) noexcept {
  if (this != &other) {
    reset();
    source_ = std::exchange(other.source_, nullptr);
  }
  return *this;
}
void EventSource::reset() {
  if (source_ != nullptr) {
    sd_event_source_disable_unref(source_);
    source_ = nullptr;
  }
}

EventLoop::EventLoop() {
  check(sd_event_new(&event_), "sd_event_new");
}
EventLoop::~EventLoop() {
  sd_event_unref(event_);
}

EventSource EventLoop::addIo(int fd, unsigned events, IoHandler handler) {
  sd_event_source *source = nullptr;
  check(sd_event_add_io(
            event_, &source, fd, events,
            [](sd_event_source *, int, uint32_t revents, void *userdata) {
              (*static_cast<IoHandler *>(userdata))(revents);
              return 0;
            },
            nullptr),
        "sd_event_add_io");
  own(source, std::move(handler));
  return EventSource(source);
}

void EventLoop::setIoEvents(const EventSource &source, unsigned events) {
  check(sd_event_source_set_io_events(source.get(), events), "sd_event_source_set_io_events");
}

EventSource EventLoop::addTimer(Clock::time_point when, Handler handler) {
  sd_event_source *source = nullptr;
  check(sd_event_add_time(
            event_, &source, CLOCK_MONOTONIC, toUsec(when), 1000,
            [](sd_event_source *, uint64_t, void *userdata) {
              (*static_cast<Handler *>(userdata))();
              return 0;
            },
            nullptr),
        "sd_event_add_time");
  own(source, std::move(handler));
  return EventSource(source);
}

void EventLoop::rearm(const EventSource &timer, Clock::time_point when) {
  check(sd_event_source_set_time(timer.get(), toUsec(when)), "sd_event_source_set_time");
  check(sd_event_source_set_enabled(timer.get(), SD_EVENT_ONESHOT), "sd_event_source_set_enabled");
}

void EventLoop::disable(const EventSource &source) {
  check(sd_event_source_set_enabled(source.get(), SD_EVENT_OFF), "sd_event_source_set_enabled");
}

EventSource EventLoop::addSignal(int signal, Handler handler) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, signal);
  // Threads started later inherit the mask, so only the loop sees the signal.
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) {
    throw std::system_error(errno, std::generic_category(), "sigprocmask");
  }
  sd_event_source *source = nullptr;
  check(sd_event_add_signal(
            event_, &source, signal,
            [](sd_event_source *, const struct signalfd_siginfo *, void *userdata) {
              (*static_cast<Handler *>(userdata))();
              return 0;
            },
            nullptr),
        "sd_event_add_signal");
  own(source, std::move(handler));
  return EventSource(source);
}

void EventLoop::enableWatchdog() {
  check(sd_event_set_watchdog(event_, 1), "sd_event_set_watchdog");
}

int EventLoop::run() {
  int rc = sd_event_loop(event_);
  check(rc, "sd_event_loop");
  return rc;
}

void EventLoop::runOnce(std::chrono::milliseconds timeout) {
  check(sd_event_run(event_,
                     static_cast<std::uint64_t>(
                         std::chrono::duration_cast<std::chrono::microseconds>(timeout).count())),
        "sd_event_run");
}

void EventLoop::exit(int code) {
  sd_event_exit(event_, code);
}

} // namespace pathkeeper::daemon
