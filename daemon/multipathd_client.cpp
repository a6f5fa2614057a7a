#include "multipathd_client.hpp"

#include "iscsi_names.hpp"
#include "text.hpp"

#include <fmt/format.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

namespace pathkeeper::daemon {

namespace {

using std::chrono::milliseconds;

std::string errnoMessage(int error) {
  return std::generic_category().message(error);
}

// Connects a non-blocking, close-on-exec stream socket to an abstract name.
// A unix connect never waits for the peer: it succeeds, or fails with
// ECONNREFUSED when nobody listens and EAGAIN when the backlog is full.
// Returns the fd, or -errno.
int connectAbstract(std::string_view name) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof(address.sun_path)) {
    return -ENAMETOOLONG;
  }
  std::memcpy(address.sun_path + 1, name.data(), name.size()); // sun_path[0] = 0: abstract
  // Abstract names are matched by length, so the length must be exactly
  // multipath-tools' (no trailing NUL).
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -errno;
  }
  if (::connect(fd, reinterpret_cast<const sockaddr *>(&address), length) < 0) {
    const int error = errno;
    ::close(fd);
    return -error;
  }
  return fd;
}

std::string socketLabel(std::string_view name) {
  return "@" + std::string(name);
}

// multipathd splits commands on blanks and treats quotes, braces, '!' and
// '#' specially; a kernel or map name has none of them.
bool plainWord(std::string_view word) {
  if (word.empty() || word.size() > 128) {
    return false;
  }
  return std::none_of(word.begin(), word.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= ' ' || byte >= 0x7f || c == '"' || c == '{' || c == '}' || c == '!' || c == '#';
  });
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) {
      return parts;
    }
    start = end + 1;
  }
}

// The reply's lines without blank ones; "ok" alone is multipathd's answer
// when a listing printed nothing.
Expected<std::vector<std::string_view>> listingLines(std::string_view reply) {
  std::vector<std::string_view> lines;
  for (const auto line : split(reply, '\n')) {
    if (!line.empty()) {
      lines.push_back(line);
    }
  }
  if (lines.size() == 1 && lines[0] == "ok") {
    lines.clear();
  }
  return lines;
}

std::string lineError(std::string_view what, std::size_t number, std::string_view line,
                      std::string_view problem) {
  return fmt::format("multipathd {} reply line {}: {}: {}", what, number, problem,
                     selector::printableQuoted(line, 120));
}

} // namespace

bool listensOnAbstract(std::string_view table, std::string_view socketName) {
  // "Num: RefCount Protocol Flags Type St Inode Path" (net/unix/af_unix.c):
  // a listener has __SO_ACCEPTCON (0x10000) in Flags; an abstract name is
  // shown with '@' for its leading NUL.
  constexpr unsigned long kAcceptCon = 0x10000;
  const std::string wanted = socketLabel(socketName);
  while (!table.empty()) {
    const auto end = table.find('\n');
    const std::string_view line = table.substr(0, end);
    table.remove_prefix(end == std::string_view::npos ? table.size() : end + 1);
    const auto words = selector::splitWords(line);
    if (words.size() < 8 || words[7] != wanted) {
      continue;
    }
    unsigned long flags = 0;
    const auto *first = words[3].data();
    const auto *last = first + words[3].size();
    if (auto [ptr, ec] = std::from_chars(first, last, flags, 16);
        ec == std::errc{} && ptr == last && (flags & kAcceptCon) != 0) {
      return true;
    }
  }
  return false;
}

MultipathdSighting lookForMultipathd(std::string_view socketName, const std::string &procRoot) {
  MultipathdSighting seen;
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(procRoot, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    std::ifstream comm(entry.path() / "comm");
    std::string command;
    if (std::getline(comm, command) && command == "multipathd") {
      seen.process = true;
      break;
    }
  }
  seen.listening = multipathdListening(socketName, procRoot);
  return seen;
}

