#pragma once

// The kernel's device events, through libudev: the subsystems the inventory
// and the health engine care about, as values. The loop watches fd() and
// calls receive() when it is readable.

#include "sysfs_inventory.hpp"

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct udev;
struct udev_monitor;

namespace pathkeeper::daemon {

/// @brief One received event: what the inventory needs, plus the
/// device-mapper fields of a dm uevent.
struct DeviceEvent {
  UdevEvent event; ///< action, subsystem, devpath
  std::string sysname;
  std::string devtype;
  std::string devnum; ///< "8:16"; empty when the device has none
  /// DM_ACTION of a dm path event ("PATH_FAILED", "PATH_REINSTATED"), with
  /// DM_PATH (the path's "major:minor") and DM_NAME; empty for other events.
  std::string dmAction;
  std::string dmPath;
  std::string dmName;
  std::string dmUuid; ///< DM_UUID, when udev's dm rules ran
};

/// @brief Where events come from.
enum class UdevSource {
  Udev,   ///< after udevd's rules ran (device nodes exist)
  Kernel, ///< straight from the kernel; for hosts without udevd
};

/// @brief What udevd's control socket says about udevd.
enum class UdevdStatus {
  NotRunning,  ///< no control socket
  Running,     ///< a process listens on it (udevd, or systemd's socket unit)
  StaleSocket, ///< the socket file is left, nobody listens: udevd exited
};

/// @brief Looks for @p runDir/control and for a process listening on it:
/// first in the kernel's list of Unix sockets (@p proc/self/net/unix), then,
/// when that lists none, by connecting to it. `udevadm control --exit`
/// leaves the file behind, and libudev and libdevmapper take any file there
/// for a running udevd. The list holds only the sockets of the reader's
/// network namespace: the connection answers for a listener elsewhere (a
/// container given the host's /run), and whenever it cannot tell, the file
/// decides, as it does for them.
UdevdStatus udevdStatus(const std::string &runDir = "/run/udev",
                        const std::filesystem::path &proc = "/proc");

/// @brief True when udevd is running: udevdStatus() is Running.
bool udevdRunning(const std::string &runDir = "/run/udev");

/// @brief True when the /proc/net/unix text @p table lists a listening socket
/// bound to @p path (as bind() was given it).
bool unixSocketListening(std::istream &table, std::string_view path);

/// @brief Where the daemon's device events come from: a UdevMonitor, or a
/// unit test's own feed (the kernel's netlink cannot be written to there).
class DeviceEventSource {
public:
  DeviceEventSource() = default;
  virtual ~DeviceEventSource() = default;
  DeviceEventSource(const DeviceEventSource &) = delete;
  DeviceEventSource &operator=(const DeviceEventSource &) = delete;

  /// @brief Non-blocking; readable when events are queued.
  [[nodiscard]] virtual int fd() const = 0;
  /// @brief Every event queued now (never blocks).
  virtual std::vector<DeviceEvent> receive() = 0;
  /// @brief True once after receive() found that events were lost (the
  /// socket's buffer overflowed): what they said must be read again.
  [[nodiscard]] virtual bool takeLostEvents() { return false; }

protected:
  DeviceEventSource(DeviceEventSource &&) noexcept = default;
  DeviceEventSource &operator=(DeviceEventSource &&) noexcept = default;
};

/// @brief A libudev monitor filtered to block, scsi, iscsi_session,
/// iscsi_connection and iscsi_host. Move-only.
class UdevMonitor final : public DeviceEventSource {
public:
  /// @brief What the monitor asks for: enough for a mass login of
  /// thousands of paths.
  static constexpr int kReceiveBufferBytes = 16 * 1024 * 1024;

  /// @throws std::system_error when the netlink socket cannot be opened.
  explicit UdevMonitor(UdevSource source, int receiveBufferBytes = kReceiveBufferBytes);
  ~UdevMonitor() override;
  UdevMonitor(UdevMonitor &&) noexcept;
  UdevMonitor &operator=(UdevMonitor &&) noexcept;
  UdevMonitor(const UdevMonitor &) = delete;
  UdevMonitor &operator=(const UdevMonitor &) = delete;

  [[nodiscard]] int fd() const override;
  std::vector<DeviceEvent> receive() override;
  [[nodiscard]] bool takeLostEvents() override;
  /// @brief The socket's receive buffer as the kernel granted it. The
  /// monitor asks for 16 MiB; without CAP_NET_ADMIN it gets at most
  /// net.core.rmem_max.
  [[nodiscard]] std::size_t receiveBufferBytes() const;

private:
  struct Handles;
  std::unique_ptr<Handles> handles_;
  bool lost_ = false;
};

} // namespace pathkeeper::daemon
