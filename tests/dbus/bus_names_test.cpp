#include "bus_names.hpp"

#include "state_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace pathkeeper::dbus {
namespace {

bool isValidElement(const std::string &element) {
  return !element.empty() && std::ranges::all_of(element, [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

TEST(DbusPathEscaping, KeepsPlainDeviceNames) {
  EXPECT_EQ(escapePathLabel("sdb"), "sdb");
  EXPECT_EQ(escapePathLabel("sdAB12"), "sdAB12");
}

TEST(DbusPathEscaping, EscapesEverythingOutsideLettersAndDigitsLikeSystemd) {
  EXPECT_EQ(escapePathLabel("mpath-a"), "mpath_2da");
  EXPECT_EQ(escapePathLabel("a_b"), "a_5fb");
  EXPECT_EQ(escapePathLabel("10.10.1.20:3260"), "_310_2e10_2e1_2e20_3a3260");
  EXPECT_EQ(escapePathLabel("a b/c"), "a_20b_2fc");
}

TEST(DbusPathEscaping, EscapesALeadingDigitOnly) {
  EXPECT_EQ(escapePathLabel("1abc"), "_31abc");
  EXPECT_EQ(escapePathLabel("a1bc"), "a1bc");
  EXPECT_EQ(escapePathLabel("0"), "_30");
}

TEST(DbusPathEscaping, EmptyLabelIsAnUnderscore) {
  EXPECT_EQ(escapePathLabel(""), "_");
  auto back = unescapePathLabel("_");
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "");
}

TEST(DbusPathEscaping, EscapesUtf8BytesOneByOne) {
  EXPECT_EQ(escapePathLabel("m\xC3\xA4p"), "m_c3_a4p");
}

TEST(DbusPathEscaping, RoundTripsEveryByteValue) {
  std::string all;
  for (int c = 0; c < 256; ++c) {
    all += static_cast<char>(c);
  }
  for (const std::string &label :
       {all, std::string("sdb"), std::string("1 m\xC3\xA4p.x"), std::string("_"), std::string("__"),
        std::string("x\0y", 3), std::string("fd00::21")}) {
    const auto escaped = escapePathLabel(label);
    EXPECT_TRUE(isValidElement(escaped)) << escaped;
    auto back = unescapePathLabel(escaped);
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(*back, label);
  }
}

TEST(DbusPathEscaping, RejectsElementsItCannotHaveProduced) {
  EXPECT_FALSE(unescapePathLabel(""));
  EXPECT_FALSE(unescapePathLabel("a_2"));
  EXPECT_FALSE(unescapePathLabel("a_zz"));
  EXPECT_FALSE(unescapePathLabel("a_2D")); // upper-case hex is never written
  EXPECT_FALSE(unescapePathLabel("a-b"));
  EXPECT_FALSE(unescapePathLabel("1ab")); // a leading digit is always escaped
}

TEST(DbusObjectPaths, PutEachKindUnderItsFolder) {
  EXPECT_EQ(objectPathOf(ObjectKind::Manager, ""), "/org/pathkeeper/PathKeeper1");
  EXPECT_EQ(objectPathOf(ObjectKind::Map, "xserve-upper"),
            "/org/pathkeeper/PathKeeper1/maps/xserve_2dupper");
  EXPECT_EQ(objectPathOf(ObjectKind::Path, "sdb"), "/org/pathkeeper/PathKeeper1/paths/sdb");
  EXPECT_EQ(objectPathOf(ObjectKind::Portal, ""), "/org/pathkeeper/PathKeeper1/portals/_");
}

TEST(DbusObjectPaths, PortalKeyBracketsIpv6) {
  daemon::PortalView v4;
  v4.address = "10.10.1.20";
  EXPECT_EQ(portalKey(v4), "10.10.1.20:3260");
  daemon::PortalView v6;
  v6.address = "fd00::21";
  v6.port = 3261;
  EXPECT_EQ(portalKey(v6), "[fd00::21]:3261");
}

} // namespace
} // namespace pathkeeper::dbus
