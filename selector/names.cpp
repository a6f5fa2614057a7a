#include "names.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace pathkeeper::selector {

namespace {

constexpr std::uint64_t kLetters = 26;
// multipathd's ids start at 1 and are ints; our indices are one less.
constexpr std::uint64_t kMaxFriendlyId = std::uint64_t{kMaxFriendlyIndex} + 1;

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

// multipath-tools sorts aliases by length first, so that for one prefix
// "mpathz" comes before "mpathaa"; equal lengths compare bytewise.
bool aliasLess(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return a.size() < b.size();
  }
  return a < b;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    pos = line.find_first_not_of(" \t", pos);
    if (pos == std::string_view::npos) {
      return out;
    }
    const std::size_t end = std::min(line.find_first_of(" \t", pos), line.size());
    out.push_back(line.substr(pos, end - pos));
    pos = end;
  }
}

// A field of the bindings file survives a render/parse round trip only if
// it has no whitespace, no comment sign and nothing unprintable.
bool isPlainField(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](char c) { return c > ' ' && c < '\x7f' && c != '#'; });
}

} // namespace

std::string friendlyName(std::uint32_t index, std::string_view prefix) {
  std::string letters;
  for (std::uint64_t id = std::uint64_t{index} + 1; id > 0; id /= kLetters) {
    --id;
    letters.push_back(static_cast<char>('a' + id % kLetters));
  }
  std::reverse(letters.begin(), letters.end());
  return std::string(prefix) + letters;
}

Expected<std::uint32_t> parseFriendlyName(std::string_view alias, std::string_view prefix) {
  if (!alias.starts_with(prefix)) {
    return fail("alias " + quoted(alias) + " does not start with " + quoted(prefix));
  }
  const std::string_view letters = alias.substr(prefix.size());
  if (letters.empty()) {
    return fail("alias " + quoted(alias) + " has no letters after " + quoted(prefix));
  }
  std::uint64_t id = 0;
  for (const char c : letters) {
    if (c < 'a' || c > 'z') {
      return fail("alias " + quoted(alias) + " has " + quoted(std::string_view(&c, 1)) + " after " +
                  quoted(prefix) + ", where only a-z may follow");
    }
    id = id * kLetters + static_cast<std::uint64_t>(c - 'a') + 1;
    if (id > kMaxFriendlyId) {
      return fail("alias " + quoted(alias) + " is beyond the last name multipathd can number");
    }
  }
  return static_cast<std::uint32_t>(id - 1);
}

Expected<void> validateMapName(std::string_view name) {
  if (name.empty()) {
    return fail("map name is empty");
  }
  if (name.size() > kMaxMapNameLength) {
    return fail("map name " + quoted(name) + " is " + std::to_string(name.size()) +
                " bytes, over device-mapper's limit of " + std::to_string(kMaxMapNameLength));
  }
  // The kernel refuses '/' in names, and udev turns names into
  // /dev/mapper/<name>, where "." and ".." would not be devices.
  if (name.find('/') != std::string_view::npos) {
    return fail("map name " + quoted(name) + " contains '/'");
  }
  if (name == "." || name == "..") {
    return fail("map name " + quoted(name) + " is not allowed");
  }
  return {};
}

