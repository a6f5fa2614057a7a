#include "config.hpp"

#include "iscsi_names.hpp"
#include "name_table.hpp"

// toml++ 3.3 asserts preconditions that malformed input can break: "[[=" or
// "[[[1]]]" reach parse_key() on a character that is no key start (fixed
// upstream in marzer/tomlplusplus#301). With asserts on that aborts; with
// NDEBUG the assert becomes an optimiser assumption, i.e. undefined
// behaviour. The code after the assert reports a proper parse error, so
// include the header with asserts compiled out and NDEBUG hidden, which
// turns TOML_ASSERT_ASSUME into a no-op rather than an assumption. Only this
// file includes toml++, so no other translation unit sees other definitions.
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_cast<void>(0)
// Debian's libtomlplusplus-dev 3.3 ships only toml.h; newer releases also
// install toml.hpp. Both are the same single entry point.
#if __has_include(<toml++/toml.hpp>)
#include <toml++/toml.hpp>
#else
#include <toml++/toml.h>
#endif
#pragma pop_macro("NDEBUG")

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <exception>
#include <limits>
#include <regex>
#include <utility>

namespace pathkeeper::selector {

namespace {

using std::chrono::milliseconds;

template <typename Enum, std::size_t N>
std::string joinNames(const std::array<std::pair<Enum, std::string_view>, N> &table) {
  std::string out;
  for (const auto &[value, name] : table) {
    out += out.empty() ? "" : ", ";
    out += name;
  }
  return out;
}

constexpr std::array<std::pair<GroupingPolicy, std::string_view>, 4> groupingNames{{
    {GroupingPolicy::Multibus, "multibus"},
    {GroupingPolicy::Failover, "failover"},
    {GroupingPolicy::GroupByController, "group_by_controller"},
    {GroupingPolicy::GroupByPrio, "group_by_prio"},
}};

constexpr std::array<std::pair<ThroughputWeights, std::string_view>, 2> weightNames{{
    {ThroughputWeights::Equal, "equal"},
    {ThroughputWeights::Auto, "auto"},
}};
constexpr std::array<std::pair<Mode, std::string_view>, 3> modeNames{{
    {Mode::Auto, "auto"},
    {Mode::Owner, "owner"},
    {Mode::Companion, "companion"},
}};

// model.hpp has no spelling for QueueMode yet; these are the config file's
// ("default" means: leave queue_mode out of the table).
constexpr std::array<std::pair<QueueMode, std::string_view>, 4> queueModeNames{{
    {QueueMode::Default, "default"},
    {QueueMode::Bio, "bio"},
    {QueueMode::Rq, "rq"},
    {QueueMode::Mq, "mq"},
}};

// The kernel's scsi_dh handlers, plus the config words "auto" and "none"
// ("none" is stored as the empty handler).
constexpr std::array<std::string_view, 6> hwHandlerNames{"auto", "none", "alua",
                                                         "emc",  "rdac", "hp_sw"};

// ---------------------------------------------------------------------------
// The schema. The parser accepts exactly these keys; the man page and the
// shipped pathkeeper.conf are tested against this list.

constexpr std::array<ConfigTable, 7> tables{{
    {"defaults", false, "Policy for every map, unless a [[device]] or [[map]] entry overrides it."},
    {"health", false, "Path checking and flap damping."},
    {"adaptive", false,
     "Measured path capacity for relative_throughput = \"auto\" and selector = \"auto\": "
     "sampling, smoothing, and how often a map may be reloaded with new weights."},
    {"discovery", false,
     "SendTargets probes: which portals to ask, from which NICs, how often and under which "
     "initiator name."},
    {"controller", true,
     "Rules naming the storage controller behind a path; the first rule that matches wins."},
    {"device", true, "Policy by SCSI vendor/product, searched before the built-in device table."},
    {"map", true, "Per-map overrides keyed by WWID."},
}};

constexpr ConfigKey schema[] = {
    // [defaults]
    {"defaults", "grouping", "string", R"("group_by_controller")",
     "How the paths of one LUN are split into priority groups: multibus, failover, "
     "group_by_controller or group_by_prio.",
     R"("multibus")"},
    {"defaults", "selector", "string", R"("service-time")",
     "The kernel path selector: round-robin, queue-length, service-time or "
     "historical-service-time; or auto: queue-length when the measured paths are equal, "
     "service-time with measured weights when they are not (queue-length until measured).",
     R"("queue-length")"},
    {"defaults", "no_path_retry", "string or integer", "12",
     "What happens to I/O when no path is left: \"fail\", \"queue\" (forever), or queue for this "
     "many checker intervals (checker_interval each), after which pathkeeperd stops the queueing "
     "(fail_if_no_path) and queued and new I/O fail, until a path is usable again.",
     R"("queue")"},
    {"defaults", "user_friendly_names", "boolean", "true",
     "Name maps without an alias mpatha, mpathb, ... (kept in bindings_file) instead of by WWID.",
     "false"},
    {"defaults", "bindings_file", "string", R"("/etc/multipath/bindings")",
     "Absolute path of the WWID-to-name bindings, in multipathd's format.",
     R"("/var/lib/pathkeeper/bindings")"},
    {"defaults", "mode", "string", R"("auto")",
     "owner: pathkeeper loads the tables; companion: multipathd does and pathkeeper watches; "
     "auto: companion when multipathd runs.",
     R"("owner")"},
    {"defaults", "hardware_handler", "string", R"("auto")",
     "The scsi_dh handler: auto (alua when the paths report ALUA), none, alua, emc, rdac or "
     "hp_sw.",
     R"("alua")"},
    {"defaults", "pg_init_retries", "integer", "",
     "Path group initialisation retries, 1..50; unset leaves the kernel's default.", "3"},
    {"defaults", "pg_init_delay_msecs", "integer", "",
     "Delay between path group initialisation retries in milliseconds, 0..60000; unset leaves "
     "the kernel's default.",
     "500"},
    {"defaults", "queue_mode", "string", R"("default")",
     "The map's queue_mode: default (request-based, blk-mq), bio, rq or mq.", R"("bio")"},
    {"defaults", "retain_attached_hw_handler", "boolean", "false",
     "Add the retain_attached_hw_handler feature (kernels since 4.3 retain it anyway).", "true"},
    {"defaults", "failback", "string or integer", R"("immediate")",
     "When a map returns to its preferred path group: \"immediate\", \"manual\", "
     "\"followover\" (only when the preferred group goes from no usable path to one), or after "
     "the group has been usable for this many seconds (an integer, or a duration in whole "
     "seconds such as \"30s\", 1s..24h).",
     R"("followover")"},
    {"defaults", "relative_throughput", "string", R"("equal")",
     "Per-path weights of service-time maps: \"equal\" (every path 1), or \"auto\" (from each "
     "path's NIC link speed, relative to the fastest path of the map, 1..100, then from the "
     "measured capacity; see [adaptive]).",
     R"("auto")"},
    // [health]
    {"health", "checker_interval", "duration", R"("5s")",
     "How often a working path is checked at first; see max_checker_interval.", R"("10s")"},
    {"health", "max_checker_interval", "duration", "",
     "Unset, 4 x checker_interval (at most 1h). A working path that keeps passing its checks is "
     "checked less often: the interval doubles after each passing check, from checker_interval "
     "up to this. A failure, a return from one, an ALUA state change or a kernel reinstatement "
     "starts it over. Most failures reach pathkeeperd as kernel events first; one that only a "
     "check sees (a LUN gone on an idle path whose session stays up) is noticed up to this late. "
     "Set it to checker_interval for a fixed interval. Like multipathd's max_polling_interval; "
     "not below checker_interval.",
     R"("1m")"},
    {"health", "failed_checker_interval", "duration", R"("1s")",
     "How often a failed path is checked, so that it is reinstated quickly.", R"("500ms")"},
    {"health", "checker_timeout", "duration", R"("3s")",
     "How long one check may take before the path counts as failed.", R"("2s")"},
    {"health", "flap_damping", "boolean", "true",
     "Hold back a path that fails flap_threshold times within flap_window.", "false"},
    {"health", "flap_threshold", "integer", "3",
     "Failures within flap_window that make a path shaky, 1..1000.", "5"},
    {"health", "flap_window", "duration", R"("1m")", "The window in which failures are counted.",
     R"("2m")"},
    {"health", "flap_recovery", "duration", R"("30s")",
     "How long a shaky path is held back the first time; doubled each time it flaps again.",
     R"("1m")"},
    {"health", "flap_recovery_max", "duration", R"("10m")",
     "The longest a shaky path is held back.", R"("1h")"},
    {"health", "proactive_failover", "boolean", "false",
     "Fail a path as soon as a SendTargets probe over its (NIC, portal) pair gets no answer (no "
     "connection, or none in time), before the iSCSI NOP-out timers notice. A portal that answers "
     "but refuses the probe (discovery CHAP, an initiator list) fails nothing. Needs "
     "discovery.probe_interval above 0s.",
     "true"},
    {"health", "proactive_failover_probes", "integer", "2",
     "Probes in a row that must fail before proactive_failover fails the pair's paths, 1..10. "
     "After a first failure the pair is probed again at once, so one lost reply on a busy host "
     "fails nothing.",
     "3"},
    // [adaptive]
    {"adaptive", "sample_interval", "duration", R"("2s")",
     "How often each path's /sys/block/<dev>/stat is sampled, 500ms..1m.", R"("1s")"},
    {"adaptive", "half_life", "duration", R"("10s")",
     "Half-life of the capacity estimate's moving average, 1s..1h: longer is steadier, shorter "
     "follows changes sooner.",
     R"("30s")"},
    {"adaptive", "min_reload_interval", "duration", R"("60s")",
     "The shortest time between two reloads of one map for new weights or selector, 1s..24h.",
     R"("5m")"},
    {"adaptive", "reload_hold_target", "duration", R"("50ms")",
     "A reload holds the map's new I/O until the I/O in flight has completed: a due reload waits "
     "for a sample at which that would take at most this long, estimated from each path's "
     "requests in flight and measured rate, 0..10s.",
     R"("100ms")"},
    {"adaptive", "reload_hold_wait", "duration", R"("30s")",
     "How long a due reload may wait for such a moment before it reloads regardless, 0..1h; 0 "
     "reloads at once.",
     R"("2m")"},
    {"adaptive", "hysteresis_percent", "integer", "20",
     "Reload only when some path's weight moves by more than this percentage of its current "
     "value, 1..100.",
     "10"},
    {"adaptive", "equal_tolerance_percent", "integer", "15",
     "For selector = \"auto\": paths whose measured capacity differs by at most this percentage "
     "count as equal, 0..90.",
     "10"},
    {"adaptive", "idle_iops", "integer", "5",
     "An interval with fewer completed I/Os per second is idle: it keeps the last estimate "
     "instead of judging the path slow, 1..100000.",
     "20"},
    {"adaptive", "min_confidence_percent", "integer", "50",
     "How much of the moving average must come from busy intervals before a path's estimate "
     "counts (50 = one half-life of busy time), 1..100.",
     "75"},
    // [discovery]
    {"discovery", "portals", "array of strings", "[]",
     "Portals to probe besides those the kernel's sessions use: \"address\", \"address:port\" "
     "or \"[ipv6]:port\" (IP addresses, not host names; the port defaults to 3260).",
     R"(["10.10.1.20", "10.10.1.21:3260"])"},
    {"discovery", "nics", "array of strings", "[]",
     "Network interfaces to probe from; empty means every NIC an iSCSI session is bound to, or "
     "let routing choose when none is bound.",
     R"(["eth1", "eth2"])"},
    {"discovery", "probe_interval", "duration", R"("30s")",
     "How often the daemon probes every (NIC, portal) pair; \"0s\" disables periodic probes, "
     "otherwise 1s..24h.",
     R"("1m")"},
    {"discovery", "probe_timeout", "duration", R"("5s")",
     "How long one probe (connect, login, SendTargets) may take, 100ms..5m and at most "
     "probe_interval.",
     R"("3s")"},
    {"discovery", "initiator_name", "string", "",
     "The probes' initiator name (IQN, EUI or NAA); unset means the host's name from "
     "/etc/iscsi/initiatorname.iscsi plus \":pathkeeper-probe\".",
     R"("iqn.2024-01.org.example:host1:pathkeeper-probe")"},
    // [[controller]]
    {"controller", "target_iqn", "glob", "", "Glob over the target IQN (*, ?, [...]).",
     R"("iqn.1987-05.com.cisco:05.*.2100001b32aa0001")"},
    {"controller", "target_iqn_regex", "regex", "",
     "POSIX extended regular expression searched in the target IQN.",
     R"('^iqn\.1987-05\.com\.cisco:')"},
    {"controller", "vendor", "string", "",
     "SCSI vendor, compared case-insensitively without trailing blanks.", R"("APPLE")"},
    {"controller", "product", "string", "",
     "SCSI product, compared case-insensitively without trailing blanks.", R"("Xserve RAID")"},
    {"controller", "serial", "glob", "", "Glob over the SCSI unit serial number.", R"("XR0*")"},
    {"controller", "portal", "string", "",
     "The portal address, optionally with :port (IPv6 as [address]:port).", R"("10.10.1.20:3260")"},
    {"controller", "label", "string", "", "Required: the controller's name, e.g. upper.",
     R"("upper")"},
    {"controller", "alias", "string", "", "The alias of the map behind this controller.",
     R"("xserve-upper")"},
    // [[device]]
    {"device", "vendor", "regex", "",
     "Required: POSIX extended regular expression searched in the SCSI vendor.", R"("^LIO-ORG$")"},
    {"device", "product", "regex", R"(".*")",
     "POSIX extended regular expression searched in the SCSI product.", R"("^TCMU")"},
    {"device", "grouping", "string", "", "As [defaults] grouping, for matching devices.",
     R"("group_by_prio")"},
    {"device", "selector", "string", "", "As [defaults] selector, for matching devices.",
     R"("round-robin")"},
    {"device", "no_path_retry", "string or integer", "",
     "As [defaults] no_path_retry, for matching devices.", "30"},
    {"device", "hardware_handler", "string", "",
     "As [defaults] hardware_handler, for matching devices.", R"("none")"},
    {"device", "pg_init_retries", "integer", "",
     "As [defaults] pg_init_retries, for matching devices.", "50"},
    {"device", "pg_init_delay_msecs", "integer", "",
     "As [defaults] pg_init_delay_msecs, for matching devices.", "0"},
    {"device", "queue_mode", "string", "", "As [defaults] queue_mode, for matching devices.",
     R"("mq")"},
    {"device", "retain_attached_hw_handler", "boolean", "",
     "As [defaults] retain_attached_hw_handler, for matching devices.", "true"},
    // [[map]]
    {"map", "wwid", "string", "", "Required: the LUN's WWID, as in /etc/multipath/wwids.",
     R"("36001405aabbccddeeff00112233445566")"},
    {"map", "alias", "string", "", "The map's name, overriding controller aliases and bindings.",
     R"("backup")"},
    {"map", "grouping", "string", "", "As [defaults] grouping, for this map.", R"("failover")"},
    {"map", "selector", "string", "", "As [defaults] selector, for this map.",
     R"("historical-service-time")"},
    {"map", "no_path_retry", "string or integer", "", "As [defaults] no_path_retry, for this map.",
     R"("fail")"},
    {"map", "hardware_handler", "string", "", "As [defaults] hardware_handler, for this map.",
     R"("rdac")"},
    {"map", "pg_init_retries", "integer", "", "As [defaults] pg_init_retries, for this map.", "1"},
    {"map", "pg_init_delay_msecs", "integer", "",
     "As [defaults] pg_init_delay_msecs, for this map.", "60000"},
    {"map", "queue_mode", "string", "", "As [defaults] queue_mode, for this map.", R"("rq")"},
    {"map", "retain_attached_hw_handler", "boolean", "",
     "As [defaults] retain_attached_hw_handler, for this map.", "false"},
};

bool inSchema(std::string_view table, std::string_view key) {
  return std::ranges::any_of(
      schema, [&](const ConfigKey &entry) { return entry.table == table && entry.key == key; });
}

// ---------------------------------------------------------------------------
// Limits, shared by the parser (which knows the position) and validateConfig
// (which checks configs built in code).

constexpr std::size_t maxPatternLength = 256;
constexpr std::size_t maxNameLength = 127; // DM_NAME_LEN minus the NUL
constexpr std::size_t maxWwidLength = 256;
constexpr unsigned maxNoPathRetry = 1000000;
// libstdc++ expands {m,n} into copies of the automaton; a product of nested
// counts is what blows up, so cap it before std::regex tries.
constexpr unsigned long long maxRegexRepetition = 1000;

struct DurationLimit {
  std::string_view key;
  milliseconds min;
  milliseconds max;
};

constexpr milliseconds maxFailbackDelay{86400000};

constexpr std::array<DurationLimit, 14> durationLimits{{
    {"sample_interval", milliseconds{500}, milliseconds{60000}},
    {"half_life", milliseconds{1000}, milliseconds{3600000}},
    {"min_reload_interval", milliseconds{1000}, milliseconds{86400000}},
    {"reload_hold_target", milliseconds{0}, milliseconds{10000}},
    {"reload_hold_wait", milliseconds{0}, milliseconds{3600000}},
    {"checker_interval", milliseconds{100}, milliseconds{3600000}},
    {"max_checker_interval", milliseconds{100}, milliseconds{3600000}},
    {"failed_checker_interval", milliseconds{100}, milliseconds{3600000}},
    {"checker_timeout", milliseconds{100}, milliseconds{600000}},
    {"flap_window", milliseconds{1000}, milliseconds{86400000}},
    {"flap_recovery", milliseconds{0}, milliseconds{86400000}},
    {"flap_recovery_max", milliseconds{0}, milliseconds{86400000}},
    // 0 disables; the 1s floor for other values is checked in probeIntervalError.
    {"probe_interval", milliseconds{0}, milliseconds{86400000}},
    {"probe_timeout", milliseconds{100}, milliseconds{300000}},
}};

std::optional<std::string> durationError(std::string_view key, milliseconds value) {
  for (const auto &limit : durationLimits) {
    if (limit.key == key && (value < limit.min || value > limit.max)) {
      return "must be between " + formatDuration(limit.min) + " and " + formatDuration(limit.max) +
             ", got " + formatDuration(value);
    }
  }
  return std::nullopt;
}

struct UnsignedLimit {
  std::string_view key;
  std::int64_t min;
  std::int64_t max;
};

constexpr std::array<UnsignedLimit, 9> unsignedLimits{{
    {"hysteresis_percent", 1, 100},
    {"equal_tolerance_percent", 0, 90},
    {"idle_iops", 1, 100000},
    {"min_confidence_percent", 1, 100},
    {"pg_init_retries", 1, 50},
    {"pg_init_delay_msecs", 0, 60000},
    {"flap_threshold", 1, 1000},
    {"proactive_failover_probes", 1, 10},
    {"no_path_retry", 1, maxNoPathRetry},
}};

std::optional<std::string> unsignedError(std::string_view key, std::int64_t value) {
  for (const auto &limit : unsignedLimits) {
    if (limit.key == key && (value < limit.min || value > limit.max)) {
      return "must be between " + std::to_string(limit.min) + " and " + std::to_string(limit.max) +
             ", got " + std::to_string(value);
    }
  }
  return std::nullopt;
}

bool isAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

char asciiLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// SCSI INQUIRY strings are blank-padded to their field width.
std::string_view trimPadding(std::string_view text) {
  while (!text.empty() && (isAsciiSpace(text.back()) || text.back() == '\0')) {
    text.remove_suffix(1);
  }
  while (!text.empty() && isAsciiSpace(text.front())) {
    text.remove_prefix(1);
  }
  return text;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return asciiLower(x) == asciiLower(y);
         });
}

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      static constexpr std::string_view hex = "0123456789abcdef";
      out += "\\x";
      out += hex[byte >> 4U];
      out += hex[byte & 0xfU];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::optional<std::string> nameError(std::string_view name) {
  if (name.empty()) {
    return "must not be empty";
  }
  if (name.size() > maxNameLength) {
    return "is longer than " + std::to_string(maxNameLength) + " characters";
  }
  if (name == "." || name == "..") {
    return "must not be \".\" or \"..\"";
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '+' || c == ':' || c == '@';
    if (!ok) {
      // Aliases become /dev/mapper names and D-Bus object path elements.
      return quoted(name) + " contains " + quoted(std::string_view(&c, 1)) +
             "; use letters, digits and . _ - + : @";
    }
  }
  return std::nullopt;
}

