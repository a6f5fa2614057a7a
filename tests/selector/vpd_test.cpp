#include "vpd.hpp"

#include "vpd_pages.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::selector {
namespace {

using namespace std::string_view_literals;
using pathkeeper::testing::Bytes;
using pathkeeper::testing::descriptor;
using pathkeeper::testing::hex;
using pathkeeper::testing::page;

Bytes text(std::string_view s) {
  return {s.begin(), s.end()};
}

// Logical-unit designators of each kind the preference order knows.
const Bytes naa6 = descriptor(0x01, 0x03, hex("6001405a1b2c3d4e5f60718293a4b5c6"));
const Bytes naa5 = descriptor(0x01, 0x03, hex("5000c50012345678"));
const Bytes naa2 = descriptor(0x01, 0x03, hex("2000001b32abcdef"));
const Bytes naa3 = descriptor(0x01, 0x03, hex("3000000000000042"));
const Bytes eui64 = descriptor(0x01, 0x02, hex("0011223344556677"));
const Bytes scsiName = descriptor(0x03, 0x08, text("naa.600A0B80ABCDEF00"));
const Bytes t10 = descriptor(0x02, 0x01, text("ACME    SuperDisk 42"));

std::string wwidOf(const Bytes &bytes) {
  auto parsed = parseVpdPage83(bytes);
  EXPECT_TRUE(parsed.has_value()) << parsed.error();
  return parsed ? parsed->wwid : "<error>";
}

// What targetcli-configured LIO returns for an iblock LUN in ALUA group 2,
// reached through relative port 1: NAA-6 and T10 for the LUN, then port and
// target designators (iSCSI protocol id 5, PIV set).
constexpr std::array<std::uint8_t, 228> kLioPage83{
    0x00, 0x83, 0x00, 0xe0, 0x01, 0x03, 0x00, 0x10, 0x60, 0x01, 0x40, 0x5a, 0x1b, 0x2c, 0x3d, 0x4e,
    0x5f, 0x60, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0x02, 0x01, 0x00, 0x34, 0x4c, 0x49, 0x4f, 0x2d,
    0x4f, 0x52, 0x47, 0x20, 0x62, 0x6c, 0x6f, 0x63, 0x6b, 0x30, 0x3a, 0x31, 0x62, 0x32, 0x63, 0x33,
    0x64, 0x34, 0x65, 0x2d, 0x35, 0x66, 0x36, 0x30, 0x2d, 0x37, 0x31, 0x38, 0x32, 0x2d, 0x39, 0x33,
    0x61, 0x34, 0x2d, 0x62, 0x35, 0x63, 0x36, 0x64, 0x37, 0x65, 0x38, 0x66, 0x39, 0x30, 0x31, 0x00,
    0x51, 0x94, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x51, 0x95, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02,
    0x01, 0x06, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x53, 0x98, 0x00, 0x40, 0x69, 0x71, 0x6e, 0x2e,
    0x32, 0x30, 0x30, 0x33, 0x2d, 0x30, 0x31, 0x2e, 0x6f, 0x72, 0x67, 0x2e, 0x6c, 0x69, 0x6e, 0x75,
    0x78, 0x2d, 0x69, 0x73, 0x63, 0x73, 0x69, 0x2e, 0x73, 0x74, 0x6f, 0x72, 0x61, 0x67, 0x65, 0x3a,
    0x73, 0x6e, 0x2e, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x61, 0x62, 0x2c,
    0x74, 0x2c, 0x30, 0x78, 0x30, 0x30, 0x30, 0x31, 0x00, 0x00, 0x00, 0x00, 0x53, 0xa8, 0x00, 0x34,
    0x69, 0x71, 0x6e, 0x2e, 0x32, 0x30, 0x30, 0x33, 0x2d, 0x30, 0x31, 0x2e, 0x6f, 0x72, 0x67, 0x2e,
    0x6c, 0x69, 0x6e, 0x75, 0x78, 0x2d, 0x69, 0x73, 0x63, 0x73, 0x69, 0x2e, 0x73, 0x74, 0x6f, 0x72,
    0x61, 0x67, 0x65, 0x3a, 0x73, 0x6e, 0x2e, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,
    0x39, 0x61, 0x62, 0x00,
};

TEST(Vpd83, ReadsLioLunAsNaa6WithPortGroupAndRelativePort) {
  auto parsed = parseVpdPage83(kLioPage83);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->wwid, "36001405a1b2c3d4e5f60718293a4b5c6");
  EXPECT_EQ(parsed->wwidDesignator, 0U);
  EXPECT_EQ(parsed->targetPortGroup, 2);
  EXPECT_EQ(parsed->relativeTargetPort, 1);
}