bool multipathdListening(std::string_view socketName, const std::string &procRoot) {
  std::ifstream sockets(std::filesystem::path(procRoot) / "net/unix");
  const std::string table((std::istreambuf_iterator<char>(sockets)),
                          std::istreambuf_iterator<char>());
  return listensOnAbstract(table, socketName);
}

Expected<std::string> encodeMultipathdMessage(std::string_view command) {
  if (command.empty()) {
    return fail("empty multipathd command");
  }
  if (command.find('\0') != std::string_view::npos) {
    return fail("multipathd command contains a NUL byte");
  }
  const std::size_t length = command.size() + 1;
  if (length > kMaxMultipathdCommand) {
    return fail(fmt::format("multipathd command of {} bytes is over multipathd's limit of {}",
                            length, kMaxMultipathdCommand));
  }
  std::string message(sizeof(length), '\0');
  std::memcpy(message.data(), &length, sizeof(length));
  message.append(command);
  message.push_back('\0');
  return message;
}

Expected<std::size_t> MultipathdFrameDecoder::feed(std::string_view bytes) {
  std::size_t used = 0;
  if (header_.size() < sizeof(std::size_t)) {
    const auto take = std::min(sizeof(std::size_t) - header_.size(), bytes.size());
    header_.append(bytes.substr(0, take));
    used += take;
    if (header_.size() < sizeof(std::size_t)) {
      return used;
    }
    std::memcpy(&length_, header_.data(), sizeof(length_));
    if (length_ == 0 || length_ > kMaxMultipathdReply) {
      return fail(fmt::format("multipathd announced a reply of {} bytes (accepted: 1 to {})",
                              length_, kMaxMultipathdReply));
    }
    payload_.reserve(std::min<std::size_t>(length_, 1 << 20));
  }
  const auto take = std::min(length_ - payload_.size(), bytes.size() - used);
  payload_.append(bytes.substr(used, take));
  return used + take;
}

bool MultipathdFrameDecoder::complete() const {
  return header_.size() == sizeof(std::size_t) && payload_.size() == length_;
}

std::size_t MultipathdFrameDecoder::received() const {
  return header_.size() + payload_.size();
}

std::size_t MultipathdFrameDecoder::expected() const {
  return header_.size() == sizeof(std::size_t) ? sizeof(std::size_t) + length_ : 0;
}

std::string MultipathdFrameDecoder::take() {
  std::string text = std::move(payload_);
  if (!text.empty() && text.back() == '\0') {
    text.pop_back();
  }
  header_.clear();
  payload_.clear();
  length_ = 0;
  return text;
}

// ---------------------------------------------------------------------------

MultipathdClient::MultipathdClient(std::string socketName, milliseconds queueLimit)
    : socketName_(std::move(socketName)), queueLimit_(queueLimit) {}

MultipathdClient::~MultipathdClient() {
  closeConnection();
}

void MultipathdClient::request(std::string command, milliseconds timeout, Callback done,
                               Clock::time_point now, std::optional<milliseconds> queueLimit) {
  const auto limit = std::min(queueLimit.value_or(queueLimit_), queueLimit_);
  queue_.push_back(Request{std::move(command), now + limit, timeout, limit, std::move(done)});
}

int MultipathdClient::fd() const {
  return fd_;
}

std::uint64_t MultipathdClient::connection() const {
  return connections_;
}

short MultipathdClient::events() const {
  if (fd_ < 0 || !running_) {
    return 0;
  }
  return out_.empty() ? POLLIN : POLLOUT;
}

std::optional<MultipathdClient::Clock::time_point> MultipathdClient::nextTick() const {
  if (queue_.empty()) {
    return std::nullopt;
  }
  if (!running_) {
    return Clock::time_point{}; // due at once: start the next request
  }
  Clock::time_point next = queue_.front().deadline;
  for (const auto &request : queue_) {
    next = std::min(next, request.deadline);
  }
  return next;
}

std::size_t MultipathdClient::pending() const {
  return queue_.size();
}

std::string MultipathdClient::queuedTooLong(const Request &request) {
  return fmt::format("\"{}\" was not sent: it waited {} ms behind earlier commands to "
                     "multipathd",
                     request.command, request.queueLimit.count());
}

