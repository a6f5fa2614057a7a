// `pathkeeperctl export multipath-conf`: the multipath.conf text made from a
// real plan (selector::planMaps over hand-made paths or the xserve inventory
// file). Whether multipath-tools 0.9.4 accepts it and builds the same maps is
// the VM test vm_xserve_dbus (tests/lab/guest/dbus_checks.sh).
#include "export_conf.hpp"

#include "config_files.hpp"
#include "inventory_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pathkeeper::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

selector::Config config(std::string_view toml = "") {
  auto parsed = selector::parseConfig(toml, "test.conf", selector::builtinConfig());
  EXPECT_TRUE(parsed) << parsed.error();
  return parsed ? *parsed : selector::builtinConfig();
}

std::string exportOf(std::vector<selector::Path> paths, const selector::Config &cfg) {
  return exportMultipathConf(selector::planMaps(std::move(paths), cfg), cfg);
}

// A LUN of the lab's ALUA array: one path per (target port group, portal).
selector::Path aluaPath(std::string device, unsigned minor, std::string wwid, std::uint16_t tpg,
                        selector::AluaState state) {
  selector::Path path;
  path.device = std::move(device);
  path.devt = {8, minor};
  path.wwid = std::move(wwid);
  path.vendor = "PKLAB";
  path.product = "ALUA ARRAY";
  path.serial = "pk0001";
  path.sizeSectors = 2048;
  path.targetIqn = "iqn.2024-01.org.pathkeeper.test:tpg" + std::to_string(tpg);
  path.portal = {minor % 32 == 0 ? "10.10.1.20" : "10.10.1.21", 3260, 1};
  path.netdev = minor % 32 == 0 ? "eth1" : "eth2";
  path.sessionId = static_cast<int>(minor);
  path.state = selector::PathState::Up;
  path.targetPortGroup = tpg;
  path.alua = state;
  return path;
}

TEST(ExportConf, XserveInventoryWithControllerRules) {
  const std::string dir = PATHKEEPER_SOURCE_DIR "/tests/data/";
  auto text = daemon::readConfigFile(dir + "inventory/xserve.toml");
  ASSERT_TRUE(text) << text.error();
  auto paths = daemon::parseInventory(*text, "xserve.toml");
  ASSERT_TRUE(paths) << paths.error();
  auto rules = daemon::readConfigFile(dir + "config/xserve.conf");
  ASSERT_TRUE(rules) << rules.error();
  const auto cfg = config(*rules);

  // The built-in Xserve entry groups multibus; the lab's LIO reports ALUA,
  // so the plan attaches alua. Every WWID but the two planned is blacklisted.
  EXPECT_EQ(exportOf(*paths, cfg),
            R"(# multipath.conf for multipath-tools 0.9.4, from pathkeeper's plan
# (pathkeeperctl export multipath-conf). multipathd builds the maps below
# and no others.

defaults {
	find_multipaths off
}

blacklist {
	wwid ".*"
}

blacklist_exceptions {
	wwid "^360014050393a1b002000000000000000$"
	wwid "^360014050393a1b001000000000000000$"
}

devices {
	device {
		vendor "^APPLE$"
		product "^Xserve RAID"
		path_grouping_policy multibus
		hardware_handler "1 alua"
	}
}

multipaths {
	multipath {
		wwid "360014050393a1b002000000000000000"
		alias "xserve-lower"
		path_grouping_policy multibus
		path_selector "service-time 0"
		failback immediate
		no_path_retry 12
	}
	multipath {
		wwid "360014050393a1b001000000000000000"
		alias "xserve-upper"
		path_grouping_policy multibus
		path_selector "service-time 0"
		failback immediate
		no_path_retry 12
	}
}
)");
}

