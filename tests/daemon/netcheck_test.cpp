// The network check's pure parts on hand-made snapshots: one scenario per
// check of issue #8, the fix script, open-iscsi's records, the bindings of
// kernel sessions, and doctor's choice of bindings and JSON.
#include "netcheck.hpp"

#include "doctor.hpp"
#include "net_iscsi_records.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace pathkeeper::daemon {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const selector::Portal kPortal{"10.10.1.20", 3260, 1};
const selector::Portal kPortal2{"10.10.1.21", 3260, 1};

Nic nic(std::string name, int ifindex, std::string address, int prefix = 24) {
  Nic n;
  n.name = std::move(name);
  n.ifindex = ifindex;
  if (!address.empty()) {
    n.addresses.push_back({std::move(address), prefix, AF_INET});
  }
  n.operstate = "up";
  n.speedMbps = 1000;
  n.mtu = 1500;
  n.sysctls = {1, 2, 2};
  return n;
}

/// The seed: eth1 10.10.1.10/24 and eth2 10.10.1.11/24, no policy routing;
/// the main table's first route (eth1) wins for traffic not bound to a device.
NetworkSnapshot seed() {
  NetworkSnapshot s;
  s.all = {0, 0, 0};
  s.nics = {nic("lo", 1, "127.0.0.1", 8), nic("eth1", 3, "10.10.1.10"),
            nic("eth2", 4, "10.10.1.11")};
  s.nics[1].sysctls = {0, 0, 0};
  s.nics[2].sysctls = {0, 0, 0};
  s.rules = {{0, AF_INET, "", 0, 255, "", ""},
             {32766, AF_INET, "", 0, 254, "", ""},
             {32767, AF_INET, "", 0, 253, "", ""}};
  s.routes = {
      {"10.10.1.20", "10.10.1.10", "eth1", "", "eth1", "10.10.1.10", "", 254},
      {"10.10.1.20", "10.10.1.10", "", "", "eth1", "10.10.1.10", "", 254},
      {"10.10.1.20", "10.10.1.11", "eth2", "", "eth2", "10.10.1.11", "", 254},
      {"10.10.1.20", "10.10.1.11", "", "", "eth1", "10.10.1.11", "", 254},
  };
  return s;
}

Binding bind(std::string nicName, selector::Portal portal = kPortal,
             std::vector<std::string> paths = {}) {
  Binding b;
  b.nic = std::move(nicName);
  b.portal = std::move(portal);
  b.paths = std::move(paths);
  b.origins = {"test"};
  return b;
}

/// The seed with per-NIC tables and the sysctls set as the fixes say.
NetworkSnapshot fixedSeed() {
  NetworkSnapshot s = seed();
  s.all = {0, 0, 0};
  s.nics[1].sysctls = {1, 2, 0};
  s.nics[2].sysctls = {1, 2, 0};
  s.rules.push_back({1003, AF_INET, "10.10.1.10", 32, 1003, "", ""});
  s.rules.push_back({1004, AF_INET, "10.10.1.11", 32, 1004, "", ""});
  s.routes[3].egress = "eth2";
  s.routes[3].table = 1004;
  return s;
}

std::vector<std::string> ids(const std::vector<Finding> &findings) {
  std::vector<std::string> out;
  for (const auto &f : findings) {
    out.push_back(f.id);
  }
  return out;
}

const Finding *find(const std::vector<Finding> &findings, std::string_view id) {
  auto it =
      std::find_if(findings.begin(), findings.end(), [&](const Finding &f) { return f.id == id; });
  return it == findings.end() ? nullptr : &*it;
}

std::vector<std::string> commands(const Finding &finding) {
  std::vector<std::string> out;
  for (const auto &step : finding.fix) {
    out.push_back(step.command);
  }
  return out;
}

TEST(NetcheckResolve, TakesTheNicsFirstAddressOfThePortalsFamily) {
  const auto b = resolveBinding(seed(), bind("eth2"));
  EXPECT_EQ(b.source, "10.10.1.11");
  EXPECT_EQ(b.nic, "eth2");
}

