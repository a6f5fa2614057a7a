// DmWorker: jobs run off the calling thread, in order, and their
// continuations run only in drain(), on the caller's thread; a throwing job
// is reported; stop() finishes the running job and drops the queued ones.
// DeviceMapper::reload's held time comes from resumeReturned().

#include "dm_worker.hpp"

#include "log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <poll.h>
#include <pthread.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pathkeeper::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

/// Records calls (from whichever thread makes them) and can hold a call
/// until the test opens a gate.
class RecordingDm final : public DeviceMapper {
public:
  std::vector<DmMapInfo> list() override { return {}; }
  std::optional<DmMapInfo> info(const std::string &) override { return std::nullopt; }
  std::optional<std::vector<DmTargetLine>> table(const std::string &) override {
    return std::nullopt;
  }
  std::optional<std::vector<DmTargetLine>> status(const std::string &) override {
    return std::nullopt;
  }
  CreateReport create(const std::string &name, const std::string &, std::uint64_t,
                      const std::string &) override {
    record("create " + name);
    return {};
  }
  void load(const std::string &name, std::uint64_t, const std::string &) override {
    record("load " + name);
  }
  void clearInactive(const std::string &name) override { record("clear " + name); }
  void suspend(const std::string &name) override { record("suspend " + name); }
  void resume(const std::string &name) override { record("resume " + name); }
  void remove(const std::string &name, bool) override { record("remove " + name); }
  RenameReport rename(const std::string &name, const std::string &newName) override {
    record("rename " + name + " " + newName);
    return {};
  }
  void message(const std::string &name, const std::string &text) override {
    record("message " + name + " " + text);
    if (text == "hold") {
      std::unique_lock lock(mutex_);
      holding_ = true;
      changed_.notify_all();
      changed_.wait(lock, [this] { return released_; });
    }
  }
  void messageUuid(const std::string &uuid, const std::string &name,
                   const std::string &text) override {
    record("message " + name + " (" + uuid + ") " + text);
  }
  [[nodiscard]] std::chrono::steady_clock::time_point resumeReturned() const override {
    return resumeReturned_ ? *resumeReturned_ : std::chrono::steady_clock::now();
  }

  std::vector<std::string> calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }
  void waitUntilHolding() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return holding_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  std::optional<std::chrono::steady_clock::time_point> resumeReturned_;

private:
  void record(std::string call) {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
    threads_.push_back(std::this_thread::get_id());
  }
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> calls_;
  std::vector<std::thread::id> threads_;
  bool holding_ = false;
  bool released_ = false;
};

/// Waits (no time limit of its own: ctest's timeout is the bound) until the
/// worker's fd is readable, then drains once.
void drainWhenReady(DmWorker &worker) {
  pollfd pfd{worker.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, -1), 1);
  worker.drain();
}

/// Drains until every posted job's continuation has run.
void drainAll(DmWorker &worker) {
  while (worker.pending() > 0) {
    drainWhenReady(worker);
  }
}

TEST(DmWorker, RunsJobsInOrderOnItsOwnThreadAndContinuationsOnTheCaller) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  std::vector<std::string> continued;
  std::vector<std::thread::id> continuedOn;
  for (const std::string name : {"a", "b", "c"}) {
    worker.post("message " + name, [&, name](DeviceMapper &d) -> DmWorker::Continuation {
      d.message(name, "fail_path 8:16");
      return [&, name] {
        continued.push_back(name);
        continuedOn.push_back(std::this_thread::get_id());
      };
    });
  }
  EXPECT_EQ(worker.pending(), 3U);
  drainAll(worker);
  EXPECT_THAT(dm.calls(), ElementsAre("message a fail_path 8:16", "message b fail_path 8:16",
                                      "message c fail_path 8:16"));
  EXPECT_THAT(continued, ElementsAre("a", "b", "c"));
  for (auto id : dm.threads()) {
    EXPECT_NE(id, std::this_thread::get_id());
  }
  for (auto id : continuedOn) {
    EXPECT_EQ(id, std::this_thread::get_id());
  }
  EXPECT_EQ(worker.pending(), 0U);
}

TEST(DmWorker, JobsRunOnAThreadNamedForTopAndProc) {
  RecordingDm dm;
  DmWorker worker(dm, "pk-dm-test");
  std::string jobThread;
  worker.post("name", [&](DeviceMapper &) -> DmWorker::Continuation {
    std::array<char, 16> name{};
    ::pthread_getname_np(::pthread_self(), name.data(), name.size());
    jobThread = name.data();
    return [] {};
  });
  drainAll(worker);
  EXPECT_EQ(jobThread, "pk-dm-test");
}

TEST(DmWorker, ContinuationsRunOnlyInDrain) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  bool continued = false;
  worker.post("message m", [&](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "reinstate_path 8:16");
    return [&] { continued = true; };
  });
  pollfd pfd{worker.fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, -1), 1); // the job is done ...
  EXPECT_FALSE(continued);           // ... but nothing touched the caller's state
  worker.drain();
  EXPECT_TRUE(continued);
  // Drained: the fd is no longer readable.
  EXPECT_EQ(::poll(&pfd, 1, 0), 0);
}

