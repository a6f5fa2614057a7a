#pragma once

// The multipath target's table line, rendered from a MapSpec and parsed back
// from what the kernel prints (dmsetup table). Grammar, from dm-mpath.c:
//
//   <start> <length> multipath
//     <#features> <features...>
//     <#hw_handler_args> [<hw_handler> <hw_handler_args...>]
//     <#groups> <initial group>
//     { <selector> <#selector_args> <selector_args...>
//       <#paths> <#per_path_args> { <device> <per_path_args...> }... }...

#include "expected.hpp"
#include "model.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief The kernel's limits (dm-mpath.c's dm_arg tables).
inline constexpr unsigned kMaxGroups = 1024;
inline constexpr unsigned kMaxPathsPerGroup = 1024;
inline constexpr unsigned kMaxSelectorArgs = 1024;
inline constexpr unsigned kMaxHwHandlerArgs = 1024;
inline constexpr unsigned kMaxRelativeThroughput = 100;

/// @brief One path entry of a group, as written in the table.
struct DmTablePath {
  std::string device; ///< "8:16" as the kernel prints it, or a /dev path
  std::vector<std::string> args;
  bool operator==(const DmTablePath &) const = default;
};

/// @brief One priority group, as written in the table.
struct DmTableGroup {
  std::string selector; ///< kept verbatim so unknown selectors survive
  std::vector<std::string> selectorArgs;
  unsigned argsPerPath = 0;
  std::vector<DmTablePath> paths;
  bool operator==(const DmTableGroup &) const = default;
};

/// @brief A parsed multipath table line.
struct DmTable {
  std::uint64_t start = 0;
  std::uint64_t length = 0;
  std::vector<std::string> featureArgs; ///< without the count
  Features features;                    ///< featureArgs, interpreted
  std::string hwHandler;                ///< empty for none
  std::vector<std::string> hwHandlerArgs;
  unsigned initialGroup = 0;
  std::vector<DmTableGroup> groups;
  bool operator==(const DmTable &) const = default;
};

/// @brief Renders the table line for a map ("0 <size> multipath ...").
/// Fails with the kernel's own reason when the spec breaks one of its limits,
/// so a bad table is caught before it reaches the kernel.
Expected<std::string> renderDmTable(const MapSpec &spec);

/// @brief Renders a parsed table back to canonical text (single spaces).
std::string renderDmTable(const DmTable &table);

/// @brief Parses a multipath table line, enforcing the kernel's grammar and
/// limits. Accepts the optional "<start> <length> multipath" prefix being
/// absent only when @p withPrefix is false (libdevmapper hands out params
/// without it).
Expected<DmTable> parseDmTable(std::string_view line, bool withPrefix = true);

/// @brief The per-path table args the kernel expects for a selector.
/// repeat_count is always 1: request-based maps ignore anything else, and the
/// kernel rewrites it to 1.
std::vector<std::string> perPathArgs(SelectorKind kind, const Path &path);

} // namespace pathkeeper::selector
