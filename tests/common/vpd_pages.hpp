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
  Bytes out{byte0, byte1, 0, static_cast<std::uint8_t>(value.size())};
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

/// @brief A whole page: 4-byte header with the page code and length, then parts.
inline Bytes page(std::uint8_t code, std::initializer_list<Bytes> parts) {
  Bytes body;
  for (const auto &part : parts) {
    body.insert(body.end(), part.begin(), part.end());
  }
  Bytes out{0, code, static_cast<std::uint8_t>(body.size() >> 8U),
            static_cast<std::uint8_t>(body.size() & 0xffU)};
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

} // namespace pathkeeper::testing
