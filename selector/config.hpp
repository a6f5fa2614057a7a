#pragma once

// pathkeeper.conf as values. Parsing lives in config.cpp (TOML via toml++);
// reading the files and the pathkeeper.conf.d/ drop-ins is the daemon's job
// (daemon/config_files.hpp), so everything here works on text in memory.

#include "adaptive.hpp"
#include "expected.hpp"
#include "model.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
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

/// @brief The config spelling, e.g. "group_by_controller".
std::string_view toString(GroupingPolicy policy);
/// @brief Parses the config spelling; nullopt for anything else.
std::optional<GroupingPolicy> parseGroupingPolicy(std::string_view text);

/// @brief multipathd's no_path_retry: fail at once, queue forever, or queue
/// for a number of checker intervals.
struct NoPathRetry {
  enum class Kind { Fail, Queue, Count } kind = Kind::Fail;
  unsigned count = 0; ///< only for Kind::Count

  bool operator==(const NoPathRetry &) const = default;
};

/// @brief "fail", "queue" or the count, as in the config file.
std::string toString(NoPathRetry retry);

/// @brief Whether pathkeeper owns the maps or leaves them to multipathd.
enum class Mode {
  Auto,      ///< companion when multipathd runs, owner otherwise
  Owner,     ///< pathkeeper loads the tables
  Companion, ///< multipathd loads them; pathkeeper watches and advises
};

/// @brief The config spelling, e.g. "companion".
std::string_view toString(Mode mode);
/// @brief Parses the config spelling; nullopt for anything else.
std::optional<Mode> parseMode(std::string_view text);

/// @brief The hardware_handler value meaning "alua when the paths report ALUA,
/// none otherwise".
inline constexpr std::string_view kAutoHwHandler = "auto";

/// @brief Settings a device entry, a map override or the defaults can carry.
/// Unset fields inherit from the next level down.
struct PolicyOverrides {
  std::optional<GroupingPolicy> grouping;
  std::optional<SelectorKind> selector;
  /// selector = "auto": set exactly when selector is, which is then
  /// ServiceTime (what "auto" renders as until measurements decide).
  std::optional<bool> autoSelector;
  std::optional<NoPathRetry> noPathRetry;
  /// "" disables; "auto" (kAutoHwHandler) picks alua for ALUA paths;
  /// otherwise a kernel scsi_dh name: "alua", "emc", "rdac", "hp_sw".
  std::optional<std::string> hwHandler;
  std::optional<unsigned> pgInitRetries;    ///< 1..50
  std::optional<unsigned> pgInitDelayMsecs; ///< 0..60000
  std::optional<QueueMode> queueMode;
  std::optional<bool> retainAttachedHwHandler;

  bool operator==(const PolicyOverrides &) const = default;
};

/// @brief Health-checking and flap-damping knobs.
struct HealthSettings {
  std::chrono::milliseconds checkerInterval{5000};
  /// A working path that keeps passing is checked less often: the interval
  /// doubles after each passing check, from checkerInterval up to this
  /// (multipathd's max_polling_interval). Unset: 4 x checkerInterval.
  std::optional<std::chrono::milliseconds> maxCheckerInterval;
  std::chrono::milliseconds failedCheckerInterval{1000};
  std::chrono::milliseconds checkerTimeout{3000};
  bool flapDamping = true;
  unsigned flapThreshold = 3; ///< failures within the window
  std::chrono::milliseconds flapWindow{60000};
  std::chrono::milliseconds flapRecovery{30000};     ///< initial hold-down
  std::chrono::milliseconds flapRecoveryMax{600000}; ///< hold-down cap
  /// Fail a path as soon as a SendTargets probe over its (NIC, portal) pair
  /// fails, before the iSCSI layer's NOP-out timers notice.
  bool proactiveFailover = false;
  /// Failed probes in a row before proactive failover acts (a first failure
  /// is confirmed by an immediate second probe).
  unsigned proactiveFailoverProbes = 2;

  /// @brief maxCheckerInterval, or its default of 4 x checkerInterval.
  [[nodiscard]] std::chrono::milliseconds effectiveMaxCheckerInterval() const {
    // The default stays within the hour an explicit value may have.
    return maxCheckerInterval.value_or(std::max(
        checkerInterval, std::min(checkerInterval * 4, std::chrono::milliseconds{3600000})));
  }

  bool operator==(const HealthSettings &) const = default;
};

