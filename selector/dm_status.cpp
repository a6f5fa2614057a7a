#include "dm_status.hpp"

#include "dm_table.hpp"
#include "text.hpp"

namespace pathkeeper::selector {

namespace {

class Fields {
public:
  explicit Fields(std::vector<std::string> words) : words_(std::move(words)) {}
  [[nodiscard]] bool done() const { return pos_ >= words_.size(); }
  [[nodiscard]] std::size_t position() const { return pos_; }

  Expected<std::string> next(std::string_view what) {
    if (done()) {
      return fail("status ends early: expected " + std::string(what));
    }
    return words_[pos_++];
  }

  Expected<std::uint64_t> number(std::string_view what, std::uint64_t max) {
    PK_TRY(word, next(what));
    auto value = parseUnsigned(word);
    if (!value || *value > max) {
      return fail("expected " + std::string(what) + ", got '" + word + "' (field " +
                  std::to_string(pos_) + ")");
    }
    return *value;
  }

private:
  std::vector<std::string> words_;
  std::size_t pos_ = 0;
};

} // namespace

char toChar(DmGroupState state) {
  switch (state) {
  case DmGroupState::Active:
    return 'A';
  case DmGroupState::Enabled:
    return 'E';
  case DmGroupState::Disabled:
    return 'D';
  }
  return '?';
}

unsigned DmStatus::activePaths() const {
  unsigned count = 0;
  for (const auto &group : groups) {
    for (const auto &path : group.paths) {
      count += path.active ? 1U : 0U;
    }
  }
  return count;
}

unsigned DmStatus::groupInUse() const {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].state == DmGroupState::Active) {
      return static_cast<unsigned>(g + 1);
    }
  }
  return nextGroup <= groups.size() ? nextGroup : 0U;
}

std::optional<std::pair<std::size_t, const DmStatusPath *>>
DmStatus::findPath(std::string_view device) const {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto &path : groups[g].paths) {
      if (path.device == device) {
        return std::make_pair(g, &path);
      }
    }
  }
  return std::nullopt;
}

Expected<DmStatus> parseDmStatus(std::string_view line, bool withPrefix) {
  Fields fields(splitWords(line));
  DmStatus status;
  if (withPrefix) {
    PK_TRY(start, fields.number("start sector", UINT64_MAX));
    PK_TRY(length, fields.number("length", UINT64_MAX));
    PK_TRY(target, fields.next("target type"));
    if (target != "multipath") {
      return fail("not a multipath status: target type is '" + target + "'");
    }
    status.start = start;
    status.length = length;
  }

  PK_TRY(featureCount, fields.number("number of feature fields", 1024));
  for (std::uint64_t i = 0; i < featureCount; ++i) {
    PK_TRY(field, fields.next("a feature field"));
    status.featureFields.push_back(field);
  }
  if (featureCount == 2) {
    auto queueIo = parseUnsigned(status.featureFields[0]);
    auto pgInit = parseUnsigned(status.featureFields[1]);
    if (!queueIo || *queueIo > 1 || !pgInit || *pgInit > UINT32_MAX) {
      return fail("invalid queue_io/pg_init_count fields '" + status.featureFields[0] + " " +
                  status.featureFields[1] + "'");
    }
    status.queueIo = *queueIo == 1;
    status.pgInitCount = static_cast<unsigned>(*pgInit);
  }

  PK_TRY(hwCount, fields.number("number of hardware handler fields", kMaxHwHandlerArgs));
  for (std::uint64_t i = 0; i < hwCount; ++i) {
    PK_TRY(field, fields.next("a hardware handler field"));
    status.hwHandlerFields.push_back(field);
  }

  PK_TRY(groupCount, fields.number("number of priority groups", kMaxGroups));
  PK_TRY(nextGroup, fields.number("next priority group", kMaxGroups));
  if (nextGroup > groupCount || (groupCount > 0 && nextGroup == 0)) {
    return fail("next priority group " + std::to_string(nextGroup) + " is out of range for " +
                std::to_string(groupCount) + " groups");
  }
  status.nextGroup = static_cast<unsigned>(nextGroup);

  for (std::uint64_t g = 0; g < groupCount; ++g) {
    DmStatusGroup group;
    PK_TRY(state, fields.next("group state"));
    if (state == "A") {
      group.state = DmGroupState::Active;
    } else if (state == "E") {
      group.state = DmGroupState::Enabled;
    } else if (state == "D") {
      group.state = DmGroupState::Disabled;
    } else {
      return fail("group " + std::to_string(g + 1) + ": state must be A, E or D, got '" + state +
                  "'");
    }
    PK_TRY(selectorCount, fields.number("number of selector fields", kMaxSelectorArgs));
    for (std::uint64_t i = 0; i < selectorCount; ++i) {
      PK_TRY(field, fields.next("a selector field"));
      group.selectorFields.push_back(field);
    }
    PK_TRY(pathCount, fields.number("number of paths", kMaxPathsPerGroup));
    if (pathCount == 0) {
      return fail("group " + std::to_string(g + 1) + " has no paths");
    }
    PK_TRY(perPath, fields.number("number of per-path fields", kMaxSelectorArgs));
    group.fieldsPerPath = static_cast<unsigned>(perPath);
    for (std::uint64_t p = 0; p < pathCount; ++p) {
      DmStatusPath path;
      PK_TRY(device, fields.next("a path device"));
      path.device = device;
      PK_TRY(active, fields.next("path state of " + device));
      if (active == "A") {
        path.active = true;
      } else if (active == "F") {
        path.active = false;
      } else {
        return fail("path " + device + ": state must be A or F, got '" + active + "'");
      }
      PK_TRY(failCount, fields.number("fail count of " + device, UINT32_MAX));
      path.failCount = static_cast<unsigned>(failCount);
      for (std::uint64_t i = 0; i < perPath; ++i) {
        // Selector fields are counters; queue-length's is an atomic_t the
        // kernel prints signed, which is never negative in practice.
        PK_TRY(field, fields.number("a selector field of " + device, UINT64_MAX));
        path.selectorFields.push_back(field);
      }
      group.paths.push_back(std::move(path));
    }
    status.groups.push_back(std::move(group));
  }
  if (!fields.done()) {
    return fail("trailing fields after the last priority group (field " +
                std::to_string(fields.position() + 1) + ")");
  }
  return status;
}

std::optional<std::uint64_t> inFlightCount(SelectorKind kind, const DmStatusPath &path) {
  if (kind == SelectorKind::QueueLength && !path.selectorFields.empty()) {
    return path.selectorFields[0];
  }
  return std::nullopt;
}

std::optional<std::uint64_t> inFlightSize(SelectorKind kind, const DmStatusPath &path) {
  if (kind == SelectorKind::ServiceTime && !path.selectorFields.empty()) {
    return path.selectorFields[0];
  }
  return std::nullopt;
}

std::optional<unsigned> relativeThroughput(SelectorKind kind, const DmStatusPath &path) {
  if (kind == SelectorKind::ServiceTime && path.selectorFields.size() >= 2 &&
      path.selectorFields[1] <= kMaxRelativeThroughput) {
    return static_cast<unsigned>(path.selectorFields[1]);
  }
  return std::nullopt;
}

} // namespace pathkeeper::selector
