#pragma once

// One alias for an expected type across the code base. GCC 12 has
// std::expected, but clang 14 (the compiler libFuzzer needs) rejects
// libstdc++'s <expected>, so everything the fuzzers compile uses tl::expected.
#include <tl/expected.hpp>

#include <string>
#include <utility>

namespace pathkeeper {

template <typename T, typename E = std::string> using Expected = tl::expected<T, E>;

using tl::unexpected;

/// @brief Shorthand for returning an error message from an Expected function.
inline tl::unexpected<std::string> fail(std::string message) {
  return tl::unexpected<std::string>(std::move(message));
}

} // namespace pathkeeper

/// Binds @p var to the value of an Expected expression, or returns its error
/// from the enclosing function (which must return an Expected with a string
/// error). C++ has no '?' operator; this keeps parsers linear.
// var names a variable, so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define PK_TRY(var, expr)                                                                          \
  auto var##_result = (expr);                                                                      \
  if (!var##_result) {                                                                             \
    return ::pathkeeper::fail(std::move(var##_result).error());                                    \
  }                                                                                                \
  auto var = *std::move(var##_result)
// NOLINTEND(bugprone-macro-parentheses)
