#include "iscsi_names.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace pathkeeper::selector {

namespace {

constexpr std::uint16_t kDefaultIscsiPort = 3260;
constexpr std::string_view kTargetAddressKey = "TargetAddress=";
constexpr std::string_view kInitiatorNameKey = "InitiatorName=";

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

bool isLower(char c) {
  return c >= 'a' && c <= 'z';
}

bool isUpper(char c) {
  return c >= 'A' && c <= 'Z';
}

bool isAlnum(char c) {
  return isDigit(c) || isLower(c) || isUpper(c);
}

std::optional<unsigned> hexValue(char c) {
  if (isDigit(c)) {
    return static_cast<unsigned>(c - '0');
  }
  if (c >= 'a' && c <= 'f') {
    return static_cast<unsigned>(c - 'a' + 10);
  }
  if (c >= 'A' && c <= 'F') {
    return static_cast<unsigned>(c - 'A' + 10);
  }
  return std::nullopt;
}

bool allHex(std::string_view text) {
  for (const char c : text) {
    if (!hexValue(c)) {
      return false;
    }
  }
  return true;
}

// A decimal number of at most maxDigits digits with no sign, no space and no
// leading zero (a leading zero would make "010" ambiguous for some parsers).
std::optional<std::uint32_t> parseDecimal(std::string_view text, std::size_t maxDigits) {
  if (text.empty() || text.size() > maxDigits || (text.size() > 1 && text.front() == '0')) {
    return std::nullopt;
  }
  std::uint32_t value = 0;
  for (const char c : text) {
    if (!isDigit(c)) {
      return std::nullopt;
    }
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  return value;
}

// The characters RFC 3720 3.2.6.2 allows in an iSCSI name, plus upper case.
bool isNameChar(char c) {
  return isAlnum(c) || c == '-' || c == '.' || c == ':';
}

Expected<void> checkIqn(std::string_view name) {
  // iqn.yyyy-mm.reversed.domain[:anything]
  const std::string_view rest = name.substr(4);
  if (rest.size() < 8 || rest[4] != '-' || rest[7] != '.') {
    return fail("IQN " + printableQuoted(name) + " lacks the yyyy-mm. date after \"iqn.\"");
  }
  const auto year = parseDecimal(rest.substr(0, 4), 4);
  const auto month = rest.substr(5, 2);
  const bool monthOk =
      isDigit(month[0]) && isDigit(month[1]) &&
      ((month[0] == '0' && month[1] != '0') || (month[0] == '1' && month[1] <= '2'));
  if (!year || *year < 1000 || !monthOk) {
    return fail("IQN " + printableQuoted(name) + " has an invalid date \"" +
                std::string(rest.substr(0, 7)) + "\"");
  }
  const std::string_view afterDate = rest.substr(8);
  const std::string_view authority = afterDate.substr(0, afterDate.find(':'));
  if (authority.empty()) {
    return fail("IQN " + printableQuoted(name) + " has no naming authority after the date");
  }
  // The naming authority is a reversed DNS name: non-empty labels of
  // letters, digits and hyphens.
  std::size_t start = 0;
  while (start <= authority.size()) {
    const std::size_t dot = std::min(authority.find('.', start), authority.size());
    const std::string_view label = authority.substr(start, dot - start);
    if (label.empty()) {
      return fail("IQN " + printableQuoted(name) + " has an empty label in its naming authority");
    }
    for (const char c : label) {
      if (!isAlnum(c) && c != '-') {
        return fail("IQN " + printableQuoted(name) +
                    " has a naming authority that is not a "
                    "reversed domain name");
      }
    }
    start = dot + 1;
  }
  return {};
}

std::string hex16(std::uint16_t value) {
  constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out;
  bool started = false;
  for (int shift = 12; shift >= 0; shift -= 4) {
    const auto nibble = static_cast<unsigned>(value >> shift) & 0xfU;
    if (nibble != 0 || started || shift == 0) {
      out += kDigits[nibble];
      started = true;
    }
  }
  return out;
}

std::optional<std::array<std::uint8_t, 4>> parseIpv4(std::string_view text) {
  std::array<std::uint8_t, 4> bytes{};
  std::size_t start = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::size_t dot = i + 1 < bytes.size() ? text.find('.', start) : text.size();
    if (dot == std::string_view::npos) {
      return std::nullopt;
    }
    const auto part = parseDecimal(text.substr(start, dot - start), 3);
    if (!part || *part > 255) {
      return std::nullopt;
    }
    bytes[i] = static_cast<std::uint8_t>(*part);
    start = dot + 1;
  }
  return bytes;
}

std::string formatIpv4(const std::array<std::uint8_t, 4> &bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i != 0) {
      out += '.';
    }
    out += std::to_string(bytes[i]);
  }
  return out;
}

