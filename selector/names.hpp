#pragma once

// Map names: multipathd's user-friendly names (mpatha, mpathb, ...) and the
// bindings file that keeps them stable across reboots. The file format and
// the allocation order are multipath-tools', so pathkeeper and multipathd
// can share /etc/multipath/bindings and a host can move between them
// without renaming its maps. Everything here takes and returns text; reading
// and atomically replacing the file is the daemon's job.

#include "expected.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief multipathd's default user_friendly_names prefix.
inline constexpr std::string_view kDefaultAliasPrefix = "mpath";

/// @brief The largest index multipathd can parse back: its ids are positive ints.
inline constexpr std::uint32_t kMaxFriendlyIndex = 2147483646;

/// @brief DM_NAME_LEN less the NUL.
inline constexpr std::size_t kMaxMapNameLength = 127;

/// @brief The text of an empty bindings file, exactly as multipath-tools writes it.
inline constexpr std::string_view kBindingsHeader =
    "# Multipath bindings, Version : 1.0\n"
    "# NOTE: this file is automatically maintained by the multipath program.\n"
    "# You should not need to edit this file in normal circumstances.\n"
    "#\n"
    "# Format:\n"
    "# alias wwid\n"
    "#\n";

/// @brief prefix + bijective base-26 letters: 0 → "mpatha", 25 → "mpathz", 26 → "mpathaa".
std::string friendlyName(std::uint32_t index, std::string_view prefix = kDefaultAliasPrefix);

/// @brief The index of a friendly name; rejects what multipathd's scan_devname rejects.
///
/// The part after the prefix must be one or more lowercase letters and the
/// index at most kMaxFriendlyIndex.
Expected<std::uint32_t> parseFriendlyName(std::string_view alias,
                                          std::string_view prefix = kDefaultAliasPrefix);

/// @brief Checks a device-mapper name: 1..127 bytes, no '/', not "." or "..".
Expected<void> validateMapName(std::string_view name);

/// @brief One "alias wwid" line of the bindings file.
struct Binding {
  std::string alias;
  std::string wwid;

  bool operator==(const Binding &) const = default;
};

/// @brief The contents of a bindings file, kept in multipath-tools' order.
///
/// Order is by alias length, then bytewise, which for one prefix is index
/// order (mpathz before mpathaa). multipathd keeps its table this way; it
/// decides which alias wins for a WWID bound twice and how the file is
/// written back.
///
/// Duplicates, as multipath-tools treats them:
/// - the same line twice is collapsed, with a warning;
/// - one alias bound to two WWIDs is an error naming both lines. multipathd
///   logs this as an ERROR and drops the later line; refusing instead keeps
///   a hand edit from silently putting another LUN under a name in use;
/// - one WWID under several aliases is kept, with a warning: aliasFor()
///   answers the first in the order above, and the others stay reserved so
///   allocation never hands them out.
class Bindings {
public:
  /// @brief Parses bindings text; fileName only labels messages ("file:line: ...").
  ///
  /// Blank lines and '#' comments (also after a binding) are skipped; fields
  /// are separated by spaces or tabs; CRLF line ends are accepted. A line
  /// with a lone alias, a third field, an invalid alias or a WWID over 127
  /// characters is an error (multipathd skips such lines with a log message).
  static Expected<Bindings> parse(std::string_view text, std::string_view fileName = "bindings");

  /// @brief The alias bound to wwid, if any.
  [[nodiscard]] std::optional<std::string> aliasFor(std::string_view wwid) const;
  /// @brief The WWID bound to alias, if any.
  [[nodiscard]] std::optional<std::string> wwidFor(std::string_view alias) const;

  /// @brief The alias of wwid, binding the smallest free friendly name when it has none.
  ///
  /// "Free" means no binding uses that index under this prefix and it is
  /// not in namesInUse: the dm names of existing maps of other WWIDs, which
  /// multipathd also steps over. Fails when the existing alias of wwid is in
  /// namesInUse, or when wwid could not be written to the file.
  Expected<std::string> allocate(std::string_view wwid,
                                 std::string_view prefix = kDefaultAliasPrefix,
                                 std::span<const std::string> namesInUse = {});

  /// @brief The file text: the standard header, then one "alias wwid" line per binding.
  [[nodiscard]] std::string render() const;

  /// @brief All bindings, in multipath-tools' order.
  [[nodiscard]] const std::vector<Binding> &entries() const { return entries_; }
  /// @brief Problems parse() tolerated, as "file:line: ..." messages.
  [[nodiscard]] const std::vector<std::string> &warnings() const { return warnings_; }

private:
  void insert(Binding binding);

  std::vector<Binding> entries_;
  std::vector<std::string> warnings_;
};

} // namespace pathkeeper::selector
