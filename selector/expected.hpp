#pragma once

// One alias for an expected type across the code base. GCC 12 has
// std::expected, but clang 14 (the compiler libFuzzer needs) rejects
// libstdc++'s <expected>, so everything the fuzzers compile uses tl::expected.
#include <tl/expected.hpp>

#include <string>

namespace pathkeeper {

template <typename T, typename E = std::string>
using Expected = tl::expected<T, E>;

using tl::unexpected;

/// @brief Shorthand for returning an error message from an Expected function.
inline tl::unexpected<std::string> fail(std::string message) {
  return tl::unexpected<std::string>(std::move(message));
}

} // namespace pathkeeper
