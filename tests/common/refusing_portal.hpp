#pragma once

// A TCP listener on 127.0.0.1 standing in for a portal whose target refuses
// every discovery login, as one that enforces discovery CHAP answers an
// initiator without credentials: it reads each connection's Login Request
// and answers with a Login Response of Status-Class 2, Status-Detail 1
// ("Authentication failure", RFC 3720 10.13.5), then closes. Only the
// fields an initiator reads from a refusal are set. Traffic stays on
// loopback. serve() does the work; call it from the test's loop.

#include "loopback_listener.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

namespace pathkeeper::daemon::fakes {

class RefusingPortal {
public:
  RefusingPortal() = default;
  ~RefusingPortal() {
    for (const auto &client : clients_) {
      ::close(client.fd);
    }
  }
  RefusingPortal(const RefusingPortal &) = delete;
  RefusingPortal &operator=(const RefusingPortal &) = delete;

  [[nodiscard]] std::uint16_t port() const { return listener_.port(); }

  /// Accepts what is waiting and answers every complete Login Request
  /// header. @return the refusals sent so far.
  unsigned serve() {
    for (int c; (c = listener_.accept()) >= 0;) {
      clients_.push_back({c, {}});
    }
    for (auto it = clients_.begin(); it != clients_.end();) {
      std::array<std::uint8_t, 512> buffer{};
      const ssize_t got = ::recv(it->fd, buffer.data(), buffer.size(), 0);
      if (got > 0) {
        it->received.insert(it->received.end(), buffer.begin(), buffer.begin() + got);
      }
      const bool closed = got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      if (it->received.size() >= kHeader) {
        refuse(it->fd, it->received);
        ++refusals_;
      }
      if (closed || it->received.size() >= kHeader) {
        ::close(it->fd);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
    return refusals_;
  }

private:
  static constexpr std::size_t kHeader = 48; // the Basic Header Segment

  struct Client {
    int fd;
    std::vector<std::uint8_t> received;
  };

  static void refuse(int fd, const std::vector<std::uint8_t> &request) {
    std::array<std::uint8_t, kHeader> response{};
    response[0] = 0x23;              // Login Response
    response[1] = request[1] & 0x0c; // the request's stage; not transiting
    std::copy_n(request.begin() + 8, 6, response.begin() + 8);   // ISID
    std::copy_n(request.begin() + 16, 4, response.begin() + 16); // Initiator Task Tag
    response[36] = 0x02;                                         // Status-Class: initiator error
    response[37] = 0x01; // Status-Detail: authentication failure
    // A short write on a fresh loopback socket cannot happen at this size;
    // if it did, the probe would see a lost connection and the test fail.
    (void)::send(fd, response.data(), response.size(), MSG_NOSIGNAL);
  }

  LoopbackListener listener_;
  unsigned refusals_ = 0;
  std::vector<Client> clients_;
};

} // namespace pathkeeper::daemon::fakes