// A NIC with an address in another subnet first (a management address, an
// old one): traffic bound to it alone gets the kernel's source for the
// portal, not the first address.
TEST(NetcheckResolve, ABindingToANicAloneTakesTheKernelsSource) {
  NetworkSnapshot s = seed();
  s.nics[2].addresses.insert(s.nics[2].addresses.begin(), {"192.168.5.11", 24, AF_INET});
  EXPECT_EQ(resolveBinding(s, bind("eth2")).source, "10.10.1.11")
      << "without the kernel's answer, the address in the portal's subnet";
  s.routes.push_back({"10.10.1.20", "", "eth2", "", "eth2", "10.10.1.111", "", 254});
  EXPECT_EQ(resolveBinding(s, bind("eth2")).source, "10.10.1.111") << "the kernel's answer wins";
  s.routes.back().error = "Network is unreachable";
  EXPECT_EQ(resolveBinding(s, bind("eth2")).source, "10.10.1.11");
}

TEST(NetcheckRouteQueries, AsksForTheSourceOfBindingsToANicAlone) {
  Binding byAddress = bind("eth1");
  byAddress.source = "10.10.1.10";
  const std::vector<Binding> bindings = {bind("eth2"), bind("eth2"), byAddress, bind("")};
  EXPECT_THAT(sourceQueries(bindings), ElementsAre(RouteQuery{"10.10.1.20", "", "eth2"}));
}

TEST(NetcheckResolve, FindsTheNicOfASourceOnlyBinding) {
  Binding b = bind("");
  b.source = "10.10.1.11";
  b.boundByDevice = false;
  EXPECT_EQ(resolveBinding(seed(), b).nic, "eth2");
}

TEST(NetcheckRouteQueries, AsksWithAndWithoutTheOutputInterfaceOncePerPair) {
  const std::vector<Binding> bindings = {bind("eth1"), bind("eth2"), bind("eth2")};
  EXPECT_THAT(routeQueries(seed(), bindings),
              ElementsAre(RouteQuery{"10.10.1.20", "10.10.1.10", "eth1"},
                          RouteQuery{"10.10.1.20", "10.10.1.10", ""},
                          RouteQuery{"10.10.1.20", "10.10.1.11", "eth2"},
                          RouteQuery{"10.10.1.20", "10.10.1.11", ""}));
}

