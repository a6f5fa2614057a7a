#pragma once

// The multipath target's feature arguments, with the kernel's grammar and
// limits (drivers/md/dm-mpath.c parse_features and multipath_status).

#include "config.hpp"
#include "expected.hpp"
#include "model.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief The kernel's limits on feature values.
inline constexpr unsigned kMaxFeatureArgs = 8;
inline constexpr unsigned kMinPgInitRetries = 1;
inline constexpr unsigned kMaxPgInitRetries = 50;
inline constexpr unsigned kMaxPgInitDelayMsecs = 60000;

/// @brief The features as the kernel holds them once loaded: bio-based maps
/// always retain the attached hardware handler (they cannot manage scsi_dh
/// themselves), and "rq"/"mq" are the request-based default the kernel never
/// prints. Seen in the VM lab on 6.1; see dm-mpath.c alloc_multipath_stage2.
Features kernelEffective(Features features);

/// @brief The feature words without the leading count, in the order the
/// kernel prints them back, so a rendered table compares equal to its echo.
/// Renders kernelEffective(features).
std::vector<std::string> renderFeatureArgs(const Features &features);

/// @brief "<count> <args...>", e.g. "1 queue_if_no_path" or "0".
std::string renderFeatures(const Features &features);

/// @brief Parses feature words (without the count) as the kernel does:
/// names are case-insensitive, values are range-checked, and unknown words
/// are rejected.
Expected<Features> parseFeatureArgs(std::span<const std::string> args);

/// @brief Parses a whole features string, "<count> <args...>".
Expected<Features> parseFeatures(std::string_view text);

/// @brief Adds one feature ("queue_if_no_path", "pg_init_retries 5",
/// "queue_mode bio", ...) to a features string; a value replaces the old one.
Expected<std::string> addFeature(std::string_view features, std::string_view feature);

/// @brief Removes a feature (by name, with its value) from a features string.
Expected<std::string> removeFeature(std::string_view features, std::string_view name);

/// @brief The result of reconciling features with no_path_retry.
struct ReconciledFeatures {
  Features features;
  std::vector<std::string> notes; ///< what was overridden and why
};

/// @brief Applies no_path_retry to the features, as multipathd does:
/// no_path_retry wins over a queue_if_no_path set in the features, since it
/// is the setting that also bounds how long I/O queues.
ReconciledFeatures reconcileFeatures(Features features, const NoPathRetry &noPathRetry);

} // namespace pathkeeper::selector