/// @brief When a map goes back to its preferred (highest-priority) group.
struct Failback {
  enum class Kind {
    Immediate,  ///< as soon as a path of a better group is usable again
    Manual,     ///< never by itself; SwitchGroup or `pathkeeperctl switch-group`
    Followover, ///< only when the better group goes from no usable path to one
                ///< (multipathd's followover: never undo a switch made elsewhere)
    Deferred,   ///< after the better group has been usable for `delay`
  } kind = Kind::Immediate;
  std::chrono::seconds delay{0}; ///< only for Kind::Deferred

  bool operator==(const Failback &) const = default;
};

/// @brief "immediate", "manual", "followover" or the number of seconds.
std::string toString(Failback failback);

/// @brief The [discovery] table: the SendTargets probes the daemon and
/// `pathkeeperctl discover` run.
struct DiscoverySettings {
  /// Portals to probe besides those the kernel's sessions already use.
  std::vector<Portal> portals;
  /// NICs to probe from; empty means every NIC an iSCSI session is bound
  /// to, or none (routing chooses) when no session is bound.
  std::vector<std::string> nics;
  std::chrono::milliseconds probeInterval{30000}; ///< 0 disables periodic probes
  std::chrono::milliseconds probeTimeout{5000};
  /// The probe's initiator name; empty means the host's plus ":pathkeeper-probe".
  std::string initiatorName;

  bool operator==(const DiscoverySettings &) const = default;
};

/// @brief How service-time maps weigh their paths (relative_throughput).
enum class ThroughputWeights {
  Equal, ///< every path 1, as multipathd's "service-time 0"
  /// Start from each path's NIC link speed, relative to the fastest in the
  /// map; then follow the measured capacity ([adaptive]).
  Auto,
};

/// @brief The config spelling, "equal" or "auto".
std::string_view toString(ThroughputWeights weights);

/// @brief The [defaults] table.
struct Defaults {
  GroupingPolicy grouping = GroupingPolicy::GroupByController;
  SelectorKind selector = SelectorKind::ServiceTime;
  bool autoSelector = false; ///< selector = "auto"; selector is then ServiceTime
  NoPathRetry noPathRetry{NoPathRetry::Kind::Count, 12};
  bool userFriendlyNames = true;
  std::string bindingsFile = "/etc/multipath/bindings";
  Mode mode = Mode::Auto;
  /// As PolicyOverrides::hwHandler; "auto" unless configured.
  std::string hwHandler{kAutoHwHandler};
  std::optional<unsigned> pgInitRetries;    ///< unset: no pg_init_retries feature
  std::optional<unsigned> pgInitDelayMsecs; ///< unset: no pg_init_delay_msecs feature
  QueueMode queueMode = QueueMode::Default;
  bool retainAttachedHwHandler = false;
  Failback failback;
  ThroughputWeights relativeThroughput = ThroughputWeights::Equal;
  HealthSettings health;

  bool operator==(const Defaults &) const = default;
};

/// @brief How a controller rule matches a path; every set field must match.
struct ControllerMatch {
  std::optional<std::string> targetIqnGlob;
  std::optional<std::string> targetIqnRegex; ///< POSIX extended, searched like multipath.conf
  std::optional<std::string> vendor;         ///< exact, case-insensitive, trailing spaces ignored
  std::optional<std::string> product;        ///< as vendor
  std::optional<std::string> serial;         ///< glob
  std::optional<std::string> portal;         ///< "address", "address:port" or "[v6]:port"

  bool operator==(const ControllerMatch &) const = default;
};

/// @brief A [[controller]] rule: names the controller behind matching paths.
struct ControllerRule {
  ControllerMatch match;
  std::string label;                ///< e.g. "upper"
  std::optional<std::string> alias; ///< map alias, e.g. "xserve-upper"
  std::string origin;               ///< "file:line:column", for messages

  bool operator==(const ControllerRule &) const = default;
};

/// @brief A [[device]] entry keyed by SCSI vendor/product (the hwtable).
struct DeviceEntry {
  std::string vendor;  ///< regex, as multipath.conf's device section
  std::string product; ///< regex
  PolicyOverrides policy;
  std::string origin; ///< "built-in" or "file:line:column"

  bool operator==(const DeviceEntry &) const = default;
};

/// @brief A [[map]] override keyed by WWID.
struct MapOverride {
  std::string wwid;
  std::optional<std::string> alias;
  PolicyOverrides policy;
  std::string origin; ///< "file:line:column"

  bool operator==(const MapOverride &) const = default;
};

/// @brief The whole configuration.
struct Config {
  Defaults defaults;
  /// Searched in order, first match wins. A later layer's rules come before
  /// an earlier layer's, so that a drop-in can override the main file.
  std::vector<ControllerRule> controllers;
  std::vector<DeviceEntry> devices; ///< user entries first (latest layer first), then built-ins
  std::vector<MapOverride> maps;
  DiscoverySettings discovery;
  AdaptiveSettings adaptive;
  /// Where each [defaults]/[health] value was last set ("health.flap_window"
  /// -> "file:line:column"), so that validateConfig can name the file.
  std::map<std::string, std::string, std::less<>> keyOrigins;
};

