#pragma once

// From an inventory of paths and a configuration to the maps pathkeeper
// would build: the pure core of `pathkeeperctl plan` and of the daemon's
// reconciler. The equivalent of `multipath -d -v2`.

#include "config.hpp"
#include "model.hpp"
#include "names.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pathkeeper::selector {

/// @brief One map pathkeeper would build, with the reasons behind it.
struct PlannedMap {
  MapSpec spec;
  std::string controller; ///< the controller label(s) behind the map
  std::string table;      ///< the exact dm table line
  std::string hwHandlerReason;
  std::vector<std::string> notes; ///< decisions worth telling an admin
  /// selector = "auto": spec.selector is the starting point, which the
  /// daemon replaces once it has measured the paths (adaptive.hpp).
  bool autoSelector = false;
  /// The map's no_path_retry: a count is the daemon's to run down (the
  /// table says queue_if_no_path; the daemon sends fail_if_no_path).
  NoPathRetry noPathRetry;
};

/// @brief A path left out of every map, and why.
struct SkippedPath {
  std::string device;
  std::string wwid;
  std::string reason;
};

/// @brief Everything the planner decided.
struct Plan {
  std::vector<PlannedMap> maps; ///< sorted by alias
  std::vector<SkippedPath> skipped;
  std::vector<std::string> warnings; ///< conflicts the admin must resolve
  Bindings bindings;                 ///< with any newly allocated aliases
  bool bindingsChanged = false;
};

/// @brief The controller a Cisco MDS dynamic-mapping target name points at:
/// the FC pWWN at the end of "iqn.1987-05.com.cisco:05.<switch>.<slot-port>.<pwwn>",
/// lowercased. The MDS gives each portal its own IQN for the same FC port, so
/// the pWWN, not the IQN, identifies the controller.
std::optional<std::string> mdsControllerFromIqn(std::string_view iqn);

/// @brief Labels each path's controller: the first matching [[controller]]
/// rule, else the MDS pWWN; leaves ALUA target port groups to the grouping.
/// @return the alias each labelled path's rule asks for, indexed like @p paths.
std::vector<std::optional<std::string>> labelControllers(std::vector<Path> &paths,
                                                         const Config &config);

/// @brief What the running kernel offers that the plan depends on.
struct KernelCapabilities {
  /// dm-historical-service-time exists only in kernels >= 5.12 built with
  /// CONFIG_DM_MULTIPATH_HST; without it a table naming it fails to load.
  bool historicalServiceTime = false;
};

/// @brief Plans every map for @p paths. Paths are keyed by WWID; a WWID that
/// two different controllers report is refused (merging two LUNs that merely
/// share an identifier would corrupt data), and so are paths whose size
/// disagrees with the rest of their LUN.
/// A configured historical-service-time falls back to service-time, with a
/// note, when @p kernel lacks it.
Plan planMaps(std::vector<Path> paths, const Config &config, Bindings bindings = {},
              KernelCapabilities kernel = {});

/// @brief relative_throughput = "auto" from link speeds: in a service-time
/// map whose paths' NICs have different known speeds, each path's weight
/// becomes round(100 * speed / fastest), at least 1, and the table is
/// rendered again (with a note saying why). A map whose speeds are all equal,
/// or where any path's NIC speed is unknown (absent from
/// @p speedMbpsByNetdev), is left as it is: equal weights.
/// @return true when the weights changed.
bool applyLinkSpeedWeights(PlannedMap &map,
                           const std::map<std::string, unsigned, std::less<>> &speedMbpsByNetdev);

} // namespace pathkeeper::selector
