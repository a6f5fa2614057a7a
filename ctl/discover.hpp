#pragma once

// `pathkeeperctl discover`: SendTargets probes from each NIC to each portal,
// all at once in one poll() loop, compared with the kernel's sessions. The
// pieces are separate so that the choice of probes, the loop and the two
// output formats can each be read (and changed) on their own; main.cpp only
// parses options and wires them together.

#include "expected.hpp"
#include "iscsi_discovery.hpp"
#include "model.hpp"
#include "session_coverage.hpp"
#include "sysfs_inventory.hpp"

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::ctl {

/// @brief One kernel iSCSI session, reduced to what discover compares: the
/// target, the portal it was configured for, the NIC it is bound to.
struct KernelSession {
  std::string name;    ///< "session1"
  std::string state;   ///< the kernel's word: LOGGED_IN, FAILED, FREE
  selector::Path path; ///< targetIqn, portal (canonical address), netdev, sessionId
};

/// @brief Every session of @p inventory with its connection's persistent
/// portal and its host's NIC, sorted by session number. Sessions without
/// disks count too: they are paths the kernel has, LUNs or not.
/// @param warnings receives one line per session that cannot be used (no
/// connection, an address that is not an IP address).
std::vector<KernelSession> kernelSessions(const daemon::Inventory &inventory,
                                          std::vector<std::string> &warnings);

/// @brief Which (NIC, portal) pairs to probe, and where each list came from.
struct ProbeSet {
  std::vector<selector::Portal> portals; ///< distinct by address and port
  std::vector<std::string> nics;         ///< {""} means one unbound probe per portal
  std::string nicSource;                 ///< "--nic", "config", "sessions" or "routing"
};

/// @brief Portals: @p portals (from --portal or [discovery]) followed by
/// every portal the sessions use, deduplicated by address and port, first
/// occurrence kept. NICs: @p nics (--nic or [discovery]), else the NICs the
/// sessions are bound to, else one unbound probe.
ProbeSet chooseProbes(std::span<const selector::Portal> portals, std::span<const std::string> nics,
                      std::string_view nicSource, std::span<const KernelSession> sessions);

/// @brief What one probe asked and what came back.
struct ProbeOutcome {
  daemon::DiscoveryRequest request;
  Expected<daemon::DiscoveryResult> result;
  std::chrono::milliseconds elapsed{0}; ///< start of the run to the probe's end
};

/// @brief Runs all @p requests concurrently on the calling thread (libiscsi's
/// bind-interface counter is not thread-safe): one poll() over every probe's
/// fd, with each probe's tick() at its nextTick(). Returns in request order.
/// @throws std::system_error when poll() fails or libiscsi has no memory.
std::vector<ProbeOutcome> runProbes(std::span<const daemon::DiscoveryRequest> requests);

/// @brief Why a probe failed, for scripts: "timeout", "refused", "login",
/// "unreachable", "no-nic" or "error".
std::string_view errorKind(std::string_view error);

/// @brief Everything discover reports.
struct DiscoverReport {
  std::string initiatorName;
  std::chrono::milliseconds timeout{0};
  ProbeSet probeSet;
  std::vector<ProbeOutcome> probes;
  /// Proven-reachable discovered paths that no kernel session (in any
  /// state) covers: what a login would add.
  std::vector<selector::MissingPath> missing;
  /// Kernel sessions that exist but are not LOGGED_IN (in recovery or given
  /// up): down paths, which are not "missing" but are still a problem.
  std::vector<KernelSession> notLoggedIn;
  std::vector<std::string> warnings; ///< from the sysfs scan and the session list

  [[nodiscard]] std::size_t failedProbes() const;
  /// @brief 0 when every probe answered, nothing is missing and every
  /// session is logged in; 2 otherwise.
  [[nodiscard]] int exitStatus() const;
};

/// @brief Fills missing and notLoggedIn from @p probes and @p sessions.
void compareWithKernel(DiscoverReport &report, std::span<const KernelSession> sessions);

/// @brief The human listing: one line per probe, then its targets, then the
/// missing paths, the sessions not logged in and a summary line.
std::string discoverToText(const DiscoverReport &report);

/// @brief The JSON document `discover --json` prints; "schema": 1 (README).
std::string discoverToJson(const DiscoverReport &report);

} // namespace pathkeeper::ctl