/// @brief One key of pathkeeper.conf. configSchema() is the single list the
/// parser accepts, and the man page and the shipped config are checked against.
struct ConfigKey {
  std::string_view table;        ///< "defaults", "health", "adaptive", "controller", ...
  std::string_view key;          ///< e.g. "checker_interval"
  std::string_view type;         ///< "string", "boolean", "integer", "duration", ...
  std::string_view defaultValue; ///< TOML literal; "" when unset or required
  std::string_view description;  ///< one sentence for the man page
  std::string_view example;      ///< a valid TOML literal for the key
};

/// @brief Every table the file may contain, and whether it is an array of tables.
struct ConfigTable {
  std::string_view name;
  bool array; ///< [[name]] rather than [name]
  std::string_view description;
};

/// @brief The tables of pathkeeper.conf, in man-page order.
std::span<const ConfigTable> configTables();
/// @brief Every key of pathkeeper.conf, grouped by table.
std::span<const ConfigKey> configSchema();

/// @brief The built-in device table (Apple Xserve RAID: multibus, ...).
std::vector<DeviceEntry> builtinDevices();

/// @brief Defaults plus the built-in device table: the base the daemon layers
/// its files over.
Config builtinConfig();

/// @brief Parses one TOML document and merges it over @p base.
/// @param origin the file name used in error messages.
/// [defaults]/[health] values replace the base's; [[controller]] and
/// [[device]] entries go before the base's; a [[map]] whose wwid the base
/// already has updates that entry's set fields. Errors read
/// "file:line:column: key: message", one per line; unknown keys and wrong
/// types are errors, nothing is ignored silently.
Expected<Config> parseConfig(std::string_view text, std::string_view origin, Config base = {});

/// @brief Checks cross-field constraints (ranges, duplicate WWIDs, ...).
Expected<void> validateConfig(const Config &config);

/// @brief Parses a portal to probe, "address", "address:port" or
/// "[ipv6]:port", into its canonical address (port 3260 unless given); host
/// names are refused. [discovery] portals and `pathkeeperctl discover
/// --portal` share it.
Expected<Portal> parsePortal(std::string_view text);

/// @brief Parses a duration: an integer number of seconds, or a string of
/// digits with a unit, "ms", "s", "m" or "h" ("500ms", "5s", "2m").
std::optional<std::chrono::milliseconds> parseDuration(std::string_view text);
/// @brief The shortest exact spelling parseDuration accepts, e.g. "90s".
std::string formatDuration(std::chrono::milliseconds duration);

/// @brief fnmatch(3)-style match without flags: `*`, `?`, `[abc]`, `[a-z]`,
/// `[!x]`/`[^x]` and backslash escapes. An unterminated `[` is literal.
bool globMatch(std::string_view pattern, std::string_view text);

/// @brief True when every set field of @p match matches @p path.
bool matches(const ControllerMatch &match, const Path &path);

/// @brief The first controller rule that matches @p path; points into
/// @p config, so it lives as long as @p config does.
std::optional<const ControllerRule *> controllerFor(const Config &config, const Path &path);

/// @brief The first device entry whose vendor and product regexes match
/// (searched, case-insensitive, on the values without SCSI padding); points
/// into @p config.
std::optional<const DeviceEntry *> deviceFor(const Config &config, std::string_view vendor,
                                             std::string_view product);

/// @brief The settings that apply to one map after layering.
struct EffectivePolicy {
  GroupingPolicy grouping = GroupingPolicy::GroupByController;
  SelectorKind selector = SelectorKind::ServiceTime;
  bool autoSelector = false; ///< selector = "auto": measurements choose; selector is the start
  NoPathRetry noPathRetry;
  std::string hwHandler; ///< "auto", "" or a handler name
  std::optional<unsigned> pgInitRetries;
  std::optional<unsigned> pgInitDelayMsecs;
  QueueMode queueMode = QueueMode::Default;
  bool retainAttachedHwHandler = false;
  std::optional<std::string> alias; ///< from the [[map]] override

  bool operator==(const EffectivePolicy &) const = default;
};

/// @brief Defaults, overridden by the matching device entry, overridden by the
/// [[map]] entry for @p wwid (multipathd's precedence).
EffectivePolicy policyFor(const Config &config, std::string_view wwid, std::string_view vendor,
                          std::string_view product);

} // namespace pathkeeper::selector
