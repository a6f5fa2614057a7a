#include "iscsi_discovery.hpp"

#include "c_handle.hpp"
#include "iscsi_names.hpp"

#include <iscsi/iscsi.h>

#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

namespace pathkeeper::daemon {

namespace {

using IscsiContextPtr = CHandle<iscsi_context, iscsi_destroy_context>;

using std::chrono::milliseconds;

// libiscsi asks for at least 100 ms between polls when it has nothing to
// wait for; a second is often enough for its own timers and the deadline.
constexpr milliseconds kTickInterval{1000};

// A target could list any number of names; more than this is not a storage
// array but a mistake or an attack, and keeping it would bloat every reply.
constexpr std::size_t kMaxTargetsPerReply = 4096;

// libiscsi's own messages can quote bytes the target sent (for example an
// unknown key in a text reply), so they are escaped like any network text.
std::string libiscsiError(iscsi_context *context) {
  const char *message = context ? iscsi_get_error(context) : nullptr;
  std::string_view text = message ? message : "";
  // Some of them end in a newline, which a log line does not want.
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (text.empty()) {
    return "unknown libiscsi error";
  }
  std::string quoted = selector::printableQuoted(text, 200);
  return quoted.substr(1, quoted.rfind('"') - 1) + (quoted.back() == '"' ? "" : "...");
}

std::string seconds(milliseconds duration) {
  if (duration.count() % 1000 == 0) {
    return std::to_string(duration.count() / 1000) + " s";
  }
  return std::to_string(duration.count()) + " ms";
}

// "10.10.1.20:3260" or "[fd00::20]:3260": the portal without a tag, as
// people and libiscsi's connect both want it.
std::string hostPort(const selector::Portal &portal) {
  const bool v6 = portal.address.find(':') != std::string::npos;
  return (v6 ? "[" + portal.address + "]" : portal.address) + ":" + std::to_string(portal.port);
}

} // namespace

Expected<std::string> defaultProbeInitiatorName(const std::filesystem::path &file) {
  std::ifstream in(file);
  if (!in) {
    return fail(file.string() + ": cannot read the host's initiator name: " +
                std::generic_category().message(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto host = selector::parseInitiatorNameFile(text.str());
  if (!host) {
    return fail(file.string() + ": " + host.error());
  }
  auto probe = selector::probeInitiatorName(*host);
  if (!probe) {
    return fail(file.string() + ": " + probe.error());
  }
  return probe;
}

struct IscsiDiscovery::Probe {
  enum class Stage { Connecting, LoggingIn, Discovering, LoggingOut, Done };

  DiscoveryRequest request;
  Clock::time_point deadline;
  Clock::time_point lastTick;
  Stage stage = Stage::Connecting;
  DiscoveryResult found;
  Expected<DiscoveryResult> outcome = fail("discovery has not finished");
  PortalReach reach = PortalReach::Unknown;
  // Declared last so that it is destroyed first: destroying a context
  // cancels its commands, whose callbacks still reach this object.
  IscsiContextPtr context;

  Probe(DiscoveryRequest req, Clock::time_point now)
      : request(std::move(req)), deadline(now + request.timeout), lastTick(now) {}

  Probe(const Probe &) = delete;
  Probe &operator=(const Probe &) = delete;

  ~Probe() {
    // Callbacks fired by the teardown must not start anything new.
    stage = Stage::Done;
    context.reset();
  }

  [[nodiscard]] std::string where() const {
    std::string text = "portal " + hostPort(request.portal);
    if (!request.netdev.empty()) {
      text += " via " + request.netdev;
    }
    return text;
  }

  [[nodiscard]] std::string_view stageName() const {
    switch (stage) {
    case Stage::Connecting:
      return "no TCP connection";
    case Stage::LoggingIn:
      return "connected, no login response";
    case Stage::Discovering:
      return "logged in, no SendTargets response";
    case Stage::LoggingOut:
      return "logout";
    case Stage::Done:
      break;
    }
    return "done";
  }

  void finish(Expected<DiscoveryResult> result, PortalReach how) {
    if (stage == Stage::Done) {
      return;
    }
    stage = Stage::Done;
    outcome = std::move(result);
    reach = how;
  }

  // The portal could not be reached, or stopped answering.
  void failWith(const std::string &message) {
    finish(fail(where() + ": " + message), PortalReach::Silent);
  }

  // The target answered, with a refusal: the network to it works.
  void failRefused(const std::string &message) {
    finish(fail(where() + ": " + message), PortalReach::Answered);
  }

  // Nothing left the host, or what did was not the probe's doing.
  void failLocally(const std::string &message) {
    finish(fail(where() + ": " + message), PortalReach::Unknown);
  }

  void failConnectionLost() {
    failWith("the connection was lost (" + std::string(stageName()) + ")");
  }

  // iscsi_service() fails when the connection breaks: the portal closed it
  // (a read of 0 bytes, POLLHUP) or the network reset it. libiscsi would
  // then reconnect, which start() turned off, and all it says is that it
  // "Can not reconnect right now"; what an admin needs is that the
  // connection was lost, and at which step.
  void failServiceError() {
    const std::string text = libiscsiError(context.get());
    if (text.find("Can not reconnect") != std::string::npos) {
      return failConnectionLost();
    }
    failWith(text + " (" + std::string(stageName()) + ")");
  }

  void failTimedOut() {
    finish(fail(where() + " did not answer within " + seconds(request.timeout) + " (" +
                std::string(stageName()) + ")"),
           PortalReach::Silent);
  }

  // The socket is closed outside libiscsi's callbacks: iscsi_service() still
  // works on the connection after a callback returns.
  void closeIfDone() {
    if (stage == Stage::Done && context && iscsi_get_fd(context.get()) != -1) {
      iscsi_disconnect(context.get());
    }
  }

  void start() {
    if (auto name = selector::validateIscsiName(request.initiatorName); !name) {
      return failLocally("bad discovery initiator name: " + name.error());
    }
    auto address = selector::canonicalIpAddress(request.portal.address);
    if (!address) {
      return failLocally(address.error());
    }
    request.portal.address = *address;
    if (request.timeout <= milliseconds::zero()) {
      return failLocally("the discovery timeout must be positive");
    }
    if (!request.netdev.empty()) {
      if (request.netdev.size() >= IFNAMSIZ || if_nametoindex(request.netdev.c_str()) == 0) {
        return failLocally("network interface " + selector::printableQuoted(request.netdev) +
                           " does not exist");
      }
    }

    context.reset(iscsi_create_context(request.initiatorName.c_str()));
    if (!context) {
      throw std::system_error(ENOMEM, std::generic_category(), "iscsi_create_context");
    }
    iscsi_context *ctx = context.get();
    if (iscsi_set_session_type(ctx, ISCSI_SESSION_DISCOVERY) != 0) {
      return failLocally("cannot make a discovery session: " + libiscsiError(ctx));
    }
    // A probe's failure is its answer: it must never reconnect behind our back.
    iscsi_set_noautoreconnect(ctx, 1);
    iscsi_set_reconnect_max_retries(ctx, 0);
    // No PDU timeouts of libiscsi's own: they count whole seconds of the
    // wall clock, so a clock step (NTP, a VM resumed) would fail a waiting
    // probe at once. tick() enforces the deadline on the monotonic clock.
    iscsi_set_timeout(ctx, 0);
    if (!request.netdev.empty()) {
      // libiscsi copies the list and picks one entry per socket; with a
      // single name that entry is always ours.
      std::array<char, IFNAMSIZ> name{};
      std::copy(request.netdev.begin(), request.netdev.end(), name.begin());
      iscsi_set_bind_interfaces(ctx, name.data());
    }

    if (iscsi_connect_async(ctx, hostPort(request.portal).c_str(), &Probe::onConnect, this) != 0) {
      // connect(2) itself refused at once (no route from the NIC, say): that
      // is the network's answer. Anything else (no socket) is ours.
      // libiscsi wraps connect(2)'s text: "Couldn't connect transport:
      // Connect failed with errno : Network is unreachable(101)".
      const std::string error = libiscsiError(ctx);
      if (error.find("Connect failed") != std::string::npos) {
        return failWith("cannot connect: " + error);
      }
      return failLocally("cannot connect: " + error);
    }
    if (!request.netdev.empty()) {
      verifyBinding();
    }
  }

  // libiscsi only logs a failed SO_BINDTODEVICE and connects anyway, which
  // would make a per-NIC probe silently test whatever NIC routing picks.
  void verifyBinding() {
    std::array<char, IFNAMSIZ> bound{};
    auto length = static_cast<socklen_t>(bound.size());
    const int fd = iscsi_get_fd(context.get());
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, bound.data(), &length) != 0) {
      return failLocally("cannot check the probe's binding to " + request.netdev + ": " +
                         std::generic_category().message(errno));
    }
    const std::string_view actual(bound.data(), strnlen(bound.data(), bound.size()));
    if (actual != request.netdev) {
      failLocally("the probe socket could not be bound to " + request.netdev +
                  " (SO_BINDTODEVICE needs CAP_NET_RAW)");
      closeIfDone();
    }
  }

  static Probe &self(void *privateData) { return *static_cast<Probe *>(privateData); }

  static void onConnect(iscsi_context *ctx, int status, void * /*data*/, void *privateData) {
    Probe &probe = self(privateData);
    // libiscsi may call this a second time when the connection drops.
    if (probe.stage != Stage::Connecting) {
      return;
    }
    if (status != SCSI_STATUS_GOOD) {
      return probe.failWith("cannot connect: " + libiscsiError(ctx));
    }
    probe.stage = Stage::LoggingIn;
    if (iscsi_login_async(ctx, &Probe::onLogin, privateData) != 0) {
      probe.failLocally("cannot send the discovery login: " + libiscsiError(ctx));
    }
  }

  /// The login's or SendTargets' reply, when the probe still waits for it
  /// at @p expected (libiscsi may call back late) and it is good; a failed
  /// one is reported here, a failure status as the portal's refusal
  /// (@p refused says what failed).
  bool goodReply(iscsi_context *ctx, int status, Stage expected, std::string_view refused) {
    if (stage != expected) {
      return false;
    }
    if (status == SCSI_STATUS_TIMEOUT) {
      failTimedOut();
      return false;
    }
    if (status == SCSI_STATUS_CANCELLED) {
      failConnectionLost();
      return false;
    }
    if (status != SCSI_STATUS_GOOD) {
      // libiscsi reports a login response with a failure status this way.
      failRefused(std::string(refused) + ": " + libiscsiError(ctx));
      return false;
    }
    return true;
  }

  static void onLogin(iscsi_context *ctx, int status, void * /*data*/, void *privateData) {
    Probe &probe = self(privateData);
    if (!probe.goodReply(ctx, status, Stage::LoggingIn, "discovery login failed")) {
      return;
    }
    probe.stage = Stage::Discovering;
    if (iscsi_discovery_async(ctx, &Probe::onDiscovery, privateData) != 0) {
      probe.failLocally("cannot send SendTargets: " + libiscsiError(ctx));
    }
  }

  static void onDiscovery(iscsi_context *ctx, int status, void *data, void *privateData) {
    Probe &probe = self(privateData);
    if (!probe.goodReply(ctx, status, Stage::Discovering, "SendTargets failed")) {
      return;
    }
    // The list belongs to libiscsi and dies when this callback returns.
    probe.collect(static_cast<const iscsi_discovery_address *>(data));
    probe.stage = Stage::LoggingOut;
    if (iscsi_logout_async(ctx, &Probe::onLogout, privateData) != 0) {
      probe.found.warnings.push_back("cannot send the logout: " + libiscsiError(ctx));
      probe.succeed();
    }
  }

  static void onLogout(iscsi_context *ctx, int status, void * /*data*/, void *privateData) {
    Probe &probe = self(privateData);
    if (probe.stage != Stage::LoggingOut) {
      return;
    }
    if (status != SCSI_STATUS_GOOD) {
      probe.found.warnings.push_back("logout failed: " + libiscsiError(ctx));
    }
    probe.succeed();
  }

  void succeed() {
    auto &targets = found.targets;
    std::sort(targets.begin(), targets.end());
    targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
    finish(std::move(found), PortalReach::Answered);
  }

  void collect(const iscsi_discovery_address *list) {
    std::size_t count = 0;
    for (const auto *entry = list; entry; entry = entry->next) {
      if (++count > kMaxTargetsPerReply) {
        found.rejected.push_back("more than " + std::to_string(kMaxTargetsPerReply) +
                                 " targets in one reply; ignored the rest");
        return;
      }
      const std::string_view name = entry->target_name ? entry->target_name : "";
      if (auto valid = selector::validateIscsiName(name); !valid) {
        found.rejected.push_back("TargetName: " + valid.error());
        continue;
      }
      if (!entry->portals) {
        found.targets.push_back(
            {std::string(name), request.portal, request.portal, request.netdev});
        continue;
      }
      for (const auto *portal = entry->portals; portal; portal = portal->next) {
        auto parsed = selector::parseTargetAddress(portal->portal ? portal->portal : "");
        if (!parsed) {
          found.rejected.push_back("target " + std::string(name) + ": " + parsed.error());
          continue;
        }
        selector::Portal probed = request.portal;
        if (parsed->address == probed.address && parsed->port == probed.port) {
          probed.tpgt = parsed->tpgt;
        }
        found.targets.push_back({std::string(name), *std::move(parsed), probed, request.netdev});
      }
    }
  }
};

IscsiDiscovery::IscsiDiscovery(DiscoveryRequest request, Clock::time_point now)
    : probe_(std::make_unique<Probe>(std::move(request), now)) {
  probe_->start();
  probe_->closeIfDone();
}

IscsiDiscovery::~IscsiDiscovery() = default;
IscsiDiscovery::IscsiDiscovery(IscsiDiscovery &&) noexcept = default;
IscsiDiscovery &IscsiDiscovery::operator=(IscsiDiscovery &&) noexcept = default;

int IscsiDiscovery::fd() const {
  if (probe_->stage == Probe::Stage::Done || !probe_->context) {
    return -1;
  }
  return iscsi_get_fd(probe_->context.get());
}

short IscsiDiscovery::events() const {
  if (fd() < 0) {
    return 0;
  }
  return static_cast<short>(iscsi_which_events(probe_->context.get()));
}

void IscsiDiscovery::service(short revents) {
  if (fd() < 0) {
    return;
  }
  if (iscsi_service(probe_->context.get(), revents) != 0) {
    probe_->failServiceError();
  }
  probe_->closeIfDone();
}

void IscsiDiscovery::tick(Clock::time_point now) {
  Probe &probe = *probe_;
  if (probe.stage == Probe::Stage::Done) {
    return;
  }
  probe.lastTick = now;
  if (now >= probe.deadline) {
    if (probe.stage == Probe::Stage::LoggingOut) {
      // The answer is in; only the courtesy logout went unanswered.
      probe.found.warnings.push_back("logout not answered within " +
                                     seconds(probe.request.timeout));
      probe.succeed();
    } else {
      probe.failTimedOut();
    }
  } else if (fd() >= 0 && iscsi_service(probe.context.get(), 0) != 0) {
    probe.failServiceError();
  }
  probe.closeIfDone();
}

IscsiDiscovery::Clock::time_point IscsiDiscovery::nextTick() const {
  return std::min(probe_->lastTick + kTickInterval, probe_->deadline);
}

bool IscsiDiscovery::done() const {
  return probe_->stage == Probe::Stage::Done;
}

const Expected<DiscoveryResult> &IscsiDiscovery::result() const {
  return probe_->outcome;
}

PortalReach IscsiDiscovery::reach() const {
  return probe_->reach;
}

const DiscoveryRequest &IscsiDiscovery::request() const {
  return probe_->request;
}

Expected<DiscoveryResult> discoverBlocking(const DiscoveryRequest &request) {
  using Clock = IscsiDiscovery::Clock;
  IscsiDiscovery probe(request, Clock::now());
  while (!probe.done()) {
    const auto wait = std::chrono::ceil<milliseconds>(probe.nextTick() - Clock::now());
    const int timeoutMs = static_cast<int>(std::clamp<milliseconds::rep>(wait.count(), 0, 1000));
    pollfd watched{probe.fd(), probe.events(), 0};
    // With no fd or no events poll() just sleeps until the next tick.
    const int ready = poll(&watched, watched.fd >= 0 && watched.events != 0 ? 1 : 0, timeoutMs);
    if (ready < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (ready > 0) {
      probe.service(watched.revents);
    }
    probe.tick(Clock::now());
  }
  return probe.result();
}

} // namespace pathkeeper::daemon
