#include "iscsi_names.hpp"
#include "session_coverage.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pathkeeper::selector {
namespace {

using ::testing::HasSubstr;

std::string errorOf(const auto &result) {
  return result ? std::string("(no error)") : result.error();
}

TEST(ValidateIscsiName, AcceptsTheThreeFormats) {
  EXPECT_EQ(validateIscsiName("iqn.2001-04.com.example:storage.disk1"), IscsiNameType::Iqn);
  EXPECT_EQ(validateIscsiName("iqn.1987-05.com.cisco:05.ips-gw.01.00.21000011c6d3e2b4"),
            IscsiNameType::Iqn);
  EXPECT_EQ(validateIscsiName("iqn.2004-10.com.ubuntu"), IscsiNameType::Iqn);
  EXPECT_EQ(validateIscsiName("eui.02004567A425678D"), IscsiNameType::Eui);
  EXPECT_EQ(validateIscsiName("naa.52004567BA64678D"), IscsiNameType::Naa);
  EXPECT_EQ(validateIscsiName("naa.62004567BA64678D0123456789ABCDEF"), IscsiNameType::Naa);
}

TEST(ValidateIscsiName, ToleratesUpperCaseThatTargetsSendInTheField) {
  EXPECT_EQ(validateIscsiName("IQN.2000-01.com.synology:DS918.Target-1"), IscsiNameType::Iqn);
}

TEST(ValidateIscsiName, AcceptsExactly223BytesAndNoMore) {
  const std::string head = "iqn.2001-04.com.example:";
  const std::string longest = head + std::string(kMaxIscsiNameLength - head.size(), 'a');
  EXPECT_TRUE(validateIscsiName(longest));
  EXPECT_THAT(errorOf(validateIscsiName(longest + "a")), HasSubstr("longer than 223 bytes"));
}

TEST(ValidateIscsiName, RejectsCharactersOutsideTheRfcSet) {
  for (const std::string &bad : std::vector<std::string>{
           "iqn.2001-04.com.example:disk 1", "iqn.2001-04.com.example:a_b",
           "iqn.2001-04.com.example:a/b", "iqn.2001-04.com.example:\xc3\xa9",
           std::string("iqn.2001-04.com.example:a\0b", 27), "iqn.2001-04.com.example:$(reboot)"}) {
    EXPECT_THAT(errorOf(validateIscsiName(bad)), HasSubstr("has a character outside")) << bad;
  }
}

TEST(ValidateIscsiName, EscapesJunkInTheReason) {
  const auto error = errorOf(validateIscsiName("iqn.2001-04.com.x:\n\x1b[31m"));
  EXPECT_THAT(error, HasSubstr("\\x0a\\x1b[31m"));
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(ValidateIscsiName, RejectsBrokenIqnDates) {
  for (const char *bad :
       {"iqn.2001-13.com.example", "iqn.2001-00.com.example", "iqn.01-04.com.example",
        "iqn.2001-4.com.example", "iqn.2001.com.example", "iqn.", "iqn.2001-04"}) {
    EXPECT_FALSE(validateIscsiName(bad)) << bad;
  }
  EXPECT_THAT(errorOf(validateIscsiName("iqn.2001-13.com.example")), HasSubstr("invalid date"));
}

TEST(ValidateIscsiName, RejectsAMissingOrMalformedNamingAuthority) {
  EXPECT_THAT(errorOf(validateIscsiName("iqn.2001-04.:disk")), HasSubstr("no naming authority"));
  EXPECT_THAT(errorOf(validateIscsiName("iqn.2001-04.com..example")), HasSubstr("empty label"));
  EXPECT_THAT(errorOf(validateIscsiName("iqn.2001-04.com.example.:x")), HasSubstr("empty label"));
}

TEST(ValidateIscsiName, RejectsEuiAndNaaWithTheWrongDigits) {
  EXPECT_THAT(errorOf(validateIscsiName("eui.02004567A425678")), HasSubstr("16 hex digits"));
  EXPECT_THAT(errorOf(validateIscsiName("eui.02004567A425678G")), HasSubstr("16 hex digits"));
  EXPECT_THAT(errorOf(validateIscsiName("naa.52004567BA64678D00")), HasSubstr("16 or 32"));
}

TEST(ValidateIscsiName, RejectsUnknownPrefixesAndEmptyNames) {
  EXPECT_THAT(errorOf(validateIscsiName("foo.bar")), HasSubstr("starts with none of"));
  EXPECT_THAT(errorOf(validateIscsiName("")), HasSubstr("empty"));
}

TEST(CanonicalIpAddress, KeepsDottedQuads) {
  EXPECT_EQ(canonicalIpAddress("10.10.1.20"), "10.10.1.20");
  EXPECT_EQ(canonicalIpAddress("0.0.0.0"), "0.0.0.0");
  EXPECT_EQ(canonicalIpAddress("255.255.255.255"), "255.255.255.255");
}

TEST(CanonicalIpAddress, RejectsAmbiguousOrOutOfRangeIpv4) {
  for (const char *bad : {"10.10.1", "10.10.1.256", "10.010.1.20", "10.10.1.20.1", "1..2.3",
                          "10.10.1.", "+1.2.3.4"}) {
    EXPECT_FALSE(canonicalIpAddress(bad)) << bad;
  }
}

TEST(CanonicalIpAddress, WritesIpv6AsRfc5952Does) {
  EXPECT_EQ(canonicalIpAddress("FD00:0:0:0:0:0:0:20"), "fd00::20");
  EXPECT_EQ(canonicalIpAddress("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
  EXPECT_EQ(canonicalIpAddress("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");
  EXPECT_EQ(canonicalIpAddress("::"), "::");
  EXPECT_EQ(canonicalIpAddress("::1"), "::1");
  EXPECT_EQ(canonicalIpAddress("fe80::"), "fe80::");
  EXPECT_EQ(canonicalIpAddress("0:0:0:0:0:ffff:a0a:114"), "::ffff:10.10.1.20");
  EXPECT_EQ(canonicalIpAddress("64:ff9b::10.10.1.20"), "64:ff9b::a0a:114");
  EXPECT_EQ(canonicalIpAddress("1:2:3:4:5:6:7::"), "1:2:3:4:5:6:7:0");
}

TEST(CanonicalIpAddress, RejectsMalformedIpv6) {
  for (const char *bad :
       {":::", "1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "::1.2.3",
        "1.2.3.4::", "g::1", ":1::", "1:2:3:4:5:6:7:8::", "fe80::1%eth0"}) {
    EXPECT_FALSE(canonicalIpAddress(bad)) << bad;
  }
  EXPECT_THAT(errorOf(canonicalIpAddress("fe80::1%eth0")), HasSubstr("zone"));
}

TEST(CanonicalIpAddress, RefusesHostNames) {
  EXPECT_THAT(errorOf(canonicalIpAddress("storage.example.com")), HasSubstr("host name"));
}

TEST(ParseTargetAddress, ReadsWhatSendTargetsReturns) {
  EXPECT_EQ(parseTargetAddress("10.10.1.20:3260,1"), (Portal{"10.10.1.20", 3260, 1}));
  EXPECT_EQ(parseTargetAddress("TargetAddress=10.10.1.21:3261,2"), (Portal{"10.10.1.21", 3261, 2}));
  EXPECT_EQ(parseTargetAddress("[FD00::20]:3260,1"), (Portal{"fd00::20", 3260, 1}));
  EXPECT_EQ(parseTargetAddress("[fd00::20],7"), (Portal{"fd00::20", 3260, 7}));
  EXPECT_EQ(parseTargetAddress("10.10.1.20,65535"), (Portal{"10.10.1.20", 3260, 65535}));
  EXPECT_EQ(parseTargetAddress("10.10.1.20:1,0"), (Portal{"10.10.1.20", 1, 0}));
}

TEST(ParseTargetAddress, RejectsJunkWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty"},
      {"10.10.1.20:3260", "no portal group tag"},
      {"10.10.1.20:3260,65536", "portal group tag"},
      {"10.10.1.20:3260,-1", "portal group tag"},
      {"10.10.1.20:3260,", "portal group tag"},
      {"10.10.1.20:0,1", "port"},
      {"10.10.1.20:65536,1", "port"},
      {"10.10.1.20:03260,1", "port"},
      {"10.10.1.20:,1", "port"},
      {"fd00::20:3260,1", "without the required brackets"},
      {"[fd00::20:3260,1", "unterminated"},
      {"[fd00::20]x3260,1", "junk after"},
      {"[10.10.1.20]:3260,1", "non-IPv6"},
      {"storage.example.com:3260,1", "host name"},
      {"10.10.1.999:3260,1", "not an IPv4 address"},
      {"10.10.1.20 :3260,1", "not an IPv4 address"},
      {std::string(300, '1') + ",1", "longer than 255"},
  };
  for (const auto &[text, reason] : cases) {
    EXPECT_THAT(errorOf(parseTargetAddress(text)), HasSubstr(reason)) << text;
  }
}

TEST(ParseInitiatorNameFile, FindsTheNameBetweenComments) {
  EXPECT_EQ(parseInitiatorNameFile("## DO NOT EDIT OR REMOVE THIS FILE!\n"
                                   "## If you remove this file, the iSCSI daemon will not start.\n"
                                   "InitiatorName=iqn.1993-08.org.debian:01:4d2a5e8f0c1\n"),
            "iqn.1993-08.org.debian:01:4d2a5e8f0c1");
  EXPECT_EQ(parseInitiatorNameFile("  InitiatorName=iqn.2004-10.com.ubuntu:01:abc \r\n"),
            "iqn.2004-10.com.ubuntu:01:abc");
}

TEST(ParseInitiatorNameFile, ExplainsWhatIsWrong) {
  EXPECT_THAT(errorOf(parseInitiatorNameFile("#InitiatorName=iqn.2001-04.com.example\n")),
              HasSubstr("no InitiatorName= line"));
  EXPECT_THAT(errorOf(parseInitiatorNameFile("\nInitiatorName=not-a-name\n")),
              HasSubstr("line 2: iSCSI name \"not-a-name\""));
}

TEST(ProbeInitiatorName, AppendsTheProbeSuffixToTheHostsIqn) {
  EXPECT_EQ(probeInitiatorName("iqn.1993-08.org.debian:01:4d2a5e8f0c1"),
            "iqn.1993-08.org.debian:01:4d2a5e8f0c1:pathkeeper-probe");
}

TEST(ProbeInitiatorName, RefusesNamesThatCannotCarryTheSuffix) {
  EXPECT_THAT(errorOf(probeInitiatorName("eui.02004567A425678D")), HasSubstr("not an IQN"));
  const std::string head = "iqn.2001-04.com.example:";
  EXPECT_THAT(errorOf(probeInitiatorName(head + std::string(190, 'a'))), HasSubstr("too long"));
  EXPECT_FALSE(probeInitiatorName("junk"));
}

TEST(PrintableQuoted, EscapesAndTruncates) {
  EXPECT_EQ(printableQuoted("a\"b\\c\x7f"), "\"a\\x22b\\x5cc\\x7f\"");
  EXPECT_EQ(printableQuoted("abcdef", 3), "\"abc\"... (6 bytes)");
}

DiscoveredTarget discovered(std::string iqn, std::string address, std::string netdev,
                            std::string probed = "") {
  Portal portal{std::move(address), 3260, 1};
  Portal probedPortal = portal;
  if (!probed.empty()) {
    probedPortal.address = std::move(probed);
  }
  return {std::move(iqn), portal, probedPortal, std::move(netdev)};
}

Path session(std::string iqn, std::string address, std::string netdev, std::uint32_t tpgt = 1) {
  Path path;
  path.targetIqn = std::move(iqn);
  path.portal = {std::move(address), 3260, tpgt};
  path.netdev = std::move(netdev);
  return path;
}

const std::string kUpper20 = "iqn.1987-05.com.cisco:05.gw.20.21000011c6d3e2b4";
const std::string kUpper21 = "iqn.1987-05.com.cisco:05.gw.21.21000011c6d3e2b4";

TEST(FindMissingPaths, ReportsTheNicPortalPairWithoutASession) {
  const std::vector<DiscoveredTarget> found = {
      discovered(kUpper20, "10.10.1.20", "eth1"), discovered(kUpper20, "10.10.1.20", "eth2"),
      discovered(kUpper21, "10.10.1.21", "eth1"), discovered(kUpper21, "10.10.1.21", "eth2")};
  const std::vector<Path> kernel = {session(kUpper20, "10.10.1.20", "eth1"),
                                    session(kUpper20, "10.10.1.20", "eth1"), // a second LUN
                                    session(kUpper21, "10.10.1.21", "eth2")};
  const auto missing = findMissingPaths(found, kernel);
  ASSERT_EQ(missing.size(), 2U);
  EXPECT_EQ(missing[0].str(), kUpper20 + " via 10.10.1.20:3260,1 from eth2");
  EXPECT_EQ(missing[1].str(), kUpper21 + " via 10.10.1.21:3260,1 from eth1");
}

TEST(FindMissingPaths, ReportsNothingWhenEverySessionExists) {
  const std::vector<DiscoveredTarget> found = {discovered(kUpper20, "10.10.1.20", "eth1")};
  const std::vector<Path> kernel = {session(kUpper20, "10.10.1.20", "eth1")};
  EXPECT_TRUE(findMissingPaths(found, kernel).empty());
}

TEST(FindMissingPaths, IgnoresAdvertisedPortalsTheProbeDidNotReach) {
  // A target reached on .20 also advertises .21; only a probe of .21 proves it.
  const std::vector<DiscoveredTarget> found = {
      discovered(kUpper20, "10.10.1.20", "eth1"),
      discovered(kUpper20, "10.10.1.21", "eth1", "10.10.1.20")};
  EXPECT_FALSE(found[1].provenReachable());
  const auto missing = findMissingPaths(found, {});
  ASSERT_EQ(missing.size(), 1U);
  EXPECT_EQ(missing[0].portal.address, "10.10.1.20");
}

TEST(FindMissingPaths, MatchesNamesCaseInsensitivelyAndAddressesCanonically) {
  const std::vector<DiscoveredTarget> found = {
      discovered("iqn.2001-04.com.example:t1", "fd00::20", "eth1")};
  const std::vector<Path> kernel = {
      session("IQN.2001-04.COM.EXAMPLE:T1", "FD00:0:0::20", "eth1", 9)};
  EXPECT_TRUE(findMissingPaths(found, kernel).empty());
}

TEST(FindMissingPaths, AnUnboundProbeIsCoveredBySessionOnAnyNic) {
  const std::vector<DiscoveredTarget> found = {discovered(kUpper20, "10.10.1.20", "")};
  EXPECT_TRUE(
      findMissingPaths(found, std::vector<Path>{session(kUpper20, "10.10.1.20", "eth2")}).empty());
  // ...but an unbound session does not prove that a given NIC has its path.
  const std::vector<DiscoveredTarget> bound = {discovered(kUpper20, "10.10.1.20", "eth1")};
  EXPECT_EQ(findMissingPaths(bound, std::vector<Path>{session(kUpper20, "10.10.1.20", "")}).size(),
            1U);
}

TEST(FindMissingPaths, ComparesThePort) {
  const std::vector<DiscoveredTarget> found = {discovered(kUpper20, "10.10.1.20", "eth1")};
  auto other = session(kUpper20, "10.10.1.20", "eth1");
  other.portal.port = 3261;
  EXPECT_EQ(findMissingPaths(found, std::vector<Path>{other}).size(), 1U);
}

} // namespace
} // namespace pathkeeper::selector
