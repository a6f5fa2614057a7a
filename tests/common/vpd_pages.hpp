#pragma once

// Builders for raw SCSI VPD pages, shared by the tests that feed pages to the
// VPD parser directly and those that write them into sysfs trees.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::testing {

using Bytes = std::vector<std::uint8_t>;

/// @brief Bytes from pairs of hex digits, "6001405a" -> {0x60, 0x01, ...}.
inline Bytes hex(std::string_view digits) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < digits.size(); i += 2) {
    out.push_back(
        static_cast<std::uint8_t>(std::stoul(std::string(digits.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

/// @brief A designation descriptor; byte1 carries PIV, association and
/// designator type, as on the wire.
inline Bytes descriptor(std::uint8_t byte0, std::uint8_t byte1, const Bytes &value) {
  // Built with push_back: GCC 12 at -O2 misreports insert() after a braced
  // initializer as an out-of-bounds memcpy (-Warray-bounds).
  Bytes out;
  out.reserve(4 + value.size());
  out.push_back(byte0);
  out.push_back(byte1);
  out.push_back(0);
  out.push_back(static_cast<std::uint8_t>(value.size()));
  for (auto byte : value) {
    out.push_back(byte);
  }
  return out;
}

/// @brief A whole page: 4-byte header with the page code and length, then parts.
inline Bytes page(std::uint8_t code, std::initializer_list<Bytes> parts) {
  std::size_t length = 0;
  for (const auto &part : parts) {
    length += part.size();
  }
  Bytes out;
  out.reserve(4 + length);
  out.push_back(0);
  out.push_back(code);
  out.push_back(static_cast<std::uint8_t>(length >> 8U));
  out.push_back(static_cast<std::uint8_t>(length & 0xffU));
  for (const auto &part : parts) {
    for (auto byte : part) {
      out.push_back(byte);
    }
  }
  return out;
}

} // namespace pathkeeper::testing