std::optional<std::string> wwidError(std::string_view wwid) {
  if (wwid.empty()) {
    return "must not be empty";
  }
  if (wwid.size() > maxWwidLength) {
    return "is longer than " + std::to_string(maxWwidLength) + " characters";
  }
  for (char c : wwid) {
    auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || c == '/') {
      return quoted(wwid) + " contains a blank, '/' or a non-printable character";
    }
  }
  return std::nullopt;
}

std::optional<std::string> globError(std::string_view pattern) {
  if (pattern.empty()) {
    return "must not be empty";
  }
  if (pattern.size() > maxPatternLength) {
    return "is longer than " + std::to_string(maxPatternLength) + " characters";
  }
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      if (i + 1 == pattern.size()) {
        return "glob " + quoted(pattern) + " ends in a lone backslash";
      }
      ++i;
    } else if (pattern[i] == '[') {
      // Mirrors the bracket scan in globMatch: a ']' right after '[', '[!'
      // or '[^' is a member, not the end.
      std::size_t j = i + 1;
      if (j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^')) {
        ++j;
      }
      if (j < pattern.size() && pattern[j] == ']') {
        ++j;
      }
      while (j < pattern.size() && pattern[j] != ']') {
        j += (pattern[j] == '\\' && j + 1 < pattern.size()) ? 2U : 1U;
      }
      if (j >= pattern.size()) {
        return "glob " + quoted(pattern) + " has a '[' without its ']'";
      }
      i = j;
    }
  }
  return std::nullopt;
}

