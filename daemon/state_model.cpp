#include "state_model.hpp"

#include <array>
#include <charconv>
#include <concepts>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace pathkeeper::daemon {

namespace {

// The length of the valid UTF-8 sequence at @p text's start (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF); 0 when invalid.
std::size_t validSequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    return 1;
  }
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    low = lead == 0xE0 ? 0xA0 : 0x80;  // overlong
    high = lead == 0xED ? 0x9F : 0xBF; // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    low = lead == 0xF0 ? 0x90 : 0x80;  // overlong
    high = lead == 0xF4 ? 0x8F : 0xBF; // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) {
      return 0;
    }
  }
  return length;
}

// Runs at every publication over every string: valid text (all of it, in
// practice) is only scanned, never copied.
void fix(std::string &text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t length = validSequence(std::string_view(text).substr(i));
    if (length == 0) {
      break;
    }
    i += length;
  }
  if (i == text.size()) {
    return;
  }
  std::string out = text.substr(0, i);
  while (i < text.size()) {
    const std::size_t length = validSequence(std::string_view(text).substr(i));
    if (length == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD
      ++i;
    } else {
      out.append(text, i, length);
      i += length;
    }
  }
  text = std::move(out);
}

void fix(std::vector<std::string> &texts) {
  for (auto &text : texts) {
    fix(text);
  }
}

// Writes JSON straight to a stream, laid out as nlohmann::json's dump(2)
// lays it out, which the state file used before. A DOM of the whole
// snapshot cost 4.6 MiB at 1000 paths, for a file rewritten at every change.
class JsonWriter {
public:
  explicit JsonWriter(std::ostream &out) : out_(out) {}

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }

  void key(std::string_view name) {
    separate();
    string(name);
    out_ << ": ";
    afterKey_ = true;
  }

  void value(std::string_view text) {
    start();
    string(text);
  }
  template <typename T>
  requires std::same_as<T, bool>
  void value(T flag) {
    start();
    out_ << (flag ? "true" : "false");
  }
  template <std::integral T>
  requires(!std::same_as<T, bool>) void value(T number) {
    start();
    std::array<char, 24> digits{};
    const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), number).ptr;
    out_.write(digits.data(), end - digits.data());
  }
  void value(const std::vector<std::string> &texts) {
    beginArray();
    for (const auto &text : texts) {
      value(text);
    }
    endArray();
  }
  void value(const std::map<std::string, std::string> &texts) {
    beginObject();
    for (const auto &[name, text] : texts) {
      field(name, text);
    }
    endObject();
  }

  template <typename T> void field(std::string_view name, const T &content) {
    key(name);
    value(content);
  }

private:
  // A value right after its key is already placed; any other starts a new
  // line in its container.
  void start() {
    if (afterKey_) {
      afterKey_ = false;
    } else {
      separate();
    }
  }
  void separate() {
    if (!counts_.empty()) {
      out_ << (counts_.back()++ == 0 ? "\n" : ",\n");
      indent();
    }
  }
  void indent() {
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      out_ << "  ";
    }
  }
  void open(char bracket) {
    start();
    out_ << bracket;
    counts_.push_back(0);
  }
  void close(char bracket) {
    const bool any = counts_.back() > 0;
    counts_.pop_back();
    if (any) {
      out_ << '\n';
      indent();
    }
    out_ << bracket;
  }
  // Escapes what JSON must (RFC 8259) and passes other UTF-8 through; a byte
  // that is not valid UTF-8 becomes U+FFFD, as replaceInvalidUtf8() makes it.
  void string(std::string_view text) {
    out_ << '"';
    std::size_t plain = 0; // start of the run not yet written
    std::size_t i = 0;
    const auto flush = [&] { out_.write(text.data() + plain, std::streamsize(i - plain)); };
    while (i < text.size()) {
      const std::size_t length = validSequence(text.substr(i));
      if (length > 1) {
        i += length;
        continue;
      }
      const char c = text[i];
      const char *escape = nullptr;
      std::array<char, 7> control{};
      switch (c) {
      case '"':
        escape = "\\\"";
        break;
      case '\\':
        escape = "\\\\";
        break;
      case '\b':
        escape = "\\b";
        break;
      case '\f':
        escape = "\\f";
        break;
      case '\n':
        escape = "\\n";
        break;
      case '\r':
        escape = "\\r";
        break;
      case '\t':
        escape = "\\t";
        break;
      default:
        if (length == 0) {
          escape = "\xEF\xBF\xBD";
        } else if (const auto byte = static_cast<unsigned char>(c); byte < 0x20) {
          static constexpr std::string_view hex = "0123456789abcdef";
          control = {'\\', 'u', '0', '0', hex[byte >> 4U], hex[byte & 0xFU], '\0'};
          escape = control.data();
        }
      }
      if (escape == nullptr) {
        ++i;
        continue;
      }
      flush();
      out_ << escape;
      plain = ++i;
    }
    flush();
    out_ << '"';
  }

  std::ostream &out_;
  std::vector<std::size_t> counts_; // elements so far, per open container
  bool afterKey_ = false;
};

} // namespace

