#include "event_loop.hpp"

#include "log.hpp"

#include <fmt/core.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <exception>
#include <stdexcept>
#include <string>
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

/// What the last handler that failed on this thread threw, for runOnce().
thread_local std::string lastFailure;

/// Runs a callback for sd-event. See the header: whatever escapes it ends
/// the loop instead of unwinding through sd-event.
template <typename Call> int guarded(sd_event_source *source, Call &&call) noexcept {
  // Taken first: a handler that destroys its own source detaches it from
  // the loop, and the source would no longer name it.
  sd_event *event = sd_event_source_get_event(source);
  const char *what = "an exception of unknown type";
  std::string message;
  try {
    call();
    return 0;
  } catch (const std::exception &e) {
    try {
      message = e.what();
      what = message.c_str();
    } catch (...) {
      what = "an exception whose message could not be copied";
    }
  } catch (...) {
  }
  try {
    lastFailure = what;
    log::error(fmt::format("internal error: an event handler failed: {}; exiting with status {} "
                           "so that the service is restarted (the maps stay as they are)",
                           what, EventLoop::kInternalError));
  } catch (...) {
    // Out of memory: the exit status still says it.
  }
  sd_event_exit(event, EventLoop::kInternalError);
  return 0;
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
            [](sd_event_source *s, int, uint32_t revents, void *userdata) {
              return guarded(s, [&] { (*static_cast<IoHandler *>(userdata))(revents); });
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
            [](sd_event_source *s, uint64_t, void *userdata) {
              return guarded(s, [&] { (*static_cast<Handler *>(userdata))(); });
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
            [](sd_event_source *s, const struct signalfd_siginfo *, void *userdata) {
              return guarded(s, [&] { (*static_cast<Handler *>(userdata))(); });
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
  // A test driving the loop step by step hears of a failed handler as an
  // exception, at the step where it happened and at every later one.
  const auto throwIfAHandlerFailed = [this] {
    int code = 0;
    if (sd_event_get_exit_code(event_, &code) >= 0 && code == kInternalError) {
      throw std::runtime_error("an event handler failed: " + lastFailure);
    }
  };
  throwIfAHandlerFailed();
  check(sd_event_run(event_,
                     static_cast<std::uint64_t>(
                         std::chrono::duration_cast<std::chrono::microseconds>(timeout).count())),
        "sd_event_run");
  throwIfAHandlerFailed();
}

void EventLoop::exit(int code) {
  sd_event_exit(event_, code);
}

} // namespace pathkeeper::daemon