void MultipathdClient::closeConnection() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  out_.clear();
  decoder_ = MultipathdFrameDecoder{};
}

void MultipathdClient::finish(Expected<std::string> outcome) {
  // Off the queue before the callback runs: it may queue more.
  auto done = std::move(queue_.front().done);
  queue_.pop_front();
  running_ = false;
  if (done) {
    done(std::move(outcome));
  }
}

void MultipathdClient::start(Clock::time_point now) {
  while (!running_ && !queue_.empty()) {
    auto &front = queue_.front();
    if (front.deadline <= now) {
      finish(fail(queuedTooLong(front)));
      continue;
    }
    auto message = encodeMultipathdMessage(front.command);
    if (!message) {
      finish(fail(message.error()));
      continue;
    }
    if (fd_ < 0) {
      const int fd = connectAbstract(socketName_);
      if (fd < 0) {
        finish(fail(fmt::format("cannot connect to multipathd at {}: {}", socketLabel(socketName_),
                                errnoMessage(-fd))));
        continue;
      }
      fd_ = fd;
      ++connections_;
    }
    out_ = std::move(*message);
    running_ = true;
    front.deadline = now + front.timeout;
    sendSome();
  }
  if (queue_.empty()) {
    closeConnection();
  }
}

void MultipathdClient::sendSome() {
  while (!out_.empty()) {
    // One send for the whole message: multipathd reads the length with a
    // single recv().
    const auto sent = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        return;
      }
      const int error = errno;
      const auto command = queue_.front().command;
      closeConnection();
      finish(fail(fmt::format("sending \"{}\" to multipathd: {}", command, errnoMessage(error))));
      return;
    }
    out_.erase(0, static_cast<std::size_t>(sent));
  }
}

void MultipathdClient::receiveSome() {
  std::array<char, std::size_t{64} * 1024> buffer{};
  for (;;) {
    const auto got = ::recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        return;
      }
      const int error = errno;
      closeConnection();
      finish(fail(fmt::format("reading multipathd's reply: {}", errnoMessage(error))));
      return;
    }
    if (got == 0) {
      const auto received = decoder_.received();
      const auto expected = decoder_.expected();
      closeConnection();
      finish(fail(expected == 0 ? fmt::format("multipathd closed the connection after {} of "
                                              "the reply's length bytes",
                                              received)
                                : fmt::format("multipathd closed the connection after {} of "
                                              "{} reply bytes",
                                              received, expected)));
      return;
    }
    const std::string_view bytes(buffer.data(), static_cast<std::size_t>(got));
    const auto used = decoder_.feed(bytes);
    if (!used) {
      closeConnection();
      finish(fail(used.error()));
      return;
    }
    if (decoder_.complete()) {
      auto reply = decoder_.take();
      if (*used < bytes.size()) {
        // Bytes nobody asked for: the connection is out of step.
        closeConnection();
      }
      finish(std::move(reply));
      return;
    }
  }
}

void MultipathdClient::service(short revents, Clock::time_point now) {
  if (fd_ >= 0 && running_ && revents != 0) {
    if (!out_.empty()) {
      sendSome();
    } else {
      receiveSome();
    }
  }
  start(now);
}