TEST(Vpd83, ListsEveryLioDesignatorInPageOrder) {
  auto parsed = parseVpdPage83(kLioPage83);
  ASSERT_TRUE(parsed) << parsed.error();
  ASSERT_EQ(parsed->designators.size(), 7U);
  const auto &d = parsed->designators;
  EXPECT_EQ(d[0].type, DesignatorType::Naa);
  EXPECT_EQ(d[1].type, DesignatorType::T10VendorId);
  EXPECT_EQ(d[1].codeSet, 2);
  EXPECT_EQ(d[2].type, DesignatorType::RelativeTargetPort);
  EXPECT_EQ(d[3].type, DesignatorType::TargetPortGroup);
  EXPECT_EQ(d[4].type, DesignatorType::LogicalUnitGroup);
  EXPECT_EQ(d[5].type, DesignatorType::ScsiNameString);
  EXPECT_EQ(d[5].association, DesignatorAssociation::TargetPort);
  EXPECT_EQ(d[6].association, DesignatorAssociation::TargetDevice);
  EXPECT_TRUE(d[6].piv);
  EXPECT_EQ(d[6].protocolId, 5);
  EXPECT_EQ(d[6].codeSet, 3);
  EXPECT_EQ(d[0].value, hex("6001405a1b2c3d4e5f60718293a4b5c6"));
}

TEST(Vpd83, FallsBackToLioT10IdAndIgnoresItsTargetScsiNames) {
  // Without the NAA designator the LUN is named by T10 vendor ID, not by
  // the iqn designators, which name the target port and the target device.
  Bytes withoutNaa(kLioPage83.begin(), kLioPage83.end());
  withoutNaa.erase(withoutNaa.begin() + 4, withoutNaa.begin() + 24);
  withoutNaa[3] = static_cast<std::uint8_t>(withoutNaa.size() - 4);
  EXPECT_EQ(wwidOf(withoutNaa), "1LIO-ORG_block0:1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
}

// Each rule is checked with the weaker designator first, so page order
// cannot be what decides.
TEST(Vpd83, PrefersNaa6OverNaa5) {
  EXPECT_EQ(wwidOf(page(0x83, {naa5, naa6})), "36001405a1b2c3d4e5f60718293a4b5c6");
}

TEST(Vpd83, PrefersNaa5OverNaa2) {
  EXPECT_EQ(wwidOf(page(0x83, {naa2, naa5})), "35000c50012345678");
}

TEST(Vpd83, PrefersNaa2OverEui64) {
  EXPECT_EQ(wwidOf(page(0x83, {eui64, naa2})), "32000001b32abcdef");
}

TEST(Vpd83, PrefersEui64OverScsiNameString) {
  EXPECT_EQ(wwidOf(page(0x83, {scsiName, eui64})), "20011223344556677");
}

TEST(Vpd83, PrefersScsiNameStringOverT10VendorId) {
  EXPECT_EQ(wwidOf(page(0x83, {t10, scsiName})), "3600a0b80abcdef00");
}

TEST(Vpd83, PrefersT10VendorIdOverNaa3) {
  EXPECT_EQ(wwidOf(page(0x83, {naa3, t10})), "1ACME_SuperDisk_42");
}

TEST(Vpd83, UsesNaa3WhenNothingElseNamesTheLun) {
  EXPECT_EQ(wwidOf(page(0x83, {naa3})), "33000000000000042");
}

TEST(Vpd83, PrefersNaa6OverEveryOtherKindInAnyOrder) {
  EXPECT_EQ(wwidOf(page(0x83, {naa3, t10, scsiName, eui64, naa2, naa5, naa6})),
            "36001405a1b2c3d4e5f60718293a4b5c6");
  EXPECT_EQ(wwidOf(page(0x83, {naa6, naa5, naa2, eui64, scsiName, t10, naa3})),
            "36001405a1b2c3d4e5f60718293a4b5c6");
}

TEST(Vpd83, KeepsTheFirstOfEqualRank) {
  const Bytes otherNaa6 = descriptor(0x01, 0x03, hex("600a0b800011223344556677889900aa"));
  EXPECT_EQ(wwidOf(page(0x83, {otherNaa6, naa6})), "3600a0b800011223344556677889900aa");
}

TEST(Vpd83, IgnoresDesignatorsOfTargetPortAndTargetDevice) {
  const Bytes portNaa6 = descriptor(0x01, 0x13, hex("6001405a1b2c3d4e5f60718293a4b5c6"));
  const Bytes deviceEui = descriptor(0x01, 0x22, hex("0011223344556677"));
  EXPECT_EQ(wwidOf(page(0x83, {portNaa6, deviceEui, t10})), "1ACME_SuperDisk_42");
}

TEST(Vpd83, IgnoresDesignatorsWithReservedAssociation) {
  const Bytes reservedNaa6 = descriptor(0x01, 0x33, hex("6001405a1b2c3d4e5f60718293a4b5c6"));
  auto parsed = parseVpdPage83(page(0x83, {reservedNaa6, t10}));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->wwid, "1ACME_SuperDisk_42");
  EXPECT_EQ(parsed->designators[0].association, DesignatorAssociation::Reserved);
}