// Parses the groups on one side of "::". An embedded IPv4 tail counts as two
// groups and is allowed only at the very end of the address.
std::optional<std::vector<std::uint16_t>> parseGroups(std::string_view text, bool mayEndInIpv4) {
  std::vector<std::uint16_t> groups;
  if (text.empty()) {
    return groups;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    const std::string_view group = text.substr(
        start, colon == std::string_view::npos ? std::string_view::npos : colon - start);
    if (colon == std::string_view::npos && mayEndInIpv4 && group.find('.') != group.npos) {
      const auto v4 = parseIpv4(group);
      if (!v4) {
        return std::nullopt;
      }
      groups.push_back(static_cast<std::uint16_t>(((*v4)[0] << 8) | (*v4)[1]));
      groups.push_back(static_cast<std::uint16_t>(((*v4)[2] << 8) | (*v4)[3]));
      return groups;
    }
    if (group.empty() || group.size() > 4 || !allHex(group)) {
      return std::nullopt;
    }
    unsigned value = 0;
    for (const char c : group) {
      value = value * 16 + *hexValue(c);
    }
    groups.push_back(static_cast<std::uint16_t>(value));
    if (colon == std::string_view::npos) {
      return groups;
    }
    start = colon + 1;
  }
}

std::optional<std::array<std::uint16_t, 8>> parseIpv6(std::string_view text) {
  std::array<std::uint16_t, 8> address{};
  const std::size_t gap = text.find("::");
  if (gap == std::string_view::npos) {
    const auto groups = parseGroups(text, true);
    if (!groups || groups->size() != address.size()) {
      return std::nullopt;
    }
    std::copy(groups->begin(), groups->end(), address.begin());
    return address;
  }
  if (text.find("::", gap + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  const auto head = parseGroups(text.substr(0, gap), false);
  const auto tail = parseGroups(text.substr(gap + 2), true);
  // "::" stands for at least one zero group.
  if (!head || !tail || head->size() + tail->size() > address.size() - 1) {
    return std::nullopt;
  }
  std::copy(head->begin(), head->end(), address.begin());
  std::copy(tail->begin(), tail->end(), address.end() - static_cast<std::ptrdiff_t>(tail->size()));
  return address;
}

// RFC 5952: lower case, no leading zeros, the longest run of two or more
// zero groups (the first on a tie) as "::", IPv4-mapped addresses dotted.
std::string formatIpv6(const std::array<std::uint16_t, 8> &groups) {
  const bool mapped = groups[0] == 0 && groups[1] == 0 && groups[2] == 0 && groups[3] == 0 &&
                      groups[4] == 0 && groups[5] == 0xffff;
  if (mapped) {
    return "::ffff:" + formatIpv4({static_cast<std::uint8_t>(groups[6] >> 8),
                                   static_cast<std::uint8_t>(groups[6] & 0xff),
                                   static_cast<std::uint8_t>(groups[7] >> 8),
                                   static_cast<std::uint8_t>(groups[7] & 0xff)});
  }
  std::size_t bestStart = groups.size();
  std::size_t bestLength = 1;
  for (std::size_t i = 0; i < groups.size();) {
    if (groups[i] != 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < groups.size() && groups[j] == 0) {
      ++j;
    }
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i == bestStart) {
      out += "::";
      i += bestLength - 1;
      continue;
    }
    if (!out.empty() && out.back() != ':') {
      out += ':';
    }
    out += hex16(groups[i]);
  }
  return out;
}

bool looksLikeHostName(std::string_view text) {
  if (text.empty()) {
    return false;
  }
  for (const char c : text) {
    if (!isAlnum(c) && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

} // namespace

std::string printableQuoted(std::string_view text, std::size_t limit) {
  constexpr std::string_view kDigits = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte >= 0x7f || byte == '"' || byte == '\\') {
      out += "\\x";
      out += kDigits[byte >> 4];
      out += kDigits[byte & 0xfU];
    } else {
      out += static_cast<char>(byte);
    }
  }
  out += '"';
  if (text.size() > limit) {
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

Expected<IscsiNameType> validateIscsiName(std::string_view name) {
  if (name.empty()) {
    return fail("empty iSCSI name");
  }
  if (name.size() > kMaxIscsiNameLength) {
    return fail("iSCSI name " + printableQuoted(name) + " is longer than " +
                std::to_string(kMaxIscsiNameLength) + " bytes");
  }
  for (const char c : name) {
    if (!isNameChar(c)) {
      return fail("iSCSI name " + printableQuoted(name) +
                  " has a character outside letters, digits, '-', '.' and ':'");
    }
  }
  std::string prefix(name.substr(0, 4));
  for (char &c : prefix) {
    if (isUpper(c)) {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  if (prefix == "iqn.") {
    if (auto ok = checkIqn(name); !ok) {
      return fail(std::move(ok).error());
    }
    return IscsiNameType::Iqn;
  }
  if (prefix == "eui.") {
    const auto digits = name.substr(4);
    if (digits.size() != 16 || !allHex(digits)) {
      return fail("EUI name " + printableQuoted(name) + " needs exactly 16 hex digits");
    }
    return IscsiNameType::Eui;
  }
  if (prefix == "naa.") {
    const auto digits = name.substr(4);
    if ((digits.size() != 16 && digits.size() != 32) || !allHex(digits)) {
      return fail("NAA name " + printableQuoted(name) + " needs 16 or 32 hex digits");
    }
    return IscsiNameType::Naa;
  }
  return fail("iSCSI name " + printableQuoted(name) +
              " starts with none of \"iqn.\", \"eui.\", \"naa.\"");
}

Expected<std::string> canonicalIpAddress(std::string_view text) {
  if (text.empty()) {
    return fail("empty address");
  }
  if (text.find(':') != std::string_view::npos) {
    if (text.find('%') != std::string_view::npos) {
      return fail("IPv6 address " + printableQuoted(text) +
                  " has a zone, which portals cannot use");
    }
    if (const auto v6 = parseIpv6(text)) {
      return formatIpv6(*v6);
    }
    return fail(printableQuoted(text) + " is not an IPv6 address");
  }
  if (const auto v4 = parseIpv4(text)) {
    return formatIpv4(*v4);
  }
  if (looksLikeHostName(text) && !isDigit(text.back())) {
    return fail(printableQuoted(text) + " is a host name, not an IP address; " +
                "pathkeeper does not resolve names sent by targets");
  }
  return fail(printableQuoted(text) + " is not an IPv4 address");
}

Expected<Portal> parseTargetAddress(std::string_view text) {
  std::string_view rest = text;
  if (rest.starts_with(kTargetAddressKey)) {
    rest.remove_prefix(kTargetAddressKey.size());
  }
  if (rest.empty()) {
    return fail("empty TargetAddress");
  }
  if (rest.size() > kMaxTextValueLength) {
    return fail("TargetAddress " + printableQuoted(rest) + " is longer than " +
                std::to_string(kMaxTextValueLength) + " bytes");
  }
  Portal portal;
  const std::size_t comma = rest.rfind(',');
  if (comma == std::string_view::npos) {
    return fail("TargetAddress " + printableQuoted(rest) +
                " has no portal group tag (\",tag\" is mandatory in SendTargets replies)");
  }
  const auto tpgt = parseDecimal(rest.substr(comma + 1), 5);
  if (!tpgt || *tpgt > 65535) {
    return fail("TargetAddress " + printableQuoted(rest) +
                " has a portal group tag that is not a number in 0..65535");
  }
  portal.tpgt = *tpgt;
  const std::string_view hostPort = rest.substr(0, comma);
  std::string_view host = hostPort;
  std::optional<std::string_view> port;
  if (hostPort.starts_with('[')) {
    const std::size_t close = hostPort.find(']');
    if (close == std::string_view::npos) {
      return fail("TargetAddress " + printableQuoted(rest) + " has an unterminated '['");
    }
    host = hostPort.substr(1, close - 1);
    const std::string_view after = hostPort.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        return fail("TargetAddress " + printableQuoted(rest) + " has junk after ']'");
      }
      port = after.substr(1);
    }
    if (host.find(':') == std::string_view::npos) {
      return fail("TargetAddress " + printableQuoted(rest) +
                  " has brackets around a non-IPv6 address");
    }
  } else if (const std::size_t colon = hostPort.find(':'); colon != std::string_view::npos) {
    if (hostPort.find(':', colon + 1) != std::string_view::npos) {
      return fail("TargetAddress " + printableQuoted(rest) +
                  " has an IPv6 address without the required brackets");
    }
    host = hostPort.substr(0, colon);
    port = hostPort.substr(colon + 1);
  }
  if (port) {
    const auto number = parseDecimal(*port, 5);
    if (!number || *number == 0 || *number > 65535) {
      return fail("TargetAddress " + printableQuoted(rest) +
                  " has a port that is not a number in 1..65535");
    }
    portal.port = static_cast<std::uint16_t>(*number);
  } else {
    portal.port = kDefaultIscsiPort;
  }
  auto address = canonicalIpAddress(host);
  if (!address) {
    return fail("TargetAddress " + printableQuoted(rest) + ": " + address.error());
  }
  portal.address = *std::move(address);
  return portal;
}

Expected<std::string> parseInitiatorNameFile(std::string_view text) {
  std::size_t start = 0;
  unsigned lineNumber = 0;
  while (start < text.size()) {
    ++lineNumber;
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) {
      line.remove_prefix(1);
    }
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (!line.starts_with(kInitiatorNameKey)) {
      continue;
    }
    const std::string_view name = line.substr(kInitiatorNameKey.size());
    if (auto valid = validateIscsiName(name); !valid) {
      return fail("line " + std::to_string(lineNumber) + ": " + valid.error());
    }
    return std::string(name);
  }
  return fail("no InitiatorName= line");
}

Expected<std::string> probeInitiatorName(std::string_view hostInitiatorName) {
  PK_TRY(type, validateIscsiName(hostInitiatorName));
  if (type != IscsiNameType::Iqn) {
    return fail("the host initiator name " + printableQuoted(hostInitiatorName) +
                " is not an IQN, so it cannot carry the \"" + std::string(kProbeInitiatorSuffix) +
                "\" suffix; configure a discovery initiator name explicitly");
  }
  std::string probe = std::string(hostInitiatorName) + std::string(kProbeInitiatorSuffix);
  if (probe.size() > kMaxIscsiNameLength) {
    return fail("the host initiator name " + printableQuoted(hostInitiatorName) +
                " is too long to append \"" + std::string(kProbeInitiatorSuffix) +
                "\"; configure a discovery initiator name explicitly");
  }
  return probe;
}

} // namespace pathkeeper::selector
