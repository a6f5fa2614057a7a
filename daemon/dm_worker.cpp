#include "dm_worker.hpp"

#include "log.hpp"

#include <fmt/core.h>

#include <cerrno>
#include <cstdint>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace pathkeeper::daemon {

DmWorker::DmWorker(DeviceMapper &dm, const char *name)
    : dm_(dm), eventFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (eventFd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "dm worker: eventfd");
  }
  try {
    thread_ = std::thread([this, name] {
      ::pthread_setname_np(::pthread_self(), name);
      run();
    });
  } catch (...) {
    ::close(eventFd_);
    throw;
  }
}

DmWorker::~DmWorker() {
  stop();
  ::close(eventFd_);
}

std::vector<std::string> DmWorker::stop() {
  std::vector<std::string> dropped;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      return dropped;
    }
    stopping_ = true;
    for (const auto &queued : queue_) {
      dropped.push_back(queued.label);
    }
    queue_.clear();
  }
  wake_.notify_one();
  if (thread_.joinable()) {
    thread_.join();
  }
  return dropped;
}

void DmWorker::post(std::string label, Job job) {
  bool queued = false;
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      queue_.push_back(Queued{std::move(label), std::move(job)});
      queued = true;
    }
  }
  if (!queued) {
    // As the daemon's exit log lists the jobs stop() dropped.
    log::info(fmt::format("exit: device-mapper job dropped, posted after the stop: {}", label));
    return;
  }
  ++pending_;
  wake_.notify_one();
}

void DmWorker::run() {
  for (;;) {
    Queued next;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        return; // stopping, and stop() dropped the rest
      }
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto start = std::chrono::steady_clock::now();
    Continuation then;
    try {
      then = next.job(dm_);
    } catch (const std::exception &e) {
      then = [label = next.label, what = std::string(e.what())] {
        log::error(fmt::format("device-mapper: {}: {}", label, what));
      };
    } catch (...) {
      then = [label = next.label] {
        log::error(fmt::format("device-mapper: {}: unknown error", label));
      };
    }
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start);
    {
      std::lock_guard lock(mutex_);
      if (longest_.label.empty() || elapsed > longest_.elapsed) {
        longest_ = Longest{next.label, elapsed};
      }
      // An empty continuation still counts: pending() must go down.
      done_.push_back(
          Finished{std::move(next.label), then ? std::move(then) : Continuation([] {})});
      signalDone();
    }
  }
}

void DmWorker::signalDone() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto wrote = ::write(eventFd_, &one, sizeof(one));
}

void DmWorker::drain() {
  std::deque<Finished> ready;
  {
    std::lock_guard lock(mutex_);
    // Under the mutex, as run() writes it: readable exactly while
    // continuations wait.
    std::uint64_t count = 0;
    [[maybe_unused]] const auto got = ::read(eventFd_, &count, sizeof(count));
    ready.swap(done_);
  }
  while (!ready.empty()) {
    Finished finished = std::move(ready.front());
    ready.pop_front();
    --pending_;
    try {
      finished.then();
    } catch (...) {
      // The rest were not run: they go back in front of any newer ones,
      // and the fd stays readable for them.
      if (!ready.empty()) {
        std::lock_guard lock(mutex_);
        done_.insert(done_.begin(), std::make_move_iterator(ready.begin()),
                     std::make_move_iterator(ready.end()));
        signalDone();
      }
      try {
        throw;
      } catch (const std::exception &e) {
        throw std::runtime_error(
            fmt::format("after the device-mapper job '{}': {}", finished.label, e.what()));
      }
    }
  }
}

bool DmWorker::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

DmWorker::Longest DmWorker::longest() const {
  std::lock_guard lock(mutex_);
  return longest_;
}

} // namespace pathkeeper::daemon