TEST(Vpd83, SkipsNaaWhoseLengthDoesNotFitItsType) {
  const Bytes shortNaa6 = descriptor(0x01, 0x03, hex("6001405a1b2c3d4e"));
  const Bytes longNaa5 = descriptor(0x01, 0x03, hex("5000c50012345678aabbccddeeff0011"));
  EXPECT_EQ(wwidOf(page(0x83, {shortNaa6, longNaa5, t10})), "1ACME_SuperDisk_42");
}

TEST(Vpd83, SkipsNaaOfUnknownTypeOrWithoutBytes) {
  const Bytes naa1 = descriptor(0x01, 0x03, hex("1000001b32abcdef"));
  const Bytes emptyNaa = descriptor(0x01, 0x03, {});
  EXPECT_EQ(wwidOf(page(0x83, {naa1, emptyNaa, t10})), "1ACME_SuperDisk_42");
}

TEST(Vpd83, AcceptsEui64OfTwelveAndSixteenBytesButNotTen) {
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x01, 0x02, hex("00112233445566778899aabb"))})),
            "200112233445566778899aabb");
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x01, 0x02, hex("00112233445566778899aabbccddeeff"))})),
            "200112233445566778899aabbccddeeff");
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x01, 0x02, hex("00112233445566778899"))})), "");
}

TEST(Vpd83, WritesNaaHexInLowerCase) {
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x01, 0x03, hex("50A0B8ABCDEF0000"))})),
            "350a0b8abcdef0000");
}

TEST(Vpd83, MapsScsiNameStringsByPrefix) {
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x03, 0x08, text("eui.0011AABB22334455"))})),
            "20011aabb22334455");
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x03, 0x08, text("naa.5000C50012345678"))})),
            "35000c50012345678");
  // iqn names keep their case, and like multipathd drop the "iqn." itself.
  EXPECT_EQ(
      wwidOf(page(0x83, {descriptor(0x03, 0x08, text("iqn.2003-01.Org.Example:Disk\0\0\0\0"sv))})),
      "82003-01.Org.Example:Disk");
}

TEST(Vpd83, SkipsScsiNameStringsWithoutAKnownPrefix) {
  const Bytes wwn = descriptor(0x03, 0x08, text("wwn-0x5000c50012345678"));
  const Bytes upper = descriptor(0x03, 0x08, text("NAA.5000C50012345678"));
  const Bytes tiny = descriptor(0x03, 0x08, text("iq"));
  EXPECT_EQ(wwidOf(page(0x83, {wwn, upper, tiny, t10})), "1ACME_SuperDisk_42");
}

TEST(Vpd83, FoldsT10SpaceRunsAndDropsTrailingOnes) {
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x02, 0x01, text("HP      OPEN-V  50 0F12    "))})),
            "1HP_OPEN-V_50_0F12");
}

TEST(Vpd83, TurnsLeadingT10SpacesIntoOneUnderscore) {
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x02, 0x01, text("   ACME DISK"))})), "1_ACME_DISK");
}

TEST(Vpd83, EndsT10AtNulButKeepsSpacesBeforeIt) {
  // multipathd judges a space run against the whole field, NULs included.
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x02, 0x01, text("ACME    X\0\0\0"sv))})), "1ACME_X");
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x02, 0x01, text("ACME    X  \0"sv))})), "1ACME_X_");
}

TEST(Vpd83, SkipsT10VendorIdShorterThanTheVendorField) {
  EXPECT_EQ(wwidOf(page(0x83, {descriptor(0x02, 0x01, text("ACME"))})), "");
}

