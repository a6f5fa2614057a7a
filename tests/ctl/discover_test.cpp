// The pure parts of `pathkeeperctl discover`: which probes to run, how the
// kernel's sessions are read from a captured sysfs tree, what counts as
// missing, and both output formats. Probe outcomes are built by hand here;
// real probes against a real target are tests/host/discover_host_test.sh.
#include "discover.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pathkeeper::ctl {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kUpper = "iqn.2024-01.org.pathkeeper.test:upper";
const std::string kLower = "iqn.2024-01.org.pathkeeper.test:lower";

KernelSession session(std::string name, std::string state, std::string target, std::string address,
                      std::string nic) {
  KernelSession out;
  out.name = std::move(name);
  out.state = std::move(state);
  out.path.targetIqn = std::move(target);
  out.path.portal = {std::move(address), 3260, 1};
  out.path.netdev = std::move(nic);
  return out;
}

std::vector<std::string> portalTexts(const ProbeSet &set) {
  std::vector<std::string> out;
  for (const auto &portal : set.portals) {
    out.push_back(portal.str());
  }
  return out;
}

ProbeOutcome answered(selector::Portal portal, std::string nic, std::vector<std::string> targets) {
  daemon::DiscoveryResult result;
  for (auto &target : targets) {
    result.targets.push_back({std::move(target), portal, portal, nic});
  }
  return {{portal, std::move(nic), "iqn.2024-01.org.pathkeeper.test:probe", milliseconds{1500}},
          std::move(result),
          milliseconds{12}};
}

ProbeOutcome failed(selector::Portal portal, std::string nic, std::string error) {
  return {{portal, std::move(nic), "iqn.2024-01.org.pathkeeper.test:probe", milliseconds{1500}},
          fail(std::move(error)),
          milliseconds{1501}};
}

// ---------------------------------------------------------- chooseProbes

TEST(ChooseProbes, GivenPortalsComeFirstAndSessionPortalsFollowOnce) {
  const std::vector<selector::Portal> given{{"10.10.1.21", 3260, 1}, {"fd00::20", 3261, 1}};
  const std::vector<KernelSession> sessions{
      session("session1", "LOGGED_IN", kUpper, "10.10.1.20", "eth1"),
      session("session2", "LOGGED_IN", kUpper, "10.10.1.21", "eth2"),
      session("session3", "FAILED", kLower, "10.10.1.20", "eth1")};
  const std::vector<std::string> nics{"eth2"};
  const ProbeSet set = chooseProbes(given, nics, "--nic", sessions);
  // The tag of a given portal is not known before a probe; it is always 1.
  EXPECT_THAT(portalTexts(set),
              ElementsAre("10.10.1.21:3260,1", "[fd00::20]:3261,1", "10.10.1.20:3260,1"));
  EXPECT_THAT(set.nics, ElementsAre("eth2"));
  EXPECT_EQ(set.nicSource, "--nic");
}

TEST(ChooseProbes, WithoutNicsUsesTheSessionsNicsSortedAndOnce) {
  const std::vector<KernelSession> sessions{
      session("session1", "LOGGED_IN", kUpper, "10.10.1.20", "eth2"),
      session("session2", "LOGGED_IN", kUpper, "10.10.1.21", "eth1"),
      session("session3", "LOGGED_IN", kLower, "10.10.1.20", "eth2"),
      session("session4", "LOGGED_IN", kLower, "10.10.1.21", "")};
  const ProbeSet set = chooseProbes({}, {}, "config", sessions);
  EXPECT_THAT(set.nics, ElementsAre("eth1", "eth2"));
  EXPECT_EQ(set.nicSource, "sessions");
  EXPECT_THAT(portalTexts(set), ElementsAre("10.10.1.20:3260,1", "10.10.1.21:3260,1"));
}

TEST(ChooseProbes, WithoutNicsOrBoundSessionsRoutingChooses) {
  const std::vector<selector::Portal> given{{"10.10.1.20", 3260, 1}};
  const ProbeSet set = chooseProbes(given, {}, "config", {});
  EXPECT_THAT(set.nics, ElementsAre(""));
  EXPECT_EQ(set.nicSource, "routing");
}

TEST(ChooseProbes, NothingToProbeGivesNoPortals) {
  EXPECT_TRUE(chooseProbes({}, {}, "config", {}).portals.empty());
}

// -------------------------------------------------------- kernelSessions

