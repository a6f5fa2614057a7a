#include "inventory_file.hpp"

#include "text.hpp"

// Debian 12 ships toml++ 3.3 with only toml.h as the entry point.
#include <toml++/toml.h>

#include <set>

namespace pathkeeper::daemon {

namespace {

using selector::Path;

std::string where(std::string_view origin, const toml::source_region &source) {
  return std::string(origin) + ":" + std::to_string(source.begin.line) + ":" +
         std::to_string(source.begin.column);
}

class PathReader {
public:
  PathReader(const toml::table &table, std::string_view origin, std::size_t index)
      : table_(table), origin_(origin), index_(index) {}

  Expected<Path> read() {
    const std::set<std::string_view> known{
        "device", "devt",      "wwid",     "vendor",     "product", "serial", "size",
        "target", "portal",    "iface",    "netdev",     "session", "state",  "tpg",
        "alua",   "preferred", "priority", "controller", "marginal"};
    for (const auto &[key, node] : table_) {
      if (!known.contains(key.str())) {
        return error(node.source(), std::string(key.str()), "unknown key");
      }
    }
    Path path;
    PK_TRY(device, string("device", true));
    path.device = device;
    PK_TRY(devt, string("devt", true));
    auto parsedDevt = selector::parseDevT(devt);
    if (!parsedDevt) {
      return error(source("devt"), "devt", "expected \"major:minor\", got \"" + devt + "\"");
    }
    path.devt = *parsedDevt;
    PK_TRY(wwid, string("wwid", false));
    path.wwid = wwid;
    PK_TRY(vendor, string("vendor", false));
    path.vendor = vendor;
    PK_TRY(product, string("product", false));
    path.product = product;
    PK_TRY(serial, string("serial", false));
    path.serial = serial;
    PK_TRY(size, integer("size", 0, INT64_MAX));
    path.sizeSectors = static_cast<std::uint64_t>(size.value_or(0));
    PK_TRY(target, string("target", false));
    path.targetIqn = target;
    PK_TRY(portal, string("portal", false));
    if (!portal.empty()) {
      auto parsed = parsePortal(portal);
      if (!parsed) {
        return error(source("portal"), "portal", parsed.error());
      }
      path.portal = *parsed;
    }
    PK_TRY(iface, string("iface", false));
    path.iface = iface;
    PK_TRY(netdev, string("netdev", false));
    path.netdev = netdev;
    PK_TRY(session, integer("session", 0, INT32_MAX));
    path.sessionId = static_cast<int>(session.value_or(-1));
    PK_TRY(state, string("state", false));
    if (!state.empty()) {
      auto parsed = selector::parsePathState(state);
      if (!parsed) {
        return error(source("state"), "state", "unknown path state \"" + state + "\"");
      }
      path.state = *parsed;
    } else {
      path.state = selector::PathState::Up;
    }
    PK_TRY(tpg, integer("tpg", 0, 65535));
    if (tpg) {
      path.targetPortGroup = static_cast<std::uint16_t>(*tpg);
    }
    PK_TRY(alua, string("alua", false));
    if (!alua.empty()) {
      auto parsed = selector::parseAluaState(alua);
      if (!parsed) {
        return error(source("alua"), "alua", "unknown ALUA state \"" + alua + "\"");
      }
      path.alua = *parsed;
    }
    PK_TRY(preferred, boolean("preferred"));
    path.aluaPreferred = preferred;
    PK_TRY(priority, integer("priority", 0, INT32_MAX));
    path.priority = static_cast<int>(priority.value_or(0));
    PK_TRY(controller, string("controller", false));
    path.controller = controller;
    PK_TRY(marginal, boolean("marginal"));
    path.marginal = marginal;
    return path;
  }

private:
  toml::source_region source(std::string_view key) const {
    const auto *node = table_.get(key);
    return node ? node->source() : table_.source();
  }

  unexpected<std::string> error(const toml::source_region &at, const std::string &key,
                                const std::string &message) const {
    return fail(where(origin_, at) + ": path[" + std::to_string(index_) + "]." + key + ": " +
                message);
  }