Expected<Bindings> Bindings::parse(std::string_view text, std::string_view fileName) {
  struct Seen {
    std::string other; // the WWID of an alias, or the alias of a WWID
    unsigned line = 0;
  };
  Bindings result;
  std::map<std::string, Seen, std::less<>> aliases;
  std::map<std::string, Seen, std::less<>> wwids;
  unsigned lineNo = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, newline - start);
    start = newline + 1;
    ++lineNo;
    const std::string where = std::string(fileName) + ":" + std::to_string(lineNo) + ": ";

    line = line.substr(0, line.find_first_of("#\r"));
    const auto parts = fields(line);
    if (parts.empty()) {
      continue;
    }
    const std::string_view alias = parts[0];
    if (parts.size() < 2) {
      return fail(where + "alias " + quoted(alias) + " has no WWID");
    }
    if (parts.size() > 2) {
      return fail(where + "unexpected field " + quoted(parts[2]) + " after the WWID");
    }
    const std::string_view wwid = parts[1];
    if (auto valid = validateMapName(alias); !valid) {
      return fail(where + valid.error());
    }
    if (wwid.size() > kMaxMapNameLength) {
      return fail(where + "WWID is " + std::to_string(wwid.size()) +
                  " characters, over multipathd's limit of 127");
    }

    if (const auto it = aliases.find(alias); it != aliases.end()) {
      if (it->second.other != wwid) {
        return fail(where + "alias " + quoted(alias) + " is bound to WWID " + std::string(wwid) +
                    " but already to " + it->second.other + " on line " +
                    std::to_string(it->second.line));
      }
      result.warnings_.push_back(where + "repeats the binding of " + quoted(alias) + " from line " +
                                 std::to_string(it->second.line));
      continue;
    }
    if (const auto it = wwids.find(wwid); it != wwids.end()) {
      result.warnings_.push_back(where + "WWID " + std::string(wwid) + " is also bound to " +
                                 quoted(it->second.other) + " on line " +
                                 std::to_string(it->second.line));
    } else {
      wwids.emplace(std::string(wwid), Seen{std::string(alias), lineNo});
    }
    aliases.emplace(std::string(alias), Seen{std::string(wwid), lineNo});
    result.insert(Binding{std::string(alias), std::string(wwid)});
  }
  return result;
}

std::optional<std::string> Bindings::aliasFor(std::string_view wwid) const {
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Binding &b) { return b.wwid == wwid; });
  return it == entries_.end() ? std::nullopt : std::optional(it->alias);
}

std::optional<std::string> Bindings::wwidFor(std::string_view alias) const {
  const auto it = std::find_if(entries_.begin(), entries_.end(),
                               [&](const Binding &b) { return b.alias == alias; });
  return it == entries_.end() ? std::nullopt : std::optional(it->wwid);
}

Expected<std::string> Bindings::allocate(std::string_view wwid, std::string_view prefix,
                                         std::span<const std::string> namesInUse) {
  if (!isPlainField(wwid) || wwid.size() > kMaxMapNameLength) {
    return fail("WWID " + quoted(wwid) +
                " cannot be bound: it must be 1..127 printable characters without spaces or '#'");
  }
  const auto inUse = [&](std::string_view name) {
    return std::find(namesInUse.begin(), namesInUse.end(), name) != namesInUse.end();
  };
  if (auto existing = aliasFor(wwid)) {
    if (inUse(*existing)) {
      return fail("alias " + quoted(*existing) + " of WWID " + std::string(wwid) +
                  " is the name of another map");
    }
    return *existing;
  }

  std::vector<std::uint32_t> taken;
  for (const auto &binding : entries_) {
    if (auto index = parseFriendlyName(binding.alias, prefix)) {
      taken.push_back(*index);
    }
  }
  for (const auto &name : namesInUse) {
    if (auto index = parseFriendlyName(name, prefix)) {
      taken.push_back(*index);
    }
  }
  std::sort(taken.begin(), taken.end());
  taken.erase(std::unique(taken.begin(), taken.end()), taken.end());
  std::uint64_t index = 0;
  for (const std::uint32_t used : taken) {
    if (used != index) {
      break;
    }
    ++index;
  }
  if (index > kMaxFriendlyIndex) {
    return fail("no free user friendly name with prefix " + quoted(prefix));
  }

  std::string alias = friendlyName(static_cast<std::uint32_t>(index), prefix);
  if (auto valid = validateMapName(alias); !valid) {
    return fail(valid.error());
  }
  if (!isPlainField(alias)) {
    return fail("prefix " + quoted(prefix) + " would give alias " + quoted(alias) +
                ", which the bindings file cannot hold");
  }
  insert(Binding{alias, std::string(wwid)});
  return alias;
}

std::string Bindings::render() const {
  std::string out(kBindingsHeader);
  for (const auto &binding : entries_) {
    out += binding.alias;
    out += ' ';
    out += binding.wwid;
    out += '\n';
  }
  return out;
}

void Bindings::insert(Binding binding) {
  const auto at = std::upper_bound(
      entries_.begin(), entries_.end(), binding,
      [](const Binding &a, const Binding &b) { return aliasLess(a.alias, b.alias); });
  entries_.insert(at, std::move(binding));
}

} // namespace pathkeeper::selector