#if defined(__GLIBCXX__)
// libstdc++'s default executor backtracks recursively: exponential time and
// deep recursion on patterns like (a*)*b. The breadth-first one is linear
// (and rejects back-references, which ERE does not have anyway).
constexpr auto regexSyntax =
    std::regex::extended | std::regex::icase | std::regex_constants::__polynomial;
#else
constexpr auto regexSyntax = std::regex::extended | std::regex::icase;
#endif

std::optional<std::string> regexError(std::string_view pattern) {
  if (pattern.empty()) {
    return "must not be empty";
  }
  if (pattern.size() > maxPatternLength) {
    return "is longer than " + std::to_string(maxPatternLength) + " characters";
  }
  unsigned long long repetition = 1;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      continue;
    }
    unsigned long long largest = 0;
    unsigned long long current = 0;
    for (std::size_t j = i + 1; j < pattern.size() && pattern[j] != '}'; ++j) {
      char c = pattern[j];
      if (c >= '0' && c <= '9') {
        current = std::min(current * 10 + static_cast<unsigned>(c - '0'), maxRegexRepetition + 1);
        largest = std::max(largest, current);
      } else {
        current = 0;
      }
    }
    repetition *= std::max<unsigned long long>(largest, 1);
    if (repetition > maxRegexRepetition) {
      return "regular expression " + quoted(pattern) + " repeats too much (the counts in {...} " +
             "multiply to more than " + std::to_string(maxRegexRepetition) + ")";
    }
  }
  try {
    std::regex compiled(pattern.begin(), pattern.end(), regexSyntax);
    (void)compiled;
  } catch (const std::regex_error &error) {
    return "invalid regular expression " + quoted(pattern) + ": " + error.what();
  } catch (const std::exception &error) {
    return "invalid regular expression " + quoted(pattern) + ": " + error.what();
  }
  return std::nullopt;
}

bool regexSearch(std::string_view pattern, std::string_view text) {
  try {
    std::regex compiled(pattern.begin(), pattern.end(), regexSyntax);
    return std::regex_search(text.begin(), text.end(), compiled);
  } catch (const std::exception &) {
    // validateConfig rejects what does not compile; a pattern that fails at
    // match time (resource limits) simply does not match.
    return false;
  }
}

struct PortalPattern {
  std::string address;
  std::optional<std::uint16_t> port;
};

std::optional<std::uint16_t> parsePort(std::string_view text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

std::optional<PortalPattern> parsePortalPattern(std::string_view text) {
  PortalPattern out;
  std::string_view address = text;
  std::string_view port;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos) {
      return std::nullopt;
    }
    address = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':')) {
        return std::nullopt;
      }
      port = rest.substr(1);
      if (port.empty()) {
        return std::nullopt;
      }
    }
  } else if (std::ranges::count(text, ':') == 1) {
    auto colon = text.find(':');
    address = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) {
      return std::nullopt;
    }
  }
  // More than one colon without brackets: a bare IPv6 address.
  if (address.empty()) {
    return std::nullopt;
  }
  for (char c : address) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == ':' || c == '-' || c == '%' || c == '_';
    if (!ok) {
      return std::nullopt;
    }
  }
  out.address = std::string(address);
  if (!port.empty()) {
    out.port = parsePort(port);
    if (!out.port) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<std::string> portalError(std::string_view portal) {
  if (!parsePortalPattern(portal)) {
    return "expected \"address\", \"address:port\" or \"[ipv6]:port\", got " + quoted(portal);
  }
  return std::nullopt;
}

// A [discovery] portal is probed, so it must be an address to connect to:
// no host names (resolving would block the event loop), port 3260 unless given.
Expected<Portal> portalFromText(std::string_view text) {
  auto pattern = parsePortalPattern(text);
  if (!pattern) {
    return fail("expected \"address\", \"address:port\" or \"[ipv6]:port\", got " + quoted(text));
  }
  auto address = canonicalIpAddress(pattern->address);
  if (!address) {
    const bool hostName =
        pattern->address.find(':') == std::string::npos &&
        std::ranges::any_of(pattern->address, [](char c) { return asciiLower(c) >= 'g'; });
    if (hostName) {
      return fail(quoted(text) + " names a host; give the portal's IP address (pathkeeper " +
                  "never resolves names)");
    }
    return fail(quoted(text) + ": " + address.error());
  }
  return Portal{*std::move(address), pattern->port.value_or(3260), 1};
}

std::string portalText(const Portal &portal) {
  const bool v6 = portal.address.find(':') != std::string::npos;
  return (v6 ? "[" + portal.address + "]" : portal.address) + ":" + std::to_string(portal.port);
}

// The kernel's dev_valid_name(): IFNAMSIZ (16) including the NUL, no '/',
// ':' or blanks, not "." or "..". Non-ASCII is refused as well, so that a
// NIC name is always safe to print.
constexpr std::size_t maxNicLength = 15;

std::optional<std::string> nicError(std::string_view nic) {
  if (nic.empty()) {
    return "must not be empty";
  }
  if (nic.size() > maxNicLength) {
    return quoted(nic) + " is longer than " + std::to_string(maxNicLength) +
           " characters (the kernel's IFNAMSIZ)";
  }
  if (nic == "." || nic == "..") {
    return "must not be \".\" or \"..\"";
  }
  for (char c : nic) {
    auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || c == '/' || c == ':') {
      return quoted(nic) + " is not a network interface name (no blanks, '/', ':' or " +
             "non-ASCII characters)";
    }
  }
  return std::nullopt;
}

std::optional<std::string> probeIntervalError(milliseconds interval) {
  if (auto problem = durationError("probe_interval", interval)) {
    return problem;
  }
  if (interval != milliseconds{0} && interval < milliseconds{1000}) {
    return "must be \"0s\" (no periodic probes) or at least 1s, got " + formatDuration(interval);
  }
  return std::nullopt;
}

std::optional<std::string> initiatorNameError(std::string_view name) {
  if (name.empty()) {
    return "must not be empty; leave the key out to use the host's name plus " +
           quoted(kProbeInitiatorSuffix);
  }
  if (auto valid = validateIscsiName(name); !valid) {
    return valid.error();
  }
  return std::nullopt;
}

std::optional<std::string> failbackDelayError(milliseconds delay) {
  if (delay < milliseconds{1000}) {
    return "a deferred failback must wait at least 1s; use \"immediate\" to fail back at once";
  }
  if (delay > maxFailbackDelay) {
    return "must be at most " + formatDuration(maxFailbackDelay) + ", got " + formatDuration(delay);
  }
  if (delay.count() % 1000 != 0) {
    return "counts whole seconds, got " + formatDuration(delay);
  }
  return std::nullopt;
}

std::optional<std::string> hwHandlerError(std::string_view handler) {
  if (handler.empty() || std::ranges::find(hwHandlerNames, handler) != hwHandlerNames.end()) {
    return std::nullopt;
  }
  return "unknown hardware handler " + quoted(handler) +
         "; expected one of auto, none, alua, emc, rdac, hp_sw";
}

