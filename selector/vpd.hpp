#pragma once

// LUN identity from raw SCSI VPD pages, as the kernel exposes them in sysfs
// (vpd_pg83, vpd_pg80) or an SG_IO INQUIRY returns them. The WWID strings
// match what multipathd derives itself (libmultipath's VPD parser) and what
// udev's scsi_id exports as ID_SERIAL, so that maps keep the names and
// bindings that multipath-tools gave them.

#include "expected.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {

/// @brief multipathd's WWID_SIZE less the NUL: longer identifiers are cut here.
inline constexpr std::size_t kMaxWwidLength = 127;

/// @brief SPC designator type (table "Designator type"); values 0xb-0xf are reserved.
enum class DesignatorType : std::uint8_t {
  VendorSpecific = 0x0,
  T10VendorId = 0x1,
  Eui64 = 0x2,
  Naa = 0x3,
  RelativeTargetPort = 0x4,
  TargetPortGroup = 0x5,
  LogicalUnitGroup = 0x6,
  Md5LogicalUnit = 0x7,
  ScsiNameString = 0x8,
  ProtocolSpecificPort = 0x9,
  Uuid = 0xa,
};

/// @brief What a designator names (SPC "ASSOCIATION"); 3 is reserved.
enum class DesignatorAssociation : std::uint8_t {
  LogicalUnit = 0,
  TargetPort = 1,
  TargetDevice = 2,
  Reserved = 3,
};

/// @brief One designation descriptor of page 0x83, fields as on the wire.
struct VpdDesignator {
  std::uint8_t protocolId = 0; ///< meaningful only when piv is set
  std::uint8_t codeSet = 0;    ///< 1 binary, 2 ASCII, 3 UTF-8
  bool piv = false;
  DesignatorAssociation association = DesignatorAssociation::LogicalUnit;
  DesignatorType type = DesignatorType::VendorSpecific;
  std::vector<std::uint8_t> value; ///< the designator bytes after the 4-byte header

  bool operator==(const VpdDesignator &) const = default;
};

/// @brief Page 0x83 (Device Identification), decoded.
struct Vpd83 {
  /// Every descriptor in page order, usable for the WWID or not.
  std::vector<VpdDesignator> designators;
  /// Empty when no logical-unit designator qualifies; callers then fall back to page 0x80.
  std::string wwid;
  /// Index into designators of the one the WWID came from.
  std::optional<std::size_t> wwidDesignator;
  /// ALUA target port group of the port this page was read through.
  std::optional<std::uint16_t> targetPortGroup;
  std::optional<std::uint16_t> relativeTargetPort;
};

/// @brief Decodes page 0x83 and picks the WWID the way multipathd does.
///
/// Preference among designators associated with the logical unit:
/// NAA-6 > NAA-5 > NAA-2 > EUI-64 > SCSI name string > T10 vendor ID > NAA-3;
/// the first of equal rank wins. Output: "3"+hex for NAA, "2"+hex for EUI-64,
/// "1"+text (space runs become one '_', trailing ones dropped) for T10, and
/// for SCSI name strings a type digit and the name after its four-character
/// prefix: "eui." gives "2", "naa." gives "3" (both lowercased), "iqn." gives
/// "8" with the case kept. Hex is lowercase. Text ends at its first NUL.
/// Identifiers longer than kMaxWwidLength are cut, as multipathd cuts them.
///
/// Errors are for pages that cannot be trusted as a whole: a wrong page code,
/// a buffer shorter than the page length says (trailing bytes beyond it, as
/// in padded SG_IO buffers, are ignored), or a descriptor running past the
/// page. A descriptor that is merely malformed (bad length for its type,
/// reserved association, unknown NAA) is listed but not used, as multipathd
/// does. Unlike multipathd, text designators that would give a WWID with
/// control characters, spaces or non-ASCII bytes are not used either: such a
/// WWID would break the bindings file and D-Bus strings.
Expected<Vpd83> parseVpdPage83(std::span<const std::uint8_t> page);

/// @brief Decodes page 0x80 (Unit Serial Number) into the serial string.
///
/// The serial ends at the first NUL; leading spaces and trailing spaces are
/// dropped (targets pad it). An empty serial is not an error. Bytes outside
/// printable ASCII are rejected, as SPC defines the field as ASCII.
Expected<std::string> parseVpdPage80(std::span<const std::uint8_t> page);

/// @brief The WWID for a LUN: from page 0x83 when it names the LUN, else from 0x80.
///
/// The fallback is udev scsi_id's ID_SERIAL for page 0x80: "S" + vendor
/// (space-padded to 8) + product (space-padded to 16) + serial, with
/// whitespace trimmed at both ends, inner whitespace runs turned into one
/// '_', and characters udev does not allow (anything but ASCII letters,
/// digits and "#+-.:=@_") replaced by '_'. With uid_attribute ID_SERIAL, this
/// is the WWID multipathd uses for such LUNs, e.g. "SLIO-ORG_disk0_1234".
///
/// A page 0x83 that is present but malformed is an error rather than a reason
/// to fall back: a LUN whose paths disagreed would otherwise get two WWIDs
/// and be split into two maps.
Expected<std::string> wwidFromVpd(std::optional<std::span<const std::uint8_t>> page83,
                                  std::optional<std::span<const std::uint8_t>> page80,
                                  std::string_view vendor, std::string_view product);

} // namespace pathkeeper::selector
