// Fuzzes the validators that stand between the network and the rest of the
// daemon. Besides "no crash", it checks what callers rely on: an accepted
// name is bounded and made only of RFC 3720 characters, an accepted address
// is canonical (parsing it again gives it back), and every rejection reason
// is printable single-line text, safe to log.
#include "iscsi_names.hpp"
#include "session_coverage.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace pathkeeper::selector;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

void checkReason(const std::string &reason) {
  check(!reason.empty());
  for (const char c : reason) {
    check(c >= ' ' && c < '\x7f');
  }
}

void checkName(std::string_view name) {
  auto type = validateIscsiName(name);
  if (!type) {
    checkReason(type.error());
    return;
  }
  check(!name.empty() && name.size() <= kMaxIscsiNameLength);
  for (const char c : name) {
    check((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.' || c == ':');
  }
  if (auto probe = probeInitiatorName(name)) {
    check(*type == IscsiNameType::Iqn);
    check(validateIscsiName(*probe).has_value());
  } else {
    checkReason(probe.error());
  }
}

void checkAddress(std::string_view text) {
  auto address = canonicalIpAddress(text);
  if (!address) {
    checkReason(address.error());
    return;
  }
  check(canonicalIpAddress(*address) == *address);
}

void checkTargetAddress(std::string_view text) {
  auto portal = parseTargetAddress(text);
  if (!portal) {
    checkReason(portal.error());
    return;
  }
  check(portal->port != 0 && portal->tpgt <= 65535);
  check(canonicalIpAddress(portal->address) == portal->address);
  // The printed form is what logs and iscsiadm show; it must read back.
  check(parseTargetAddress(portal->str()) == *portal);
}

} // namespace

// libFuzzer fixes this name.
extern "C" int LLVMFuzzerTestOneInput( // NOLINT(readability-identifier-naming)
    const std::uint8_t *data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  checkName(text);
  checkAddress(text);
  checkTargetAddress(text);
  if (auto name = parseInitiatorNameFile(text)) {
    check(validateIscsiName(*name).has_value());
  } else {
    checkReason(name.error());
  }
  // Lines of a text reply, as libiscsi hands them over: the comparison must
  // cope with whatever survives validation.
  std::vector<DiscoveredTarget> found;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      continue;
    }
    auto portal = parseTargetAddress(line.substr(space + 1));
    if (portal && validateIscsiName(line.substr(0, space))) {
      found.push_back({std::string(line.substr(0, space)), *portal, *portal, "eth1"});
    }
  }
  const auto missing = findMissingPaths(found, {});
  check(missing.size() <= found.size());
  return 0;
}
