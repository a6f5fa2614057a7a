// Fuzzes the VPD page parsers and, since both take untrusted bytes that
// end up naming maps, the bindings file parser. Besides "no crash", it
// checks the promises callers rely on: WWIDs are printable, bounded and
// space free, and rendered bindings read back unchanged.
#include "names.hpp"
#include "vpd.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

namespace {

using namespace pathkeeper::selector;

void check(bool condition) {
  if (!condition) {
    std::abort();
  }
}

void checkWwid(std::string_view wwid) {
  check(wwid.size() <= kMaxWwidLength);
  for (const char c : wwid) {
    check(c > ' ' && c < '\x7f');
  }
}

void fuzzVpd(std::span<const std::uint8_t> bytes) {
  if (auto page83 = parseVpdPage83(bytes)) {
    checkWwid(page83->wwid);
    check(page83->wwid.empty() == !page83->wwidDesignator.has_value());
    if (page83->wwidDesignator) {
      check(*page83->wwidDesignator < page83->designators.size());
    }
  }
  (void)parseVpdPage80(bytes);

  // Splitting the input lets one run exercise the fallback path with a
  // page 0x80 while page 0x83 is absent or has no usable designator.
  const std::size_t half = bytes.size() / 2;
  for (const auto &page83 :
       {std::optional(bytes.first(half)), std::optional<std::span<const std::uint8_t>>()}) {
    if (auto wwid = wwidFromVpd(page83, bytes.subspan(half), "LIO-ORG", "block0")) {
      check(!wwid->empty());
      checkWwid(*wwid);
    }
  }
}

void fuzzBindings(std::string_view text) {
  auto bindings = Bindings::parse(text, "fuzz");
  if (!bindings) {
    return;
  }
  auto again = Bindings::parse(bindings->render(), "fuzz");
  check(again.has_value());
  check(again->entries() == bindings->entries());
  if (auto alias = bindings->allocate("3600140500000000000000000000000001")) {
    check(bindings->aliasFor("3600140500000000000000000000000001") == *alias);
  }
}

} // namespace

// libFuzzer fixes this name.
extern "C" int LLVMFuzzerTestOneInput( // NOLINT(readability-identifier-naming)
    const std::uint8_t *data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  fuzzVpd(bytes);
  fuzzBindings(std::string_view(reinterpret_cast<const char *>(data), size));
  return 0;
}
