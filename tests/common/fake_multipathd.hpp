#pragma once

// A stand-in for multipathd's listener (multipathd/uxlsnr.c in 0.9.4): an
// abstract socket with a test-unique name, whose connections are each
// handed to the test's handler on a thread of their own, as multipathd
// serves clients concurrently. Framing is multipathd's: a native size_t
// length, then the text and its NUL.

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace pathkeeper::daemon::fakes {

using std::chrono::milliseconds;

inline std::string frame(std::string_view text, std::size_t length) {
  std::string bytes(sizeof(length), '\0');
  std::memcpy(bytes.data(), &length, sizeof(length));
  bytes.append(text);
  return bytes;
}

inline std::string uniqueSocketName() {
  static std::atomic<int> counter{0};
  return "/org/pathkeeper/test/multipathd-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

inline bool readExactly(int fd, void *buffer, std::size_t length) {
  auto *bytes = static_cast<char *>(buffer);
  while (length > 0) {
    const auto got = ::recv(fd, bytes, length, 0);
    if (got <= 0) {
      return false;
    }
    bytes += got;
    length -= static_cast<std::size_t>(got);
  }
  return true;
}

inline bool writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const auto sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) {
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

// A stand-in for multipathd's listener: accepts connections on an abstract
// socket and hands each to the test's handler on a server thread.
class FakeMultipathd {
public:
  using Handler = std::function<void(int fd, FakeMultipathd &server)>;

  explicit FakeMultipathd(Handler handler)
      : FakeMultipathd(uniqueSocketName(), std::move(handler)) {}
  /// Listens on @p name (a uniqueSocketName() the test chose beforehand).
  FakeMultipathd(std::string name, Handler handler)
      : name_(std::move(name)), handler_(std::move(handler)) {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, name_.data(), name_.size());
    const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name_.size());
    if (::bind(listener_, reinterpret_cast<const sockaddr *>(&address), length) != 0 ||
        ::listen(listener_, 8) != 0) {
      ADD_FAILURE() << "cannot listen on @" << name_ << ": " << std::strerror(errno);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeMultipathd() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  FakeMultipathd(const FakeMultipathd &) = delete;
  FakeMultipathd &operator=(const FakeMultipathd &) = delete;

  [[nodiscard]] const std::string &name() const { return name_; }
  [[nodiscard]] bool stopping() const { return stop_; }
  int connections() const { return connections_; }
  std::vector<std::string> commands() const {
    std::lock_guard lock(mutex_);
    return commands_;
  }

  // Reads one framed command the way uxlsnr does; nullopt at EOF.
  std::optional<std::string> readCommand(int fd) {
    std::size_t length = 0;
    if (!readExactly(fd, &length, sizeof(length)) || length == 0 || length > 512) {
      return std::nullopt;
    }
    std::string text(length, '\0');
    if (!readExactly(fd, text.data(), length)) {
      return std::nullopt;
    }
    EXPECT_EQ(text.back(), '\0');
    text.pop_back();
    std::lock_guard lock(mutex_);
    commands_.push_back(text);
    return text;
  }
  static bool reply(int fd, std::string_view text) {
    return writeAll(fd, frame(std::string(text) + '\0', text.size() + 1));
  }
  // Holds the connection open until the test ends.
  void stall() const {
    while (!stop_) {
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

private:
  void serve() {
    while (!stop_) {
      pollfd pfd{listener_, POLLIN, 0};
      if (::poll(&pfd, 1, 10) != 1) {
        continue;
      }
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        continue;
      }
      ++connections_;
      // One thread per client, as multipathd serves clients concurrently.
      {
        std::lock_guard lock(mutex_);
        open_.push_back(fd);
      }
      clients_.emplace_back([this, fd] {
        handler_(fd, *this);
        {
          std::lock_guard lock(mutex_);
          std::erase(open_, fd);
        }
        ::close(fd);
      });
    }
    {
      // A handler blocked reading from a client that never hangs up (the
      // daemon outlives this object in a failing test) must not hang us.
      std::lock_guard lock(mutex_);
      for (const int fd : open_) {
        ::shutdown(fd, SHUT_RDWR);
      }
    }
    for (auto &client : clients_) {
      client.join();
    }
  }

  std::string name_;
  Handler handler_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> commands_;
  std::vector<std::thread> clients_; // only serve() touches it
  std::vector<int> open_;            // client sockets not yet closed; under mutex_
  std::thread thread_;
};

} // namespace pathkeeper::daemon::fakes