TEST(DmWorker, AJobThatThrowsStillCompletesAndTheNextOneRuns) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  bool second = false;
  worker.post("broken", [](DeviceMapper &) -> DmWorker::Continuation {
    throw std::runtime_error("the kernel said no");
  });
  worker.post("empty continuation", [](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "x");
    return {};
  });
  worker.post("second",
              [&](DeviceMapper &) -> DmWorker::Continuation { return [&] { second = true; }; });
  drainAll(worker);
  EXPECT_TRUE(second);
  EXPECT_THAT(dm.calls(), ElementsAre("message m x"));
}

TEST(DmWorker, AContinuationThatThrowsNamesItsJobAndLeavesTheRestForTheNextDrain) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  std::vector<std::string> continued;
  worker.post("reload xserve-upper", [](DeviceMapper &) -> DmWorker::Continuation {
    return [] { throw std::out_of_range("map::at"); };
  });
  worker.post("reload xserve-lower", [&](DeviceMapper &) -> DmWorker::Continuation {
    return [&] { continued.push_back("lower"); };
  });
  // A third job holds the worker: once it runs, both continuations above
  // wait together, so that one drain meets both.
  worker.post("hold", [](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "hold");
    return [] {};
  });
  dm.waitUntilHolding();
  try {
    worker.drain();
    ADD_FAILURE() << "the continuation's exception did not come out of drain()";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "after the device-mapper job 'reload xserve-upper': map::at");
  }
  EXPECT_THAT(continued, IsEmpty());
  EXPECT_EQ(worker.pending(), 2U);
  // The fd is still readable for the one left.
  pollfd pfd{worker.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 0), 1);
  dm.release();
  drainAll(worker);
  EXPECT_THAT(continued, ElementsAre("lower"));
  EXPECT_EQ(worker.pending(), 0U);
}

TEST(DmWorker, AContinuationThatThrowsSomethingElseLeavesTheRestQueuedToo) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  bool second = false;
  worker.post("odd", [](DeviceMapper &) -> DmWorker::Continuation { return [] { throw 42; }; });
  worker.post("second",
              [&](DeviceMapper &) -> DmWorker::Continuation { return [&] { second = true; }; });
  worker.post("hold", [](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "hold");
    return [] {};
  });
  dm.waitUntilHolding();
  EXPECT_THROW(worker.drain(), int);
  EXPECT_FALSE(second);
  EXPECT_EQ(worker.pending(), 2U);
  dm.release();
  drainAll(worker);
  EXPECT_TRUE(second);
}

TEST(DmWorker, ContinuationsMayPostMoreJobs) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  int finished = 0;
  worker.post("read", [&](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "first");
    return [&] {
      worker.post("apply", [&](DeviceMapper &d2) -> DmWorker::Continuation {
        d2.message("m", "second");
        return [&] { ++finished; };
      });
    };
  });
  drainAll(worker);
  EXPECT_EQ(finished, 1);
  EXPECT_THAT(dm.calls(), ElementsAre("message m first", "message m second"));
}

TEST(DmWorker, StopFinishesTheRunningJobAndDropsTheQueuedOnes) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  worker.post("held", [](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "hold");
    d.resume("m"); // must still happen: a running job is never cut short
    return {};
  });
  worker.post("queued 1", [](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "never");
    return {};
  });
  worker.post("queued 2", [](DeviceMapper &) -> DmWorker::Continuation { return {}; });
  dm.waitUntilHolding();
  // stop() must wait for the held job, so release it from another thread
  // once stop() has begun.
  std::thread releaser([&] {
    while (!worker.stopping()) {
      std::this_thread::yield();
    }
    dm.release();
  });
  const std::vector<std::string> dropped = worker.stop();
  releaser.join();
  EXPECT_THAT(dropped, ElementsAre("queued 1", "queued 2"));
  EXPECT_THAT(dm.calls(), ElementsAre("message m hold", "resume m"));
  EXPECT_THAT(worker.stop(), IsEmpty()); // idempotent
  const std::size_t pendingBefore = worker.pending();
  log::configure(log::Target::Stderr, log::Level::Info);
  ::testing::internal::CaptureStderr();
  worker.post("after stop", [](DeviceMapper &d) -> DmWorker::Continuation {
    d.message("m", "late");
    return {};
  });
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("device-mapper job dropped, posted after the stop: after stop"))
      << "a job posted too late is said, as the dropped ones are";
  EXPECT_THAT(dm.calls(), ElementsAre("message m hold", "resume m"));
  EXPECT_EQ(worker.pending(), pendingBefore);
}

TEST(DmWorker, RemembersTheLongestJob) {
  RecordingDm dm;
  DmWorker worker(dm, "test-dm");
  worker.post("quick", [](DeviceMapper &) -> DmWorker::Continuation { return {}; });
  drainAll(worker);
  EXPECT_EQ(worker.longest().label, "quick"); // the only one so far
}

TEST(DeviceMapperReload, HeldTimeEndsWhenTheResumeIoctlReturned) {
  RecordingDm dm;
  // An implementation that waited for udev after the ioctl reports the
  // ioctl's return; reload() must measure to that point, not to its own end.
  dm.resumeReturned_ = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const auto held = dm.reload("m", 8, "0 0 1 1 round-robin 0 1 1 8:16 1");
  EXPECT_GT(held, std::chrono::minutes(59));
  // One resume ioctl suspends, swaps and resumes: no separate suspend that
  // a kill could strand.
  EXPECT_THAT(dm.calls(), ElementsAre("load m", "resume m"));
}

} // namespace
} // namespace pathkeeper::daemon