TEST(NetcheckAnalyse, SeedGivesUnboundEgressNamingTheNicTrafficLeavesBy) {
  const std::vector<Binding> bindings = {bind("eth1", kPortal, {"sdb"}),
                                         bind("eth2", kPortal, {"sdc"})};
  const auto findings = analyse(seed(), bindings);
  const Finding *egress = find(findings, "unbound-egress");
  ASSERT_NE(egress, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(egress->severity, Severity::Warning);
  EXPECT_THAT(egress->nics, ElementsAre("eth2", "eth1"));
  EXPECT_THAT(egress->summary, HasSubstr("leaves via eth1"));
  EXPECT_THAT(egress->paths, ElementsAre("sdc"));
  EXPECT_THAT(egress->portals, ElementsAre("10.10.1.20:3260"));
  EXPECT_THAT(commands(*egress),
              ElementsAre("ip route replace 10.10.1.0/24 dev eth2 src 10.10.1.11 table 1004",
                          "ip rule add from 10.10.1.11 table 1004 priority 1004"));
  EXPECT_THAT(ids(findings), UnorderedElementsAre("unbound-egress", "shared-subnet", "arp-flux"));
}

TEST(NetcheckAnalyse, AddressOnlyBindingThatLeavesByAnotherNicIsWrongEgress) {
  Binding b = bind("");
  b.source = "10.10.1.11";
  b.boundByDevice = false;
  const auto findings = analyse(seed(), std::vector<Binding>{b});
  const Finding *egress = find(findings, "wrong-egress");
  ASSERT_NE(egress, nullptr);
  EXPECT_EQ(egress->severity, Severity::Error);
  EXPECT_THAT(egress->summary, HasSubstr("leaves via eth1"));
  EXPECT_EQ(findings.front().id, "wrong-egress") << "errors come first";
}

TEST(NetcheckAnalyse, DeviceBoundLookupLeavingByAnotherNicIsWrongEgress) {
  NetworkSnapshot s = fixedSeed();
  s.routes[2].egress = "eth1"; // e.g. a rule with oif sends it elsewhere
  const auto findings = analyse(s, std::vector<Binding>{bind("eth2")});
  const Finding *egress = find(findings, "wrong-egress");
  ASSERT_NE(egress, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(egress->severity, Severity::Error);
  EXPECT_THAT(egress->explanation, HasSubstr("forced to eth2"));
}

TEST(NetcheckAnalyse, FixedSeedHasNoFinding) {
  const std::vector<Binding> bindings = {bind("eth1"), bind("eth2")};
  EXPECT_THAT(analyse(fixedSeed(), bindings), IsEmpty());
}

TEST(NetcheckAnalyse, SourceOfAnotherNicIsForeignSource) {
  Binding b = bind("eth2");
  b.source = "10.10.1.10";
  NetworkSnapshot s = fixedSeed();
  s.routes.push_back({"10.10.1.20", "10.10.1.10", "eth2", "", "eth2", "10.10.1.10", "", 1003});
  const auto findings = analyse(s, std::vector<Binding>{b});
  const Finding *foreign = find(findings, "foreign-source");
  ASSERT_NE(foreign, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(foreign->severity, Severity::Error);
  EXPECT_THAT(foreign->nics, ElementsAre("eth2", "eth1"));
  EXPECT_THAT(foreign->summary, HasSubstr("belongs to eth1"));
}

// Bound to the device alone, to a NIC without an IPv4 address: the kernel
// takes another NIC's as the source. There is no iface.ipaddress to fix;
// the NIC needs an address.
TEST(NetcheckAnalyse, ANicWithoutAnAddressGetsAnotherNicsSourceAndTheAdviceToAddOne) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].addresses.clear();
  s.routes.push_back({"10.10.1.20", "", "eth2", "", "eth2", "10.10.1.10", "", 254});
  const auto findings = analyse(s, std::vector<Binding>{bind("eth2")});
  const Finding *foreign = find(findings, "foreign-source");
  ASSERT_NE(foreign, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_THAT(foreign->summary, HasSubstr("belongs to eth1"));
  EXPECT_THAT(foreign->explanation, HasSubstr("eth2 has no IPv4 address"));
  EXPECT_THAT(foreign->explanation, HasSubstr("ip address add ADDRESS/PREFIX dev eth2"));
  EXPECT_THAT(foreign->explanation, Not(HasSubstr("iface.ipaddress")));
}

// The same with an address of its own the kernel does not prefer.
TEST(NetcheckAnalyse, AKernelChosenForeignSourceBesideTheNicsOwnNamesTheRoute) {
  NetworkSnapshot s = fixedSeed();
  s.routes.push_back({"10.10.1.20", "", "eth2", "", "eth2", "10.10.1.10", "", 254});
  const auto findings = analyse(s, std::vector<Binding>{bind("eth2")});
  const Finding *foreign = find(findings, "foreign-source");
  ASSERT_NE(foreign, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_THAT(foreign->explanation, HasSubstr("the kernel prefers it for 10.10.1.20"));
  EXPECT_THAT(foreign->explanation, HasSubstr("iface.ipaddress to eth2's address"));
}

TEST(NetcheckAnalyse, SharedSubnetWithoutPolicyRoutingNamesBothNicsAndFixesEach) {
  NetworkSnapshot s = fixedSeed();
  s.rules.pop_back(); // eth2 lost its rule
  const auto findings = analyse(s, std::vector<Binding>{bind("eth1")});
  const Finding *shared = find(findings, "shared-subnet");
  ASSERT_NE(shared, nullptr);
  EXPECT_THAT(shared->nics, ElementsAre("eth1", "eth2"));
  EXPECT_THAT(shared->summary, HasSubstr("10.10.1.0/24"));
  // Only the NIC without a rule gets one.
  EXPECT_THAT(commands(*shared),
              ElementsAre("ip route replace 10.10.1.0/24 dev eth2 src 10.10.1.11 table 1004",
                          "ip rule add from 10.10.1.11 table 1004 priority 1004"));
}

TEST(NetcheckAnalyse, RuleToTheMainTableIsNoPolicyRouting) {
  NetworkSnapshot s = fixedSeed();
  s.rules.back().table = 254;
  EXPECT_THAT(ids(analyse(s, std::vector<Binding>{bind("eth1")})), Contains("shared-subnet"));
}

TEST(NetcheckAnalyse, NicsInDifferentSubnetsShareNothing) {
  NetworkSnapshot s = seed();
  s.nics[2].addresses = {{"10.10.2.11", 24, AF_INET}};
  s.routes.clear();
  const auto findings = analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2", kPortal2)});
  EXPECT_THAT(ids(findings), Not(Contains("shared-subnet")));
  EXPECT_THAT(ids(findings), Not(Contains("arp-flux")));
}

TEST(NetcheckAnalyse, ArpFluxOnlyWhereEffectiveValuesAreZero) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].sysctls.arpIgnore = 0;
  const auto findings = analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")});
  const Finding *flux = find(findings, "arp-flux");
  ASSERT_NE(flux, nullptr);
  EXPECT_THAT(flux->nics, ElementsAre("eth2"));
  EXPECT_THAT(commands(*flux), ElementsAre("sysctl -qw net.ipv4.conf.eth2.arp_ignore=1",
                                           "sysctl -qw net.ipv4.conf.eth2.arp_announce=2"));
  // "all" counts too: the larger of all and the NIC's value is effective.
  s.all.arpIgnore = 1;
  EXPECT_EQ(find(analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")}), "arp-flux"),
            nullptr);
}

TEST(NetcheckAnalyse, StrictRpFilterWhereRepliesComeBackOnAnotherNic) {
  NetworkSnapshot s = seed();
  s.nics[2].sysctls.rpFilter = 1;
  const auto findings = analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")});
  const Finding *rp = find(findings, "rp-filter");
  ASSERT_NE(rp, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(rp->severity, Severity::Error);
  EXPECT_THAT(rp->nics, ElementsAre("eth2"));
  EXPECT_THAT(commands(*rp), ElementsAre("sysctl -qw net.ipv4.conf.eth2.rp_filter=2"));
}

TEST(NetcheckAnalyse, StrictRpFilterIsFineWhenTheReverseRouteAgrees) {
  NetworkSnapshot s = fixedSeed();
  s.all.rpFilter = 1;
  EXPECT_THAT(analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")}), IsEmpty());
}

TEST(NetcheckAnalyse, LooseRpFilterInAllOverridesStrictNic) {
  NetworkSnapshot s = seed();
  s.all.rpFilter = 2;
  s.nics[2].sysctls.rpFilter = 1;
  EXPECT_EQ(find(analyse(s, std::vector<Binding>{bind("eth2")}), "rp-filter"), nullptr);
}

NetworkSnapshot bonded(std::string mode) {
  NetworkSnapshot s;
  s.all = {1, 2, 0};
  s.nics = {nic("eth1", 3, ""), nic("eth2", 4, ""), nic("bond0", 5, "10.10.1.10")};
  s.nics[0].master = "bond0";
  s.nics[1].master = "bond0";
  s.nics[2].bond = BondInfo{std::move(mode), {"eth1", "eth2"}};
  s.nics[2].speedMbps = 2000;
  s.routes = {{"10.10.1.20", "10.10.1.10", "bond0", "", "bond0", "10.10.1.10", "", 254},
              {"10.10.1.20", "10.10.1.10", "", "", "bond0", "10.10.1.10", "", 254}};
  return s;
}

TEST(NetcheckBond, BalanceAlbWithBothSlavesUpHasNoFinding) {
  EXPECT_THAT(analyse(bonded("balance-alb"), std::vector<Binding>{bind("bond0")}), IsEmpty());
}

TEST(NetcheckBond, BalanceRrIsAWarning) {
  const auto findings = analyse(bonded("balance-rr"), std::vector<Binding>{bind("bond0")});
  ASSERT_THAT(ids(findings), ElementsAre("bond-mode"));
  EXPECT_EQ(findings[0].severity, Severity::Warning);
  EXPECT_THAT(findings[0].explanation, HasSubstr("out of order"));
}

TEST(NetcheckBond, SlaveDownIsAWarningNamingTheSlave) {
  NetworkSnapshot s = bonded("802.3ad");
  s.nics[1].operstate = "lowerlayerdown";
  const auto findings = analyse(s, std::vector<Binding>{bind("bond0")});
  ASSERT_THAT(ids(findings), ElementsAre("bond-slave-down"));
  EXPECT_THAT(findings[0].nics, ElementsAre("bond0", "eth2"));
}

TEST(NetcheckBond, NoSlavesIsAnError) {
  NetworkSnapshot s = bonded("active-backup");
  s.nics[2].bond->slaves.clear();
  const auto findings = analyse(s, std::vector<Binding>{bind("bond0")});
  ASSERT_THAT(ids(findings), Contains("bond-no-slaves"));
  EXPECT_EQ(find(findings, "bond-no-slaves")->severity, Severity::Error);
}

TEST(NetcheckBond, BindingASlaveIsAWarning) {
  NetworkSnapshot s = bonded("balance-alb");
  Binding b = bind("eth1");
  b.source = "10.10.1.10";
  s.routes.push_back({"10.10.1.20", "10.10.1.10", "eth1", "", "eth1", "10.10.1.10", "", 254});
  const auto findings = analyse(s, std::vector<Binding>{b});
  EXPECT_THAT(ids(findings), Contains("bond-slave-bound"));
}

TEST(NetcheckLink, DownNicIsAnErrorWithLinkUpFix) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].operstate = "down";
  const auto findings = analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")});
  const Finding *down = find(findings, "link-down");
  ASSERT_NE(down, nullptr);
  EXPECT_THAT(down->nics, ElementsAre("eth2"));
  EXPECT_THAT(commands(*down), ElementsAre("ip link set dev eth2 up"));
}

TEST(NetcheckLink, UnknownOperstateOfVirtualNicsIsNotDown) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].operstate = "unknown";
  EXPECT_THAT(analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")}), IsEmpty());
}

TEST(NetcheckLink, DifferentSpeedsAreInfoForTheThroughputWeights) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].speedMbps = 10000;
  const auto findings = analyse(s, std::vector<Binding>{bind("eth1"), bind("eth2")});
  ASSERT_THAT(ids(findings), ElementsAre("speed-mismatch"));
  EXPECT_EQ(findings[0].severity, Severity::Info);
  EXPECT_THAT(findings[0].summary, HasSubstr("eth2 10000 Mb/s"));
  EXPECT_EQ(worstSeverity(findings), Severity::Info);
}