TEST(Vpd83, SkipsTextDesignatorsThatWouldGiveUnprintableWwids) {
  const Bytes withTab = descriptor(0x02, 0x01, text("ACME    X\tY"));
  const Bytes withHighByte = descriptor(0x03, 0x08, text("iqn.2003-01.org.\xc3\xa9t\xc3\xa9"));
  EXPECT_EQ(wwidOf(page(0x83, {withHighByte, withTab, naa3})), "33000000000000042");
}

TEST(Vpd83, SkipsDesignatorsThatAreOnlyPadding) {
  const Bytes blank = descriptor(0x02, 0x01, text("\0\0\0\0\0\0\0\0"sv));
  const Bytes naaPrefixOnly = descriptor(0x03, 0x08, text("naa.\0\0\0\0"sv));
  EXPECT_EQ(wwidOf(page(0x83, {naaPrefixOnly, blank})), "");
}

TEST(Vpd83, ReadsOnlyTheFirst128DesignatorBytesLikeMultipathd) {
  const std::string longId = "ACME    " + std::string(200, 'x');
  const std::string wwid = wwidOf(page(0x83, {descriptor(0x02, 0x01, text(longId))}));
  EXPECT_EQ(wwid, "1ACME_" + std::string(120, 'x'));
}

TEST(Vpd83, CutsOverlongWwidsAtMultipathdsLimit) {
  const std::string longId = "ACMECORP" + std::string(200, 'x');
  const std::string wwid = wwidOf(page(0x83, {descriptor(0x02, 0x01, text(longId))}));
  EXPECT_EQ(wwid.size(), kMaxWwidLength);
  EXPECT_EQ(wwid, "1ACMECORP" + std::string(118, 'x'));
}

TEST(Vpd83, LeavesWwidEmptyWhenOnlyPortsAreNamed) {
  auto parsed = parseVpdPage83(page(0x83, {descriptor(0x51, 0x95, hex("00000007"))}));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->wwid, "");
  EXPECT_FALSE(parsed->wwidDesignator);
  EXPECT_EQ(parsed->targetPortGroup, 7);
  EXPECT_FALSE(parsed->relativeTargetPort);
}

TEST(Vpd83, AcceptsAnEmptyPage) {
  auto parsed = parseVpdPage83(page(0x83, {}));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_TRUE(parsed->designators.empty());
  EXPECT_EQ(parsed->wwid, "");
}

TEST(Vpd83, ReadsPortDesignatorsOnlyWithTargetPortAssociationAndLengthFour) {
  const Bytes lunTpg = descriptor(0x01, 0x05, hex("00000009"));
  const Bytes longTpg = descriptor(0x51, 0x95, hex("0000000800"));
  const Bytes goodTpg = descriptor(0x51, 0x95, hex("00000102"));
  const Bytes laterTpg = descriptor(0x51, 0x95, hex("00000103"));
  const Bytes shortRtp = descriptor(0x51, 0x94, hex("0001"));
  const Bytes goodRtp = descriptor(0x51, 0x94, hex("0000abcd"));
  auto parsed = parseVpdPage83(page(0x83, {lunTpg, longTpg, shortRtp, goodTpg, laterTpg, goodRtp}));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->targetPortGroup, 0x0102);
  EXPECT_EQ(parsed->relativeTargetPort, 0xabcd);
}

TEST(Vpd83, RejectsAnotherPageCode) {
  auto parsed = parseVpdPage83(page(0x80, {text("SERIAL")}));
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "VPD page 0x83: page code is 0x80");
}

TEST(Vpd83, RejectsABufferShorterThanTheHeader) {
  const Bytes bytes{0x00, 0x83, 0x00};
  auto parsed = parseVpdPage83(bytes);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "VPD page 0x83: 3 bytes, shorter than the 4-byte header");
  EXPECT_FALSE(parseVpdPage83({}));
}

TEST(Vpd83, RejectsAPageLengthBeyondTheBuffer) {
  Bytes bytes = page(0x83, {naa6});
  bytes.pop_back();
  auto parsed = parseVpdPage83(bytes);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "VPD page 0x83: page length 20 needs 24 bytes but only 23 were given");
}

TEST(Vpd83, IgnoresBytesAfterThePageLength) {
  // SG_IO buffers are larger than the page and zero filled.
  Bytes bytes = page(0x83, {naa5});
  bytes.resize(bytes.size() + 32, 0xff);
  EXPECT_EQ(wwidOf(bytes), "35000c50012345678");
}

