#pragma once

// The daemon's side of adaptive selection (issue #9): one capacity estimator
// per path, one reload governor per map, the weights and selector last
// decided for each map, and a bounded history of decisions to publish.
//
// No OS access: the daemon reads /sys/block/<dev>/stat and the clocks and
// passes the text and the times in; it asks evaluate() on its sampling timer
// and, on a Reload, reconciles, which calls applyTo() on every desired map so
// that the decided weights survive every later reconcile too.

#include "adaptive.hpp"
#include "path_estimator.hpp"
#include "per_map_state.hpp"
#include "plan.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief The lines of /proc/diskstats by device name, each mapped to the
/// counters after the name: the same fields, in the same order, as
/// /sys/block/<dev>/stat. One read of that file gives every device's
/// counters; at 1000 paths opening each stat file every sample (a path
/// walk through the sysfs symlinks each) was a quarter of the daemon's
/// CPU. The views point into @p text. Lines that do not have a major, a
/// minor and a name are skipped.
[[nodiscard]] std::map<std::string_view, std::string_view> parseDiskstats(std::string_view text);

/// @brief One published decision: when, what, why.
struct AdaptiveRecord {
  std::chrono::system_clock::time_point at;
  selector::AdaptiveDecision::Action action = selector::AdaptiveDecision::Action::Keep;
  std::string reason;

  bool operator==(const AdaptiveRecord &) const = default;
};

/// @brief A path's estimates as last published.
struct PublishedEstimate {
  std::uint64_t throughputBps = 0;
  std::uint64_t capacityBps = 0;
  std::int64_t latencyUs = -1;
  unsigned confidencePercent = 0; ///< in steps of 10

  bool operator==(const PublishedEstimate &) const = default;
};

/// @brief What the daemon knows about one map when it asks for a decision.
struct AdaptiveMapInput {
  std::string alias;
  struct PathWeight {
    std::string device;
    unsigned weight = 1; ///< relative_throughput in the live table
  };
  std::vector<PathWeight> paths;
  selector::SelectorKind currentSelector = selector::SelectorKind::ServiceTime;
  bool autoSelector = false;
  /// A path of the map that is failing or being reinstated; empty when none.
  std::string transitionDevice;
};

/// @brief One path as the "failing or being reinstated" check sees it.
struct PathSettling {
  std::string device;
  std::optional<selector::PathState> state; ///< health's verdict; nullopt when untracked
  std::optional<bool> failedInDm;           ///< dm's view; nullopt when dm does not list it
};

/// @brief The first path that is failing or being reinstated, "" when none.
/// Settled means health says up or ghost and dm has the path active; any
/// disagreement is a fail_path or reinstate_path on its way, and a reload
/// then would race it.
std::string firstUnsettledPath(const std::vector<PathSettling> &paths);

/// @brief Estimators, governors and decided tables for every adaptive map.
class AdaptiveController {
public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  /// @brief Decisions kept per map for publishing; older ones are dropped.
  static constexpr std::size_t kHistoryLength = 16;

  explicit AdaptiveController(selector::AdaptiveSettings settings = {});

  /// @brief New settings (SIGHUP): estimators restart with the new half-life,
  /// governors keep the time of their last reload.
  void setSettings(const selector::AdaptiveSettings &settings);
  [[nodiscard]] const selector::AdaptiveSettings &settings() const { return settings_; }

  /// @brief Feeds the text of /sys/block/@p device/stat read at @p now. A
  /// text that does not parse (device gone mid-read) is ignored.
  void sample(const std::string &device, std::string_view statText, TimePoint now);
  /// @brief Drops a path's estimator (the device went away).
  void forgetPath(const std::string &device);

  /// @brief Decides for one map and remembers a Reload's weights and
  /// selector for applyTo(). Reload, and the first Held or Deferred of a run,
  /// go into the map's history.
  selector::AdaptiveDecision evaluate(const AdaptiveMapInput &input, TimePoint now, WallTime wall);

  /// @brief Puts the decided selector and weights into @p map and renders
  /// its table again. @return true when @p map changed.
  bool applyTo(selector::PlannedMap &map) const;
  /// @brief Forgets a map's governor, decisions and history (no longer adaptive).
  void forgetMap(const std::string &alias);
  /// @brief Forgets every map for which @p gone says so.
  void forgetMapsIf(const std::function<bool(std::string_view)> &gone);
  /// @brief Maps renamed in the kernel: their governors (the last
  /// reload's time), decisions and histories go with them.
  void renameMaps(const MapRenames &renames);

  /// @brief Publishing without a storm: moves each path's published figures
  /// to its estimates only where a figure moved by more than
  /// kPublishDeadBandPercent (or the confidence to another tenth), so that a
  /// busy path's ordinary jitter does not announce PropertiesChanged every
  /// sample. The weights and decisions, which matter, are published at once.
  /// @return true when anything published changed.
  bool refreshPublished();
  /// @brief Published figures of @p device; defaults when never published.
  [[nodiscard]] PublishedEstimate published(const std::string &device) const;
  static constexpr double kPublishDeadBandPercent = 10;

  /// @brief The estimate of @p device, if it was ever sampled.
  [[nodiscard]] const selector::PathEstimate *estimate(const std::string &device) const;
  /// @brief The weight last decided for @p device, if any.
  [[nodiscard]] std::optional<unsigned> decidedWeight(const std::string &device) const;
  [[nodiscard]] const std::deque<AdaptiveRecord> &history(const std::string &alias) const;
  [[nodiscard]] unsigned reloads(const std::string &alias) const;
  [[nodiscard]] bool tracks(const std::string &alias) const { return maps_.contains(alias); }

private:
  struct MapState {
    selector::ReloadGovernor governor;
    std::optional<selector::SelectorKind> selector; ///< decided; only for selector = "auto"
    std::map<std::string, unsigned> weights;        ///< decided, by device
    std::deque<AdaptiveRecord> history;
  };

  selector::AdaptiveSettings settings_;
  std::map<std::string, selector::PathEstimator> estimators_; ///< by device
  std::map<std::string, MapState> maps_;                      ///< by alias
  std::map<std::string, PublishedEstimate> published_;        ///< by device
};

} // namespace pathkeeper::daemon