TEST(NetcheckMtu, MismatchBetweenNicsOfOneMapIsAWarning) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].mtu = 9000;
  Binding a = bind("eth1");
  Binding b = bind("eth2");
  a.maps = b.maps = {"36001405aaaa"};
  const auto findings = analyse(s, std::vector<Binding>{a, b});
  ASSERT_THAT(ids(findings), ElementsAre("mtu-mismatch"));
  EXPECT_THAT(findings[0].summary, HasSubstr("36001405aaaa"));
  EXPECT_THAT(findings[0].nics, ElementsAre("eth1", "eth2"));
  EXPECT_THAT(findings[0].notes, Contains(HasSubstr("ip link set dev eth1 mtu 9000")));
}

TEST(NetcheckMtu, NicsOfDifferentMapsMayDiffer) {
  NetworkSnapshot s = fixedSeed();
  s.nics[2].mtu = 9000;
  Binding a = bind("eth1");
  Binding b = bind("eth2");
  a.maps = {"36001405aaaa"};
  b.maps = {"36001405bbbb"};
  EXPECT_THAT(analyse(s, std::vector<Binding>{a, b}), IsEmpty());
}

TEST(NetcheckAnalyse, MissingNicIsAnError) {
  const auto findings = analyse(seed(), std::vector<Binding>{bind("eth9")});
  ASSERT_THAT(ids(findings), ElementsAre("nic-missing"));
  EXPECT_EQ(findings[0].severity, Severity::Error);
}

