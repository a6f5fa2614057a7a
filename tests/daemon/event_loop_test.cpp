// EventLoop: a callback that throws ends the loop with kInternalError and a
// logged reason, instead of unwinding through sd-event; the sources after it
// do not run, and a loop whose callbacks do not throw exits with its code.

#include "event_loop.hpp"
#include "log.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace pathkeeper::daemon {
namespace {

using ::testing::HasSubstr;

class EventLoopTest : public ::testing::Test {
protected:
  void SetUp() override { log::configure(log::Target::Stderr, log::Level::Info); }
};

TEST_F(EventLoopTest, ExitsWithTheCodeItIsGiven) {
  EventLoop loop;
  auto timer = loop.addTimer(EventLoop::Clock::now(), [&] { loop.exit(3); });
  EXPECT_EQ(loop.run(), 3);
}

TEST_F(EventLoopTest, ATimerThatThrowsEndsTheLoopWithAnInternalError) {
  EventLoop loop;
  const auto now = EventLoop::Clock::now();
  bool later = false;
  auto broken = loop.addTimer(now, [] { throw std::out_of_range("map::at"); });
  auto after = loop.addTimer(now + std::chrono::milliseconds(1), [&] { later = true; });
  // A guard: if the loop went on, it would end here with another code.
  auto guard = loop.addTimer(now + std::chrono::seconds(5), [&] { loop.exit(0); });
  testing::internal::CaptureStderr();
  EXPECT_EQ(loop.run(), EventLoop::kInternalError);
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(later);
  EXPECT_THAT(logged, HasSubstr("internal error: an event handler failed: map::at"));
  EXPECT_THAT(logged, HasSubstr("exiting with status 70"));
}

TEST_F(EventLoopTest, AnIoHandlerThatThrowsSomethingElseEndsTheLoopToo) {
  EventLoop loop;
  const int fd = ::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC); // readable at once
  ASSERT_GE(fd, 0);
  auto io = loop.addIo(fd, EPOLLIN, [](unsigned) { throw 42; });
  auto guard =
      loop.addTimer(EventLoop::Clock::now() + std::chrono::seconds(5), [&] { loop.exit(0); });
  testing::internal::CaptureStderr();
  EXPECT_EQ(loop.run(), EventLoop::kInternalError);
  EXPECT_THAT(testing::internal::GetCapturedStderr(),
              HasSubstr("an event handler failed: an exception of unknown type"));
  io.reset();
  ::close(fd);
}

TEST_F(EventLoopTest, ASignalHandlerThatThrowsEndsTheLoopToo) {
  EventLoop loop;
  auto signal = loop.addSignal(SIGUSR2, [] { throw std::runtime_error("reload failed"); });
  auto raise = loop.addTimer(EventLoop::Clock::now(), [] { ::raise(SIGUSR2); });
  auto guard =
      loop.addTimer(EventLoop::Clock::now() + std::chrono::seconds(5), [&] { loop.exit(0); });
  testing::internal::CaptureStderr();
  EXPECT_EQ(loop.run(), EventLoop::kInternalError);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("reload failed"));
}

TEST_F(EventLoopTest, RunOnceThrowsWhatAFailedHandlerThrewAtThatStepAndAfter) {
  EventLoop loop;
  auto broken = loop.addTimer(EventLoop::Clock::now(), [] { throw std::logic_error("half done"); });
  testing::internal::CaptureStderr();
  EXPECT_THROW(
      {
        try {
          loop.runOnce(std::chrono::seconds(5));
        } catch (const std::runtime_error &e) {
          EXPECT_STREQ(e.what(), "an event handler failed: half done");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_THROW(loop.runOnce(std::chrono::milliseconds(0)), std::runtime_error);
  testing::internal::GetCapturedStderr();
}

TEST_F(EventLoopTest, AHandlerThatDestroysItsOwnSourceAndThrowsStillEndsTheLoop) {
  EventLoop loop;
  EventSource self;
  self = loop.addTimer(EventLoop::Clock::now(), [&] {
    self.reset();
    throw std::runtime_error("after its own reset");
  });
  auto guard =
      loop.addTimer(EventLoop::Clock::now() + std::chrono::seconds(5), [&] { loop.exit(0); });
  testing::internal::CaptureStderr();
  EXPECT_EQ(loop.run(), EventLoop::kInternalError);
  EXPECT_THAT(testing::internal::GetCapturedStderr(), HasSubstr("after its own reset"));
}

} // namespace
} // namespace pathkeeper::daemon
