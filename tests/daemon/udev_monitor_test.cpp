#include "udev_monitor.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

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

class UdevdStatusTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pk-udevd-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (fd_ >= 0) {
      ::close(fd_);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A listening socket at dir_/control, as udevd (or systemd's socket unit) binds it.
  void listen() {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = (dir_ / "control").string();
    ASSERT_LT(path.size(), sizeof(address.sun_path));
    path.copy(address.sun_path, path.size());
    ASSERT_EQ(::bind(fd_, reinterpret_cast<const sockaddr *>(&address), sizeof(address)), 0);
    ASSERT_EQ(::listen(fd_, 4), 0);
  }

  fs::path dir_;
  int fd_ = -1;
};

TEST_F(UdevdStatusTest, AListenedSocketIsARunningUdevd) {
  listen();
  EXPECT_EQ(udevdStatus(dir_.string()), UdevdStatus::Running);
  EXPECT_TRUE(udevdRunning(dir_.string()));
  // The same directory written with a trailing slash.
  EXPECT_EQ(udevdStatus(dir_.string() + "/"), UdevdStatus::Running);
}

TEST_F(UdevdStatusTest, ASocketLeftByAUdevdThatExitedIsStale) {
  // `udevadm control --exit`: udevd closes its socket and leaves the file.
  listen();
  ::close(fd_);
  fd_ = -1;
  ASSERT_TRUE(fs::exists(dir_ / "control"));
  EXPECT_EQ(udevdStatus(dir_.string()), UdevdStatus::StaleSocket);
  EXPECT_FALSE(udevdRunning(dir_.string()));
}

TEST_F(UdevdStatusTest, NoSocketIsNoUdevd) {
  EXPECT_EQ(udevdStatus(dir_.string()), UdevdStatus::NotRunning);
}

TEST_F(UdevdStatusTest, WithoutTheSocketTableTheFileDecides) {
  listen();
  ::close(fd_);
  fd_ = -1;
  EXPECT_EQ(udevdStatus(dir_.string(), (dir_ / "no-such-table").string()), UdevdStatus::Running);
}

} // namespace
} // namespace pathkeeper::daemon
