#pragma once

// A non-blocking TCP listener on 127.0.0.1 at a port the kernel picks: the
// socket under the fake portals of the probe tests. Traffic stays on
// loopback.

#include <cerrno>
#include <cstdint>
#include <system_error>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace pathkeeper::daemon::fakes {

class LoopbackListener {
public:
  LoopbackListener() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr *>(&address), length) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
      const int error = errno;
      if (fd_ >= 0) {
        ::close(fd_);
      }
      throw std::system_error(error, std::generic_category(), "listening on 127.0.0.1");
    }
    port_ = ntohs(address.sin_port);
  }
  ~LoopbackListener() { ::close(fd_); }
  LoopbackListener(const LoopbackListener &) = delete;
  LoopbackListener &operator=(const LoopbackListener &) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }

  /// A waiting connection (non-blocking, close-on-exec), or -1 when none is.
  int accept() { return ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC); }

private:
  int fd_;
  std::uint16_t port_ = 0;
};

} // namespace pathkeeper::daemon::fakes
