#pragma once

// A thin owner of an sd-event loop: io sources, one-shot monotonic timers
// and signals, each with a std::function callback, and the systemd
// watchdog. Callbacks run on the loop thread only; nothing here blocks.
//
// A callback is expected to handle its own failures. An exception that
// escapes one anyway must not unwind through sd-event's C frames (that
// would leave the loop marked as dispatching for good, or terminate the
// process without a word): it is logged, and the loop ends with
// kInternalError. pathkeeperd then exits with that status; its maps stay as
// they are, systemd restarts it (Restart=on-failure), and the new process
// adopts the maps without reloading them. A daemon that went on after a
// half-run handler could keep a pass marked as running and never reconcile
// again, which is worse than a restart.

#include <chrono>
#include <functional>
#include <memory>

struct sd_event;
struct sd_event_source;

namespace pathkeeper::daemon {

/// @brief An event source; removing it is destroying (or reset()ing) it.
class EventSource {
public:
  EventSource() = default;
  explicit EventSource(sd_event_source *source);
  ~EventSource();
  EventSource(EventSource &&other) noexcept;
  EventSource &operator=(EventSource &&other) noexcept;
  EventSource(const EventSource &) = delete;
  EventSource &operator=(const EventSource &) = delete;

  void reset();
  [[nodiscard]] bool active() const { return source_ != nullptr; }
  [[nodiscard]] sd_event_source *get() const { return source_; }

private:
  sd_event_source *source_ = nullptr;
};

/// @brief One sd-event loop. Move-only; sources must not outlive it.
class EventLoop {
public:
  using Clock = std::chrono::steady_clock;
  using IoHandler = std::function<void(unsigned revents)>;
  using Handler = std::function<void()>;
  /// @brief run()'s result when a callback threw (EX_SOFTWARE, sysexits.h).
  static constexpr int kInternalError = 70;

  /// @throws std::system_error when sd-event cannot be set up.
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop &) = delete;
  EventLoop &operator=(const EventLoop &) = delete;

  /// @brief Watches @p fd for @p events (EPOLLIN, EPOLLOUT).
  [[nodiscard]] EventSource addIo(int fd, unsigned events, IoHandler handler);
  /// @brief Changes the events an io source waits for.
  static void setIoEvents(const EventSource &source, unsigned events);
  /// @brief Runs @p handler once at @p when (CLOCK_MONOTONIC, as steady_clock).
  [[nodiscard]] EventSource addTimer(Clock::time_point when, Handler handler);
  /// @brief Moves a one-shot timer to @p when and enables it again.
  static void rearm(const EventSource &timer, Clock::time_point when);
  /// @brief Stops a source from firing (it stays allocated until reset).
  static void disable(const EventSource &source);
  /// @brief Blocks @p signal for the thread and delivers it to @p handler.
  [[nodiscard]] EventSource addSignal(int signal, Handler handler);

  /// @brief Sends WATCHDOG=1 at half of WATCHDOG_USEC, when systemd asks for it.
  void enableWatchdog();
  /// @brief Runs until exit() is called; returns the exit code.
  int run();
  /// @brief Dispatches what is due, waiting at most @p timeout for it: one
  /// iteration of run(), for tests that drive the loop step by step.
  /// @throws std::runtime_error once a handler has failed (the loop then
  /// ends with kInternalError), naming what it threw.
  void runOnce(std::chrono::milliseconds timeout);
  void exit(int code);

  [[nodiscard]] sd_event *get() const { return event_; }

private:
  sd_event *event_ = nullptr;
};

} // namespace pathkeeper::daemon