std::optional<std::string> bindingsFileError(std::string_view file) {
  if (!file.starts_with('/')) {
    return "must be an absolute path, got " + quoted(file);
  }
  if (file.find('\0') != std::string_view::npos) {
    return "must not contain a NUL character";
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// The TOML walk.

std::string_view typeName(const toml::node &node) {
  switch (node.type()) {
  case toml::node_type::table:
    return "table";
  case toml::node_type::array:
    return "array";
  case toml::node_type::string:
    return "string";
  case toml::node_type::integer:
    return "integer";
  case toml::node_type::floating_point:
    return "floating-point number";
  case toml::node_type::boolean:
    return "boolean";
  case toml::node_type::date:
    return "date";
  case toml::node_type::time:
    return "time";
  case toml::node_type::date_time:
    return "date-time";
  case toml::node_type::none:
    break;
  }
  return "nothing";
}

std::string at(std::string_view origin, const toml::source_region &where) {
  std::string out(origin);
  if (where.begin.line != 0) {
    out += ':' + std::to_string(where.begin.line) + ':' + std::to_string(where.begin.column);
  }
  return out;
}

class DocumentParser {
public:
  DocumentParser(std::string_view origin, Config &config) : origin_(origin), config_(config) {}

  void parse(const toml::table &root);

  std::vector<std::string> errors_;
  std::vector<ControllerRule> controllers_;
  std::vector<DeviceEntry> devices_;
  std::vector<MapOverride> maps_;

private:
  void error(const toml::source_region &where, std::string_view key, std::string_view message) {
    errors_.push_back(at(origin_, where) + ": " + std::string(key) + ": " + std::string(message));
  }
  void typeError(const toml::node &node, std::string_view key, std::string_view expected) {
    error(node.source(), key,
          "expected " + std::string(expected) + ", got " + std::string(typeName(node)));
  }
  void remember(std::string_view key, const toml::node &node) {
    config_.keyOrigins[std::string(key)] = at(origin_, node.source());
  }

  std::optional<std::string> string(const toml::node &node, std::string_view key);
  std::optional<bool> boolean(const toml::node &node, std::string_view key);
  std::optional<unsigned> bounded(const toml::node &node, std::string_view key,
                                  std::string_view name);
  std::optional<milliseconds> duration(const toml::node &node, std::string_view key,
                                       std::string_view name);
  template <typename Enum, std::size_t N>
  std::optional<Enum> choice(const toml::node &node, std::string_view key, std::string_view what,
                             const std::array<std::pair<Enum, std::string_view>, N> &names);
  std::optional<NoPathRetry> noPathRetry(const toml::node &node, std::string_view key);
  // The kernel selector, and whether it was "auto" (then QueueLength).
  std::optional<std::pair<SelectorKind, bool>> selector(const toml::node &node,
                                                        std::string_view key);
  std::optional<Failback> failback(const toml::node &node, std::string_view key);
  // The strings of an array, each reported at its own position when not a string.
  std::optional<std::vector<std::pair<std::string, const toml::node *>>>
  strings(const toml::node &node, std::string_view key);
  // Returns the value when the check passes, and reports @p check's message
  // at the value's position otherwise.
  std::optional<std::string> checked(const toml::node &node, std::string_view key,
                                     std::optional<std::string> (*check)(std::string_view));

  bool policyKey(std::string_view name, const toml::node &node, std::string_view key,
                 PolicyOverrides &policy);

  void parseDefaults(const toml::table &table);
  void parseHealth(const toml::table &table);
  void parseDiscovery(const toml::table &table);
  void parseAdaptive(const toml::table &table);
  void parseController(const toml::table &table, std::string_view path);
  void parseDevice(const toml::table &table, std::string_view path);
  void parseMap(const toml::table &table, std::string_view path);

  // Reports unknown keys; true when @p name is in the schema of @p table.
  bool known(std::string_view table, const toml::key &name, std::string_view key) {
    if (inSchema(table, name.str())) {
      return true;
    }
    error(name.source(), key,
          "unknown key in " + bracketed(table) + " (see pathkeeper.conf(5) for the valid keys)");
    return false;
  }
  void unhandled(const toml::key &name, std::string_view key) {
    // Only reachable when the schema lists a key the parser forgot: a bug,
    // but still reported rather than ignored.
    error(name.source(), key, "key is in the schema but not handled (please report this bug)");
  }
  static std::string bracketed(std::string_view table) {
    for (const auto &entry : tables) {
      if (entry.name == table) {
        return entry.array ? "[[" + std::string(table) + "]]" : "[" + std::string(table) + "]";
      }
    }
    return std::string(table);
  }

  std::string origin_;
  Config &config_;
};

std::optional<std::string> DocumentParser::string(const toml::node &node, std::string_view key) {
  if (const auto *value = node.as_string()) {
    return value->get();
  }
  typeError(node, key, "a string");
  return std::nullopt;
}

std::optional<bool> DocumentParser::boolean(const toml::node &node, std::string_view key) {
  if (const auto *value = node.as_boolean()) {
    return value->get();
  }
  typeError(node, key, "a boolean (true or false)");
  return std::nullopt;
}

std::optional<unsigned> DocumentParser::bounded(const toml::node &node, std::string_view key,
                                                std::string_view name) {
  const auto *value = node.as_integer();
  if (value == nullptr) {
    typeError(node, key, "an integer");
    return std::nullopt;
  }
  if (auto problem = unsignedError(name, value->get())) {
    error(node.source(), key, *problem);
    return std::nullopt;
  }
  return static_cast<unsigned>(value->get());
}

std::optional<milliseconds> DocumentParser::duration(const toml::node &node, std::string_view key,
                                                     std::string_view name) {
  std::optional<milliseconds> result;
  if (const auto *seconds = node.as_integer()) {
    // Bounded before multiplying so that huge integers cannot overflow.
    constexpr std::int64_t maxSeconds = std::numeric_limits<std::int64_t>::max() / 1000;
    if (seconds->get() < 0 || seconds->get() > maxSeconds) {
      error(node.source(), key,
            "must be a non-negative number of seconds, got " + std::to_string(seconds->get()));
      return std::nullopt;
    }
    result = milliseconds{seconds->get() * 1000};
  } else if (const auto *text = node.as_string()) {
    result = parseDuration(text->get());
    if (!result) {
      error(node.source(), key,
            "expected a duration such as \"500ms\", \"5s\", \"2m\" or \"1h\", got " +
                quoted(text->get()));
      return std::nullopt;
    }
  } else {
    typeError(node, key, "a duration (integer seconds or a string such as \"5s\")");
    return std::nullopt;
  }
  if (auto problem = durationError(name, *result)) {
    error(node.source(), key, *problem);
    return std::nullopt;
  }
  return result;
}

template <typename Enum, std::size_t N>
std::optional<Enum>
DocumentParser::choice(const toml::node &node, std::string_view key, std::string_view what,
                       const std::array<std::pair<Enum, std::string_view>, N> &names) {
  auto text = string(node, key);
  if (!text) {
    return std::nullopt;
  }
  if (auto value = lookup(names, *text)) {
    return value;
  }
  error(node.source(), key,
        "unknown " + std::string(what) + " " + quoted(*text) + "; expected one of " +
            joinNames(names));
  return std::nullopt;
}

std::optional<NoPathRetry> DocumentParser::noPathRetry(const toml::node &node,
                                                       std::string_view key) {
  if (const auto *text = node.as_string()) {
    if (text->get() == "fail") {
      return NoPathRetry{NoPathRetry::Kind::Fail, 0};
    }
    if (text->get() == "queue") {
      return NoPathRetry{NoPathRetry::Kind::Queue, 0};
    }
    error(node.source(), key,
          "expected \"fail\", \"queue\" or a positive integer, got " + quoted(text->get()));
    return std::nullopt;
  }
  if (node.is_integer()) {
    if (auto count = bounded(node, key, "no_path_retry")) {
      return NoPathRetry{NoPathRetry::Kind::Count, *count};
    }
    return std::nullopt;
  }
  typeError(node, key, "\"fail\", \"queue\" or a positive integer");
  return std::nullopt;
}

std::optional<std::pair<SelectorKind, bool>> DocumentParser::selector(const toml::node &node,
                                                                      std::string_view key) {
  auto text = string(node, key);
  if (!text) {
    return std::nullopt;
  }
  if (auto kind = parseSelectorKind(*text)) {
    return std::pair{*kind, false};
  }
  // "auto" is pathkeeper's, never the kernel's. It starts as queue-length:
  // paths are taken as equal until measured otherwise, so equal paths (the
  // usual case) never need a reload, and queue-length already serves
  // unequal ones well until their weights are known (bench/README.md, #9:
  // 0.94 of the link sum on 40+10 Mbit/s, against 0.38 for round-robin).
  if (*text == "auto") {
    return std::pair{SelectorKind::QueueLength, true};
  }
  // The spellings are model.cpp's; list them from there.
  std::string names;
  for (auto kind : {SelectorKind::RoundRobin, SelectorKind::QueueLength, SelectorKind::ServiceTime,
                    SelectorKind::HistoricalServiceTime}) {
    names += names.empty() ? "" : ", ";
    names += toString(kind);
  }
  names += ", auto";
  error(node.source(), key,
        "unknown path selector " + quoted(*text) + "; expected one of " + names);
  return std::nullopt;
}

std::optional<Failback> DocumentParser::failback(const toml::node &node, std::string_view key) {
  constexpr std::string_view expected =
      "\"immediate\", \"manual\", \"followover\", a number of seconds or a duration such as "
      "\"30s\"";
  std::optional<milliseconds> delay;
  if (const auto *text = node.as_string()) {
    const std::string &word = text->get();
    if (word == "immediate") {
      return Failback{Failback::Kind::Immediate, {}};
    }
    if (word == "manual") {
      return Failback{Failback::Kind::Manual, {}};
    }
    if (word == "followover") {
      return Failback{Failback::Kind::Followover, {}};
    }
    delay = parseDuration(word);
    if (!delay) {
      error(node.source(), key, "expected " + std::string(expected) + ", got " + quoted(word));
      return std::nullopt;
    }
  } else if (const auto *seconds = node.as_integer()) {
    if (seconds->get() < 0 || seconds->get() > maxFailbackDelay.count() / 1000) {
      error(node.source(), key,
            "must be between 1 and " + std::to_string(maxFailbackDelay.count() / 1000) +
                " seconds, got " + std::to_string(seconds->get()));
      return std::nullopt;
    }
    delay = milliseconds{seconds->get() * 1000};
  } else {
    typeError(node, key, expected);
    return std::nullopt;
  }
  if (auto problem = failbackDelayError(*delay)) {
    error(node.source(), key, *problem);
    return std::nullopt;
  }
  return Failback{Failback::Kind::Deferred,
                  std::chrono::duration_cast<std::chrono::seconds>(*delay)};
}

std::optional<std::vector<std::pair<std::string, const toml::node *>>>
DocumentParser::strings(const toml::node &node, std::string_view key) {
  const auto *array = node.as_array();
  if (array == nullptr) {
    typeError(node, key, "an array of strings");
    return std::nullopt;
  }
  std::vector<std::pair<std::string, const toml::node *>> out;
  bool ok = true;
  std::size_t index = 0;
  for (const auto &element : *array) {
    std::string elementKey = std::string(key) + "[" + std::to_string(++index) + "]";
    if (auto text = string(element, elementKey)) {
      out.emplace_back(*std::move(text), &element);
    } else {
      ok = false;
    }
  }
  return ok ? std::optional(std::move(out)) : std::nullopt;
}

std::optional<std::string>
DocumentParser::checked(const toml::node &node, std::string_view key,
                        std::optional<std::string> (*check)(std::string_view)) {
  auto text = string(node, key);
  if (!text) {
    return std::nullopt;
  }
  if (auto problem = check(*text)) {
    error(node.source(), key, *problem);
    return std::nullopt;
  }
  return text;
}

bool DocumentParser::policyKey(std::string_view name, const toml::node &node, std::string_view key,
                               PolicyOverrides &policy) {
  if (name == "grouping") {
    if (auto value = choice(node, key, "grouping policy", groupingNames)) {
      policy.grouping = value;
    }
  } else if (name == "selector") {
    if (auto value = selector(node, key)) {
      policy.selector = value->first;
      policy.autoSelector = value->second;
    }
  } else if (name == "no_path_retry") {
    if (auto value = noPathRetry(node, key)) {
      policy.noPathRetry = value;
    }
  } else if (name == "hardware_handler") {
    if (auto value = checked(node, key, hwHandlerError)) {
      policy.hwHandler = *value == "none" ? std::string() : *value;
    }
  } else if (name == "pg_init_retries" || name == "pg_init_delay_msecs") {
    if (auto value = bounded(node, key, name)) {
      (name == "pg_init_retries" ? policy.pgInitRetries : policy.pgInitDelayMsecs) = value;
    }
  } else if (name == "queue_mode") {
    if (auto value = choice(node, key, "queue mode", queueModeNames)) {
      policy.queueMode = value;
    }
  } else if (name == "retain_attached_hw_handler") {
    if (auto value = boolean(node, key)) {
      policy.retainAttachedHwHandler = value;
    }
  } else {
    return false;
  }
  return true;
}

void DocumentParser::parseDefaults(const toml::table &table) {
  for (auto &&[name, node] : table) {
    std::string key = "defaults." + std::string(name.str());
    if (!known("defaults", name, key)) {
      continue;
    }
    remember(key, node);
    Defaults &defaults = config_.defaults;
    PolicyOverrides policy;
    if (policyKey(name.str(), node, key, policy)) {
      // [defaults] is a complete policy, so copy over only what was parsed.
      if (policy.grouping) {
        defaults.grouping = *policy.grouping;
      }
      if (policy.selector) {
        defaults.selector = *policy.selector;
        defaults.autoSelector = policy.autoSelector.value_or(false);
      }
      if (policy.noPathRetry) {
        defaults.noPathRetry = *policy.noPathRetry;
      }
      if (policy.hwHandler) {
        defaults.hwHandler = *policy.hwHandler;
      }
      if (policy.pgInitRetries) {
        defaults.pgInitRetries = policy.pgInitRetries;
      }
      if (policy.pgInitDelayMsecs) {
        defaults.pgInitDelayMsecs = policy.pgInitDelayMsecs;
      }
      if (policy.queueMode) {
        defaults.queueMode = *policy.queueMode;
      }
      if (policy.retainAttachedHwHandler) {
        defaults.retainAttachedHwHandler = *policy.retainAttachedHwHandler;
      }
    } else if (name.str() == "user_friendly_names") {
      if (auto value = boolean(node, key)) {
        defaults.userFriendlyNames = *value;
      }
    } else if (name.str() == "bindings_file") {
      if (auto value = checked(node, key, bindingsFileError)) {
        defaults.bindingsFile = *value;
      }
    } else if (name.str() == "relative_throughput") {
      if (auto value = choice(node, key, "relative_throughput", weightNames)) {
        defaults.relativeThroughput = *value;
      }
    } else if (name.str() == "mode") {
      if (auto value = choice(node, key, "mode", modeNames)) {
        defaults.mode = *value;
      }
    } else if (name.str() == "failback") {
      if (auto value = failback(node, key)) {
        defaults.failback = *value;
      }
    } else {
      unhandled(name, key);
    }
  }
}

void DocumentParser::parseHealth(const toml::table &table) {
  HealthSettings &health = config_.defaults.health;
  for (auto &&[name, node] : table) {
    std::string key = "health." + std::string(name.str());
    if (!known("health", name, key)) {
      continue;
    }
    remember(key, node);
    std::string_view n = name.str();
    milliseconds *target = nullptr;
    if (n == "checker_interval") {
      target = &health.checkerInterval;
    } else if (n == "failed_checker_interval") {
      target = &health.failedCheckerInterval;
    } else if (n == "checker_timeout") {
      target = &health.checkerTimeout;
    } else if (n == "flap_window") {
      target = &health.flapWindow;
    } else if (n == "flap_recovery") {
      target = &health.flapRecovery;
    } else if (n == "flap_recovery_max") {
      target = &health.flapRecoveryMax;
    }
    if (target != nullptr) {
      if (auto value = duration(node, key, n)) {
        *target = *value;
      }
    } else if (n == "max_checker_interval") {
      if (auto value = duration(node, key, n)) {
        health.maxCheckerInterval = *value;
      }
    } else if (n == "flap_damping") {
      if (auto value = boolean(node, key)) {
        health.flapDamping = *value;
      }
    } else if (n == "flap_threshold") {
      if (auto value = bounded(node, key, n)) {
        health.flapThreshold = *value;
      }
    } else if (n == "proactive_failover") {
      if (auto value = boolean(node, key)) {
        health.proactiveFailover = *value;
      }
    } else if (n == "proactive_failover_probes") {
      if (auto value = bounded(node, key, n)) {
        health.proactiveFailoverProbes = *value;
      }
    } else {
      unhandled(name, key);
    }
  }
}

// A later layer's list replaces the earlier one, as any other [discovery]
// value does: a drop-in that lists portals means exactly those. A duplicate
// within one list is an error, since it is either a typo or a second spelling
// of one portal ("10.10.1.20" and "10.10.1.20:3260").
void DocumentParser::parseAdaptive(const toml::table &table) {
  AdaptiveSettings &adaptive = config_.adaptive;
  for (auto &&[name, node] : table) {
    std::string key = "adaptive." + std::string(name.str());
    if (!known("adaptive", name, key)) {
      continue;
    }
    remember(key, node);
    std::string_view n = name.str();
    milliseconds *interval = nullptr;
    unsigned *count = nullptr;
    if (n == "sample_interval") {
      interval = &adaptive.sampleInterval;
    } else if (n == "half_life") {
      interval = &adaptive.halfLife;
    } else if (n == "min_reload_interval") {
      interval = &adaptive.minReloadInterval;
    } else if (n == "reload_hold_target") {
      interval = &adaptive.reloadHoldTarget;
    } else if (n == "reload_hold_wait") {
      interval = &adaptive.reloadHoldWait;
    } else if (n == "hysteresis_percent") {
      count = &adaptive.hysteresisPercent;
    } else if (n == "equal_tolerance_percent") {
      count = &adaptive.equalTolerancePercent;
    } else if (n == "idle_iops") {
      count = &adaptive.idleIops;
    } else if (n == "min_confidence_percent") {
      count = &adaptive.minConfidencePercent;
    }
    if (interval != nullptr) {
      if (auto value = duration(node, key, n)) {
        *interval = *value;
      }
    } else if (count != nullptr) {
      if (auto value = bounded(node, key, n)) {
        *count = *value;
      }
    } else {
      unhandled(name, key);
    }
  }
}

void DocumentParser::parseDiscovery(const toml::table &table) {
  DiscoverySettings &discovery = config_.discovery;
  for (auto &&[name, node] : table) {
    std::string key = "discovery." + std::string(name.str());
    if (!known("discovery", name, key)) {
      continue;
    }
    remember(key, node);
    std::string_view n = name.str();
    if (n == "portals" || n == "nics") {
      auto values = strings(node, key);
      if (!values) {
        continue;
      }
      std::vector<Portal> portals;
      std::vector<std::string> nics;
      std::vector<std::string> seen;
      bool ok = true;
      std::size_t index = 0;
      for (const auto &[text, element] : *values) {
        std::string elementKey = key + "[" + std::to_string(++index) + "]";
        std::string identity;
        if (n == "portals") {
          auto portal = portalFromText(text);
          if (!portal) {
            error(element->source(), elementKey, portal.error());
            ok = false;
            continue;
          }
          identity = portalText(*portal);
          portals.push_back(*std::move(portal));
        } else {
          if (auto problem = nicError(text)) {
            error(element->source(), elementKey, *problem);
            ok = false;
            continue;
          }
          identity = text;
          nics.push_back(text);
        }
        auto same = std::ranges::find(seen, identity);
        if (same != seen.end()) {
          error(element->source(), elementKey,
                "duplicate " + std::string(n == "portals" ? "portal " : "NIC ") + quoted(identity) +
                    " (already element " + std::to_string(same - seen.begin() + 1) + ")");
          ok = false;
        }
        seen.push_back(std::move(identity));
      }
      if (ok) {
        if (n == "portals") {
          discovery.portals = std::move(portals);
        } else {
          discovery.nics = std::move(nics);
        }
      }
    } else if (n == "probe_interval") {
      if (auto value = duration(node, key, n)) {
        if (auto problem = probeIntervalError(*value)) {
          error(node.source(), key, *problem);
        } else {
          discovery.probeInterval = *value;
        }
      }
    } else if (n == "probe_timeout") {
      if (auto value = duration(node, key, n)) {
        discovery.probeTimeout = *value;
      }
    } else if (n == "initiator_name") {
      if (auto value = checked(node, key, initiatorNameError)) {
        discovery.initiatorName = *value;
      }
    } else {
      unhandled(name, key);
    }
  }
}

void DocumentParser::parseController(const toml::table &table, std::string_view path) {
  ControllerRule rule;
  rule.origin = at(origin_, table.source());
  bool hasLabel = false;
  std::size_t errorsBefore = errors_.size();
  for (auto &&[name, node] : table) {
    std::string key = std::string(path) + "." + std::string(name.str());
    if (!known("controller", name, key)) {
      continue;
    }
    std::string_view n = name.str();
    ControllerMatch &match = rule.match;
    if (n == "target_iqn") {
      match.targetIqnGlob = checked(node, key, globError);
    } else if (n == "target_iqn_regex") {
      match.targetIqnRegex = checked(node, key, regexError);
    } else if (n == "vendor" || n == "product") {
      auto value = checked(node, key, [](std::string_view text) -> std::optional<std::string> {
        if (trimPadding(text).empty()) {
          return "must not be empty";
        }
        return std::nullopt;
      });
      (n == "vendor" ? match.vendor : match.product) = value;
    } else if (n == "serial") {
      match.serial = checked(node, key, globError);
    } else if (n == "portal") {
      match.portal = checked(node, key, portalError);
    } else if (n == "label") {
      hasLabel = true;
      if (auto value = checked(node, key, nameError)) {
        rule.label = *value;
      }
    } else if (n == "alias") {
      rule.alias = checked(node, key, nameError);
    } else {
      unhandled(name, key);
    }
  }
  if (!hasLabel) {
    error(table.source(), std::string(path) + ".label", "missing; every rule names a controller");
  }
  const ControllerMatch &match = rule.match;
  bool anyMatch = match.targetIqnGlob || match.targetIqnRegex || match.vendor || match.product ||
                  match.serial || match.portal;
  if (!anyMatch && errors_.size() == errorsBefore) {
    // A rule without match keys would claim every path; that is never meant.
    error(table.source(), path,
          "needs at least one of target_iqn, target_iqn_regex, vendor, product, serial, portal");
  }
  controllers_.push_back(std::move(rule));
}

void DocumentParser::parseDevice(const toml::table &table, std::string_view path) {
  DeviceEntry entry;
  entry.origin = at(origin_, table.source());
  entry.product = ".*";
  bool hasVendor = false;
  for (auto &&[name, node] : table) {
    std::string key = std::string(path) + "." + std::string(name.str());
    if (!known("device", name, key)) {
      continue;
    }
    std::string_view n = name.str();
    if (n == "vendor") {
      hasVendor = true;
      if (auto value = checked(node, key, regexError)) {
        entry.vendor = *value;
      }
    } else if (n == "product") {
      if (auto value = checked(node, key, regexError)) {
        entry.product = *value;
      }
    } else if (!policyKey(n, node, key, entry.policy)) {
      unhandled(name, key);
    }
  }
  if (!hasVendor) {
    error(table.source(), std::string(path) + ".vendor", "missing; every device entry needs one");
  }
  devices_.push_back(std::move(entry));
}

void DocumentParser::parseMap(const toml::table &table, std::string_view path) {
  MapOverride entry;
  entry.origin = at(origin_, table.source());
  const toml::node *wwidNode = nullptr;
  for (auto &&[name, node] : table) {
    std::string key = std::string(path) + "." + std::string(name.str());
    if (!known("map", name, key)) {
      continue;
    }
    std::string_view n = name.str();
    if (n == "wwid") {
      wwidNode = &node;
      if (auto value = checked(node, key, wwidError)) {
        entry.wwid = *value;
      }
    } else if (n == "alias") {
      entry.alias = checked(node, key, nameError);
    } else if (!policyKey(n, node, key, entry.policy)) {
      unhandled(name, key);
    }
  }
  if (wwidNode == nullptr) {
    error(table.source(), std::string(path) + ".wwid", "missing; every map entry needs one");
  } else if (!entry.wwid.empty()) {
    auto same = std::ranges::find(maps_, entry.wwid, &MapOverride::wwid);
    if (same != maps_.end()) {
      error(wwidNode->source(), std::string(path) + ".wwid",
            "duplicate wwid " + quoted(entry.wwid) + " (first at " + same->origin + ")");
      return;
    }
  }
  maps_.push_back(std::move(entry));
}

void DocumentParser::parse(const toml::table &root) {
  for (auto &&[name, node] : root) {
    std::string_view n = name.str();
    auto table = std::ranges::find(tables, n, &ConfigTable::name);
    if (table == tables.end()) {
      error(
          name.source(), n,
          "unknown table; expected [defaults], [health], [adaptive], [discovery], [[controller]], "
          "[[device]] or [[map]]");
      continue;
    }
    if (!table->array) {
      if (const auto *values = node.as_table()) {
        if (n == "defaults") {
          parseDefaults(*values);
        } else if (n == "health") {
          parseHealth(*values);
        } else if (n == "adaptive") {
          parseAdaptive(*values);
        } else {
          parseDiscovery(*values);
        }
      } else {
        typeError(node, n, "a table ([" + std::string(n) + "])");
      }
      continue;
    }
    const auto *array = node.as_array();
    if (array == nullptr) {
      typeError(node, n, "an array of tables ([[" + std::string(n) + "]])");
      continue;
    }
    std::size_t index = 0;
    for (const auto &element : *array) {
      // Counted from 1, as a reader counts the blocks in the file.
      std::string path = std::string(n) + "[" + std::to_string(++index) + "]";
      const auto *values = element.as_table();
      if (values == nullptr) {
        typeError(element, path, "a table");
        continue;
      }
      if (n == "controller") {
        parseController(*values, path);
      } else if (n == "device") {
        parseDevice(*values, path);
      } else {
        parseMap(*values, path);
      }
    }
  }
}

// toml++ 3.3's is_non_ascii_horizontal_whitespace() reaches
// __builtin_unreachable() for the code points U+00A1..U+0499,
// U+2C5E..U+3057 (but U+3000) and U+FBA6..U+FEFE, and the parser asks it
// about characters well beyond whitespace positions (its value-type scan reads
// ahead over quotes, for one). Where toml++ looks is hard to predict; where
// it does not look is easy: inside a comment. So those code points are
// rejected everywhere but in comments. Comments are found with just enough
// lexing to skip strings; wherever this lexer and toml++ disagree, toml++
// has already hit a syntax error and reads no further, and the lexer's
// error is to check more text, never less.
bool tomlCannotClassify(char32_t c) {
  return (c >= 0xA1 && c <= 0x499) || (c >= 0x2C5E && c <= 0x3057 && c != 0x3000) ||
         (c >= 0xFBA6 && c <= 0xFEFE);
}

std::optional<std::string> unsupportedCharacter(std::string_view text, std::string_view origin) {
  enum class State { Normal, Comment, Basic, Literal, MultiBasic, MultiLiteral };
  State state = State::Normal;
  auto where = [&](std::size_t offset) {
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t k = 0; k < offset; ++k) {
      if (text[k] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text[k]) & 0xC0U) != 0x80U) {
        ++column; // code points, as toml++ counts, not UTF-8 bytes
      }
    }
    return std::string(origin) + ":" + std::to_string(line) + ":" + std::to_string(column);
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    char c = text[i];
    if (byte >= 0xC0U && state != State::Comment) {
      // Decoded leniently (overlong forms too), so that nothing toml++
      // might decode to a bad code point slips through.
      std::size_t length = byte >= 0xF0U ? 4 : byte >= 0xE0U ? 3 : 2;
      char32_t code = byte & (0x7FU >> length);
      for (std::size_t k = 1; k < length && i + k < text.size(); ++k) {
        code = (code << 6U) | (static_cast<unsigned char>(text[i + k]) & 0x3FU);
      }
      if (tomlCannotClassify(code)) {
        static constexpr std::string_view hex = "0123456789ABCDEF";
        std::string name = "U+";
        for (int shift = 12; shift >= 0; shift -= 4) {
          name += hex[(code >> static_cast<unsigned>(shift)) & 0xFU];
        }
        return where(i) + ": character " + name +
               " is only supported in comments (a limitation of the TOML parser)";
      }
    }
    auto startsWith = [&](std::string_view token) { return text.substr(i).starts_with(token); };
    switch (state) {
    case State::Normal:
      if (c == '#') {
        state = State::Comment;
      } else if (startsWith("\"\"\"")) {
        i += 2;
        state = State::MultiBasic;
      } else if (c == '"') {
        state = State::Basic;
      } else if (startsWith("'''")) {
        i += 2;
        state = State::MultiLiteral;
      } else if (c == '\'') {
        state = State::Literal;
      }
      break;
    case State::Comment:
      if (c == '\n') {
        state = State::Normal;
      }
      break;
    case State::Basic:
      if (c == '"' || c == '\n') {
        state = State::Normal;
      } else if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
        ++i; // an escaped quote or backslash does not end the string
      }
      break;
    case State::Literal:
      if (c == '\'' || c == '\n') {
        state = State::Normal;
      }
      break;
    case State::MultiBasic:
      if (startsWith("\"\"\"")) {
        i += 2; // extra closing quotes land in Normal and open a string: more checking
        state = State::Normal;
      } else if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {
        ++i;
      }
      break;
    case State::MultiLiteral:
      if (startsWith("'''")) {
        i += 2;
        state = State::Normal;
      }
      break;
    }
  }
  return std::nullopt;
}

