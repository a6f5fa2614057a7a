#pragma once

// Enum <-> name tables for the config file and the model's printable states.
// Internal to the selector library.

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace pathkeeper::selector {

template <typename Enum, std::size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

/// @brief The value named @p text, if any.
template <typename Enum, std::size_t N>
std::optional<Enum> lookup(const NameTable<Enum, N> &table, std::string_view text) {
  for (const auto &[value, name] : table) {
    if (name == text) {
      return value;
    }
  }
  return std::nullopt;
}

/// @brief The name of @p value, or "invalid" for a value outside the table.
template <typename Enum, std::size_t N>
std::string_view nameOf(const NameTable<Enum, N> &table, Enum value) {
  for (const auto &[candidate, name] : table) {
    if (candidate == value) {
      return name;
    }
  }
  return "invalid";
}

} // namespace pathkeeper::selector