TEST(ExportConf, AluaControllerGroupsBecomeGroupByPrioWithTheAluaPrioritizer) {
  using enum selector::AluaState;
  const std::string wwid = "36001405aaaa0000000000000000000001";
  const auto out = exportOf({aluaPath("sda", 0, wwid, 1, ActiveOptimized),
                             aluaPath("sdb", 16, wwid, 1, ActiveOptimized),
                             aluaPath("sdc", 32, wwid, 2, ActiveNonOptimized),
                             aluaPath("sdd", 48, wwid, 2, ActiveNonOptimized)},
                            config());
  EXPECT_THAT(out, HasSubstr("\t\tpath_grouping_policy group_by_prio\n\t\tprio alua\n"));
  EXPECT_THAT(out, Not(HasSubstr("not reproduced")));
  // No pathkeeper device entry matches: the handler gets an exact-match entry.
  EXPECT_THAT(out, HasSubstr("\t\tvendor \"^PKLAB$\"\n\t\tproduct \"^ALUA ARRAY$\"\n"
                             "\t\thardware_handler \"1 alua\"\n"));
  EXPECT_THAT(out, HasSubstr("\twwid \"^" + wwid + "$\"\n"));
}

TEST(ExportConf, TargetPortGroupsInOneAluaStateCannotBeReproduced) {
  using enum selector::AluaState;
  const std::string wwid = "36001405aaaa0000000000000000000002";
  const auto plan = selector::planMaps(
      {aluaPath("sda", 0, wwid, 1, ActiveOptimized), aluaPath("sdc", 32, wwid, 2, ActiveOptimized)},
      config());
  ASSERT_EQ(plan.maps.size(), 1U);
  ASSERT_EQ(plan.maps[0].spec.groups.size(), 2U) << "grouped by target port group";
  const auto out = exportMultipathConf(plan, config());
  // group_by_prio would merge both groups; failover is the safe fallback.
  EXPECT_THAT(out, HasSubstr("\t# " + plan.maps[0].spec.alias +
                             ": groups not reproduced exactly: pathkeeper groups it by "
                             "controller (2 groups"));
  EXPECT_THAT(out, HasSubstr("\t\tpath_grouping_policy failover\n"));
  EXPECT_THAT(out, Not(HasSubstr("prio alua")));
}

TEST(ExportConf, PolicyFromTheConfig) {
  using enum selector::AluaState;
  const std::string wwid = "36001405aaaa0000000000000000000003";
  const auto out = exportOf(
      {aluaPath("sda", 0, wwid, 1, ActiveOptimized), aluaPath("sdc", 32, wwid, 1, ActiveOptimized)},
      config(R"(
[defaults]
grouping = "failover"
selector = "round-robin"
no_path_retry = "queue"
failback = "manual"
pg_init_retries = 5
hardware_handler = ""

[[map]]
wwid = "36001405aaaa0000000000000000000003"
alias = "db"
)"));
  EXPECT_THAT(out, HasSubstr(R"(	multipath {
		wwid "36001405aaaa0000000000000000000003"
		alias "db"
		path_grouping_policy failover
		path_selector "round-robin 0"
		failback manual
		no_path_retry queue
		features "2 pg_init_retries 5"
	}
)"));
  // No device entry and no handler: no devices section at all.
  EXPECT_THAT(out, Not(HasSubstr("devices {")));
}

TEST(ExportConf, SkippedPathsAreCommentsAndAnEmptyPlanBlacklistsEverything) {
  using enum selector::AluaState;
  auto path = aluaPath("sda", 0, "", 1, ActiveOptimized); // no WWID: skipped
  const auto out = exportOf({path}, config());
  EXPECT_THAT(out, HasSubstr("# not exported: sda: "));
  EXPECT_THAT(out, HasSubstr("# pathkeeper plans no map: every WWID is blacklisted.\n"));
  EXPECT_THAT(out, HasSubstr("blacklist {\n\twwid \".*\"\n}\n"));
  EXPECT_THAT(out, Not(HasSubstr("blacklist_exceptions")));
  EXPECT_THAT(out, Not(HasSubstr("multipaths {")));
}

TEST(ExportConf, WwidExceptionsAreAnchoredAndEscaped) {
  using enum selector::AluaState;
  const std::string wwid = "1PKLAB  ALUA.ARRAY (1)";
  const auto out = exportOf({aluaPath("sda", 0, wwid, 1, ActiveOptimized)}, config());
  EXPECT_THAT(out, HasSubstr("\twwid \"^1PKLAB  ALUA\\.ARRAY \\(1\\)$\"\n"));
  EXPECT_THAT(out, HasSubstr("\t\twwid \"" + wwid + "\"\n"));
}

} // namespace
} // namespace pathkeeper::ctl
