#include "path_estimator.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

namespace pathkeeper::selector {

namespace {

constexpr std::uint64_t kSectorBytes = 512;
constexpr std::uint64_t kWrap32 = std::uint64_t{1} << 32;

} // namespace

Expected<BlockStat> parseBlockStat(std::string_view text) {
  constexpr std::size_t maxFields = 17;
  std::array<std::uint64_t, maxFields> fields{};
  std::size_t count = 0;
  std::size_t pos = 0;
  while (true) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n')) {
      ++pos;
    }
    if (pos == text.size()) {
      break;
    }
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), value);
    auto next = static_cast<std::size_t>(end - text.data());
    if (ec != std::errc() ||
        (next < text.size() && text[next] != ' ' && text[next] != '\t' && text[next] != '\n')) {
      return fail("stat field " + std::to_string(count + 1) + " is not an unsigned number");
    }
    if (count < maxFields) {
      fields[count] = value;
    }
    ++count;
    pos = next;
  }
  if (count < 11) {
    return fail("stat has " + std::to_string(count) + " fields, expected at least 11");
  }
  BlockStat stat;
  std::uint64_t *targets[maxFields] = {
      &stat.readIos,       &stat.readMerges,     &stat.readSectors,  &stat.readTicks,
      &stat.writeIos,      &stat.writeMerges,    &stat.writeSectors, &stat.writeTicks,
      &stat.inFlight,      &stat.ioTicks,        &stat.timeInQueue,  &stat.discardIos,
      &stat.discardMerges, &stat.discardSectors, &stat.discardTicks, &stat.flushIos,
      &stat.flushTicks};
  for (std::size_t i = 0; i < std::min(count, maxFields); ++i) {
    *targets[i] = fields[i];
  }
  return stat;
}

std::optional<std::uint64_t> counterDelta(std::uint64_t before, std::uint64_t after) {
  if (after >= before) {
    return after - before;
  }
  if (before < kWrap32) {
    std::uint64_t wrapped = kWrap32 - before + after;
    if (wrapped < kWrap32 / 2) {
      return wrapped;
    }
  }
  return std::nullopt;
}

IntervalResult intervalBetween(const StatSample &before, const StatSample &after) {
  IntervalResult result;
  if (after.at <= before.at) {
    return result; // Invalid
  }
  const BlockStat &a = before.stat;
  const BlockStat &b = after.stat;
  auto reads = counterDelta(a.readIos, b.readIos);
  auto writes = counterDelta(a.writeIos, b.writeIos);
  auto readSectors = counterDelta(a.readSectors, b.readSectors);
  auto writeSectors = counterDelta(a.writeSectors, b.writeSectors);
  auto readTicks = counterDelta(a.readTicks, b.readTicks);
  auto writeTicks = counterDelta(a.writeTicks, b.writeTicks);
  auto ioTicks = counterDelta(a.ioTicks, b.ioTicks);
  if (!reads || !writes || !readSectors || !writeSectors || !readTicks || !writeTicks || !ioTicks) {
    result.kind = IntervalResult::Kind::Reset;
    return result;
  }
  IntervalMetrics &m = result.metrics;
  m.seconds = std::chrono::duration<double>(after.at - before.at).count();
  m.ios = *reads + *writes;
  m.bytes = (*readSectors + *writeSectors) * kSectorBytes;
  m.bytesPerSecond = static_cast<double>(m.bytes) / m.seconds;
  m.iops = static_cast<double>(m.ios) / m.seconds;
  m.latencyMs =
      m.ios == 0 ? 0.0 : static_cast<double>(*readTicks + *writeTicks) / static_cast<double>(m.ios);
  // io_ticks can run slightly ahead of the wall clock the caller measured
  // (jiffy rounding, a late sample); more than the interval is not possible.
  m.busyFraction = std::clamp(static_cast<double>(*ioTicks) / (m.seconds * 1000.0), 0.0, 1.0);
  result.kind = IntervalResult::Kind::Measured;
  return result;
}

double PathEstimator::Smoothed::feed(double value, double alpha) {
  recent.push_back(value);
  if (recent.size() > 3) {
    recent.erase(recent.begin());
  }
  std::vector<double> sorted = recent;
  std::ranges::sort(sorted);
  // With two values the lower one: a first spike must not pass unfiltered
  // for capacity, and for the other figures the difference fades in the EWMA.
  double median = sorted.size() == 3 ? sorted[1] : sorted.front();
  sum = (1.0 - alpha) * sum + alpha * median;
  return sum;
}

PathEstimator::Update PathEstimator::add(const StatSample &sample) {
  if (!previous_) {
    previous_ = sample;
    estimate_.inFlight = sample.stat.inFlight;
    return Update::Baseline;
  }
  IntervalResult interval = intervalBetween(*previous_, sample);
  switch (interval.kind) {
  case IntervalResult::Kind::Invalid:
    return Update::Ignored;
  case IntervalResult::Kind::Reset:
    // A different device behind the same name, or a reset one: nothing of
    // the old estimates describes it, and the new counters are the baseline.
    *this = PathEstimator(settings_);
    previous_ = sample;
    estimate_.inFlight = sample.stat.inFlight;
    return Update::Reset;
  case IntervalResult::Kind::Measured:
    break;
  }
  estimate_.inFlight = sample.stat.inFlight;
  const IntervalMetrics &m = interval.metrics;
  last_ = m;
  if (m.iops < settings_.idleIops || m.ios == 0) {
    // Busy but with few completions: keep the window open (previous_ stays
    // its start) until it holds enough of them to measure.
    const bool busy = m.busyFraction >= kBusyWindowFraction;
    const bool full = m.ios >= kMinWindowIos;
    const bool tooLong = m.seconds >= std::chrono::duration<double>(kMaxWindow).count();
    if (!busy || tooLong) {
      previous_ = sample;
      return Update::Idle;
    }
    if (!full) {
      return Update::Idle;
    }
  }
  previous_ = sample;
  double halfLifeSeconds = std::chrono::duration<double>(settings_.halfLife).count();
  double alpha = halfLifeSeconds <= 0 ? 1.0 : 1.0 - std::exp2(-m.seconds / halfLifeSeconds);
  weight_ = (1.0 - alpha) * weight_ + alpha;
  double busy = std::max(m.busyFraction, kMinBusyFraction);
  estimate_.capacityBytesPerSecond = capacity_.feed(m.bytesPerSecond / busy, alpha) / weight_;
  estimate_.throughputBytesPerSecond = throughput_.feed(m.bytesPerSecond, alpha) / weight_;
  estimate_.latencyMs = latency_.feed(m.latencyMs, alpha) / weight_;
  estimate_.iops = iops_.feed(m.iops, alpha) / weight_;
  estimate_.confidence = weight_;
  ++estimate_.busySamples;
  return Update::Busy;
}

} // namespace pathkeeper::selector
