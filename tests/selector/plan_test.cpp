#include "plan.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::selector {
namespace {

using testing::makePath;
using testing::withTpg;

constexpr const char *kUpperWwid = "36001405a1b2c3d4e5f60718293a4b5c6";
constexpr const char *kLowerWwid = "36001405f6e5d4c3b2a1908172635445";
// The MDS gives each portal its own target name for one FC port: the pWWN at
// the end is the controller, the rest differs per portal.
constexpr const char *kUpperIqnPortal1 =
    "iqn.1987-05.com.cisco:05.mds9216-1.02-01.210000d0b2000001";
constexpr const char *kUpperIqnPortal2 =
    "iqn.1987-05.com.cisco:05.mds9216-1.02-02.210000d0b2000001";
constexpr const char *kLowerIqnPortal1 =
    "iqn.1987-05.com.cisco:05.mds9216-1.02-01.210000d0b2000002";
constexpr const char *kLowerIqnPortal2 =
    "iqn.1987-05.com.cisco:05.mds9216-1.02-02.210000d0b2000002";

Path xservePath(std::string device, std::uint32_t minor, const char *wwid, const char *iqn,
                const char *portal, const char *netdev) {
  auto path = makePath(std::move(device), minor, wwid);
  path.targetIqn = iqn;
  path.portal = Portal{portal, 3260, 1};
  path.netdev = netdev;
  return path;
}

std::vector<Path> xservePaths() {
  return {xservePath("sdb", 16, kUpperWwid, kUpperIqnPortal1, "10.10.1.20", "eth1"),
          xservePath("sdc", 32, kLowerWwid, kLowerIqnPortal1, "10.10.1.20", "eth1"),
          xservePath("sdd", 48, kUpperWwid, kUpperIqnPortal2, "10.10.1.21", "eth2"),
          xservePath("sde", 64, kLowerWwid, kLowerIqnPortal2, "10.10.1.21", "eth2")};
}

Config xserveConfig() {
  Config config = builtinConfig();
  ControllerRule upper;
  upper.match.targetIqnGlob = "iqn.1987-05.com.cisco:05.*.210000d0b2000001";
  upper.label = "upper";
  upper.alias = "xserve-upper";
  ControllerRule lower;
  lower.match.targetIqnGlob = "iqn.1987-05.com.cisco:05.*.210000d0b2000002";
  lower.label = "lower";
  lower.alias = "xserve-lower";
  config.controllers = {upper, lower};
  return config;
}

TEST(MdsControllerFromIqn, TakesThePwwnAtTheEnd) {
  EXPECT_EQ(mdsControllerFromIqn(kUpperIqnPortal1), "210000d0b2000001");
  EXPECT_EQ(mdsControllerFromIqn("iqn.1987-05.com.cisco:05.sw.1-1.21000000C0FFEE00"),
            "21000000c0ffee00");
}

TEST(MdsControllerFromIqn, IgnoresOtherTargetNames) {
  EXPECT_FALSE(mdsControllerFromIqn("iqn.2003-01.org.linux-iscsi.host:sn.1234"));
  EXPECT_FALSE(mdsControllerFromIqn("iqn.1987-05.com.cisco:05.sw.210000d0b2000001"));
  EXPECT_FALSE(mdsControllerFromIqn("iqn.1987-05.com.cisco:05.sw.1-1.210000d0b200000"));
  EXPECT_FALSE(mdsControllerFromIqn("iqn.1987-05.com.cisco:05.sw.1-1.210000d0b200000x"));
}

TEST(PlanMaps, BuildsOneMapPerXserveControllerWithOnePathPerPortal) {
  auto plan = planMaps(xservePaths(), xserveConfig());
  EXPECT_TRUE(plan.warnings.empty());
  EXPECT_TRUE(plan.skipped.empty());
  ASSERT_EQ(plan.maps.size(), 2U);

  const auto &lower = plan.maps[0];
  EXPECT_EQ(lower.spec.alias, "xserve-lower");
  EXPECT_EQ(lower.spec.wwid, kLowerWwid);
  EXPECT_EQ(lower.controller, "lower");
  EXPECT_EQ(lower.spec.dmUuid(), std::string("mpath-") + kLowerWwid);

  const auto &upper = plan.maps[1];
  EXPECT_EQ(upper.spec.alias, "xserve-upper");
  ASSERT_EQ(upper.spec.groups.size(), 1U); // the built-in Xserve entry is multibus
  ASSERT_EQ(upper.spec.groups[0].paths.size(), 2U);
  EXPECT_EQ(upper.spec.groups[0].paths[0].portal.address, "10.10.1.20");
  EXPECT_EQ(upper.spec.groups[0].paths[1].portal.address, "10.10.1.21");
  EXPECT_EQ(upper.spec.hwHandler, "");
  // Defaults: service-time, no_path_retry 12 -> queue_if_no_path.
  EXPECT_EQ(upper.table, "0 2097152 multipath 1 queue_if_no_path 0 1 1 service-time 0 2 2 "
                         "8:16 1 1 8:48 1 1");
}

TEST(PlanMaps, LabelsMdsControllersByPwwnWithoutAnyRules) {
  Config config = builtinConfig();
  config.defaults.userFriendlyNames = false;
  auto plan = planMaps(xservePaths(), config);
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_EQ(plan.maps[0].spec.alias, kUpperWwid);
  EXPECT_EQ(plan.maps[0].controller, "210000d0b2000001");
  EXPECT_EQ(plan.maps[0].spec.groups.at(0).paths.size(), 2U);
}

TEST(PlanMaps, AllocatesUserFriendlyNamesAndRecordsThemInTheBindings) {
  auto plan = planMaps(xservePaths(), builtinConfig());
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_TRUE(plan.bindingsChanged);
  EXPECT_EQ(plan.bindings.aliasFor(plan.maps[0].spec.wwid), plan.maps[0].spec.alias);
  EXPECT_NE(plan.maps[0].spec.alias, plan.maps[1].spec.alias);
  EXPECT_EQ(plan.maps[0].spec.alias.substr(0, 5), "mpath");

  // A second run with the saved bindings keeps the names and changes nothing.
  auto again = planMaps(xservePaths(), builtinConfig(), plan.bindings);
  EXPECT_FALSE(again.bindingsChanged);
  EXPECT_EQ(again.maps[0].spec.alias, plan.maps[0].spec.alias);
}

TEST(PlanMaps, RefusesOneWwidReportedByTwoControllers) {
  auto paths = xservePaths();
  paths[1].wwid = kUpperWwid; // the lower LUN now claims the upper's identity
  paths[3].wwid = kUpperWwid;
  auto plan = planMaps(paths, xserveConfig());
  EXPECT_TRUE(plan.maps.empty());
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("lower and upper"), std::string::npos) << plan.warnings[0];
  EXPECT_EQ(plan.skipped.size(), 4U);
}