TEST(NetcheckAnalyse, KernelRefusalIsNoRoute) {
  NetworkSnapshot s = fixedSeed();
  s.routes[2] = {"10.10.1.20", "10.10.1.11", "eth2", "Network is unreachable", "", "", "", 0};
  const auto findings = analyse(s, std::vector<Binding>{bind("eth2")});
  ASSERT_NE(find(findings, "no-route"), nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_THAT(find(findings, "no-route")->explanation, HasSubstr("Network is unreachable"));
}

TEST(NetcheckAnalyse, WithoutBindingsSharedSubnetsAreStillFound) {
  const auto findings = analyse(seed(), std::vector<Binding>{});
  EXPECT_THAT(ids(findings), UnorderedElementsAre("shared-subnet", "arp-flux"));
}

TEST(NetcheckFixScript, GuardsRulesSkipsRepeatsAndNeverRunsItself) {
  const std::vector<Binding> bindings = {bind("eth1"), bind("eth2")};
  const std::string script = renderFixScript(analyse(seed(), bindings));
  EXPECT_THAT(script, HasSubstr("#!/bin/sh\n"));
  EXPECT_THAT(script, HasSubstr("\nset -e\n"));
  EXPECT_THAT(script,
              HasSubstr("if ! ip rule show | grep -qwF 'from 10.10.1.11 lookup 1004'; "
                        "then\n  ip rule add from 10.10.1.11 table 1004 priority 1004\nfi\n"));
  EXPECT_THAT(script, HasSubstr("# (done above) ip route replace 10.10.1.0/24 dev eth2"));
  EXPECT_THAT(script, HasSubstr("sysctl -qw net.ipv4.conf.eth1.arp_ignore=1\n"));
  EXPECT_THAT(script, HasSubstr("# note: make it persistent"));
  // Each command runs once: the first occurrence is live, later ones comments.
  const std::string live = "\nip route replace 10.10.1.0/24 dev eth2";
  EXPECT_EQ(script.find(live), script.rfind(live));
}

TEST(NetcheckFixScript, NothingToApplyStillAValidScript) {
  EXPECT_EQ(renderFixScript({}), "#!/bin/sh\n"
                                 "# Written by `pathkeeperctl doctor --fix-script`. Read it, "
                                 "then run it as root.\n"
                                 "# pathkeeper never applies it itself. Each step is skipped "
                                 "where it is already done.\n"
                                 "set -e\n\n# Nothing to apply.\nexit 0\n");
}

TEST(NetcheckBindings, MergeJoinsPathsOfOnePair) {
  Binding a = bind("eth1", kPortal, {"sdb"});
  Binding b = bind("eth1", kPortal, {"sdc"});
  b.origins = {"session2"};
  const auto merged = mergeBindings({a, b, bind("eth2")});
  ASSERT_EQ(merged.size(), 2U);
  EXPECT_THAT(merged[0].paths, ElementsAre("sdb", "sdc"));
  EXPECT_THAT(merged[0].origins, ElementsAre("test", "session2"));
}

class TempDir : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pathkeeper-netcheck-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::filesystem::path &relative, const std::string &text) {
    std::filesystem::create_directories((dir_ / relative).parent_path());
    std::ofstream(dir_ / relative) << text;
  }
  std::filesystem::path dir_;
};

