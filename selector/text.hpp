#pragma once

// Small text helpers shared by the parsers. Internal to the selector library.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief Splits on runs of ASCII whitespace, as the kernel's dm_split_args
/// does for unquoted text.
std::vector<std::string> splitWords(std::string_view text);

/// @brief A decimal unsigned number, with no sign, space or trailing junk.
std::optional<std::uint64_t> parseUnsigned(std::string_view text);

/// @brief ASCII case-insensitive equality (the kernel's strcasecmp).
bool iequals(std::string_view a, std::string_view b);

} // namespace pathkeeper::selector