void replaceInvalidUtf8(StateSnapshot &snapshot) {
  for (auto *text : {&snapshot.version, &snapshot.mode, &snapshot.status}) {
    fix(*text);
  }
  for (auto &map : snapshot.maps) {
    for (auto *text :
         {&map.alias, &map.wwid, &map.dmUuid, &map.selector, &map.state, &map.adaptive}) {
      fix(*text);
    }
    for (auto &group : map.groups) {
      fix(group.paths);
    }
    for (auto &decision : map.adaptiveDecisions) {
      fix(decision.action);
      fix(decision.reason);
    }
  }
  for (auto &path : snapshot.paths) {
    for (auto *text : {&path.device, &path.devt, &path.map, &path.state, &path.dmState,
                       &path.checker, &path.alua, &path.wwid, &path.target, &path.portal,
                       &path.netdev, &path.controller, &path.note}) {
      fix(*text);
    }
  }
  for (auto &portal : snapshot.portals) {
    fix(portal.address);
    std::map<std::string, std::string> reachability;
    for (const auto &[nic, text] : portal.reachability) {
      std::string key = nic;
      std::string value = text;
      fix(key);
      fix(value);
      reachability.emplace(std::move(key), std::move(value));
    }
    portal.reachability = std::move(reachability);
  }
  for (auto &finding : snapshot.findings) {
    for (auto *text :
         {&finding.key, &finding.id, &finding.severity, &finding.summary, &finding.explanation}) {
      fix(*text);
    }
    fix(finding.nics);
    fix(finding.portals);
    fix(finding.paths);
    fix(finding.fix);
  }
}

void writeSnapshotJson(const StateSnapshot &snapshot, std::optional<bool> ready,
                       std::ostream &out) {
  JsonWriter json(out);
  json.beginObject();
  json.field("schema", 1);
  if (ready) {
    json.field("ready", *ready);
  }
  json.field("version", snapshot.version);
  json.field("mode", snapshot.mode);
  json.field("status", snapshot.status);
  json.key("maps");
  json.beginArray();
  for (const auto &map : snapshot.maps) {
    json.beginObject();
    json.field("alias", map.alias);
    json.field("wwid", map.wwid);
    json.field("dm_uuid", map.dmUuid);
    json.field("selector", map.selector);
    json.field("state", map.state);
    json.field("active_group", map.activeGroup);
    json.field("usable_paths", map.usablePaths);
    json.field("total_paths", map.totalPaths);
    json.field("queueing", map.queueing);
    json.field("no_path_retry", map.noPathRetry);
    json.key("groups");
    json.beginArray();
    for (const auto &group : map.groups) {
      json.beginObject();
      json.field("number", group.number);
      json.field("priority", group.priority);
      json.field("paths", group.paths);
      json.endObject();
    }
    json.endArray();
    json.field("adaptive", map.adaptive);
    json.field("adaptive_reloads", map.adaptiveReloads);
    json.key("adaptive_decisions");
    json.beginArray();
    for (const auto &decision : map.adaptiveDecisions) {
      json.beginObject();
      json.field("at", decision.at);
      json.field("action", decision.action);
      json.field("reason", decision.reason);
      json.endObject();
    }
    json.endArray();
    json.endObject();
  }
  json.endArray();
  json.key("paths");
  json.beginArray();
  for (const auto &path : snapshot.paths) {
    json.beginObject();
    json.field("device", path.device);
    json.field("devt", path.devt);
    json.field("map", path.map);
    json.field("state", path.state);
    json.field("dm_state", path.dmState);
    json.field("checker", path.checker);
    json.field("failures", path.failures);
    json.field("shaky", path.shaky);
    json.field("latency_us", path.latencyUs);
    json.field("alua", path.alua);
    json.field("wwid", path.wwid);
    json.field("target", path.target);
    json.field("portal", path.portal);
    json.field("netdev", path.netdev);
    json.field("controller", path.controller);
    json.field("session_id", path.sessionId);
    json.field("note", path.note);
    json.field("throughput_bps", path.throughputBps);
    json.field("capacity_bps", path.capacityBps);
    json.field("io_latency_us", path.ioLatencyUs);
    json.field("confidence", path.confidence);
    json.field("weight", path.weight);
    json.endObject();
  }
  json.endArray();
  json.key("portals");
  json.beginArray();
  for (const auto &portal : snapshot.portals) {
    json.beginObject();
    json.field("address", portal.address);
    json.field("port", portal.port);
    json.field("reachability", portal.reachability);
    json.endObject();
  }
  json.endArray();
  json.key("findings");
  json.beginArray();
  for (const auto &finding : snapshot.findings) {
    json.beginObject();
    json.field("key", finding.key);
    json.field("id", finding.id);
    json.field("severity", finding.severity);
    json.field("summary", finding.summary);
    json.field("explanation", finding.explanation);
    json.field("nics", finding.nics);
    json.field("portals", finding.portals);
    json.field("paths", finding.paths);
    json.field("fix", finding.fix);
    json.endObject();
  }
  json.endArray();
  json.endObject();
  out << '\n';
}

std::string snapshotToJson(const StateSnapshot &snapshot, std::optional<bool> ready) {
  std::ostringstream out;
  writeSnapshotJson(snapshot, ready, out);
  return std::move(out).str();
}

bool holdLatencyJitter(StateSnapshot &next, const StateSnapshot &published, bool holdEveryMove) {
  bool moved = false;
  // Both are sorted by device: one merge walk.
  auto old = published.paths.begin();
  for (auto &path : next.paths) {
    while (old != published.paths.end() && old->device < path.device) {
      ++old;
    }
    if (old == published.paths.end()) {
      break;
    }
    if (old->device != path.device || old->latencyUs < 0 || path.latencyUs < 0) {
      continue;
    }
    const std::int64_t was = old->latencyUs;
    const std::int64_t now = path.latencyUs;
    const bool small = std::abs(now - was) < 1000 || (3 * now >= 2 * was && 2 * now <= 3 * was);
    if (holdEveryMove || small) {
      path.latencyUs = was;
    } else {
      moved = true;
    }
  }
  return moved;
}

} // namespace pathkeeper::daemon
