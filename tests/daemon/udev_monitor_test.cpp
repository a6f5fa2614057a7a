#include "udev_monitor.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;

constexpr const char *kHeader = "Num       RefCount Protocol Flags    Type St Inode Path\n";

TEST(UnixSocketTable, FindsTheListeningSocketBoundToThePath) {
  std::istringstream table(std::string(kHeader) +
                           "0000000000000000: 00000002 00000000 00010000 0005 01 16093 "
                           "/run/udev/control\n"
                           "0000000000000000: 00000003 00000000 00000000 0005 03 16871 "
                           "/run/udev/control\n");
  EXPECT_TRUE(unixSocketListening(table, "/run/udev/control"));
}

TEST(UnixSocketTable, IgnoresSocketsThatDoNotListenAndOtherPaths) {
  // An accepted connection is listed with the listener's path, without the
  // accept flag; a listener elsewhere does not count.
  std::istringstream table(std::string(kHeader) +
                           "0000000000000000: 00000003 00000000 00000000 0005 03 16871 "
                           "/run/udev/control\n"
                           "0000000000000000: 00000002 00000000 00010000 0001 01 15000 "
                           "/run/udev/control.old\n"
                           "0000000000000000: 00000002 00000000 00010000 0001 01 15001 "
                           "@/org/kernel/linux/storage/multipathd\n"
                           "0000000000000000: 00000002 00000000 00010000 0001 01 15002\n");
  EXPECT_FALSE(unixSocketListening(table, "/run/udev/control"));
}

TEST(UnixSocketTable, APathWithSpacesIsTheRestOfTheLine) {
  std::istringstream table(std::string(kHeader) +
                           "0000000000000000: 00000002 00000000 00010000 0005 01 16093 "
                           "/run/my udev/control\n");
  EXPECT_TRUE(unixSocketListening(table, "/run/my udev/control"));
  table.clear();
  table.seekg(0);
  EXPECT_FALSE(unixSocketListening(table, "/run/my"));
}

// The socket table read is the kernel's own (/proc/self/net/unix), through
// a proc directory the test can take it away from.
class UdevdStatusTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pk-udevd-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    run_ = dir_ / "udev";
    proc_ = dir_ / "proc";
    ASSERT_TRUE(std::ifstream("/proc/self/net/unix")) << "the kernel's socket table";
    fs::create_directories(run_);
    fs::create_directories(proc_ / "self/net");
    fs::create_symlink("/proc/self/net/unix", proc_ / "self/net/unix");
  }
  void TearDown() override {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A listening socket at run_/control, as udevd (or systemd's socket unit)
  // binds it; made in the calling thread's network namespace.
  void listen() {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = (run_ / "control").string();
    ASSERT_LT(path.size(), sizeof(address.sun_path)) << "TMPDIR too long for a socket path";
    path.copy(address.sun_path, path.size());
    ASSERT_EQ(::bind(fd_, reinterpret_cast<const sockaddr *>(&address), sizeof(address)), 0);
    ASSERT_EQ(::listen(fd_, 4), 0);
  }
  // udevd exits: it closes its socket and leaves the file.
  void exitUdevd() {
    ::close(fd_);
    fd_ = -1;
    ASSERT_TRUE(fs::exists(run_ / "control"));
  }
  [[nodiscard]] bool listedInTheTable() const {
    std::ifstream table("/proc/self/net/unix");
    return unixSocketListening(table, (run_ / "control").string());
  }

  [[nodiscard]] UdevdStatus status(const fs::path &run) const {
    return udevdStatus(run.string(), proc_);
  }

  fs::path dir_;
  fs::path run_;  ///< udevd's run directory
  fs::path proc_; ///< the proc directory udevdStatus reads
  int fd_ = -1;
};

TEST_F(UdevdStatusTest, AListenedSocketIsARunningUdevd) {
  ASSERT_NO_FATAL_FAILURE(listen());
  ASSERT_TRUE(listedInTheTable());
  EXPECT_EQ(status(run_), UdevdStatus::Running);
  EXPECT_EQ(status(run_.string() + "/"), UdevdStatus::Running);
  // Told the directory through a symlink, as /var/run/udev is /run/udev.
  fs::create_symlink(run_, dir_ / "var-run-udev");
  EXPECT_EQ(status(dir_ / "var-run-udev"), UdevdStatus::Running);
  EXPECT_TRUE(udevdRunning(run_.string())) << "with the real /proc";
}

TEST_F(UdevdStatusTest, ASocketLeftByAUdevdThatExitedIsStale) {
  ASSERT_NO_FATAL_FAILURE(listen());
  ASSERT_NO_FATAL_FAILURE(exitUdevd());
  EXPECT_EQ(status(run_), UdevdStatus::StaleSocket);
  EXPECT_EQ(status(dir_ / "udev/../udev"), UdevdStatus::StaleSocket);
  EXPECT_FALSE(udevdRunning(run_.string())) << "with the real /proc";
}

TEST_F(UdevdStatusTest, NoSocketIsNoUdevd) {
  EXPECT_EQ(status(run_), UdevdStatus::NotRunning);
  EXPECT_FALSE(udevdRunning(run_.string()));
}

TEST_F(UdevdStatusTest, AListenerInAnotherNetworkNamespaceIsARunningUdevd) {
  // A container given the host's /run: udevd's socket is not in the
  // container's table, and connecting to it reaches it all the same.
  int unshareError = 0;
  std::thread other([&] {
    // Only this thread moves to a new network namespace; the socket is made there.
    if (::unshare(CLONE_NEWNET) != 0) {
      unshareError = errno;
      return;
    }
    listen();
  });
  other.join();
  if (unshareError != 0) {
    GTEST_SKIP() << "cannot make a network namespace here: " << std::strerror(unshareError);
  }
  ASSERT_GE(fd_, 0);
  ASSERT_FALSE(listedInTheTable()) << "the listener must be one the table does not show";
  EXPECT_EQ(status(run_), UdevdStatus::Running);
}

TEST_F(UdevdStatusTest, WithoutTheSocketTableTheConnectionDecides) {
  fs::remove(proc_ / "self/net/unix");
  ASSERT_NO_FATAL_FAILURE(listen());
  EXPECT_EQ(status(run_), UdevdStatus::Running);
  ASSERT_NO_FATAL_FAILURE(exitUdevd());
  EXPECT_EQ(status(run_), UdevdStatus::StaleSocket);
}

} // namespace
} // namespace pathkeeper::daemon