TEST(PlanMaps, SkipsPathsWithoutWwidOrRemovedWithAReason) {
  auto paths = xservePaths();
  paths[0].wwid.clear();
  paths[2].state = PathState::Removed;
  auto plan = planMaps(paths, xserveConfig());
  ASSERT_EQ(plan.skipped.size(), 2U);
  EXPECT_EQ(plan.skipped[0].device, "sdb");
  EXPECT_NE(plan.skipped[0].reason.find("no WWID"), std::string::npos);
  EXPECT_EQ(plan.skipped[1].reason, "device was removed");
  EXPECT_EQ(plan.maps.size(), 1U); // the upper LUN has no path left
}

TEST(PlanMaps, SkipsAPathWhoseSizeDisagreesWithItsLun) {
  auto paths = xservePaths();
  paths[2].sizeSectors = 4096;
  auto plan = planMaps(paths, xserveConfig());
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].device, "sdd");
  EXPECT_EQ(plan.maps[1].spec.groups[0].paths.size(), 1U);
}

TEST(PlanMaps, GroupsAluaPathsByPortGroupWithTheOptimizedFirstAndAluaHandler) {
  std::vector<Path> paths{withTpg(makePath("sdb", 16), 1, AluaState::ActiveOptimized),
                          withTpg(makePath("sdc", 32), 2, AluaState::ActiveNonOptimized),
                          withTpg(makePath("sdd", 48), 1, AluaState::ActiveOptimized),
                          withTpg(makePath("sde", 64), 2, AluaState::ActiveNonOptimized)};
  for (auto &path : paths) {
    path.vendor = "LIO-ORG";
    path.product = "alua-lun";
    path.priority = 0; // the planner derives it from the ALUA state
  }
  Config config = builtinConfig();
  config.defaults.userFriendlyNames = false;
  auto plan = planMaps(paths, config);
  ASSERT_EQ(plan.maps.size(), 1U);
  const auto &spec = plan.maps[0].spec;
  EXPECT_EQ(spec.hwHandler, "alua");
  ASSERT_EQ(spec.groups.size(), 2U);
  EXPECT_EQ(spec.groups[0].priority(), 50);
  EXPECT_EQ(spec.groups[0].paths[0].device, "sdb");
  EXPECT_EQ(spec.groups[1].priority(), 10);
  EXPECT_NE(plan.maps[0].table.find(" 1 alua 2 1 "), std::string::npos) << plan.maps[0].table;
}

