#pragma once

// pathkeeper.conf as values. Parsing lives in config.cpp (TOML via toml++);
// reading the files and the pathkeeper.conf.d/ drop-ins is the daemon's job
// (daemon/config_files.hpp), so everything here works on text in memory.

#include "expected.hpp"
#include "model.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief How paths of one LUN are split into priority groups.
enum class GroupingPolicy {
  Multibus,          ///< one group with every path
  Failover,          ///< one path per group
  GroupByController, ///< one group per ALUA target port group or controller label
  GroupByPrio,       ///< one group per distinct path priority
};

std::string_view toString(GroupingPolicy policy);
std::optional<GroupingPolicy> parseGroupingPolicy(std::string_view text);

/// @brief multipathd's no_path_retry: fail at once, queue forever, or queue
/// for a number of checker intervals.
struct NoPathRetry {
  enum class Kind { Fail, Queue, Count } kind = Kind::Fail;
  unsigned count = 0; ///< only for Kind::Count

  bool operator==(const NoPathRetry &) const = default;
};

/// @brief Whether pathkeeper owns the maps or leaves them to multipathd.
enum class Mode {
  Auto,      ///< companion when multipathd runs, owner otherwise
  Owner,     ///< pathkeeper loads the tables
  Companion, ///< multipathd loads them; pathkeeper watches and advises
};

std::string_view toString(Mode mode);

/// @brief Settings a device entry, a map override or the defaults can carry.
/// Unset fields inherit from the next level down.
struct PolicyOverrides {
  std::optional<GroupingPolicy> grouping;
  std::optional<SelectorKind> selector;
  std::optional<NoPathRetry> noPathRetry;
  std::optional<std::string> hwHandler; ///< "" disables; "alua" etc.
  std::optional<unsigned> pgInitRetries;
  std::optional<unsigned> pgInitDelayMsecs;
  std::optional<QueueMode> queueMode;
  std::optional<bool> retainAttachedHwHandler;
};

/// @brief Health-checking and flap-damping knobs.
struct HealthSettings {
  std::chrono::milliseconds checkerInterval{5000};
  std::chrono::milliseconds failedCheckerInterval{1000};
  std::chrono::milliseconds checkerTimeout{3000};
  bool flapDamping = true;
  unsigned flapThreshold = 3;               ///< failures within the window
  std::chrono::milliseconds flapWindow{60000};
  std::chrono::milliseconds flapRecovery{30000};     ///< initial hold-down
  std::chrono::milliseconds flapRecoveryMax{600000}; ///< hold-down cap
};

/// @brief The [defaults] table.
struct Defaults {
  GroupingPolicy grouping = GroupingPolicy::GroupByController;
  SelectorKind selector = SelectorKind::ServiceTime;
  NoPathRetry noPathRetry{NoPathRetry::Kind::Count, 12};
  bool userFriendlyNames = true;
  std::string bindingsFile = "/etc/multipath/bindings";
  Mode mode = Mode::Auto;
  HealthSettings health;
};

/// @brief How a controller rule matches a path; every set field must match.
struct ControllerMatch {
  std::optional<std::string> targetIqnGlob;
  std::optional<std::string> targetIqnRegex;
  std::optional<std::string> vendor;  ///< exact, case-insensitive, trailing spaces ignored
  std::optional<std::string> product; ///< as vendor
  std::optional<std::string> serial;  ///< glob
  std::optional<std::string> portal;  ///< "address" or "address:port"
};

/// @brief A [[controller]] rule: names the controller behind matching paths.
struct ControllerRule {
  ControllerMatch match;
  std::string label;          ///< e.g. "upper"
  std::optional<std::string> alias; ///< map alias, e.g. "xserve-upper"
  std::string origin;         ///< "file:line", for messages
};

/// @brief A [[device]] entry keyed by SCSI vendor/product (the hwtable).
struct DeviceEntry {
  std::string vendor;  ///< regex, as multipath.conf's device section
  std::string product; ///< regex
  PolicyOverrides policy;
  std::string origin; ///< "built-in" or "file:line"
};

/// @brief A [[map]] override keyed by WWID.
struct MapOverride {
  std::string wwid;
  std::optional<std::string> alias;
  PolicyOverrides policy;
  std::string origin;
};

/// @brief The whole configuration.
struct Config {
  Defaults defaults;
  std::vector<ControllerRule> controllers;
  std::vector<DeviceEntry> devices; ///< user entries first, then built-ins
  std::vector<MapOverride> maps;
};

/// @brief The built-in device table (Apple Xserve RAID: multibus, ...).
std::vector<DeviceEntry> builtinDevices();

/// @brief Parses one TOML document and merges it over @p base.
/// @param origin the file name used in error messages.
/// Errors read "file:line:column: key: message". Unknown keys and wrong types
/// are errors; nothing is ignored silently.
Expected<Config> parseConfig(std::string_view text, std::string_view origin, Config base = {});

/// @brief Checks cross-field constraints (ranges, duplicate WWIDs, ...).
Expected<void> validateConfig(const Config &config);

} // namespace pathkeeper::selector