TEST(Vpd83, RejectsADescriptorRunningPastThePage) {
  Bytes bytes = page(0x83, {naa5, t10});
  bytes[3] = static_cast<std::uint8_t>(bytes[3] - 1); // page ends inside the T10 designator
  auto parsed = parseVpdPage83(bytes);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(),
            "VPD page 0x83: descriptor at offset 16 with length 20 runs past the page end at 39");
}

TEST(Vpd83, RejectsAPartialDescriptorHeader) {
  auto parsed = parseVpdPage83(page(0x83, {naa5, Bytes{0x01, 0x03}}));
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(),
            "VPD page 0x83: descriptor header at offset 16 runs past the page end at 18");
}

TEST(Vpd83, RejectsOverrunEvenAfterAGoodDesignator) {
  // multipathd keeps an earlier NAA here; a page that lies about its own
  // layout is not trusted for identity at all.
  Bytes bytes = page(0x83, {naa6, descriptor(0x02, 0x01, text("ACME    X"))});
  bytes[24 + 3] = 200;
  EXPECT_FALSE(parseVpdPage83(bytes));
}

TEST(Vpd80, ReadsSerialAndDropsPadding) {
  auto serial = parseVpdPage80(page(0x80, {text("  A1B2C3D4   ")}));
  ASSERT_TRUE(serial) << serial.error();
  EXPECT_EQ(*serial, "A1B2C3D4");
  serial = parseVpdPage80(page(0x80, {text("1234 56\0\0\0"sv)}));
  ASSERT_TRUE(serial) << serial.error();
  EXPECT_EQ(*serial, "1234 56");
}

TEST(Vpd80, ReadsLioSerial) {
  // LIO reports the backstore's unit serial, a UUID.
  auto serial = parseVpdPage80(page(0x80, {text("1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901")}));
  ASSERT_TRUE(serial) << serial.error();
  EXPECT_EQ(*serial, "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901");
}

TEST(Vpd80, GivesAnEmptySerialForABlankPage) {
  auto serial = parseVpdPage80(page(0x80, {text("    ")}));
  ASSERT_TRUE(serial) << serial.error();
  EXPECT_EQ(*serial, "");
}

TEST(Vpd80, RejectsAnotherPageCode) {
  auto serial = parseVpdPage80(page(0x83, {naa5}));
  ASSERT_FALSE(serial);
  EXPECT_EQ(serial.error(), "VPD page 0x80: page code is 0x83");
}

TEST(Vpd80, RejectsAPageLengthBeyondTheBuffer) {
  Bytes bytes = page(0x80, {text("ABCD")});
  bytes.resize(6);
  auto serial = parseVpdPage80(bytes);
  ASSERT_FALSE(serial);
  EXPECT_EQ(serial.error(), "VPD page 0x80: page length 4 needs 8 bytes but only 6 were given");
}

TEST(Vpd80, RejectsNonAsciiSerials) {
  auto serial = parseVpdPage80(page(0x80, {text("AB\x01"
                                                "CD")}));
  ASSERT_FALSE(serial);
  EXPECT_EQ(serial.error(), "VPD page 0x80: serial number has non-ASCII byte 0x01 at offset 6");
}

TEST(WwidFromVpd, UsesPage83WhenItNamesTheLun) {
  const Bytes page83(kLioPage83.begin(), kLioPage83.end());
  const Bytes page80 = page(0x80, {text("1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901")});
  auto wwid = wwidFromVpd(page83, page80, "LIO-ORG", "block0");
  ASSERT_TRUE(wwid) << wwid.error();
  EXPECT_EQ(*wwid, "36001405a1b2c3d4e5f60718293a4b5c6");
}

TEST(WwidFromVpd, FallsBackToScsiIdSerialFormatWithoutPage83) {
  const Bytes page80 = page(0x80, {text("a1b2c3d4")});
  auto wwid = wwidFromVpd(std::nullopt, page80, "LIO-ORG", "block0");
  ASSERT_TRUE(wwid) << wwid.error();
  EXPECT_EQ(*wwid, "SLIO-ORG_block0_a1b2c3d4");
}

TEST(WwidFromVpd, FallsBackWhenPage83NamesOnlyPorts) {
  const Bytes page83 = page(0x83, {descriptor(0x51, 0x95, hex("00000001"))});
  const Bytes page80 = page(0x80, {text("XR0042")});
  auto wwid = wwidFromVpd(page83, page80, "APPLE", "Xserve RAID");
  ASSERT_TRUE(wwid) << wwid.error();
  EXPECT_EQ(*wwid, "SAPPLE_Xserve_RAID_XR0042");
}