TEST(IscsiRecordParse, KeyValueLinesWithCommentsAndEmptyValues) {
  const auto record = parseIscsiRecord("# BEGIN RECORD 2.1.8\n"
                                       "iface.iscsi_ifacename = iface1\n"
                                       "iface.net_ifacename = eth1\n"
                                       "iface.ipaddress = <empty>\n"
                                       "garbage line\n"
                                       "  node.conn[0].port =3260  \n");
  EXPECT_EQ(record.at("iface.iscsi_ifacename"), "iface1");
  EXPECT_EQ(record.at("iface.net_ifacename"), "eth1");
  EXPECT_EQ(record.at("iface.ipaddress"), "");
  EXPECT_EQ(record.at("node.conn[0].port"), "3260");
  EXPECT_EQ(record.size(), 4U);
}

using IscsiRecordFiles = TempDir;

TEST_F(IscsiRecordFiles, NodesThroughIfacesBecomeBindingsAndDefaultIfaceNone) {
  write("ifaces/iface1", "iface.iscsi_ifacename = iface1\niface.net_ifacename = eth1\n"
                         "iface.transport_name = tcp\n");
  write("ifaces/iface2", "iface.iscsi_ifacename = iface2\niface.ipaddress = 10.10.1.11\n");
  write("ifaces/offload", "iface.iscsi_ifacename = offload\niface.net_ifacename = eth5\n"
                          "iface.transport_name = bnx2i\n");
  const std::string iqn = "iqn.2024-01.com.example:upper";
  write("nodes/" + iqn + "/10.10.1.20,3260,1/iface1",
        "node.name = " + iqn +
            "\nnode.conn[0].address = 10.10.1.20\nnode.conn[0].port = 3260\n"
            "iface.iscsi_ifacename = iface1\n");
  write("nodes/" + iqn + "/10.10.1.20,3260,1/iface2",
        "node.conn[0].address = 10.10.1.20\nnode.conn[0].port = 3261\n"
        "iface.iscsi_ifacename = iface2\n");
  write("nodes/" + iqn + "/10.10.1.20,3260,1/offload", "iface.iscsi_ifacename = offload\n");
  write("nodes/" + iqn + "/10.10.1.21,3260,1", "node.conn[0].address = 10.10.1.21\n");

  const auto records = readIscsiRecords(dir_);
  EXPECT_THAT(records.warnings, IsEmpty());
  ASSERT_EQ(records.ifaces.size(), 3U);
  ASSERT_EQ(records.nodes.size(), 4U);
  const auto bindings = bindingsFromRecords(records);
  ASSERT_EQ(bindings.size(), 2U);
  EXPECT_EQ(bindings[0].nic, "eth1");
  EXPECT_TRUE(bindings[0].boundByDevice);
  EXPECT_EQ(bindings[0].portal.address, "10.10.1.20");
  EXPECT_EQ(bindings[0].portal.port, 3260);
  EXPECT_THAT(bindings[0].origins, ElementsAre("node " + iqn + " via iface iface1"));
  EXPECT_EQ(bindings[1].nic, "");
  EXPECT_EQ(bindings[1].source, "10.10.1.11");
  EXPECT_FALSE(bindings[1].boundByDevice);
  EXPECT_EQ(bindings[1].portal.port, 3261);
}