  Expected<std::string> string(std::string_view key, bool required) const {
    const auto *node = table_.get(key);
    if (!node) {
      if (required) {
        return error(table_.source(), std::string(key), "missing");
      }
      return std::string{};
    }
    if (!node->is_string()) {
      return error(node->source(), std::string(key), "expected a string");
    }
    return std::string(**node->as_string());
  }

  Expected<std::optional<std::int64_t>> integer(std::string_view key, std::int64_t min,
                                                std::int64_t max) const {
    const auto *node = table_.get(key);
    if (!node) {
      return std::optional<std::int64_t>{};
    }
    if (!node->is_integer()) {
      return error(node->source(), std::string(key), "expected an integer");
    }
    const std::int64_t value = **node->as_integer();
    if (value < min || value > max) {
      return error(node->source(), std::string(key),
                   "out of range " + std::to_string(min) + ".." + std::to_string(max));
    }
    return std::optional<std::int64_t>{value};
  }

  Expected<bool> boolean(std::string_view key) const {
    const auto *node = table_.get(key);
    if (!node) {
      return false;
    }
    if (!node->is_boolean()) {
      return error(node->source(), std::string(key), "expected true or false");
    }
    return **node->as_boolean();
  }

  const toml::table &table_;
  std::string_view origin_;
  std::size_t index_;
};

} // namespace

Expected<selector::Portal> parsePortal(std::string_view text) {
  selector::Portal portal;
  std::string_view rest = text;
  if (auto comma = rest.rfind(','); comma != std::string_view::npos) {
    auto tpgt = selector::parseUnsigned(rest.substr(comma + 1));
    if (!tpgt || *tpgt > 65535) {
      return fail("bad portal group tag in \"" + std::string(text) + "\"");
    }
    portal.tpgt = static_cast<std::uint32_t>(*tpgt);
    rest = rest.substr(0, comma);
  }
  std::string_view host = rest;
  std::optional<std::string_view> port;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) {
      return fail("unterminated '[' in portal \"" + std::string(text) + "\"");
    }
    host = rest.substr(1, close - 1);
    auto after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return fail("junk after ']' in portal \"" + std::string(text) + "\"");
      }
      port = after.substr(1);
    }
  } else if (auto colon = rest.find(':'); colon != std::string_view::npos) {
    if (rest.find(':', colon + 1) != std::string_view::npos) {
      return fail("an IPv6 portal needs brackets: \"" + std::string(text) + "\"");
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) {
    return fail("portal \"" + std::string(text) + "\" has no address");
  }
  portal.address = std::string(host);
  if (port) {
    auto value = selector::parseUnsigned(*port);
    if (!value || *value == 0 || *value > 65535) {
      return fail("bad port in portal \"" + std::string(text) + "\"");
    }
    portal.port = static_cast<std::uint16_t>(*value);
  }
  return portal;
}

Expected<std::vector<selector::Path>> parseInventory(std::string_view text,
                                                     std::string_view origin) {
  auto parsed = toml::parse(text, origin);
  if (!parsed) {
    const auto &err = parsed.error();
    return fail(where(origin, err.source()) + ": " + std::string(err.description()));
  }
  const toml::table &root = parsed.table();
  for (const auto &[key, node] : root) {
    if (key.str() != "path") {
      return fail(where(origin, node.source()) + ": " + std::string(key.str()) +
                  ": unknown key (an inventory holds only [[path]] tables)");
    }
  }
  std::vector<selector::Path> paths;
  const auto *array = root.get("path");
  if (!array) {
    return paths;
  }
  if (!array->is_array_of_tables()) {
    return fail(where(origin, array->source()) + ": path: expected [[path]] tables");
  }
  std::set<std::string> devices;
  std::size_t index = 0;
  for (const auto &node : *array->as_array()) {
    ++index;
    PathReader reader(*node.as_table(), origin, index);
    PK_TRY(path, reader.read());
    if (!devices.insert(path.device).second) {
      return fail(where(origin, node.source()) + ": path[" + std::to_string(index) +
                  "].device: \"" + path.device + "\" appears twice");
    }
    paths.push_back(std::move(path));
  }
  return paths;
}

} // namespace pathkeeper::daemon
