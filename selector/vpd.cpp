#include "vpd.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace pathkeeper::selector {

namespace {

constexpr std::size_t kHeaderSize = 4;
constexpr std::size_t kDescriptorHeaderSize = 4;
// multipathd reads at most WWID_SIZE designator bytes before formatting.
constexpr std::size_t kMaxDesignatorBytes = kMaxWwidLength + 1;
constexpr std::size_t kInquiryVendorLength = 8;
constexpr std::size_t kInquiryProductLength = 16;

constexpr std::array<char, 16> kHexDigits{'0', '1', '2', '3', '4', '5', '6', '7',
                                          '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};

std::string hexByte(std::uint8_t byte) {
  return {'0', 'x', kHexDigits[byte >> 4U], kHexDigits[byte & 0xfU]};
}

std::uint16_t be16(std::uint8_t high, std::uint8_t low) {
  return static_cast<std::uint16_t>((static_cast<unsigned>(high) << 8U) | low);
}

char asciiLower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// The bytes of a page after its header, once the header has been checked
// against the expected page code and the buffer size.
Expected<std::span<const std::uint8_t>> pageBody(std::span<const std::uint8_t> page,
                                                 std::uint8_t pageCode) {
  const std::string what = "VPD page " + hexByte(pageCode);
  if (page.size() < kHeaderSize) {
    return fail(what + ": " + std::to_string(page.size()) +
                " bytes, shorter than the 4-byte header");
  }
  if (page[1] != pageCode) {
    return fail(what + ": page code is " + hexByte(page[1]));
  }
  const std::size_t length = be16(page[2], page[3]);
  if (page.size() - kHeaderSize < length) {
    return fail(what + ": page length " + std::to_string(length) + " needs " +
                std::to_string(kHeaderSize + length) + " bytes but only " +
                std::to_string(page.size()) + " were given");
  }
  return page.subspan(kHeaderSize, length);
}

// Ranks follow multipathd; 0 means "not a WWID candidate".
int wwidRank(const VpdDesignator &d) {
  const auto &v = d.value;
  switch (d.type) {
  case DesignatorType::Naa: {
    if (v.empty()) {
      return 0;
    }
    switch (v[0] >> 4U) {
    case 6:
      return v.size() == 16 ? 8 : 0;
    case 5:
      return v.size() == 8 ? 7 : 0;
    case 2:
      return v.size() == 8 ? 6 : 0;
    case 3:
      return v.size() == 8 ? 1 : 0;
    default:
      return 0;
    }
  }
  case DesignatorType::Eui64:
    return (v.size() == 8 || v.size() == 12 || v.size() == 16) ? 4 : 0;
  case DesignatorType::ScsiNameString: {
    if (v.size() < 4) {
      return 0;
    }
    const std::string_view prefix(reinterpret_cast<const char *>(v.data()), 4);
    return (prefix == "eui." || prefix == "naa." || prefix == "iqn.") ? 3 : 0;
  }
  case DesignatorType::T10VendorId:
    return v.size() >= 8 ? 2 : 0;
  default:
    return 0;
  }
}

// T10 vendor IDs are space padded fields glued together ("LIO-ORG " +
// product + serial); multipathd folds each run of spaces into one '_' and
// drops a run at the very end. The run is judged against the whole field,
// before the NUL cut, so "AB \0" gives "AB_" there and here.
std::string formatT10(std::span<const std::uint8_t> value) {
  std::string out = "1";
  std::size_t i = 0;
  while (i < value.size()) {
    if (value[i] != ' ') {
      out.push_back(static_cast<char>(value[i]));
      ++i;
      continue;
    }
    while (i < value.size() && value[i] == ' ') {
      ++i;
    }
    if (i < value.size()) {
      out.push_back('_');
    }
  }
  return out;
}

std::string formatScsiName(std::span<const std::uint8_t> value) {
  const std::string_view text(reinterpret_cast<const char *>(value.data()), value.size());
  const std::string_view prefix = text.substr(0, 4);
  // "naa." and "eui." names carry the same hex as the binary designators, so
  // they map onto the same type digits and case.
  const char typeDigit = prefix == "eui." ? '2' : prefix == "naa." ? '3' : '8';
  std::string out(1, typeDigit);
  for (const char c : text.substr(4)) {
    out.push_back(typeDigit == '8' ? c : asciiLower(c));
  }
  return out;
}

std::string formatWwid(const VpdDesignator &d) {
  const auto value = std::span(d.value).first(std::min(d.value.size(), kMaxDesignatorBytes));
  std::string out;
  switch (d.type) {
  case DesignatorType::Naa:
  case DesignatorType::Eui64:
    out.push_back(d.type == DesignatorType::Naa ? '3' : '2');
    for (const std::uint8_t byte : value) {
      out.push_back(kHexDigits[byte >> 4U]);
      out.push_back(kHexDigits[byte & 0xfU]);
    }
    break;
  case DesignatorType::ScsiNameString:
    out = formatScsiName(value);
    break;
  case DesignatorType::T10VendorId:
    out = formatT10(value);
    break;
  default:
    return {};
  }
  // Text designators are NUL padded; multipathd treats them as C strings.
  out.resize(std::min(out.find('\0'), out.size()));
  out.resize(std::min(out.size(), kMaxWwidLength));
  return out;
}

// A WWID ends up as a whitespace-separated field in the bindings file, in a
// DM UUID and in D-Bus strings, so it must be visible ASCII.
bool usableWwid(std::string_view wwid) {
  return wwid.size() > 1 &&
         std::all_of(wwid.begin(), wwid.end(), [](char c) { return c > ' ' && c < '\x7f'; });
}

std::optional<std::uint16_t> portDesignatorValue(const VpdDesignator &d, DesignatorType type) {
  if (d.type != type || d.association != DesignatorAssociation::TargetPort || d.value.size() != 4) {
    return std::nullopt;
  }
  return be16(d.value[2], d.value[3]);
}

bool udevAllowed(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         std::string_view("#+-.:=@_").find(c) != std::string_view::npos;
}

// udev's ID_SERIAL treatment: trim, fold whitespace runs into '_', then
// replace what is not allowed in device names.
std::string udevSerial(std::string_view raw) {
  std::string out;
  bool pendingSpace = false;
  for (const char c : raw) {
    if (isSpace(c)) {
      pendingSpace = !out.empty();
      continue;
    }
    if (pendingSpace) {
      out.push_back('_');
      pendingSpace = false;
    }
    out.push_back(udevAllowed(c) ? c : '_');
  }
  return out;
}

std::string padded(std::string_view field, std::size_t width) {
  std::string out(field);
  out.resize(width, ' ');
  return out;
}

} // namespace

Expected<Vpd83> parseVpdPage83(std::span<const std::uint8_t> page) {
  auto body = pageBody(page, 0x83);
  if (!body) {
    return fail(body.error());
  }
  Vpd83 result;
  std::size_t offset = 0;
  while (offset < body->size()) {
    // Offsets in messages count from the start of the page, as in hex dumps.
    const std::size_t pageOffset = kHeaderSize + offset;
    const std::size_t left = body->size() - offset;
    if (left < kDescriptorHeaderSize) {
      return fail("VPD page 0x83: descriptor header at offset " + std::to_string(pageOffset) +
                  " runs past the page end at " + std::to_string(kHeaderSize + body->size()));
    }
    const auto header = body->subspan(offset, kDescriptorHeaderSize);
    const std::size_t length = header[3];
    if (left - kDescriptorHeaderSize < length) {
      return fail("VPD page 0x83: descriptor at offset " + std::to_string(pageOffset) +
                  " with length " + std::to_string(length) + " runs past the page end at " +
                  std::to_string(kHeaderSize + body->size()));
    }
    const auto value = body->subspan(offset + kDescriptorHeaderSize, length);
    VpdDesignator d;
    d.protocolId = static_cast<std::uint8_t>(header[0] >> 4U);
    d.codeSet = static_cast<std::uint8_t>(header[0] & 0xfU);
    d.piv = (header[1] & 0x80U) != 0;
    d.association = static_cast<DesignatorAssociation>((header[1] >> 4U) & 0x3U);
    d.type = static_cast<DesignatorType>(header[1] & 0xfU);
    d.value.assign(value.begin(), value.end());
    result.designators.push_back(std::move(d));
    offset += kDescriptorHeaderSize + length;
  }

  int bestRank = 0;
  for (std::size_t i = 0; i < result.designators.size(); ++i) {
    const auto &d = result.designators[i];
    if (!result.targetPortGroup) {
      result.targetPortGroup = portDesignatorValue(d, DesignatorType::TargetPortGroup);
    }
    if (!result.relativeTargetPort) {
      result.relativeTargetPort = portDesignatorValue(d, DesignatorType::RelativeTargetPort);
    }
    if (d.association != DesignatorAssociation::LogicalUnit) {
      continue;
    }
    const int rank = wwidRank(d);
    // Strictly greater: the first of equal rank wins, as in multipathd.
    if (rank <= bestRank) {
      continue;
    }
    std::string wwid = formatWwid(d);
    if (!usableWwid(wwid)) {
      continue;
    }
    bestRank = rank;
    result.wwid = std::move(wwid);
    result.wwidDesignator = i;
  }
  return result;
}

Expected<std::string> parseVpdPage80(std::span<const std::uint8_t> page) {
  auto body = pageBody(page, 0x80);
  if (!body) {
    return fail(body.error());
  }
  std::string_view serial(reinterpret_cast<const char *>(body->data()), body->size());
  serial = serial.substr(0, serial.find('\0'));
  const auto first = serial.find_first_not_of(' ');
  if (first == std::string_view::npos) {
    return std::string();
  }
  serial = serial.substr(first, serial.find_last_not_of(' ') - first + 1);
  for (std::size_t i = 0; i < serial.size(); ++i) {
    const auto byte = static_cast<std::uint8_t>(serial[i]);
    if (byte < 0x20 || byte > 0x7e) {
      return fail("VPD page 0x80: serial number has non-ASCII byte " + hexByte(byte) +
                  " at offset " + std::to_string(kHeaderSize + first + i));
    }
  }
  return std::string(serial);
}

Expected<std::string> wwidFromVpd(std::optional<std::span<const std::uint8_t>> page83,
                                  std::optional<std::span<const std::uint8_t>> page80,
                                  std::string_view vendor, std::string_view product) {
  if (page83) {
    auto parsed = parseVpdPage83(*page83);
    if (!parsed) {
      return fail(parsed.error());
    }
    if (!parsed->wwid.empty()) {
      return std::move(parsed->wwid);
    }
  }
  const std::string why =
      page83 ? "VPD page 0x83 has no usable logical unit designator" : "no VPD page 0x83";
  if (!page80) {
    return fail(why + " and no page 0x80");
  }
  auto serial = parseVpdPage80(*page80);
  if (!serial) {
    return fail(why + "; " + serial.error());
  }
  if (serial->empty()) {
    return fail(why + " and the page 0x80 serial number is empty");
  }
  if (vendor.size() > kInquiryVendorLength) {
    return fail("vendor \"" + std::string(vendor) + "\" is longer than the 8 INQUIRY bytes");
  }
  if (product.size() > kInquiryProductLength) {
    return fail("product \"" + std::string(product) + "\" is longer than the 16 INQUIRY bytes");
  }
  // scsi_id prefixes 'S' so that these never collide with page 0x83 names.
  std::string wwid = udevSerial("S" + padded(vendor, kInquiryVendorLength) +
                                padded(product, kInquiryProductLength) + *serial);
  wwid.resize(std::min(wwid.size(), kMaxWwidLength));
  return wwid;
}

} // namespace pathkeeper::selector