void MultipathdClient::tick(Clock::time_point now) {
  if (running_ && queue_.front().deadline <= now) {
    const auto &front = queue_.front();
    auto message = fmt::format("multipathd did not answer \"{}\" within {} ms", front.command,
                               front.timeout.count());
    closeConnection();
    finish(fail(std::move(message)));
  }
  // Waiting ones past their deadline; collected first, as callbacks may queue.
  std::vector<Request> expired;
  for (auto it = queue_.begin() + (running_ ? 1 : 0); it != queue_.end();) {
    if (it->deadline <= now) {
      expired.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto &request : expired) {
    if (request.done) {
      request.done(fail(queuedTooLong(request)));
    }
  }
  start(now);
}

Expected<std::string> multipathdCommand(std::string_view command, milliseconds timeout,
                                        std::string_view socketName) {
  using Clock = MultipathdClient::Clock;
  MultipathdClient client{std::string(socketName)};
  std::optional<Expected<std::string>> outcome;
  client.request(
      std::string(command), timeout,
      [&outcome](Expected<std::string> reply) { outcome = std::move(reply); }, Clock::now());
  client.tick(Clock::now());
  while (!outcome) {
    const auto now = Clock::now();
    int wait = -1;
    if (const auto next = client.nextTick()) {
      wait = static_cast<int>(std::clamp<milliseconds::rep>(
          std::chrono::ceil<milliseconds>(*next - now).count(), 0, 60'000));
    }
    pollfd pfd{client.fd(), client.events(), 0};
    const int ready = ::poll(&pfd, client.fd() >= 0 ? 1 : 0, wait);
    if (ready < 0 && errno != EINTR) {
      return fail(fmt::format("waiting for multipathd: {}", errnoMessage(errno)));
    }
    if (ready > 0) {
      client.service(pfd.revents, Clock::now());
    }
    if (!outcome) {
      client.tick(Clock::now());
    }
  }
  return std::move(*outcome);
}

Expected<void> checkMultipathdActionReply(std::string_view reply) {
  std::string_view text = reply;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (text == "ok") {
    return {};
  }
  if (text == "fail") {
    return fail("multipathd refused the action (\"fail\")");
  }
  if (text == "timeout") {
    return fail("multipathd timed out on the action");
  }
  if (text.starts_with("permission deny")) {
    return fail("multipathd refused the action: only root may change paths and maps");
  }
  return fail("unexpected reply from multipathd: " + selector::printableQuoted(text, 200));
}

std::optional<std::string> failPathCommand(std::string_view device) {
  if (!plainWord(device)) {
    return std::nullopt;
  }
  return "fail path " + std::string(device);
}

std::optional<std::string> reinstatePathCommand(std::string_view device) {
  if (!plainWord(device)) {
    return std::nullopt;
  }
  return "reinstate path " + std::string(device);
}

std::optional<std::string> switchGroupCommand(std::string_view map, unsigned group) {
  if (!plainWord(map) || group == 0) {
    return std::nullopt;
  }
  return fmt::format("switchgroup map {} group {}", map, group);
}

std::optional<std::string> queueingCommand(std::string_view map, bool queue) {
  if (!plainWord(map)) {
    return std::nullopt;
  }
  return fmt::format("{} map {}", queue ? "restorequeueing" : "disablequeueing", map);
}

std::string_view toString(MultipathdDmState state) {
  switch (state) {
  case MultipathdDmState::Active:
    return "active";
  case MultipathdDmState::Failed:
    return "failed";
  case MultipathdDmState::Undef:
    return "undef";
  }
  return "undef";
}

std::string_view toString(MultipathdCheckerState state) {
  switch (state) {
  case MultipathdCheckerState::Ready:
    return "ready";
  case MultipathdCheckerState::Faulty:
    return "faulty";
  case MultipathdCheckerState::Shaky:
    return "shaky";
  case MultipathdCheckerState::Ghost:
    return "ghost";
  case MultipathdCheckerState::Pending:
    return "i/o pending";
  case MultipathdCheckerState::Timeout:
    return "i/o timeout";
  case MultipathdCheckerState::Delayed:
    return "delayed";
  case MultipathdCheckerState::Undef:
    return "undef";
  }
  return "undef";
}

selector::PathState toPathState(MultipathdCheckerState state) {
  switch (state) {
  case MultipathdCheckerState::Ready:
    return selector::PathState::Up;
  case MultipathdCheckerState::Faulty:
  case MultipathdCheckerState::Timeout:
    return selector::PathState::Down;
  case MultipathdCheckerState::Shaky:
    return selector::PathState::Shaky;
  case MultipathdCheckerState::Ghost:
    return selector::PathState::Ghost;
  case MultipathdCheckerState::Pending:
  case MultipathdCheckerState::Delayed:
    return selector::PathState::Pending;
  case MultipathdCheckerState::Undef:
    return selector::PathState::Unknown;
  }
  return selector::PathState::Unknown;
}

Expected<std::vector<MultipathdPath>> parseMultipathdPaths(std::string_view reply) {
  PK_TRY(lines, listingLines(reply));
  std::vector<MultipathdPath> paths;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto line = lines[i];
    const auto fields = split(line, '\t');
    if (fields.size() != 7) {
      return fail(lineError("paths", i + 1, line,
                            fmt::format("expected 7 tab-separated fields, got {}", fields.size())));
    }
    MultipathdPath path;
    path.device = fields[0];
    path.devT = fields[1];
    if (path.device.empty()) {
      return fail(lineError("paths", i + 1, line, "no device name"));
    }
    if (fields[2] == "active") {
      path.dmState = MultipathdDmState::Active;
    } else if (fields[2] == "failed") {
      path.dmState = MultipathdDmState::Failed;
    } else if (fields[2] == "undef") {
      path.dmState = MultipathdDmState::Undef;
    } else {
      return fail(lineError("paths", i + 1, line,
                            fmt::format("unknown dm state \"{}\"", std::string(fields[2]))));
    }
    static constexpr std::array kCheckerStates = {
        MultipathdCheckerState::Ready,   MultipathdCheckerState::Faulty,
        MultipathdCheckerState::Shaky,   MultipathdCheckerState::Ghost,
        MultipathdCheckerState::Pending, MultipathdCheckerState::Timeout,
        MultipathdCheckerState::Delayed, MultipathdCheckerState::Undef};
    const auto checker = std::find_if(kCheckerStates.begin(), kCheckerStates.end(),
                                      [&](auto state) { return toString(state) == fields[3]; });
    if (checker == kCheckerStates.end()) {
      return fail(lineError("paths", i + 1, line,
                            fmt::format("unknown checker state \"{}\"", std::string(fields[3]))));
    }
    path.checkerState = *checker;
    if (fields[4] == "offline") {
      path.offline = true;
    } else if (fields[4] != "running" && fields[4] != "unknown") {
      return fail(lineError("paths", i + 1, line,
                            fmt::format("unknown device state \"{}\"", std::string(fields[4]))));
    }
    // multipathd prints "[orphan]" for a path in no map and "[unknown]" for
    // a map without an alias.
    if (fields[5] != "[orphan]" && fields[5] != "[unknown]") {
      path.map = fields[5];
    }
    path.wwid = fields[6];
    paths.push_back(std::move(path));
  }
  return paths;
}

Expected<std::vector<MultipathdMap>> parseMultipathdMaps(std::string_view reply) {
  PK_TRY(lines, listingLines(reply));
  std::vector<MultipathdMap> maps;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto line = lines[i];
    const auto fields = split(line, '\t');
    if (fields.size() != 5) {
      return fail(lineError("maps", i + 1, line,
                            fmt::format("expected 5 tab-separated fields, got {}", fields.size())));
    }
    MultipathdMap map;
    map.name = fields[0];
    map.wwid = fields[1];
    if (map.name.empty()) {
      return fail(lineError("maps", i + 1, line, "no map name"));
    }
    if (fields[2] != "undef") {
      map.sysfsName = fields[2];
    }
    if (fields[3] == "suspend") {
      map.suspended = true;
    } else if (fields[3] != "active" && fields[3] != "undef") {
      return fail(lineError("maps", i + 1, line,
                            fmt::format("unknown map state \"{}\"", std::string(fields[3]))));
    }
    const auto count = fields[4];
    const auto [end, error] =
        std::from_chars(count.data(), count.data() + count.size(), map.activePaths);
    if (count.empty() || error != std::errc{} || end != count.data() + count.size()) {
      return fail(
          lineError("maps", i + 1, line, fmt::format("bad path count \"{}\"", std::string(count))));
    }
    maps.push_back(std::move(map));
  }
  return maps;
}

} // namespace pathkeeper::daemon