void mergePolicy(PolicyOverrides &into, const PolicyOverrides &from) {
  auto take = [](auto &target, const auto &source) {
    if (source) {
      target = source;
    }
  };
  take(into.grouping, from.grouping);
  take(into.selector, from.selector);
  take(into.autoSelector, from.autoSelector);
  take(into.noPathRetry, from.noPathRetry);
  take(into.hwHandler, from.hwHandler);
  take(into.pgInitRetries, from.pgInitRetries);
  take(into.pgInitDelayMsecs, from.pgInitDelayMsecs);
  take(into.queueMode, from.queueMode);
  take(into.retainAttachedHwHandler, from.retainAttachedHwHandler);
}

std::string joinLines(const std::vector<std::string> &lines) {
  // Enough to fix a file in one go without flooding the journal.
  constexpr std::size_t maxLines = 20;
  std::string out;
  for (std::size_t i = 0; i < lines.size() && i < maxLines; ++i) {
    out += i == 0 ? "" : "\n";
    out += lines[i];
  }
  if (lines.size() > maxLines) {
    out += "\n(" + std::to_string(lines.size() - maxLines) + " more errors)";
  }
  return out;
}

bool matchBracket(std::string_view pattern, std::size_t &index, char c, bool &matched) {
  // index points at '['; on success it moves past the closing ']'.
  std::size_t j = index + 1;
  bool negate = false;
  if (j < pattern.size() && (pattern[j] == '!' || pattern[j] == '^')) {
    negate = true;
    ++j;
  }
  bool first = true;
  bool found = false;
  while (j < pattern.size()) {
    if (pattern[j] == ']' && !first) {
      matched = found != negate;
      index = j + 1;
      return true;
    }
    first = false;
    char low = pattern[j];
    if (low == '\\' && j + 1 < pattern.size()) {
      low = pattern[++j];
    }
    ++j;
    if (j + 1 < pattern.size() && pattern[j] == '-' && pattern[j + 1] != ']') {
      char high = pattern[j + 1];
      j += 2;
      if (high == '\\' && j < pattern.size()) {
        high = pattern[j++];
      }
      auto u = static_cast<unsigned char>(c);
      if (static_cast<unsigned char>(low) <= u && u <= static_cast<unsigned char>(high)) {
        found = true;
      }
    } else if (c == low) {
      found = true;
    }
  }
  return false; // unterminated: the caller treats '[' as a literal
}

} // namespace