TEST(PlanMaps, GivesAnXserveThatReportsAluaTheAluaHandler) {
  // An emulated or gateway-fronted Xserve whose LUNs report ALUA: the kernel
  // attaches scsi_dh_alua anyway, so the table must say so.
  auto paths = xservePaths();
  for (auto &path : paths) {
    path.alua = AluaState::ActiveOptimized;
  }
  auto plan = planMaps(paths, xserveConfig());
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_EQ(plan.maps[1].table, "0 2097152 multipath 1 queue_if_no_path 1 alua 1 1 service-time 0 "
                                "2 2 8:16 1 1 8:48 1 1");
}

TEST(PlanMaps, KeepsTheHandlerTheKernelAttachedToEveryPath) {
  // scsi_dh_rdac fills access_state as well; the kernel keeps rdac attached
  // whatever a table names, so naming alua would differ on every pass.
  auto paths = xservePaths();
  for (auto &path : paths) {
    path.alua = AluaState::ActiveOptimized;
    path.attachedHandler = "rdac";
  }
  auto plan = planMaps(paths, xserveConfig());
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_EQ(plan.maps[1].spec.hwHandler, "rdac");
  EXPECT_EQ(plan.maps[1].hwHandlerReason, "the kernel attached rdac to every path");
  EXPECT_NE(plan.maps[1].table.find(" 1 rdac "), std::string::npos) << plan.maps[1].table;

  // Not every path has it (one not probed yet, say): the ALUA states decide.
  paths[0].attachedHandler.clear(); // sdb, an upper path
  plan = planMaps(paths, xserveConfig());
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_EQ(plan.maps[1].spec.alias, "xserve-upper");
  EXPECT_EQ(plan.maps[1].spec.hwHandler, "alua") << plan.maps[1].table;
  EXPECT_EQ(plan.maps[0].spec.hwHandler, "rdac") << plan.maps[0].table;
}

TEST(PlanMaps, ReportsAnAliasTwoMapsWouldShare) {
  auto config = xserveConfig();
  config.controllers[1].alias = "xserve-upper";
  auto plan = planMaps(xservePaths(), config);
  EXPECT_EQ(plan.maps.size(), 1U);
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("already used"), std::string::npos);
}

TEST(PlanMaps, FallsBackToServiceTimeWhenTheKernelLacksHistoricalServiceTime) {
  auto config = xserveConfig();
  MapOverride override;
  override.wwid = kUpperWwid;
  override.policy.selector = SelectorKind::HistoricalServiceTime;
  config.maps.push_back(override);

  auto without = planMaps(xservePaths(), config, {}, KernelCapabilities{false});
  EXPECT_EQ(without.maps.at(1).spec.selector, SelectorKind::ServiceTime);
  EXPECT_NE(without.maps.at(1).notes.back().find("service-time"), std::string::npos);

  auto with = planMaps(xservePaths(), config, {}, KernelCapabilities{true});
  EXPECT_EQ(with.maps.at(1).spec.selector, SelectorKind::HistoricalServiceTime);
  EXPECT_NE(with.maps.at(1).table.find("historical-service-time 0 2 1 8:16 1 8:48 1"),
            std::string::npos)
      << with.maps.at(1).table;
}

