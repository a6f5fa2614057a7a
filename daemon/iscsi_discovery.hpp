#pragma once

// iSCSI SendTargets discovery through libiscsi, written as a non-blocking
// state machine so that the daemon's single event loop can run many probes
// at once: the loop watches fd() for events(), calls service() when the fd
// is ready and tick() on a timer, and reads result() once done() is true.
// discoverBlocking() runs the same machine with poll() for pathkeeperctl and
// tests.
//
// A probe is one discovery session: TCP connect (optionally bound to one NIC
// with SO_BINDTODEVICE), a discovery login under its own initiator name,
// SendTargets=All, logout. It never touches the kernel's sessions, and its
// initiator name (the host's plus ":pathkeeper-probe") keeps a target's logs
// from confusing the two.

#include "expected.hpp"
#include "model.hpp"
#include "session_coverage.hpp"

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief open-iscsi's initiator name file.
inline constexpr std::string_view kInitiatorNameFile = "/etc/iscsi/initiatorname.iscsi";

/// @brief The host's initiator name from @p file plus ":pathkeeper-probe".
/// Errors name the file.
Expected<std::string>
defaultProbeInitiatorName(const std::filesystem::path &file = kInitiatorNameFile);

/// @brief What one probe asks, and of whom.
struct DiscoveryRequest {
  selector::Portal portal;   ///< the portal to ask; its tpgt is not used
  std::string netdev;        ///< NIC to bind the probe to; empty lets routing choose
  std::string initiatorName; ///< the probe's own name, see defaultProbeInitiatorName()
  std::chrono::milliseconds timeout{5000}; ///< for the whole exchange, connect to logout
};

/// @brief What a probe found.
struct DiscoveryResult {
  /// Valid entries, sorted. A target that lists no TargetAddress is
  /// reachable at the probed portal (RFC 3720 appendix D); its tpgt is then
  /// the request's.
  std::vector<selector::DiscoveredTarget> targets;
  /// One reason per entry of the reply that failed validation.
  std::vector<std::string> rejected;
  /// Trouble that did not spoil the result, e.g. an unanswered logout.
  std::vector<std::string> warnings;
};

/// @brief What a finished probe says about the network between its NIC and
/// the portal, which is what proactive failover acts on.
enum class PortalReach {
  /// The probe failed before anything left the host (a bad request, a NIC
  /// that does not exist, no socket): it says nothing about the network.
  Unknown,
  /// The target answered at the iSCSI level: with targets, or by refusing
  /// the discovery login or SendTargets (discovery CHAP, an initiator list).
  Answered,
  /// No TCP connection, a connection lost, or no answer within the timeout.
  Silent,
};

/// @brief One SendTargets probe. Move-only; owns its libiscsi context. A
/// moved-from probe may only be destroyed or assigned to.
///
/// fd() changes while the probe runs (libiscsi opens the socket on connect
/// and the probe closes it when done), so the loop re-reads fd() and
/// events() after every service() and tick().
///
/// Run all probes on one thread: libiscsi 1.19 picks the bind interface
/// with an unguarded global counter.
class IscsiDiscovery {
public:
  using Clock = std::chrono::steady_clock;

  /// @brief Starts connecting. Problems with the request or the NIC, and a
  /// connect that fails at once, finish the probe with an error right away.
  /// @throws std::system_error when libiscsi cannot allocate a context.
  IscsiDiscovery(DiscoveryRequest request, Clock::time_point now);
  ~IscsiDiscovery();
  IscsiDiscovery(IscsiDiscovery &&) noexcept;
  IscsiDiscovery &operator=(IscsiDiscovery &&) noexcept;
  IscsiDiscovery(const IscsiDiscovery &) = delete;
  IscsiDiscovery &operator=(const IscsiDiscovery &) = delete;

  /// @brief The socket to watch, or -1 when there is none (yet or any more).
  [[nodiscard]] int fd() const;
  /// @brief poll(2) events to wait for on fd(); 0 means wait for tick().
  [[nodiscard]] short events() const;
  /// @brief Handles readiness of fd() (@p revents as poll(2) reports it).
  void service(short revents);
  /// @brief Enforces the deadline and lets libiscsi run its timers; call it
  /// at nextTick() at the latest.
  void tick(Clock::time_point now);
  /// @brief When tick() must run next: in at most a second, or at the deadline.
  [[nodiscard]] Clock::time_point nextTick() const;

  [[nodiscard]] bool done() const;
  /// @brief The outcome; only meaningful once done().
  [[nodiscard]] const Expected<DiscoveryResult> &result() const;
  /// @brief Whether the portal answered; only meaningful once done().
  /// Answered whenever result() holds a value.
  [[nodiscard]] PortalReach reach() const;
  [[nodiscard]] const DiscoveryRequest &request() const;

private:
  struct Probe;
  std::unique_ptr<Probe> probe_; // heap-pinned: libiscsi keeps a pointer to it
};

/// @brief Runs one probe to completion with poll(2).
Expected<DiscoveryResult> discoverBlocking(const DiscoveryRequest &request);

} // namespace pathkeeper::daemon
