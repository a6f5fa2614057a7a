#pragma once

// A TCP listener on 127.0.0.1 standing in for a portal that accepts each
// connection and closes it at once: it counts the connections made to it
// (SendTargets probes'), and every probe that reaches it fails. Traffic
// stays on loopback.

#include <cerrno>
#include <cstdint>
#include <system_error>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace pathkeeper::daemon::fakes {

class ClosingPortal {
public:
  ClosingPortal() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {
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
  ~ClosingPortal() { ::close(fd_); }
  ClosingPortal(const ClosingPortal &) = delete;
  ClosingPortal &operator=(const ClosingPortal &) = delete;

  [[nodiscard]] std::uint16_t port() const { return port_; }

  /// Accepts and closes what is waiting. @return the connections so far.
  unsigned connections() {
    for (int c; (c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
      ::close(c);
      ++count_;
    }
    return count_;
  }

private:
  int fd_;
  std::uint16_t port_ = 0;
  unsigned count_ = 0;
};

} // namespace pathkeeper::daemon::fakes