TEST_F(IscsiRecordFiles, AnIfaceBoundByHardwareAddressIsOnTheNicWithIt) {
  write("ifaces/by-mac", "iface.iscsi_ifacename = by-mac\niface.hwaddress = 52:54:00:0a:01:0b\n"
                         "iface.net_ifacename = <empty>\niface.transport_name = tcp\n");
  // No NIC has the address: iscsid fails the login, net_ifacename or not.
  write("ifaces/unknown-mac", "iface.iscsi_ifacename = unknown-mac\n"
                              "iface.hwaddress = 52:54:00:ff:ff:ff\niface.net_ifacename = eth1\n");
  // Both set: iscsid binds by the address first (bind_conn_to_iface).
  write("ifaces/both", "iface.iscsi_ifacename = both\niface.hwaddress = 52:54:00:0a:01:0b\n"
                       "iface.net_ifacename = eth1\n");
  write("nodes/iqn.2024-01.com.example:lower/10.10.1.21,3260,1/both",
        "node.conn[0].address = 10.10.1.21\niface.iscsi_ifacename = both\n");
  const std::string iqn = "iqn.2024-01.com.example:upper";
  write("nodes/" + iqn + "/10.10.1.21,3260,1/by-mac",
        "node.conn[0].address = 10.10.1.21\niface.iscsi_ifacename = by-mac\n");
  write("nodes/" + iqn + "/10.10.1.20,3260,1/unknown-mac",
        "node.conn[0].address = 10.10.1.20\niface.iscsi_ifacename = unknown-mac\n");
  const auto records = readIscsiRecords(dir_);
  const auto nicOf = [](std::string_view address) {
    return address == "52:54:00:0a:01:0b" ? std::string("eth2") : std::string();
  };
  std::vector<std::string> warnings;
  const auto bindings = bindingsFromRecords(records, nicOf, &warnings);
  ASSERT_EQ(bindings.size(), 2U) << "an address no NIC has binds nothing";
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_THAT(warnings[0], HasSubstr("iface unknown-mac: no network interface has its "
                                     "iface.hwaddress 52:54:00:ff:ff:ff"));
  EXPECT_THAT(warnings[0], HasSubstr("node " + iqn));
  for (const auto &binding : bindings) {
    EXPECT_EQ(binding.nic, "eth2") << binding.origins.front();
    EXPECT_TRUE(binding.boundByDevice);
    EXPECT_EQ(binding.portal.address, "10.10.1.21");
  }
  const auto unresolved = bindingsFromRecords(records);
  ASSERT_EQ(unresolved.size(), 2U) << "without a resolver only net_ifacename is known";
  EXPECT_EQ(unresolved[0].nic, "eth1");
  EXPECT_EQ(unresolved[1].nic, "eth1");
}

TEST_F(IscsiRecordFiles, MissingDirectoryIsNoRecords) {
  const auto records = readIscsiRecords(dir_ / "nowhere");
  EXPECT_THAT(records.nodes, IsEmpty());
  EXPECT_THAT(records.ifaces, IsEmpty());
}

TEST(SessionBindings, HostNetdevAndAddressWithThePathsAndWwids) {
  Inventory inventory;
  for (int id : {1, 2}) {
    IscsiSession session;
    session.name = "session" + std::to_string(id);
    session.id = id;
    session.hostNo = id + 1;
    inventory.sessions[session.name] = session;
    IscsiConnection connection;
    connection.name = "connection" + std::to_string(id) + ":0";
    connection.sessionId = id;
    connection.persistentAddress = id == 1 ? "10.10.1.20" : "10.10.1.21";
    connection.persistentPort = 3260;
    inventory.connections[connection.name] = connection;
    IscsiHost host;
    host.name = "host" + std::to_string(id + 1);
    host.hostNo = id + 1;
    host.netdev = id == 1 ? "eth1" : ""; // session 2 is bound by address only
    host.ipAddress = id == 1 ? "10.10.1.10" : "10.10.1.11";
    inventory.hosts[host.name] = host;
  }
  InventoryPath path;
  path.path.device = "sdb";
  path.path.sessionId = 1;
  path.path.wwid = "36001405aaaa";
  inventory.paths["sdb"] = path;
  const auto bindings = bindingsFromSessions(inventory);
  ASSERT_EQ(bindings.size(), 2U);
  EXPECT_EQ(bindings[0].nic, "eth1");
  EXPECT_EQ(bindings[0].source, "10.10.1.10");
  EXPECT_TRUE(bindings[0].boundByDevice);
  EXPECT_THAT(bindings[0].paths, ElementsAre("sdb"));
  EXPECT_THAT(bindings[0].maps, ElementsAre("36001405aaaa"));
  EXPECT_EQ(bindings[1].nic, "");
  EXPECT_FALSE(bindings[1].boundByDevice);
  EXPECT_EQ(bindings[1].portal.address, "10.10.1.21");
}

} // namespace
} // namespace pathkeeper::daemon

