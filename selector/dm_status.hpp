#pragma once

// The multipath target's status line (dmsetup status), parsed. Grammar, from
// dm-mpath.c multipath_status (STATUSTYPE_INFO):
//
//   <start> <length> multipath
//     <#feature_fields> <queue_io> <pg_init_count>
//     <#hw_handler_fields> <hw_handler_fields...>
//     <#groups> <next group>
//     { <A|E|D> <#selector_fields> <selector_fields...>
//       <#paths> <#per_path_fields>
//       { <device> <A|F> <fail_count> <per_path_fields...> }... }...

#include "expected.hpp"
#include "model.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief A priority group's state in the status line.
enum class DmGroupState {
  Active,   ///< 'A': the current group
  Enabled,  ///< 'E': usable, not current
  Disabled, ///< 'D': bypassed (e.g. after a failed pg_init)
};

/// @brief One path of a group in the status line.
struct DmStatusPath {
  std::string device;  ///< "8:16"
  bool active = false; ///< 'A' (true) or 'F'
  unsigned failCount = 0;
  std::vector<std::uint64_t> selectorFields; ///< raw; see the accessors below
  bool operator==(const DmStatusPath &) const = default;
};

/// @brief One priority group in the status line.
struct DmStatusGroup {
  DmGroupState state = DmGroupState::Enabled;
  std::vector<std::string> selectorFields;
  unsigned fieldsPerPath = 0;
  std::vector<DmStatusPath> paths;
  bool operator==(const DmStatusGroup &) const = default;
};

/// @brief A parsed multipath status line.
struct DmStatus {
  std::uint64_t start = 0;
  std::uint64_t length = 0;
  std::vector<std::string> featureFields; ///< normally queue_io, pg_init_count
  bool queueIo = false;                   ///< I/O is queued (no usable path or pg_init)
  unsigned pgInitCount = 0;
  std::vector<std::string> hwHandlerFields;
  unsigned nextGroup = 0;
  std::vector<DmStatusGroup> groups;
  bool operator==(const DmStatus &) const = default;

  /// @brief The number of paths marked 'A'.
  [[nodiscard]] unsigned activePaths() const;
  /// @brief The 1-based group the kernel uses: the one marked 'A', else the
  /// one it will use next (after switch_group the kernel drops its current
  /// group until the next I/O and reports the chosen one only as next); 0
  /// for a map without groups.
  [[nodiscard]] unsigned groupInUse() const;
  /// @brief Finds a path by device ("8:16"), with its 0-based group index.
  [[nodiscard]] std::optional<std::pair<std::size_t, const DmStatusPath *>>
  findPath(std::string_view device) const;
};

/// @brief Parses a status line; @p withPrefix as for parseDmTable.
Expected<DmStatus> parseDmStatus(std::string_view line, bool withPrefix = true);

/// @brief queue-length: the path's in-flight I/O count.
std::optional<std::uint64_t> inFlightCount(SelectorKind kind, const DmStatusPath &path);
/// @brief service-time: the path's in-flight size (bytes).
std::optional<std::uint64_t> inFlightSize(SelectorKind kind, const DmStatusPath &path);
/// @brief service-time: the relative_throughput the kernel is using.
std::optional<unsigned> relativeThroughput(SelectorKind kind, const DmStatusPath &path);

/// @brief 'A', 'E' or 'D'.
char toChar(DmGroupState state);

} // namespace pathkeeper::selector