TEST(PlanMaps, RendersSelectorAutoAsQueueLengthUntilMeasuredAndSaysSo) {
  auto config = xserveConfig();
  config.defaults.autoSelector = true;
  config.defaults.selector = SelectorKind::QueueLength; // what "auto" parses to
  auto plan = planMaps(xservePaths(), config);
  const auto &upper = plan.maps.at(1);
  EXPECT_TRUE(upper.autoSelector);
  EXPECT_EQ(upper.spec.selector, SelectorKind::QueueLength);
  EXPECT_NE(upper.table.find("queue-length 0 2 1 8:16 1 8:48 1"), std::string::npos) << upper.table;
  EXPECT_EQ(upper.notes.back(), "selector auto: queue-length until pathkeeperd has measured the "
                                "paths");
  EXPECT_FALSE(planMaps(xservePaths(), xserveConfig()).maps.at(1).autoSelector);
}

TEST(ApplyLinkSpeedWeights, WeighsServiceTimePathsByTheirNicsSpeed) {
  auto plan = planMaps(xservePaths(), xserveConfig());
  auto upper = plan.maps[1];
  ASSERT_EQ(upper.spec.alias, "xserve-upper");
  EXPECT_TRUE(applyLinkSpeedWeights(upper, {{"eth1", 10000}, {"eth2", 1000}}));
  EXPECT_EQ(upper.spec.groups[0].paths[0].relativeThroughput, 100U);
  EXPECT_EQ(upper.spec.groups[0].paths[1].relativeThroughput, 10U);
  EXPECT_EQ(upper.table, "0 2097152 multipath 1 queue_if_no_path 0 1 1 service-time 0 2 2 "
                         "8:16 1 100 8:48 1 10");
  ASSERT_FALSE(upper.notes.empty());
  EXPECT_NE(upper.notes.back().find("sdd 10 (eth2 1000 Mb/s)"), std::string::npos)
      << upper.notes.back();
}

TEST(ApplyLinkSpeedWeights, GivesAVerySlowPathWeightOneNotZero) {
  auto upper = planMaps(xservePaths(), xserveConfig()).maps[1];
  EXPECT_TRUE(applyLinkSpeedWeights(upper, {{"eth1", 100000}, {"eth2", 10}}));
  EXPECT_EQ(upper.spec.groups[0].paths[1].relativeThroughput, 1U);
}

TEST(ApplyLinkSpeedWeights, LeavesEqualSpeedsAndUnknownSpeedsAlone) {
  auto upper = planMaps(xservePaths(), xserveConfig()).maps[1];
  const std::string table = upper.table;
  EXPECT_FALSE(applyLinkSpeedWeights(upper, {{"eth1", 1000}, {"eth2", 1000}}));
  EXPECT_FALSE(applyLinkSpeedWeights(upper, {{"eth1", 1000}}));
  EXPECT_FALSE(applyLinkSpeedWeights(upper, {{"eth1", 1000}, {"eth2", 0}}));
  EXPECT_EQ(upper.table, table);
  EXPECT_EQ(upper.spec.groups[0].paths[0].relativeThroughput, 1U);
}

TEST(ApplyLinkSpeedWeights, LeavesOtherSelectorsAlone) {
  Config config = xserveConfig();
  config.defaults.selector = SelectorKind::RoundRobin;
  auto upper = planMaps(xservePaths(), config).maps[1];
  EXPECT_FALSE(applyLinkSpeedWeights(upper, {{"eth1", 10000}, {"eth2", 1000}}));
}

} // namespace
} // namespace pathkeeper::selector
