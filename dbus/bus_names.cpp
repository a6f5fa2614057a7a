#include "bus_names.hpp"

#include "state_model.hpp"

#include <fmt/format.h>

namespace pathkeeper::dbus {
namespace {

bool isAsciiLetter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool isAsciiDigit(char c) {
  return c >= '0' && c <= '9';
}

int hexValue(char c) {
  if (isAsciiDigit(c)) {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  return -1; // escapePathLabel() writes lower case only, so upper case is not ours
}

} // namespace

const char *interfaceOf(ObjectKind kind) {
  switch (kind) {
  case ObjectKind::Manager:
    return kManagerInterface;
  case ObjectKind::Map:
    return kMapInterface;
  case ObjectKind::Path:
    return kPathInterface;
  case ObjectKind::Portal:
    return kPortalInterface;
  case ObjectKind::Finding:
    return kFindingInterface;
  }
  return kManagerInterface;
}

std::string escapePathLabel(std::string_view label) {
  if (label.empty()) {
    return "_";
  }
  std::string out;
  out.reserve(label.size());
  for (std::size_t i = 0; i < label.size(); ++i) {
    const char c = label[i];
    // A leading digit is legal in an object path, but systemd escapes it, and
    // matching its encoding lets busctl users predict the paths.
    if (isAsciiLetter(c) || (i > 0 && isAsciiDigit(c))) {
      out += c;
    } else {
      out += fmt::format("_{:02x}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

Expected<std::string> unescapePathLabel(std::string_view element) {
  if (element == "_") {
    return std::string{};
  }
  if (element.empty()) {
    return fail("an empty object path element is not an escaped label");
  }
  std::string out;
  for (std::size_t i = 0; i < element.size(); ++i) {
    const char c = element[i];
    if (c != '_') {
      if (!isAsciiLetter(c) && !(i > 0 && isAsciiDigit(c))) {
        return fail(fmt::format("'{}' is not an escaped label: '{}' at {}", element, c, i));
      }
      out += c;
      continue;
    }
    if (i + 2 >= element.size()) {
      return fail(
          fmt::format("'{}' is not an escaped label: '_' at {} lacks two hex digits", element, i));
    }
    const int high = hexValue(element[i + 1]);
    const int low = hexValue(element[i + 2]);
    if (high < 0 || low < 0) {
      return fail(
          fmt::format("'{}' is not an escaped label: bad hex digits after '_' at {}", element, i));
    }
    out += static_cast<char>((high << 4) | low);
    i += 2;
  }
  return out;
}

std::string objectPathOf(ObjectKind kind, std::string_view key) {
  switch (kind) {
  case ObjectKind::Manager:
    return kRootPath;
  case ObjectKind::Map:
    return fmt::format("{}/maps/{}", kRootPath, escapePathLabel(key));
  case ObjectKind::Path:
    return fmt::format("{}/paths/{}", kRootPath, escapePathLabel(key));
  case ObjectKind::Portal:
    return fmt::format("{}/portals/{}", kRootPath, escapePathLabel(key));
  case ObjectKind::Finding:
    return fmt::format("{}/findings/{}", kRootPath, escapePathLabel(key));
  }
  return kRootPath;
}

std::string portalKey(const daemon::PortalView &portal) {
  if (portal.address.find(':') != std::string::npos) {
    return fmt::format("[{}]:{}", portal.address, portal.port);
  }
  return fmt::format("{}:{}", portal.address, portal.port);
}

} // namespace pathkeeper::dbus
