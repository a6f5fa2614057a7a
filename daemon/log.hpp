#pragma once

// Structured logging: journald with fields when stderr is connected to the
// journal (systemd sets JOURNAL_STREAM), plain lines on stderr otherwise.
//
// Every message can carry the fields an admin filters by
// (`journalctl PATH=sdb`, `journalctl MAP=xserve-upper`) and, for the events
// worth alerting on, a MESSAGE_ID from the catalogue below.

#include <initializer_list>
#include <string>
#include <string_view>

namespace pathkeeper::daemon::log {

/// @brief syslog priorities, as journald stores them.
enum class Level { Error = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

/// @brief Where messages go.
enum class Target {
  Auto,    ///< journal when stderr is the journal stream, else stderr
  Journal, ///< sd_journal_send
  Stderr,  ///< "<level>: message (FIELD=value ...)"
};

/// @brief One structured field, e.g. {"PATH", "sdb"}. Names follow
/// journald's rules: upper case letters, digits and '_'.
struct Field {
  std::string_view name;
  std::string value;
};

/// @brief MESSAGE_IDs (128-bit, as `journalctl --new-id128` makes them), so
/// that `journalctl MESSAGE_ID=...` finds every instance of an event.
namespace id {
inline constexpr std::string_view kPathFailed = "6c2a1f0b8e3d4b6f9a51c7d2e4f80a11";
inline constexpr std::string_view kPathReinstated = "9d4e2b7a1c6f43e8b0a2d5f7c9e31b22";
inline constexpr std::string_view kPathShaky = "3f8b6d2e0a9c47d1a6e4b2c8f5d70c33";
inline constexpr std::string_view kMapCreated = "b7e1c9a34d2f4e6a8c0b5d1f3a9e2d44";
inline constexpr std::string_view kMapReloaded = "e2a6d8f0c4b1493d9e7a3c5b1f8d6e55";
/// pathkeeperd renamed a map to the alias the configuration gives it.
inline constexpr std::string_view kMapRenamed = "e1bdebb0b8714db787694b2870797fd5";
inline constexpr std::string_view kConfigRejected = "5a9c3e7b2d8f41a6b4e0c6d2a8f1b966";
/// The mode changed at run time: auto mode following multipathd, or a reload.
inline constexpr std::string_view kModeChanged = "9215eb5ea9e34f4cb591c8dfe69dbc46";
/// A network check finding appears (issue #8).
inline constexpr std::string_view kNetworkFinding = "c41d7e9a2b6f48d3a05e8b1c7f2d9a77";
/// An adaptive-selection decision that reloads a map (or is held/deferred).
inline constexpr std::string_view kAdaptiveDecision = "9d90f649611749b6aab55e4d511d35b2";
} // namespace id

/// @brief Chooses the target and the most verbose level written.
void configure(Target target, Level maxLevel);
/// @brief The target Auto resolves to in this process.
Target effectiveTarget();

/// @brief Writes one message with its fields and, when not empty, a MESSAGE_ID.
void write(Level level, std::string_view message, std::initializer_list<Field> fields = {},
           std::string_view messageId = {});

inline void error(std::string_view message, std::initializer_list<Field> fields = {}) {
  write(Level::Error, message, fields);
}
inline void warning(std::string_view message, std::initializer_list<Field> fields = {}) {
  write(Level::Warning, message, fields);
}
inline void notice(std::string_view message, std::initializer_list<Field> fields = {}) {
  write(Level::Notice, message, fields);
}
inline void info(std::string_view message, std::initializer_list<Field> fields = {}) {
  write(Level::Info, message, fields);
}
inline void debug(std::string_view message, std::initializer_list<Field> fields = {}) {
  write(Level::Debug, message, fields);
}

/// @brief The stderr rendering, exposed for tests:
/// "warning: path sdb failed (PATH=sdb MAP=xserve-upper)".
std::string formatLine(Level level, std::string_view message, std::initializer_list<Field> fields);

/// @brief True when @p journalStream (the JOURNAL_STREAM value, "dev:ino")
/// names the file @p fd is open on: systemd connected it to the journal.
bool isJournalStream(std::string_view journalStream, int fd);

} // namespace pathkeeper::daemon::log
