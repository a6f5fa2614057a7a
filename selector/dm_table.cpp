#include "dm_table.hpp"

#include "features.hpp"
#include "text.hpp"

#include <span>

namespace pathkeeper::selector {

namespace {

/// A cursor over the table's words that reports what it expected on failure.
class Words {
public:
  explicit Words(std::vector<std::string> words) : words_(std::move(words)) {}

  [[nodiscard]] bool done() const { return pos_ >= words_.size(); }
  [[nodiscard]] std::size_t position() const { return pos_; }

  Expected<std::string> next(std::string_view what) {
    if (done()) {
      return fail("table ends early: expected " + std::string(what));
    }
    return words_[pos_++];
  }

  Expected<std::uint64_t> number(std::string_view what, std::uint64_t min, std::uint64_t max) {
    auto word = next(what);
    if (!word) {
      return fail(word.error());
    }
    auto value = parseUnsigned(*word);
    if (!value) {
      return fail("expected " + std::string(what) + ", got '" + *word + "' (word " +
                  std::to_string(pos_) + ")");
    }
    if (*value < min || *value > max) {
      return fail("invalid " + std::string(what) + " " + *word + " (the kernel accepts " +
                  std::to_string(min) + "-" + std::to_string(max) + ")");
    }
    return *value;
  }

private:
  std::vector<std::string> words_;
  std::size_t pos_ = 0;
};

Expected<void> checkKnownSelectorArgs(const DmTableGroup &group, std::size_t index) {
  auto kind = parseSelectorKind(group.selector);
  if (!kind) {
    return {};
  }
  const std::string where = "group " + std::to_string(index + 1) + ": ";
  const unsigned expected = tableArgsPerPath(*kind);
  // The kernel accepts fewer per-path args than the selector takes (it uses
  // defaults), but never more.
  if (group.argsPerPath > expected) {
    return fail(where + group.selector + " takes at most " + std::to_string(expected) +
                " per-path args, table has " + std::to_string(group.argsPerPath));
  }
  for (const auto &path : group.paths) {
    for (std::size_t i = 0; i < path.args.size(); ++i) {
      auto value = parseUnsigned(path.args[i]);
      if (!value || *value > 0xffffffffULL) {
        return fail(where + "path " + path.device + ": invalid selector arg '" + path.args[i] +
                    "'");
      }
      if (*kind == SelectorKind::ServiceTime && i == 1 && *value > kMaxRelativeThroughput) {
        return fail(where + "path " + path.device + ": relative_throughput " + path.args[i] +
                    " is above 100");
      }
    }
  }
  return {};
}

void appendWords(std::string &out, const std::vector<std::string> &words) {
  for (const auto &word : words) {
    out += ' ';
    out += word;
  }
}

} // namespace

std::vector<std::string> perPathArgs(SelectorKind kind, const Path &path) {
  switch (kind) {
  case SelectorKind::RoundRobin:
  case SelectorKind::QueueLength:
  case SelectorKind::HistoricalServiceTime:
    return {"1"};
  case SelectorKind::ServiceTime:
    return {"1", std::to_string(path.relativeThroughput)};
  }
  return {};
}

Expected<std::string> renderDmTable(const MapSpec &spec) {
  if (spec.groups.size() > kMaxGroups) {
    return fail("invalid number of priority groups " + std::to_string(spec.groups.size()) +
                " (the kernel accepts 0-1024)");
  }
  if (spec.groups.empty() != (spec.initialGroup == 0) || spec.initialGroup > spec.groups.size()) {
    return fail("invalid initial priority group " + std::to_string(spec.initialGroup) + " for " +
                std::to_string(spec.groups.size()) +
                " groups (it must be 0 exactly when there are no groups)");
  }
  if (spec.sizeSectors == 0) {
    return fail("map " + spec.alias + " has size 0");
  }
  if (spec.hwHandler.empty() && !spec.hwHandlerArgs.empty()) {
    return fail("hardware handler args given without a hardware handler");
  }
  auto features = renderFeatureArgs(spec.features);
  if (features.size() > kMaxFeatureArgs) {
    return fail("invalid number of feature args " + std::to_string(features.size()) +
                " (the kernel accepts 0-8)");
  }

  std::string out = "0 " + std::to_string(spec.sizeSectors) + " multipath ";
  out += std::to_string(features.size());
  appendWords(out, features);
  if (spec.hwHandler.empty()) {
    out += " 0";
  } else {
    out += ' ' + std::to_string(1 + spec.hwHandlerArgs.size()) + ' ' + spec.hwHandler;
    appendWords(out, spec.hwHandlerArgs);
  }
  out += ' ' + std::to_string(spec.groups.size()) + ' ' + std::to_string(spec.initialGroup);

  const unsigned argsPerPath = tableArgsPerPath(spec.selector);
  for (std::size_t g = 0; g < spec.groups.size(); ++g) {
    const auto &group = spec.groups[g];
    if (group.paths.empty() || group.paths.size() > kMaxPathsPerGroup) {
      return fail("group " + std::to_string(g + 1) + " has " + std::to_string(group.paths.size()) +
                  " paths (the kernel accepts 1-1024)");
    }
    out += ' ';
    out += toString(spec.selector);
    out += " 0 " + std::to_string(group.paths.size()) + ' ' + std::to_string(argsPerPath);
    for (const auto &path : group.paths) {
      if (path.devt.major == 0 && path.devt.minor == 0) {
        return fail("path " + path.device + " has no device number");
      }
      if (spec.selector == SelectorKind::ServiceTime &&
          path.relativeThroughput > kMaxRelativeThroughput) {
        return fail("path " + path.device + ": relative_throughput " +
                    std::to_string(path.relativeThroughput) + " is above 100");
      }
      out += ' ' + path.devt.str();
      appendWords(out, perPathArgs(spec.selector, path));
    }
  }
  return out;
}

std::string renderDmTable(const DmTable &table) {
  std::string out = std::to_string(table.start) + ' ' + std::to_string(table.length) +
                    " multipath " + std::to_string(table.featureArgs.size());
  appendWords(out, table.featureArgs);
  if (table.hwHandler.empty()) {
    out += " 0";
  } else {
    out += ' ' + std::to_string(1 + table.hwHandlerArgs.size()) + ' ' + table.hwHandler;
    appendWords(out, table.hwHandlerArgs);
  }
  out += ' ' + std::to_string(table.groups.size()) + ' ' + std::to_string(table.initialGroup);
  for (const auto &group : table.groups) {
    out += ' ' + group.selector + ' ' + std::to_string(group.selectorArgs.size());
    appendWords(out, group.selectorArgs);
    out += ' ' + std::to_string(group.paths.size()) + ' ' + std::to_string(group.argsPerPath);
    for (const auto &path : group.paths) {
      out += ' ' + path.device;
      appendWords(out, path.args);
    }
  }
  return out;
}

Expected<DmTable> parseDmTable(std::string_view line, bool withPrefix) {
  Words words(splitWords(line));
  DmTable table;
  if (withPrefix) {
    PK_TRY(start, words.number("start sector", 0, UINT64_MAX));
    PK_TRY(length, words.number("length", 1, UINT64_MAX));
    PK_TRY(target, words.next("target type"));
    if (target != "multipath") {
      return fail("not a multipath table: target type is '" + target + "'");
    }
    table.start = start;
    table.length = length;
  }

  PK_TRY(featureCount, words.number("number of feature args", 0, kMaxFeatureArgs));
  for (std::uint64_t i = 0; i < featureCount; ++i) {
    PK_TRY(arg, words.next("a feature arg"));
    table.featureArgs.push_back(arg);
  }
  PK_TRY(features, parseFeatureArgs(table.featureArgs));
  table.features = features;

  PK_TRY(hwCount, words.number("number of hardware handler args", 0, kMaxHwHandlerArgs));
  if (hwCount > 0) {
    PK_TRY(handler, words.next("hardware handler name"));
    table.hwHandler = handler;
    for (std::uint64_t i = 1; i < hwCount; ++i) {
      PK_TRY(arg, words.next("a hardware handler arg"));
      table.hwHandlerArgs.push_back(arg);
    }
  }

  PK_TRY(groupCount, words.number("number of priority groups", 0, kMaxGroups));
  PK_TRY(initial, words.number("initial priority group", 0, kMaxGroups));
  if ((groupCount == 0) != (initial == 0) || initial > groupCount) {
    return fail("invalid initial priority group " + std::to_string(initial) + " for " +
                std::to_string(groupCount) +
                " groups (it must be 0 exactly when there are no groups)");
  }
  table.initialGroup = static_cast<unsigned>(initial);

  for (std::uint64_t g = 0; g < groupCount; ++g) {
    DmTableGroup group;
    PK_TRY(selector, words.next("path selector name"));
    group.selector = selector;
    PK_TRY(selectorArgCount, words.number("number of selector args", 0, kMaxSelectorArgs));
    for (std::uint64_t i = 0; i < selectorArgCount; ++i) {
      PK_TRY(arg, words.next("a selector arg"));
      group.selectorArgs.push_back(arg);
    }
    PK_TRY(pathCount, words.number("number of paths", 1, kMaxPathsPerGroup));
    PK_TRY(argsPerPath, words.number("number of per-path args", 0, kMaxSelectorArgs));
    group.argsPerPath = static_cast<unsigned>(argsPerPath);
    for (std::uint64_t p = 0; p < pathCount; ++p) {
      DmTablePath path;
      PK_TRY(device, words.next("a path device"));
      path.device = device;
      for (std::uint64_t i = 0; i < argsPerPath; ++i) {
        PK_TRY(arg, words.next("a per-path arg of " + device));
        path.args.push_back(arg);
      }
      group.paths.push_back(std::move(path));
    }
    auto checked = checkKnownSelectorArgs(group, static_cast<std::size_t>(g));
    if (!checked) {
      return fail(checked.error());
    }
    table.groups.push_back(std::move(group));
  }
  if (!words.done()) {
    return fail("trailing words after the last priority group (word " +
                std::to_string(words.position() + 1) + ")");
  }
  return table;
}

} // namespace pathkeeper::selector
