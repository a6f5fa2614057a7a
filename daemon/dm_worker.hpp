#pragma once

// The device-mapper worker: one thread that owns every DeviceMapper call
// once the daemon runs, so that the event loop never waits for the kernel.
//
// Why a thread and not the loop: a reload suspends the map, and a suspend
// waits until the I/O already sent down its paths completes (seconds on a
// slow or dying link); create and resume then wait for udev to run its
// rules on the new table (the cookie), which under load takes seconds more.
// The loop meanwhile must keep reading uevents, checker results and D-Bus.
//
// Order: one worker runs its jobs one at a time, in posting order, so a
// fail_path posted after a reload on the same worker reaches the new table.
// libdevmapper's process-wide state (log hook, udev sync switch, control
// fd) is set up before the workers start; its log capture is per thread,
// and concurrent ioctls from two threads are what dmeventd does too.
//
// A job runs on the worker and returns its continuation, which the loop
// runs after drain(): results travel by value inside that closure, and only
// the loop thread touches the daemon's state.
//
// The daemon runs two of them, one for table work and one for messages (see
// Daemon::start), so that a hung udev delays no path failure.
//
// Threading: post() and pending() are for the loop thread; fd() is
// readable (eventfd) while continuations wait; drain() runs them on the
// caller's thread.

#include "dm_adapter.hpp"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pathkeeper::daemon {

class DmWorker {
public:
  /// @brief What the loop runs once the job is done.
  using Continuation = std::function<void()>;
  /// @brief Runs on the worker thread, with the only DeviceMapper access.
  using Job = std::function<Continuation(DeviceMapper &)>;

  /// @brief Starts the thread. @p dm must outlive the worker.
  /// @throws std::system_error when the eventfd or the thread cannot be created.
  /// @param name the thread's name in `top -H` and /proc (at most 15 bytes).
  DmWorker(DeviceMapper &dm, const char *name);
  /// @brief stop(), if not done yet.
  ~DmWorker();
  DmWorker(const DmWorker &) = delete;
  DmWorker &operator=(const DmWorker &) = delete;

  /// @brief Queues @p job; @p label names it in logs ("reload xserve-upper").
  /// A job that throws is logged as an error with its label; jobs are
  /// expected to catch what they can handle themselves. After stop() the job
  /// is not run, and the log names it.
  void post(std::string label, Job job);

  /// @brief Readable while finished jobs' continuations wait.
  [[nodiscard]] int fd() const { return eventFd_; }

  /// @brief Runs the waiting continuations, in posting order.
  /// @throws std::runtime_error when a continuation throws a std::exception:
  /// its message names the job ("after the device-mapper job 'reload
  /// xserve-upper': ..."); anything else comes out as it was thrown. Either
  /// way the continuations after it stay queued for the next drain().
  void drain();

  /// @brief Jobs posted and whose continuation has not run yet.
  [[nodiscard]] std::size_t pending() const { return pending_; }

  /// @brief Lets the running job finish (a reload half done would leave a
  /// map suspended), drops the queued ones and joins the thread. Returns
  /// the labels of the dropped jobs, for the exit log. Idempotent.
  std::vector<std::string> stop();
  /// @brief Whether stop() has begun (jobs are no longer taken).
  [[nodiscard]] bool stopping() const;

  /// @brief The longest job so far and its label (for status and logs).
  struct Longest {
    std::string label;
    std::chrono::microseconds elapsed{0};
  };
  [[nodiscard]] Longest longest() const;

private:
  struct Queued {
    std::string label;
    Job job;
  };
  struct Finished {
    std::string label;
    Continuation then;
  };

  void run();
  /// Makes fd() readable; the caller holds mutex_.
  void signalDone();

  DeviceMapper &dm_;
  int eventFd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Queued> queue_;  // guarded by mutex_
  std::deque<Finished> done_; // guarded by mutex_
  bool stopping_ = false;     // guarded by mutex_
  Longest longest_;           // guarded by mutex_
  std::size_t pending_ = 0;   // loop thread only
  std::thread thread_;
};

} // namespace pathkeeper::daemon
