// Fuzzes the /sys/block/<dev>/stat parser and the estimator behind it: each
// line of the input is one sample, a second apart. Besides "no crash", it
// checks what the weight computation relies on: every estimate is finite and
// non-negative, and the confidence stays within 0..1.
#include "path_estimator.hpp"

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

using namespace pathkeeper::selector;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

void checkFigure(double value) {
  check(std::isfinite(value) && value >= 0);
}

} // namespace

// libFuzzer fixes this name.
extern "C" int LLVMFuzzerTestOneInput( // NOLINT(readability-identifier-naming)
    const std::uint8_t *data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  PathEstimator estimator(EstimatorSettings{std::chrono::seconds{4}, 1.0});
  std::chrono::steady_clock::time_point at{};
  while (!text.empty()) {
    auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    at += std::chrono::seconds{1};
    auto stat = parseBlockStat(line);
    if (!stat) {
      continue;
    }
    estimator.add(StatSample{at, *stat});
    const PathEstimate &estimate = estimator.estimate();
    checkFigure(estimate.capacityBytesPerSecond);
    checkFigure(estimate.throughputBytesPerSecond);
    checkFigure(estimate.latencyMs);
    checkFigure(estimate.iops);
    check(estimate.confidence >= 0 && estimate.confidence <= 1.0 + 1e-9);
  }
  return 0;
}