// ---------------------------------------------------------------------------

std::string_view toString(GroupingPolicy policy) {
  return nameOf(groupingNames, policy);
}
std::optional<GroupingPolicy> parseGroupingPolicy(std::string_view text) {
  return lookup(groupingNames, text);
}

std::string_view toString(Mode mode) {
  return nameOf(modeNames, mode);
}
std::optional<Mode> parseMode(std::string_view text) {
  return lookup(modeNames, text);
}

std::string toString(NoPathRetry retry) {
  switch (retry.kind) {
  case NoPathRetry::Kind::Fail:
    return "fail";
  case NoPathRetry::Kind::Queue:
    return "queue";
  case NoPathRetry::Kind::Count:
    break;
  }
  return std::to_string(retry.count);
}

std::string_view toString(ThroughputWeights weights) {
  return nameOf(weightNames, weights);
}

std::string toString(Failback failback) {
  switch (failback.kind) {
  case Failback::Kind::Immediate:
    return "immediate";
  case Failback::Kind::Manual:
    return "manual";
  case Failback::Kind::Followover:
    return "followover";
  case Failback::Kind::Deferred:
    break;
  }
  return std::to_string(failback.delay.count());
}

Expected<Portal> parsePortal(std::string_view text) {
  return portalFromText(text);
}