#ifdef PATHKEEPER_SOURCE_DIR
TEST(KernelSessions, ReadsTheFailedCaptureWithPortalsNicsAndStates) {
  auto inventory =
      daemon::SysfsInventory(PATHKEEPER_SOURCE_DIR "/tests/data/sysfs/xserve-failed").scan();
  ASSERT_TRUE(inventory) << inventory.error();
  std::vector<std::string> warnings;
  const auto sessions = kernelSessions(*inventory, warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  std::vector<std::string> lines;
  lines.reserve(sessions.size());
  for (const auto &s : sessions) {
    lines.push_back(s.name + " " + s.state + " " + s.path.portal.str() + " " + s.path.netdev);
  }
  // eth1 was cut: its sessions (portal 10.10.1.20) are FAILED, eth2's are fine.
  EXPECT_THAT(lines, ElementsAre("session1 FAILED 10.10.1.20:3260,1 eth1",
                                 "session2 LOGGED_IN 10.10.1.21:3260,1 eth2",
                                 "session3 FAILED 10.10.1.20:3260,1 eth1",
                                 "session4 LOGGED_IN 10.10.1.21:3260,1 eth2"));
  EXPECT_EQ(sessions[0].path.targetIqn, "iqn.1987-05.com.cisco:05.mds-gw.02-01.5000393000a1b001");
  EXPECT_EQ(sessions[0].path.sessionId, 1);
}
#endif

TEST(KernelSessions, SessionWithoutAConnectionIsAWarningNotAPath) {
  daemon::Inventory inventory;
  daemon::IscsiSession lonely;
  lonely.name = "session7";
  lonely.id = 7;
  lonely.targetName = kUpper;
  lonely.state = "FREE";
  inventory.sessions.emplace("session7", lonely);
  daemon::IscsiSession named = lonely;
  named.name = "session8";
  named.id = 8;
  inventory.sessions.emplace("session8", named);
  daemon::IscsiConnection hostName;
  hostName.name = "connection8:0";
  hostName.sessionId = 8;
  hostName.cid = 0;
  hostName.persistentAddress = "san.example.com";
  inventory.connections.emplace("connection8:0", hostName);
  std::vector<std::string> warnings;
  EXPECT_TRUE(kernelSessions(inventory, warnings).empty());
  ASSERT_EQ(warnings.size(), 2U);
  EXPECT_EQ(warnings[0], "session7: no connection with a portal address; not compared");
  EXPECT_THAT(warnings[1], HasSubstr("session8: portal address: "));
}

// ------------------------------------------------------------- errorKind

TEST(ErrorKind, NamesTheCausesScriptsCareAbout) {
  EXPECT_EQ(errorKind("portal 10.200.1.22:3260 via eth1 did not answer within 1500 ms (no TCP "
                      "connection)"),
            "timeout");
  EXPECT_EQ(errorKind("portal 10.200.1.23:3260 via eth1: cannot connect: iscsi_service: socket "
                      "error Connection refused(111)."),
            "refused");
  EXPECT_EQ(errorKind("portal 10.200.1.20:3260: discovery login failed: Login failed"), "login");
  EXPECT_EQ(errorKind("portal 10.9.9.9:3260: cannot connect: Network is unreachable"),
            "unreachable");
  EXPECT_EQ(errorKind("portal 10.200.1.20:3260 via x: network interface \"x\" does not exist"),
            "no-nic");
  EXPECT_EQ(errorKind("portal 10.200.1.20:3260: SendTargets failed: ..."), "error");
}

// ----------------------------------------------------- compareWithKernel

TEST(CompareWithKernel, FailedSessionCoversItsPathButIsReportedAsNotLoggedIn) {
  const selector::Portal portalA{"10.200.1.20", 3260, 1};
  DiscoverReport report;
  report.probes.push_back(answered(portalA, "eth1", {kLower, kUpper}));
  const std::vector<KernelSession> sessions{
      session("session1", "FAILED", kUpper, "10.200.1.20", "eth1"),
      session("session2", "LOGGED_IN", kLower, "10.200.1.20", "eth2")};
  compareWithKernel(report, sessions);
  // upper has a (failed) session from eth1; lower has one, but from eth2.
  ASSERT_EQ(report.missing.size(), 1U);
  EXPECT_EQ(report.missing[0].str(), kLower + " via 10.200.1.20:3260,1 from eth1");
  ASSERT_EQ(report.notLoggedIn.size(), 1U);
  EXPECT_EQ(report.notLoggedIn[0].name, "session1");
  EXPECT_EQ(report.exitStatus(), 2);
}

TEST(CompareWithKernel, AllCoveredAllLoggedInAllAnsweredExitsZero) {
  const selector::Portal portalA{"10.200.1.20", 3260, 1};
  DiscoverReport report;
  report.probes.push_back(answered(portalA, "eth1", {kUpper}));
  const std::vector<KernelSession> sessions{
      session("session1", "LOGGED_IN", kUpper, "10.200.1.20", "eth1")};
  compareWithKernel(report, sessions);
  EXPECT_TRUE(report.missing.empty());
  EXPECT_TRUE(report.notLoggedIn.empty());
  EXPECT_EQ(report.exitStatus(), 0);
  report.probes.push_back(failed({"10.200.1.22", 3260, 1}, "eth1", "did not answer within 1 s"));
  EXPECT_EQ(report.failedProbes(), 1U);
  EXPECT_EQ(report.exitStatus(), 2);
}

// ---------------------------------------------------------------- output

DiscoverReport sampleReport() {
  const selector::Portal portalA{"10.200.1.20", 3260, 1};
  DiscoverReport report;
  report.initiatorName = "iqn.2024-01.org.pathkeeper.test:probe";
  report.timeout = milliseconds{1500};
  report.probeSet = {{portalA, {"10.200.1.22", 3260, 1}}, {"eth1"}, "--nic"};
  auto ok = answered(portalA, "eth1", {kLower, kUpper});
  // upper also advertises a second portal that no probe reached.
  ok.result->targets.push_back({kUpper, {"10.200.2.21", 3260, 2}, portalA, "eth1"});
  std::ranges::sort(ok.result->targets);
  ok.result->rejected.push_back("TargetName: \"bad name\" is not an iSCSI name");
  ok.result->warnings.push_back("logout not answered within 1500 ms");
  report.probes.push_back(std::move(ok));
  report.probes.push_back(failed({"10.200.1.22", 3260, 1}, "eth1",
                                 "portal 10.200.1.22:3260 via eth1 did not answer within 1500 ms "
                                 "(no TCP connection)"));
  compareWithKernel(report, {});
  return report;
}

TEST(DiscoverToText, OneLinePerProbeThenTargetsRejectsMissingAndSummary) {
  EXPECT_EQ(discoverToText(sampleReport()),
            "Probing 2 portals from 1 NIC (--nic) as iqn.2024-01.org.pathkeeper.test:probe, "
            "timeout 1500 ms\n"
            "eth1 -> 10.200.1.20:3260: OK, 2 targets (12 ms)\n"
            "    " +
                kLower +
                " -> 10.200.1.20:3260,1\n"
                "    " +
                kUpper +
                " -> 10.200.1.20:3260,1, 10.200.2.21:3260,2\n"
                "    rejected: TargetName: \"bad name\" is not an iSCSI name\n"
                "    warning: logout not answered within 1500 ms\n"
                "eth1 -> 10.200.1.22:3260: FAILED (timeout) after 1501 ms: portal 10.200.1.22:3260 "
                "via eth1 did not answer within 1500 ms (no TCP connection)\n"
                "\n"
                "Expected but missing paths:\n"
                "    " +
                kLower +
                " via 10.200.1.20:3260,1 from eth1\n"
                "    " +
                kUpper +
                " via 10.200.1.20:3260,1 from eth1\n"
                "Kernel sessions not logged in: none\n"
                "Summary: 2 probes, 1 failed; 2 targets found; 2 missing paths; 0 sessions not "
                "logged in\n");
}

TEST(DiscoverToJson, CarriesEveryFieldOfSchemaOne) {
  const auto doc = nlohmann::json::parse(discoverToJson(sampleReport()));
  EXPECT_EQ(doc["schema"], 1);
  EXPECT_EQ(doc["timeout_ms"], 1500);
  EXPECT_EQ(doc["nic_source"], "--nic");
  EXPECT_EQ(doc["portals"], nlohmann::json({"10.200.1.20:3260", "10.200.1.22:3260"}));
  const auto &ok = doc["probes"][0];
  EXPECT_EQ(ok["nic"], "eth1");
  EXPECT_EQ(ok["ok"], true);
  EXPECT_TRUE(ok["error"].is_null());
  EXPECT_TRUE(ok["error_kind"].is_null());
  EXPECT_EQ(ok["targets"][1]["target"], kUpper);
  EXPECT_EQ(ok["targets"][1]["portals"],
            nlohmann::json({"10.200.1.20:3260,1", "10.200.2.21:3260,2"}));
  EXPECT_EQ(ok["rejected"][0], "TargetName: \"bad name\" is not an iSCSI name");
  EXPECT_EQ(ok["warnings"][0], "logout not answered within 1500 ms");
  const auto &bad = doc["probes"][1];
  EXPECT_EQ(bad["ok"], false);
  EXPECT_EQ(bad["error_kind"], "timeout");
  EXPECT_EQ(bad["elapsed_ms"], 1501);
  EXPECT_TRUE(bad["targets"].empty());
  EXPECT_EQ(doc["missing_paths"].size(), 2U);
  EXPECT_EQ(
      doc["missing_paths"][1],
      nlohmann::json({{"target", kUpper}, {"portal", "10.200.1.20:3260,1"}, {"nic", "eth1"}}));
  EXPECT_TRUE(doc["sessions_not_logged_in"].empty());
  EXPECT_EQ(
      doc["summary"],
      nlohmann::json(
          {{"probes", 2}, {"failed", 1}, {"targets", 2}, {"missing", 2}, {"not_logged_in", 0}}));
  EXPECT_EQ(doc["exit_status"], 2);
}

TEST(DiscoverToJson, UnboundProbesHaveANullNic) {
  DiscoverReport report;
  report.probeSet = {{{"10.200.1.20", 3260, 1}}, {""}, "routing"};
  report.probes.push_back(answered({"10.200.1.20", 3260, 1}, "", {kUpper}));
  compareWithKernel(report, {});
  const auto doc = nlohmann::json::parse(discoverToJson(report));
  EXPECT_TRUE(doc["nics"][0].is_null());
  EXPECT_TRUE(doc["probes"][0]["nic"].is_null());
  EXPECT_TRUE(doc["missing_paths"][0]["nic"].is_null());
  EXPECT_THAT(discoverToText(report), HasSubstr("(routing) -> 10.200.1.20:3260: OK, 1 target "));
}

} // namespace
} // namespace pathkeeper::ctl
