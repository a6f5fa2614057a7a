#include "udev_monitor.hpp"

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include <libudev.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

namespace pathkeeper::daemon {
namespace {

std::string orEmpty(const char *text) {
  return text != nullptr ? std::string(text) : std::string();
}

std::string property(udev_device *device, const char *name) {
  return orEmpty(udev_device_get_property_value(device, name));
}

} // namespace

struct UdevMonitor::Handles {
  udev *context = nullptr;
  udev_monitor *monitor = nullptr;

  ~Handles() {
    if (monitor != nullptr) {
      udev_monitor_unref(monitor);
    }
    if (context != nullptr) {
      udev_unref(context);
    }
  }
};

bool unixSocketListening(std::istream &table, std::string_view path) {
  // "Num RefCount Protocol Flags Type St Inode Path", Flags in hex; a
  // listening socket has __SO_ACCEPTCON (1 << 16) set. The path is the rest
  // of the line, spaces and all.
  constexpr unsigned long kAcceptCon = 1UL << 16;
  std::string line;
  std::getline(table, line); // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string num;
    std::string refCount;
    std::string protocol;
    std::string flags;
    std::string type;
    std::string state;
    std::string inode;
    if (!(fields >> num >> refCount >> protocol >> flags >> type >> state >> inode) ||
        fields.get() != ' ') {
      continue; // no path: unbound
    }
    std::string bound;
    std::getline(fields, bound);
    if (bound != path) {
      continue;
    }
    unsigned long value = 0;
    const auto [end, ec] = std::from_chars(flags.data(), flags.data() + flags.size(), value, 16);
    if (ec == std::errc() && (value & kAcceptCon) != 0) {
      return true;
    }
  }
  return false;
}

namespace {

/// Whether anything listens on the Unix socket @p control, by connecting
/// to it: refused when nobody does. Only asked when the socket table lists
/// no listener, so that a udevd that does listen (there, or in a network
/// namespace the table does not show) gets no empty connection to log.
UdevdStatus connectProbe(const std::filesystem::path &control) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = control.string();
  if (path.size() >= sizeof(address.sun_path)) {
    return UdevdStatus::Running; // cannot tell: as libudev would
  }
  path.copy(address.sun_path, path.size());
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return UdevdStatus::Running;
  }
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr *>(&address), sizeof(address));
  const int error = errno;
  ::close(fd);
  if (rc == 0) {
    return UdevdStatus::Running;
  }
  switch (error) {
  case ECONNREFUSED:
    return UdevdStatus::StaleSocket;
  case ENOENT:
    return UdevdStatus::NotRunning; // removed meanwhile
  default:
    return UdevdStatus::Running; // EAGAIN: a full backlog is a listener; EACCES and the rest:
                                 // unknown
  }
}

} // namespace

UdevdStatus udevdStatus(const std::string &runDir, const std::filesystem::path &proc) {
  const std::filesystem::path control = std::filesystem::path(runDir) / "control";
  std::error_code ec;
  if (!std::filesystem::exists(control, ec)) {
    return UdevdStatus::NotRunning;
  }
  // udevd binds /run/udev/control; the daemon may be told /var/run/udev.
  std::filesystem::path bound = std::filesystem::weakly_canonical(control, ec);
  if (ec) {
    bound = control.lexically_normal();
  }
  if (std::ifstream table(proc / "self/net/unix");
      table && unixSocketListening(table, bound.string())) {
    return UdevdStatus::Running;
  }
  return connectProbe(control);
}

bool udevdRunning(const std::string &runDir) {
  return udevdStatus(runDir) == UdevdStatus::Running;
}

UdevMonitor::UdevMonitor(UdevSource source, int receiveBufferBytes)
    : handles_(std::make_unique<Handles>()) {
  handles_->context = udev_new();
  if (handles_->context == nullptr) {
    throw std::system_error(errno, std::generic_category(), "udev_new");
  }
  handles_->monitor = udev_monitor_new_from_netlink(handles_->context,
                                                    source == UdevSource::Udev ? "udev" : "kernel");
  if (handles_->monitor == nullptr) {
    throw std::system_error(errno, std::generic_category(), "udev_monitor_new_from_netlink");
  }
  for (const char *subsystem :
       {"block", "scsi", "iscsi_session", "iscsi_connection", "iscsi_host"}) {
    int rc = udev_monitor_filter_add_match_subsystem_devtype(handles_->monitor, subsystem, nullptr);
    if (rc < 0) {
      throw std::system_error(-rc, std::generic_category(),
                              std::string("udev monitor filter ") + subsystem);
    }
  }
  // A burst of path events at login must not overflow the socket. Without
  // CAP_NET_ADMIN the kernel caps it at net.core.rmem_max; a burst beyond
  // that is reported by takeLostEvents().
  (void)udev_monitor_set_receive_buffer_size(handles_->monitor, receiveBufferBytes);
  int rc = udev_monitor_enable_receiving(handles_->monitor);
  if (rc < 0) {
    throw std::system_error(-rc, std::generic_category(), "udev_monitor_enable_receiving");
  }
}

UdevMonitor::~UdevMonitor() = default;
UdevMonitor::UdevMonitor(UdevMonitor &&) noexcept = default;
UdevMonitor &UdevMonitor::operator=(UdevMonitor &&) noexcept = default;

int UdevMonitor::fd() const {
  return udev_monitor_get_fd(handles_->monitor);
}

std::vector<DeviceEvent> UdevMonitor::receive() {
  std::vector<DeviceEvent> events;
  // The socket is non-blocking: receive_device returns nullptr once drained
  // (errno EAGAIN), or once with ENOBUFS when the kernel dropped messages
  // because the buffer was full; those after the drop are still queued.
  for (;;) {
    errno = 0;
    udev_device *device = udev_monitor_receive_device(handles_->monitor);
    if (device == nullptr) {
      if (errno == ENOBUFS) {
        lost_ = true;
        continue;
      }
      break;
    }
    DeviceEvent ev;
    ev.event.action = parseUdevAction(orEmpty(udev_device_get_action(device)));
    ev.event.subsystem = orEmpty(udev_device_get_subsystem(device));
    ev.event.devpath = orEmpty(udev_device_get_devpath(device));
    ev.sysname = orEmpty(udev_device_get_sysname(device));
    ev.devtype = orEmpty(udev_device_get_devtype(device));
    dev_t num = udev_device_get_devnum(device);
    if (num != 0) {
      ev.devnum = std::to_string(major(num)) + ":" + std::to_string(minor(num));
    }
    ev.dmAction = property(device, "DM_ACTION");
    ev.dmPath = property(device, "DM_PATH");
    ev.dmName = property(device, "DM_NAME");
    ev.dmUuid = property(device, "DM_UUID");
    udev_device_unref(device);
    events.push_back(std::move(ev));
  }
  return events;
}

bool UdevMonitor::takeLostEvents() {
  return std::exchange(lost_, false);
}

std::size_t UdevMonitor::receiveBufferBytes() const {
  int bytes = 0;
  socklen_t size = sizeof bytes;
  if (::getsockopt(fd(), SOL_SOCKET, SO_RCVBUF, &bytes, &size) != 0 || bytes < 0) {
    return 0;
  }
  return static_cast<std::size_t>(bytes);
}

} // namespace pathkeeper::daemon