std::span<const ConfigTable> configTables() {
  return tables;
}
std::span<const ConfigKey> configSchema() {
  return schema;
}

std::optional<milliseconds> parseDuration(std::string_view text) {
  std::uint64_t number = 0;
  const char *begin = text.data();
  const char *end = text.data() + text.size();
  auto [unitStart, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc{} || unitStart == begin) {
    return std::nullopt;
  }
  std::string_view unit(unitStart, static_cast<std::size_t>(end - unitStart));
  std::uint64_t scale = 0;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60000;
  } else if (unit == "h") {
    scale = 3600000;
  } else {
    return std::nullopt;
  }
  constexpr auto limit = static_cast<std::uint64_t>(std::numeric_limits<milliseconds::rep>::max());
  if (number > limit / scale) {
    return std::nullopt;
  }
  return milliseconds{static_cast<milliseconds::rep>(number * scale)};
}

std::string formatDuration(milliseconds duration) {
  auto count = duration.count();
  if (count != 0) {
    if (count % 3600000 == 0) {
      return std::to_string(count / 3600000) + "h";
    }
    if (count % 60000 == 0) {
      return std::to_string(count / 60000) + "m";
    }
    if (count % 1000 == 0) {
      return std::to_string(count / 1000) + "s";
    }
  }
  return std::to_string(count) + "ms";
}

std::vector<DeviceEntry> builtinDevices() {
  std::vector<DeviceEntry> devices;
  {
    // The Xserve RAID's two controllers each own their LUN: no ALUA and no
    // failover between them, so every path of a LUN goes to the same
    // controller and all of them may carry I/O (multipath-tools' hwtable
    // agrees).
    DeviceEntry xserve;
    xserve.vendor = "^APPLE$";
    xserve.product = "^Xserve RAID";
    xserve.policy.grouping = GroupingPolicy::Multibus;
    // The hardware handler stays "auto": the array itself reports no ALUA,
    // but a gateway or an emulation in front of it may, and then the kernel
    // attaches scsi_dh_alua whatever the table says.
    xserve.origin = "built-in";
    devices.push_back(std::move(xserve));
  }
  {
    // LIO (targetcli) implements implicit ALUA: group by priority with the
    // alua handler, queueing briefly as multipath-tools does for it.
    DeviceEntry lio;
    lio.vendor = "^LIO-ORG$";
    lio.product = ".*";
    lio.policy.grouping = GroupingPolicy::GroupByPrio;
    lio.policy.hwHandler = std::string("alua");
    lio.policy.noPathRetry = NoPathRetry{NoPathRetry::Kind::Count, 12};
    lio.origin = "built-in";
    devices.push_back(std::move(lio));
  }
  return devices;
}

Config builtinConfig() {
  Config config;
  config.devices = builtinDevices();
  return config;
}

Expected<Config> parseConfig(std::string_view text, std::string_view origin, Config base) {
  // toml++ reports errors as values here (TOML_EXCEPTIONS=0), but std::regex
  // and allocation can still throw; a config parser must never take the
  // daemon down, so everything becomes an error message.
  try {
    if (auto problem = unsupportedCharacter(text, origin)) {
      return fail(*problem);
    }
    toml::parse_result result = toml::parse(text, std::string(origin));
    if (!result) {
      const auto &problem = result.error();
      return fail(at(origin, problem.source()) + ": " + std::string(problem.description()));
    }
    DocumentParser parser(origin, base);
    parser.parse(result.table());
    if (!parser.errors_.empty()) {
      return fail(joinLines(parser.errors_));
    }
    // Later layers first, so that a drop-in's rule beats the main file's.
    parser.controllers_.insert(parser.controllers_.end(),
                               std::make_move_iterator(base.controllers.begin()),
                               std::make_move_iterator(base.controllers.end()));
    base.controllers = std::move(parser.controllers_);
    parser.devices_.insert(parser.devices_.end(), std::make_move_iterator(base.devices.begin()),
                           std::make_move_iterator(base.devices.end()));
    base.devices = std::move(parser.devices_);
    for (auto &entry : parser.maps_) {
      auto same = std::ranges::find(base.maps, entry.wwid, &MapOverride::wwid);
      if (same == base.maps.end()) {
        base.maps.push_back(std::move(entry));
        continue;
      }
      if (entry.alias) {
        same->alias = entry.alias;
      }
      mergePolicy(same->policy, entry.policy);
      same->origin = entry.origin;
    }
    return base;
  } catch (const std::exception &error) {
    return fail(std::string(origin) + ": " + error.what());
  }
}