TEST(WwidFromVpd, GivesTheSameFallbackForPaddedAndTrimmedInquiryFields) {
  // sysfs shows vendor and model space padded; callers may have trimmed them.
  const Bytes page80 = page(0x80, {text("  S123  ")});
  EXPECT_EQ(*wwidFromVpd(std::nullopt, page80, "ATA     ", "ST500DM002      "),
            *wwidFromVpd(std::nullopt, page80, "ATA", "ST500DM002"));
  EXPECT_EQ(*wwidFromVpd(std::nullopt, page80, "ATA", "ST500DM002"), "SATA_ST500DM002_S123");
}

TEST(WwidFromVpd, GluesSerialToAFullLengthProductAsScsiIdDoes) {
  const Bytes page80 = page(0x80, {text("S123")});
  EXPECT_EQ(*wwidFromVpd(std::nullopt, page80, "ATA", "ST500DM002-1BD14"),
            "SATA_ST500DM002-1BD14S123");
}

TEST(WwidFromVpd, ReplacesCharactersUdevDoesNotAllowInTheFallback) {
  const Bytes page80 = page(0x80, {text("AB/CD*1")});
  auto wwid = wwidFromVpd(std::nullopt, page80, "ACME", "DISK (R)");
  ASSERT_TRUE(wwid) << wwid.error();
  EXPECT_EQ(*wwid, "SACME_DISK__R__AB_CD_1");
}

TEST(WwidFromVpd, CutsOverlongFallbacksAtMultipathdsLimit) {
  const Bytes page80 = page(0x80, {text(std::string(250, '7'))});
  auto wwid = wwidFromVpd(std::nullopt, page80, "ACME", "DISK");
  ASSERT_TRUE(wwid) << wwid.error();
  EXPECT_EQ(wwid->size(), kMaxWwidLength);
}

TEST(WwidFromVpd, FailsOnAMalformedPage83EvenWithPage80) {
  Bytes page83 = page(0x83, {naa6});
  page83[3] = 40;
  const Bytes page80 = page(0x80, {text("SER")});
  auto wwid = wwidFromVpd(page83, page80, "ACME", "DISK");
  ASSERT_FALSE(wwid);
  EXPECT_EQ(wwid.error(), "VPD page 0x83: page length 40 needs 44 bytes but only 24 were given");
}

TEST(WwidFromVpd, FailsWithoutAnyIdentifier) {
  auto wwid = wwidFromVpd(std::nullopt, std::nullopt, "ACME", "DISK");
  ASSERT_FALSE(wwid);
  EXPECT_EQ(wwid.error(), "no VPD page 0x83 and no page 0x80");

  const Bytes page83 = page(0x83, {});
  wwid = wwidFromVpd(page83, std::nullopt, "ACME", "DISK");
  ASSERT_FALSE(wwid);
  EXPECT_EQ(wwid.error(), "VPD page 0x83 has no usable logical unit designator and no page 0x80");

  wwid = wwidFromVpd(page83, page(0x80, {text("   ")}), "ACME", "DISK");
  ASSERT_FALSE(wwid);
  EXPECT_EQ(wwid.error(), "VPD page 0x83 has no usable logical unit designator and the page "
                          "0x80 serial number is empty");
}

TEST(WwidFromVpd, FailsOnABadPage80) {
  auto wwid = wwidFromVpd(std::nullopt, page(0x83, {naa6}), "ACME", "DISK");
  ASSERT_FALSE(wwid);
  EXPECT_EQ(wwid.error(), "no VPD page 0x83; VPD page 0x80: page code is 0x83");
}

TEST(WwidFromVpd, RejectsInquiryFieldsLongerThanTheirBytes) {
  const Bytes page80 = page(0x80, {text("SER")});
  EXPECT_FALSE(wwidFromVpd(std::nullopt, page80, "TOOLONGVENDOR", "DISK"));
  EXPECT_FALSE(wwidFromVpd(std::nullopt, page80, "ACME", "A PRODUCT NAME OVER 16"));
  EXPECT_TRUE(wwidFromVpd(std::nullopt, page80, "EIGHTCHR", "SIXTEEN CHARS!!!"));
}

} // namespace
} // namespace pathkeeper::selector