namespace pathkeeper::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DoctorOptions, ParsesRepeatedNicsAndPortals) {
  auto options = parseDoctorOptions(
      {"doctor", "--nic", "eth1", "--nic", "eth2", "--portal", "10.10.1.20", "--json"}, 1);
  ASSERT_TRUE(options) << options.error();
  EXPECT_THAT(options->nics, ElementsAre("eth1", "eth2"));
  ASSERT_EQ(options->portals.size(), 1U);
  EXPECT_EQ(options->portals[0].port, 3260);
  EXPECT_TRUE(options->json);
}

TEST(DoctorOptions, RejectsUnknownOptionsBadPortalsAndTwoFormats) {
  EXPECT_THAT(parseDoctorOptions({"--bogus"}, 0).error(), HasSubstr("unknown option"));
  EXPECT_THAT(parseDoctorOptions({"--portal", "not a portal"}, 0).error(), HasSubstr("--portal"));
  EXPECT_THAT(parseDoctorOptions({"--nic"}, 0).error(), HasSubstr("needs a value"));
  EXPECT_THAT(parseDoctorOptions({"--json", "--fix-script"}, 0).error(),
              HasSubstr("two output formats"));
}

TEST(DoctorBindings, NicsAloneArePairedWithTheKnownPortals) {
  daemon::Binding known;
  known.nic = "eth1";
  known.source = "10.10.1.10";
  known.portal = {"10.10.1.20", 3260, 1};
  known.paths = {"sdb"};
  DoctorOptions options;
  options.nics = {"eth1", "eth2"};
  std::vector<std::string> warnings;
  const auto bindings = chooseBindings(options, {known}, warnings);
  ASSERT_EQ(bindings.size(), 2U);
  EXPECT_EQ(bindings[0].nic, "eth1");
  EXPECT_THAT(bindings[0].paths, ElementsAre("sdb")) << "the kernel's paths stay attached";
  EXPECT_EQ(bindings[1].nic, "eth2");
  EXPECT_EQ(bindings[1].portal.address, "10.10.1.20");
  EXPECT_TRUE(warnings.empty());
}

TEST(DoctorBindings, PortalWithoutAnyKnownNicWarns) {
  DoctorOptions options;
  options.portals = {{"10.10.1.20", 3260, 1}};
  std::vector<std::string> warnings;
  EXPECT_TRUE(chooseBindings(options, {}, warnings).empty());
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("give --nic")));
}

TEST(DoctorReport, JsonCarriesFindingsFixesAndWorstAndExitStatusThree) {
  DoctorReport report;
  daemon::Nic eth2;
  eth2.name = "eth2";
  eth2.ifindex = 4;
  eth2.operstate = "up";
  report.snapshot.nics.push_back(eth2);
  daemon::Finding finding;
  finding.id = "unbound-egress";
  finding.severity = daemon::Severity::Warning;
  finding.nics = {"eth2", "eth1"};
  finding.fix = {{"ip rule add from 10.10.1.11 table 1004 priority 1004", "ip rule show | grep"}};
  report.findings = {finding};
  const auto document = nlohmann::json::parse(doctorToJson(report));
  EXPECT_EQ(document["schema"], 1);
  EXPECT_EQ(document["worst"], "warning");
  ASSERT_EQ(document["findings"].size(), 1U);
  EXPECT_EQ(document["findings"][0]["id"], "unbound-egress");
  EXPECT_EQ(document["findings"][0]["fix"][0]["command"],
            "ip rule add from 10.10.1.11 table 1004 priority 1004");
  EXPECT_EQ(document["nics"][0]["name"], "eth2");
  EXPECT_TRUE(document["nics"][0]["speed_mbps"].is_null());
  EXPECT_EQ(report.exitStatus(), kDoctorFindingsStatus);
  report.findings[0].severity = daemon::Severity::Info;
  EXPECT_EQ(report.exitStatus(), 0);
  EXPECT_THAT(doctorToText(report), HasSubstr("[info] unbound-egress"));
}

} // namespace
} // namespace pathkeeper::ctl
