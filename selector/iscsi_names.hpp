#pragma once

// Validators for the strings iSCSI puts on the wire: iSCSI names (RFC 3720
// 3.2.6, RFC 3721, RFC 3980) and the TargetAddress values of a SendTargets
// reply. Everything a target sends is untrusted: these checks run before a
// name reaches a log line, a D-Bus property or a comparison, and every
// rejection carries a reason with the offending text made printable.

#include "expected.hpp"
#include "model.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace pathkeeper::selector {

/// @brief RFC 3720 3.2.6.1: an iSCSI name is at most 223 bytes.
inline constexpr std::size_t kMaxIscsiNameLength = 223;

/// @brief RFC 3720 5.1: a text value (here TargetAddress) is at most 255 bytes.
inline constexpr std::size_t kMaxTextValueLength = 255;

/// @brief Appended to the host's initiator name for discovery probes, so a
/// target (and an administrator reading its logs) can never mistake a probe
/// for one of the kernel's sessions.
inline constexpr std::string_view kProbeInitiatorSuffix = ":pathkeeper-probe";

/// @brief The three iSCSI name formats.
enum class IscsiNameType {
  Iqn, ///< iqn.yyyy-mm.reversed.domain[:anything]
  Eui, ///< eui. + 16 hex digits (EUI-64)
  Naa, ///< naa. + 16 or 32 hex digits (RFC 3980)
};

/// @brief Checks an iSCSI name and tells its format.
///
/// Only the ASCII subset RFC 3720 3.2.6.2 allows is accepted: letters,
/// digits, '-', '.', ':'. Upper case is tolerated because targets in the
/// field send it (RFC 3722 would fold it); names compare case-insensitively.
/// Non-ASCII (stringprep'd Unicode) names are refused rather than half-checked.
Expected<IscsiNameType> validateIscsiName(std::string_view name);

/// @brief Parses an IPv4 dotted quad or an IPv6 address (no brackets, no
/// zone) and returns its canonical text (RFC 5952 for IPv6), so that two
/// spellings of one address compare equal.
Expected<std::string> canonicalIpAddress(std::string_view text);

/// @brief Parses a TargetAddress value from a SendTargets reply:
/// "10.10.1.20:3260,1", "[fd00::20]:3260,1" or "10.10.1.20,1" (port 3260).
///
/// A leading "TargetAddress=" is accepted. RFC 3720 appendix D makes the
/// portal group tag mandatory there, so it is required. Host names are
/// refused: resolving them would block the event loop and let a target
/// steer probes anywhere. The address comes back canonical.
Expected<Portal> parseTargetAddress(std::string_view text);

/// @brief Finds the InitiatorName= line of open-iscsi's initiatorname.iscsi
/// text and validates the name.
Expected<std::string> parseInitiatorNameFile(std::string_view text);

/// @brief The initiator name a discovery probe uses: the host's IQN plus
/// kProbeInitiatorSuffix. EUI and NAA names cannot carry a suffix, so they
/// are refused with a hint to configure a probe name explicitly.
Expected<std::string> probeInitiatorName(std::string_view hostInitiatorName);

/// @brief Quotes untrusted text for a message: escapes anything outside
/// printable ASCII as \xNN and cuts it after @p limit bytes.
std::string printableQuoted(std::string_view text, std::size_t limit = 80);

} // namespace pathkeeper::selector