Expected<void> validateConfig(const Config &config) {
  std::vector<std::string> errors;
  auto where = [&](std::string_view key) {
    auto found = config.keyOrigins.find(key);
    return found == config.keyOrigins.end() ? std::string() : found->second + ": ";
  };
  auto report = [&](std::string_view prefix, std::string_view key, std::string_view message) {
    errors.push_back(std::string(prefix) + std::string(key) + ": " + std::string(message));
  };
  auto check = [&](std::string_view prefix, std::string_view key,
                   const std::optional<std::string> &problem) {
    if (problem) {
      report(prefix, key, *problem);
    }
  };

  const Defaults &defaults = config.defaults;
  const HealthSettings &health = defaults.health;
  const std::array<std::pair<std::string_view, milliseconds>, 6> durations{{
      {"checker_interval", health.checkerInterval},
      {"failed_checker_interval", health.failedCheckerInterval},
      {"checker_timeout", health.checkerTimeout},
      {"flap_window", health.flapWindow},
      {"flap_recovery", health.flapRecovery},
      {"flap_recovery_max", health.flapRecoveryMax},
  }};
  for (const auto &[name, value] : durations) {
    std::string key = "health." + std::string(name);
    check(where(key), key, durationError(name, value));
  }
  check(where("health.flap_threshold"), "health.flap_threshold",
        unsignedError("flap_threshold", health.flapThreshold));
  const AdaptiveSettings &adaptive = config.adaptive;
  const std::array<std::pair<std::string_view, milliseconds>, 5> adaptiveDurations{{
      {"sample_interval", adaptive.sampleInterval},
      {"half_life", adaptive.halfLife},
      {"min_reload_interval", adaptive.minReloadInterval},
      {"reload_hold_target", adaptive.reloadHoldTarget},
      {"reload_hold_wait", adaptive.reloadHoldWait},
  }};
  for (const auto &[name, value] : adaptiveDurations) {
    std::string key = "adaptive." + std::string(name);
    check(where(key), key, durationError(name, value));
  }
  const std::array<std::pair<std::string_view, unsigned>, 4> adaptiveCounts{{
      {"hysteresis_percent", adaptive.hysteresisPercent},
      {"equal_tolerance_percent", adaptive.equalTolerancePercent},
      {"idle_iops", adaptive.idleIops},
      {"min_confidence_percent", adaptive.minConfidencePercent},
  }};
  for (const auto &[name, value] : adaptiveCounts) {
    std::string key = "adaptive." + std::string(name);
    check(where(key), key, unsignedError(name, value));
  }
  if (health.maxCheckerInterval) {
    check(where("health.max_checker_interval"), "health.max_checker_interval",
          durationError("max_checker_interval", *health.maxCheckerInterval));
    if (*health.maxCheckerInterval < health.checkerInterval) {
      report(where("health.max_checker_interval"), "health.max_checker_interval",
             formatDuration(*health.maxCheckerInterval) + " is below health.checker_interval (" +
                 formatDuration(health.checkerInterval) + ")");
    }
  }
  if (health.flapRecovery > health.flapRecoveryMax) {
    report(where("health.flap_recovery"), "health.flap_recovery",
           formatDuration(health.flapRecovery) + " exceeds health.flap_recovery_max (" +
               formatDuration(health.flapRecoveryMax) + ")");
  }

  auto checkPolicy = [&](std::string_view prefix, std::string_view path,
                         const PolicyOverrides &policy) {
    auto key = [&](std::string_view name) { return std::string(path) + "." + std::string(name); };
    if (policy.noPathRetry && policy.noPathRetry->kind == NoPathRetry::Kind::Count) {
      check(prefix, key("no_path_retry"),
            unsignedError("no_path_retry", policy.noPathRetry->count));
    }
    if (policy.hwHandler) {
      check(prefix, key("hardware_handler"), hwHandlerError(*policy.hwHandler));
    }
    if (policy.pgInitRetries) {
      check(prefix, key("pg_init_retries"),
            unsignedError("pg_init_retries", *policy.pgInitRetries));
    }
    if (policy.pgInitDelayMsecs) {
      check(prefix, key("pg_init_delay_msecs"),
            unsignedError("pg_init_delay_msecs", *policy.pgInitDelayMsecs));
    }
  };
  PolicyOverrides defaultPolicy;
  defaultPolicy.noPathRetry = defaults.noPathRetry;
  defaultPolicy.hwHandler = defaults.hwHandler;
  defaultPolicy.pgInitRetries = defaults.pgInitRetries;
  defaultPolicy.pgInitDelayMsecs = defaults.pgInitDelayMsecs;
  checkPolicy(where("defaults.hardware_handler"), "defaults", defaultPolicy);
  check(where("defaults.bindings_file"), "defaults.bindings_file",
        bindingsFileError(defaults.bindingsFile));
  if (defaults.failback.kind == Failback::Kind::Deferred) {
    check(where("defaults.failback"), "defaults.failback",
          failbackDelayError(std::chrono::duration_cast<milliseconds>(defaults.failback.delay)));
  }

  const DiscoverySettings &discovery = config.discovery;
  std::vector<std::string> seenPortals;
  for (const auto &portal : discovery.portals) {
    // A Portal built in code must hold the canonical address a probe compares.
    auto canonical = canonicalIpAddress(portal.address);
    if (!canonical || *canonical != portal.address || portal.port == 0) {
      report(where("discovery.portals"), "discovery.portals",
             quoted(portalText(portal)) + " is not a canonical IP address and port");
    } else if (std::ranges::find(seenPortals, portalText(portal)) != seenPortals.end()) {
      report(where("discovery.portals"), "discovery.portals",
             "duplicate portal " + quoted(portalText(portal)));
    }
    seenPortals.push_back(portalText(portal));
  }
  for (std::size_t i = 0; i < discovery.nics.size(); ++i) {
    check(where("discovery.nics"), "discovery.nics", nicError(discovery.nics[i]));
    if (std::find(discovery.nics.begin(), discovery.nics.begin() + static_cast<long>(i),
                  discovery.nics[i]) != discovery.nics.begin() + static_cast<long>(i)) {
      report(where("discovery.nics"), "discovery.nics",
             "duplicate NIC " + quoted(discovery.nics[i]));
    }
  }
  check(where("discovery.probe_interval"), "discovery.probe_interval",
        probeIntervalError(discovery.probeInterval));
  check(where("discovery.probe_timeout"), "discovery.probe_timeout",
        durationError("probe_timeout", discovery.probeTimeout));
  if (config.defaults.health.proactiveFailover && discovery.probeInterval == milliseconds{0}) {
    // The paths a failed probe took down come back only on a passing probe.
    report(where("health.proactive_failover"), "health.proactive_failover",
           "needs periodic probes, but discovery.probe_interval is 0s: the paths a failed probe "
           "took down would never be probed again");
  }
  if (discovery.probeInterval != milliseconds{0} &&
      discovery.probeTimeout > discovery.probeInterval) {
    // Otherwise a periodic probe would start before the previous one ended.
    report(where("discovery.probe_timeout"), "discovery.probe_timeout",
           formatDuration(discovery.probeTimeout) + " exceeds discovery.probe_interval (" +
               formatDuration(discovery.probeInterval) + ")");
  }
  if (!discovery.initiatorName.empty()) {
    check(where("discovery.initiator_name"), "discovery.initiator_name",
          initiatorNameError(discovery.initiatorName));
  }

  // Controller rules: each must name a controller and match something; one
  // alias may serve several rules (one per portal IQN) of the same label.
  std::map<std::string, const ControllerRule *, std::less<>> aliasOwner;
  for (const auto &rule : config.controllers) {
    std::string prefix = rule.origin.empty() ? std::string() : rule.origin + ": ";
    const ControllerMatch &match = rule.match;
    check(prefix, "controller.label", nameError(rule.label));
    if (match.targetIqnGlob) {
      check(prefix, "controller.target_iqn", globError(*match.targetIqnGlob));
    }
    if (match.targetIqnRegex) {
      check(prefix, "controller.target_iqn_regex", regexError(*match.targetIqnRegex));
    }
    if (match.serial) {
      check(prefix, "controller.serial", globError(*match.serial));
    }
    if (match.portal) {
      check(prefix, "controller.portal", portalError(*match.portal));
    }
    if (!(match.targetIqnGlob || match.targetIqnRegex || match.vendor || match.product ||
          match.serial || match.portal)) {
      report(prefix, "controller",
             "needs at least one of target_iqn, target_iqn_regex, vendor, product, serial, "
             "portal");
    }
    if (rule.alias) {
      check(prefix, "controller.alias", nameError(*rule.alias));
      auto [owner, inserted] = aliasOwner.try_emplace(*rule.alias, &rule);
      if (!inserted && owner->second->label != rule.label) {
        report(prefix, "controller.alias",
               "alias " + quoted(*rule.alias) + " already names controller " +
                   quoted(owner->second->label) + " (at " + owner->second->origin + ")");
      }
    }
  }

  for (const auto &device : config.devices) {
    std::string prefix = device.origin.empty() ? std::string() : device.origin + ": ";
    check(prefix, "device.vendor", regexError(device.vendor));
    check(prefix, "device.product", regexError(device.product));
    checkPolicy(prefix, "device", device.policy);
  }

  std::map<std::string, const MapOverride *, std::less<>> byWwid;
  std::map<std::string, const MapOverride *, std::less<>> byAlias;
  for (const auto &map : config.maps) {
    std::string prefix = map.origin.empty() ? std::string() : map.origin + ": ";
    check(prefix, "map.wwid", wwidError(map.wwid));
    auto [first, inserted] = byWwid.try_emplace(map.wwid, &map);
    if (!inserted) {
      report(prefix, "map.wwid",
             "duplicate wwid " + quoted(map.wwid) + " (first at " + first->second->origin + ")");
    }
    if (map.alias) {
      check(prefix, "map.alias", nameError(*map.alias));
      auto [other, fresh] = byAlias.try_emplace(*map.alias, &map);
      if (!fresh) {
        report(prefix, "map.alias",
               "alias " + quoted(*map.alias) + " is already used by wwid " +
                   quoted(other->second->wwid) + " (at " + other->second->origin + ")");
      }
    }
    checkPolicy(prefix, "map", map.policy);
  }

  if (!errors.empty()) {
    return fail(joinLines(errors));
  }
  return {};
}

bool globMatch(std::string_view pattern, std::string_view text) {
  // Classic iterative matcher: on a mismatch, let the most recent '*'
  // swallow one more character. Linear backtracking, no recursion, so a
  // hostile pattern cannot exhaust the stack.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t starPattern = std::string_view::npos;
  std::size_t starText = 0;
  while (t < text.size()) {
    bool advanced = false;
    if (p < pattern.size()) {
      char pc = pattern[p];
      if (pc == '*') {
        starPattern = ++p;
        starText = t;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++t;
        continue;
      }
      if (pc == '[') {
        std::size_t next = p;
        bool matched = false;
        if (matchBracket(pattern, next, text[t], matched)) {
          if (matched) {
            p = next;
            ++t;
            advanced = true;
          }
        } else if (text[t] == '[') {
          ++p;
          ++t;
          advanced = true;
        }
      } else if (pc == '\\' && p + 1 < pattern.size()) {
        if (pattern[p + 1] == text[t]) {
          p += 2;
          ++t;
          advanced = true;
        }
      } else if (pc == text[t]) {
        ++p;
        ++t;
        advanced = true;
      }
    }
    if (advanced) {
      continue;
    }
    if (starPattern == std::string_view::npos) {
      return false;
    }
    p = starPattern;
    t = ++starText;
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

bool matches(const ControllerMatch &match, const Path &path) {
  if (match.targetIqnGlob && !globMatch(*match.targetIqnGlob, path.targetIqn)) {
    return false;
  }
  if (match.targetIqnRegex && !regexSearch(*match.targetIqnRegex, path.targetIqn)) {
    return false;
  }
  if (match.vendor && !equalsIgnoreCase(trimPadding(*match.vendor), trimPadding(path.vendor))) {
    return false;
  }
  if (match.product && !equalsIgnoreCase(trimPadding(*match.product), trimPadding(path.product))) {
    return false;
  }
  if (match.serial && !globMatch(*match.serial, trimPadding(path.serial))) {
    return false;
  }
  if (match.portal) {
    auto portal = parsePortalPattern(*match.portal);
    if (!portal || !equalsIgnoreCase(portal->address, path.portal.address) ||
        (portal->port && *portal->port != path.portal.port)) {
      return false;
    }
  }
  return true;
}

std::optional<const ControllerRule *> controllerFor(const Config &config, const Path &path) {
  for (const auto &rule : config.controllers) {
    if (matches(rule.match, path)) {
      return &rule;
    }
  }
  return std::nullopt;
}

std::optional<const DeviceEntry *> deviceFor(const Config &config, std::string_view vendor,
                                             std::string_view product) {
  vendor = trimPadding(vendor);
  product = trimPadding(product);
  for (const auto &device : config.devices) {
    if (regexSearch(device.vendor, vendor) && regexSearch(device.product, product)) {
      return &device;
    }
  }
  return std::nullopt;
}

EffectivePolicy policyFor(const Config &config, std::string_view wwid, std::string_view vendor,
                          std::string_view product) {
  const Defaults &defaults = config.defaults;
  PolicyOverrides merged;
  merged.grouping = defaults.grouping;
  merged.selector = defaults.selector;
  merged.autoSelector = defaults.autoSelector;
  merged.noPathRetry = defaults.noPathRetry;
  merged.hwHandler = defaults.hwHandler;
  merged.pgInitRetries = defaults.pgInitRetries;
  merged.pgInitDelayMsecs = defaults.pgInitDelayMsecs;
  merged.queueMode = defaults.queueMode;
  merged.retainAttachedHwHandler = defaults.retainAttachedHwHandler;
  if (auto device = deviceFor(config, vendor, product)) {
    mergePolicy(merged, (*device)->policy);
  }
  EffectivePolicy out;
  auto map = std::ranges::find(config.maps, wwid, &MapOverride::wwid);
  if (map != config.maps.end()) {
    mergePolicy(merged, map->policy);
    out.alias = map->alias;
  }
  out.grouping = *merged.grouping;
  out.selector = *merged.selector;
  out.autoSelector = merged.autoSelector.value_or(false);
  out.noPathRetry = *merged.noPathRetry;
  out.hwHandler = *merged.hwHandler;
  out.pgInitRetries = merged.pgInitRetries;
  out.pgInitDelayMsecs = merged.pgInitDelayMsecs;
  out.queueMode = *merged.queueMode;
  out.retainAttachedHwHandler = *merged.retainAttachedHwHandler;
  return out;
}

} // namespace pathkeeper::selector
