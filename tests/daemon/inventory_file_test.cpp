#include "inventory_file.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::daemon {
namespace {

constexpr const char *kTwoPaths = R"(
[[path]]
device = "sdb"
devt = "8:16"
wwid = "36001405aa"
vendor = "LIO-ORG"
product = "alua-lun"
size = 2048
target = "iqn.2003-01.org.linux-iscsi.t:sn.1"
portal = "10.10.1.20:3260,1"
iface = "iface0"
netdev = "eth1"
session = 3
state = "ghost"
tpg = 2
alua = "standby"
preferred = true
priority = 7

[[path]]
device = "sdc"
devt = "8:32"
)";

TEST(ParseInventory, ReadsEveryFieldOfAPath) {
  auto paths = parseInventory(kTwoPaths, "inv.toml");
  ASSERT_TRUE(paths) << paths.error();
  ASSERT_EQ(paths->size(), 2U);
  const auto &path = (*paths)[0];
  EXPECT_EQ(path.device, "sdb");
  EXPECT_EQ(path.devt, (selector::DevT{8, 16}));
  EXPECT_EQ(path.wwid, "36001405aa");
  EXPECT_EQ(path.sizeSectors, 2048U);
  EXPECT_EQ(path.portal, (selector::Portal{"10.10.1.20", 3260, 1}));
  EXPECT_EQ(path.netdev, "eth1");
  EXPECT_EQ(path.sessionId, 3);
  EXPECT_EQ(path.state, selector::PathState::Ghost);
  EXPECT_EQ(path.targetPortGroup, 2);
  EXPECT_EQ(path.alua, selector::AluaState::Standby);
  EXPECT_TRUE(path.aluaPreferred);
  EXPECT_EQ(path.priority, 7);
  // Unset fields take defaults: state up, no session.
  EXPECT_EQ((*paths)[1].state, selector::PathState::Up);
  EXPECT_EQ((*paths)[1].sessionId, -1);
}

TEST(ParseInventory, NamesFileLineAndKeyInErrors) {
  auto paths = parseInventory("[[path]]\ndevice = \"sdb\"\ndevt = \"8-16\"\n", "inv.toml");
  ASSERT_FALSE(paths);
  EXPECT_EQ(paths.error().rfind("inv.toml:3:", 0), 0U) << paths.error();
  EXPECT_NE(paths.error().find("path[1].devt"), std::string::npos) << paths.error();
}

TEST(ParseInventory, RejectsUnknownKeysWrongTypesAndDuplicates) {
  EXPECT_FALSE(parseInventory("[[path]]\ndevice = \"a\"\ndevt = \"8:0\"\ncolour = 1\n", "f"));
  EXPECT_FALSE(parseInventory("[[path]]\ndevice = \"a\"\ndevt = \"8:0\"\nsession = \"1\"\n", "f"));
  EXPECT_FALSE(parseInventory("[[path]]\ndevice = \"a\"\ndevt = \"8:0\"\nstate = \"fine\"\n", "f"));
  EXPECT_FALSE(parseInventory("[[path]]\ndevt = \"8:0\"\n", "f"));
  EXPECT_FALSE(parseInventory("[maps]\n", "f"));
  EXPECT_FALSE(parseInventory("[[path]]\ndevice = \"a\"\ndevt = \"8:0\"\n"
                              "[[path]]\ndevice = \"a\"\ndevt = \"8:16\"\n",
                              "f"));
  EXPECT_FALSE(parseInventory("[[path", "f"));
}

TEST(ParsePortal, AcceptsIscsiadmSpellings) {
  EXPECT_EQ(parsePortal("10.10.1.20:3260,1"), (selector::Portal{"10.10.1.20", 3260, 1}));
  EXPECT_EQ(parsePortal("10.10.1.21"), (selector::Portal{"10.10.1.21", 3260, 1}));
  EXPECT_EQ(parsePortal("[fd00::1]:3261,2"), (selector::Portal{"fd00::1", 3261, 2}));
  EXPECT_EQ(parsePortal("[fd00::1]"), (selector::Portal{"fd00::1", 3260, 1}));
}

TEST(ParsePortal, RejectsMalformedPortals) {
  for (const char *bad : {"", ":3260", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:x", "fd00::1:3260",
                          "[fd00::1", "[fd00::1]x", "10.0.0.1,x"}) {
    EXPECT_FALSE(parsePortal(bad)) << bad;
  }
}

} // namespace
} // namespace pathkeeper::daemon
