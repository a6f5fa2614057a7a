// UdevMonitor against the kernel's own uevent socket: a burst of real
// uevents (a "change" written to a block device's uevent file, as `udevadm
// trigger` does) beyond the socket's buffer must be reported as lost
// events, and what comes after the loss must still arrive. Needs root and a
// loop device in sysfs (every Linux host with the loop driver); otherwise
// SKIPPED with the reason. Nothing but uevents is touched.

#include "udev_monitor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <string>
#include <unistd.h>
#include <vector>

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;

/// A loop device's sysfs name ("loop0"), or "" when there is none.
std::string loopDevice() {
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator("/sys/block", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("loop") && fs::exists(entry.path() / "uevent")) {
      return name;
    }
  }
  return {};
}

/// Writes "change" to @p device's uevent file @p times times.
bool triggerChanges(const std::string &device, int times) {
  for (int i = 0; i < times; ++i) {
    std::ofstream uevent("/sys/block/" + device + "/uevent");
    uevent << "change";
    uevent.flush();
    if (!uevent) {
      return false;
    }
  }
  return true;
}

/// The events for @p device received within @p wait.
std::size_t changesFor(UdevMonitor &monitor, const std::string &device, std::size_t want,
                       std::chrono::milliseconds wait = std::chrono::seconds(5)) {
  std::size_t seen = 0;
  const auto until = std::chrono::steady_clock::now() + wait;
  while (seen < want && std::chrono::steady_clock::now() < until) {
    pollfd fd{monitor.fd(), POLLIN, 0};
    if (::poll(&fd, 1, 50) > 0) {
      for (const auto &ev : monitor.receive()) {
        seen += ev.sysname == device && ev.event.action == UdevEvent::Action::Change ? 1U : 0U;
      }
    }
  }
  return seen;
}

class UdevMonitorHost : public testing::Test {
protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "SKIPPED: needs root to write a block device's uevent file";
    }
    device_ = loopDevice();
    if (device_.empty()) {
      GTEST_SKIP() << "SKIPPED: no loop device in /sys/block";
    }
    if (!triggerChanges(device_, 1)) {
      GTEST_SKIP() << "SKIPPED: cannot write /sys/block/" << device_
                   << "/uevent (sysfs mounted read-only?)";
    }
  }
  std::string device_;
};

TEST_F(UdevMonitorHost, ABurstBeyondTheBufferIsReportedOnceAndLaterEventsStillArrive) {
  // The smallest buffer the kernel grants (a few KiB): a handful of events.
  UdevMonitor monitor(UdevSource::Kernel, 4096);
  ASSERT_LE(monitor.receiveBufferBytes(), 16384U);
  constexpr int kBurst = 200;
  ASSERT_TRUE(triggerChanges(device_, kBurst));
  const auto received = changesFor(monitor, device_, kBurst, std::chrono::milliseconds(500));
  EXPECT_LT(received, static_cast<std::size_t>(kBurst)) << "the buffer held the whole burst";
  EXPECT_TRUE(monitor.takeLostEvents());
  EXPECT_FALSE(monitor.takeLostEvents()) << "one loss is reported once";

  ASSERT_TRUE(triggerChanges(device_, 1));
  EXPECT_EQ(changesFor(monitor, device_, 1), 1U);
  EXPECT_FALSE(monitor.takeLostEvents());
}

TEST_F(UdevMonitorHost, ABurstWithinTheBufferLosesNothing) {
  UdevMonitor monitor(UdevSource::Kernel);
  constexpr int kBurst = 50;
  ASSERT_TRUE(triggerChanges(device_, kBurst));
  EXPECT_EQ(changesFor(monitor, device_, kBurst), static_cast<std::size_t>(kBurst));
  EXPECT_FALSE(monitor.takeLostEvents());
}

} // namespace
} // namespace pathkeeper::daemon
