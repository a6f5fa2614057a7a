#pragma once

// What the admin holds, kept across daemon restarts: the paths failed with
// FailPath (until ReinstatePath) and the maps whose queueing DisableQueueing
// stopped (until RestoreQueueing). Neither is visible in the kernel as the
// admin's: a failed path looks like any failed path, a map that does not
// queue like one whose no_path_retry ran out. Without this file a restart
// (a package upgrade restarts the daemon) would put an admin-failed path
// back into service at its first passing check.
//
// The file lives under /run: a reboot ends every hold, as it ends the maps.
// One hold a line:
//
//   fail-path DEVICE DEVT WWID
//   disable-queueing-uuid DM_UUID MAP
//   disable-queueing MAP             (written when the DM UUID is unknown,
//                                     and by earlier versions; still read)
//
// A fail-path hold names the device's identity too, because the kernel reuses
// sdX names: after the restart it applies only if DEVICE is still that
// device. A disable-queueing hold names the map's DM UUID for the same
// reason, and so that it follows a map renamed while the daemon was stopped.
// Pure text handling; the daemon reads and writes the file.

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

struct AdminHolds {
  /// device -> identity ("DEVT WWID", as the daemon compares it).
  std::map<std::string, std::string> failedPaths;
  std::set<std::string, std::less<>> queueingDisabled; ///< map aliases
  /// A held map's DM UUID, by alias, where known.
  std::map<std::string, std::string, std::less<>> mapUuids;

  bool operator==(const AdminHolds &) const = default;
};

/// @brief The file's text: a comment line, then the holds in a stable order.
[[nodiscard]] std::string renderAdminHolds(const AdminHolds &holds);

/// @brief What the file holds, and in @p problems one message for each
/// line it cannot read (that line is skipped; the others still hold).
[[nodiscard]] AdminHolds parseAdminHolds(std::string_view text, std::vector<std::string> &problems);

} // namespace pathkeeper::daemon
