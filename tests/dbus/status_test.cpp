#include "status.hpp"

#include "bus_names.hpp"
#include "dbus_client.hpp"
#include "sample_state.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sdbus-c++/sdbus-c++.h>

namespace pathkeeper::ctl {
namespace {

using dbus::sample::sampleSnapshot;

TEST(DbusStatusText, ShowsMapsGroupsAndPathsLikeMultipathLl) {
  const auto text = statusToText(sampleSnapshot(), false);
  EXPECT_NE(text.find("pathkeeperd 0.1.0-test (owner mode): 3 maps, 6 paths, 0 degraded\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("xserve-lower (36000d31000aa000000000000000000b2) ok selector=round-robin "
                      "paths=2/2\n"
                      "|-+- group 1 prio=50 active\n"
                      "|  `- sdd 8:48 up active ctrl=lower eth1 -> 10.10.1.20:3260,1 "
                      "alua=active/optimized latency=253us failures=3\n"
                      "`-+- group 2 prio=10\n"
                      "   `- sde 8:64 up active ctrl=lower eth2 -> 10.10.1.21:3260,1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("paths in no map:\n  sdz 8:96 up none ctrl=- eth2 -> 10.10.1.21:3260,1 "
                      "alua=active/optimized latency=- failures=6 (traffic bound to eth2 leaves "
                      "via eth1)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  10.10.1.21:3260 eth1 reachable, eth2 unreachable: no route\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  [fd00::21]:3261 (routed) unknown\n"), std::string::npos) << text;
  EXPECT_EQ(text.find('\033'), std::string::npos);
}

TEST(DbusStatusText, ShowsMeasuredThroughputLatencyAndWeightOfAdaptiveMaps) {
  const auto text = statusToText(sampleSnapshot(), false);
  EXPECT_NE(text.find("xserve-upper (36000d31000aa000000000000000000a1) ok selector=service-time "
                      "paths=2/2 adaptive=weights reloads=1\n"
                      "|  last decision (reload): xserve-upper: weights sdb 100, sdc 25 (measured "
                      "4.9 MB/s vs 1.2 MB/s busy capacity); previous 1/1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sdb 8:16 up active ctrl=upper eth1 -> 10.10.1.20:3260,1 "
                      "alua=active/optimized latency=251us weight=100 tput=4.9MB/s "
                      "capacity=5.0MB/s io=12.5ms conf=80% failures=1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sdc 8:32 up active ctrl=upper eth2 -> 10.10.1.21:3260,1 "
                      "alua=active/optimized latency=252us weight=25 tput=1.2MB/s "
                      "capacity=1.2MB/s io=51.0ms conf=80% failures=2\n"),
            std::string::npos)
      << text;
  // Unmeasured paths of a fixed map say nothing about it.
  EXPECT_EQ(text.find("sdd 8:48 up active ctrl=lower eth1 -> 10.10.1.20:3260,1 "
                      "alua=active/optimized latency=253us failures=3\n"),
            text.find("sdd 8:48"))
      << text;
}

TEST(DbusStatusText, SaysWhatAStaleMapIsAndHowToRemoveIt) {
  auto s = sampleSnapshot();
  daemon::MapView gone;
  gone.alias = "xserve-gone";
  gone.wwid = "36000d31000aa000000000000000000c3";
  gone.state = "stale";
  gone.selector = "service-time";
  gone.totalPaths = 1;
  gone.queueing = true;
  gone.noPathRetry = "disabled";
  gone.groups.push_back({1, 0, {"8:240"}});
  s.maps.push_back(gone);
  const auto text = statusToText(s, false);
  EXPECT_NE(text.find("xserve-gone (36000d31000aa000000000000000000c3) stale "
                      "selector=service-time paths=0/1 queueing queueing-disabled\n"
                      "|  no planned map names it (are its devices gone? the log says if its "
                      "alias changed): left in place, not maintained; once nothing uses it: "
                      "dmsetup remove xserve-gone\n"
                      "`-+- group 1 prio=0\n"
                      "   `- 8:240 (not published)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(statusToText(s, true).find("\033[33mstale\033[0m"), std::string::npos);
}

TEST(DbusStatusText, ColoursStatesOnlyWhenAsked) {
  auto s = sampleSnapshot();
  s.paths[0].state = "down";
  const auto text = statusToText(s, true);
  EXPECT_NE(text.find("\033[31mdown\033[0m"), std::string::npos) << text;
  EXPECT_NE(text.find("\033[32mup\033[0m"), std::string::npos) << text;
}

TEST(DbusStatusJson, CarriesEveryField) {
  const auto s = sampleSnapshot();
  const auto json = nlohmann::json::parse(statusToJson(s));
  EXPECT_EQ(json["schema"], 1);
  EXPECT_EQ(json["maps"].size(), s.maps.size());
  EXPECT_EQ(json["maps"][1]["groups"][1]["paths"][0], "sde");
  EXPECT_EQ(json["paths"][5]["latency_us"], -1);
  EXPECT_EQ(json["paths"][5]["note"], "traffic bound to eth2 leaves via eth1");
  EXPECT_EQ(json["portals"][2]["port"], 3261);
  EXPECT_EQ(json["portals"][1]["reachability"]["eth2"], "unreachable: no route");
  EXPECT_EQ(json["maps"][2]["adaptive"], "weights");
  EXPECT_EQ(json["maps"][2]["adaptive_reloads"], 1);
  EXPECT_EQ(json["maps"][2]["adaptive_decisions"][0]["at"], 1764460800);
  EXPECT_EQ(json["maps"][2]["adaptive_decisions"][0]["action"], "reload");
  EXPECT_EQ(json["maps"][1]["adaptive"], "off");
  EXPECT_EQ(json["paths"][0]["weight"], 100);
  EXPECT_EQ(json["paths"][0]["throughput_bps"], 4900000);
  EXPECT_EQ(json["paths"][0]["capacity_bps"], 4960000);
  EXPECT_EQ(json["paths"][0]["io_latency_us"], 12500);
  EXPECT_EQ(json["paths"][0]["confidence"], 80);
  EXPECT_EQ(json["paths"][5]["io_latency_us"], -1);
}

PropertyMap pathProperties(const daemon::PathView &p) {
  return {{"Device", sdbus::Variant(p.device)},
          {"DevT", sdbus::Variant(p.devt)},
          {"Map", sdbus::Variant(p.map)},
          {"State", sdbus::Variant(p.state)},
          {"DmState", sdbus::Variant(p.dmState)},
          {"Checker", sdbus::Variant(p.checker)},
          {"Failures", sdbus::Variant(p.failures)},
          {"Shaky", sdbus::Variant(p.shaky)},
          {"LatencyUs", sdbus::Variant(p.latencyUs)},
          {"Alua", sdbus::Variant(p.alua)},
          {"Wwid", sdbus::Variant(p.wwid)},
          {"Target", sdbus::Variant(p.target)},
          {"Portal", sdbus::Variant(p.portal)},
          {"NetDev", sdbus::Variant(p.netdev)},
          {"Controller", sdbus::Variant(p.controller)},
          {"SessionId", sdbus::Variant(std::int32_t{p.sessionId})},
          {"Note", sdbus::Variant(p.note)},
          {"ThroughputBytesPerSecond", sdbus::Variant(p.throughputBps)},
          {"CapacityBytesPerSecond", sdbus::Variant(p.capacityBps)},
          {"IoLatencyUs", sdbus::Variant(p.ioLatencyUs)},
          {"Confidence", sdbus::Variant(std::uint32_t{p.confidence})},
          {"Weight", sdbus::Variant(std::uint32_t{p.weight})}};
}

TEST(DbusSnapshotFromBus, RebuildsPathsAndIgnoresForeignInterfaces) {
  const auto sample = sampleSnapshot();
  ManagedObjects objects;
  // Deliberately out of order: the snapshot comes out sorted by device.
  objects[sdbus::ObjectPath(dbus::objectPathOf(dbus::ObjectKind::Path, "sdz"))] = {
      {dbus::kPathInterface, pathProperties(sample.paths[5])}, {"org.freedesktop.DBus.Peer", {}}};
  objects[sdbus::ObjectPath(dbus::objectPathOf(dbus::ObjectKind::Path, "sdb"))] = {
      {dbus::kPathInterface, pathProperties(sample.paths[0])}};
  objects[sdbus::ObjectPath("/org/pathkeeper/PathKeeper1/other")] = {{"com.example.X", {}}};
  const auto snapshot =
      snapshotFromBus(objects, {{"Version", sdbus::Variant(std::string("9"))},
                                {"Mode", sdbus::Variant(std::string("companion"))}});
  EXPECT_EQ(snapshot.version, "9");
  EXPECT_EQ(snapshot.mode, "companion");
  ASSERT_EQ(snapshot.paths.size(), 2U);
  EXPECT_EQ(snapshot.paths[0], sample.paths[0]);
  EXPECT_EQ(snapshot.paths[1], sample.paths[5]);
  EXPECT_TRUE(snapshot.maps.empty());
}

TEST(DbusSnapshotFromBus, RebuildsFindingsWithTheirKeys) {
  // status --json renders the same JSON as the daemon's state file, whose
  // findings come from these objects.
  daemon::FindingView egress;
  egress.key = "wrong-egress:eth2,eth1";
  egress.id = "wrong-egress";
  egress.severity = "error";
  egress.summary = "traffic bound to eth2 leaves via eth1";
  egress.explanation = "two NICs on one subnet without policy routing";
  egress.nics = {"eth2", "eth1"};
  egress.portals = {"10.10.1.21:3260"};
  egress.paths = {"sdb", "sdd"};
  egress.fix = {"ip rule add from 10.10.1.11 table 102",
                "sysctl -w net.ipv4.conf.all.arp_ignore=1"};
  daemon::FindingView flux = egress;
  flux.key = "arp-flux";
  flux.id = "arp-flux";
  flux.severity = "warning";
  const auto properties = [](const daemon::FindingView &f) {
    return PropertyMap{
        {"Id", sdbus::Variant(f.id)},           {"Severity", sdbus::Variant(f.severity)},
        {"Summary", sdbus::Variant(f.summary)}, {"Explanation", sdbus::Variant(f.explanation)},
        {"NetDevs", sdbus::Variant(f.nics)},    {"Portals", sdbus::Variant(f.portals)},
        {"Paths", sdbus::Variant(f.paths)},     {"Fix", sdbus::Variant(f.fix)}};
  };
  ManagedObjects objects;
  for (const auto *finding : {&egress, &flux}) {
    objects[sdbus::ObjectPath(dbus::objectPathOf(dbus::ObjectKind::Finding, finding->key))] = {
        {dbus::kFindingInterface, properties(*finding)}};
  }
  const auto snapshot = snapshotFromBus(objects, {});
  ASSERT_EQ(snapshot.findings.size(), 2U);
  EXPECT_EQ(snapshot.findings[0], flux) << "sorted by key";
  EXPECT_EQ(snapshot.findings[1], egress);
  EXPECT_EQ(nlohmann::json::parse(daemon::snapshotToJson(snapshot))["findings"].size(), 2U);
}

TEST(DbusWatchText, NamesObjectsByTheirUnescapedKey) {
  BusChange added{BusChange::Type::Added,
                  dbus::objectPathOf(dbus::ObjectKind::Map, "1 m\xC3\xA4p.x"),
                  dbus::kMapInterface,
                  {},
                  {}};
  EXPECT_EQ(changeToText(added), "+ map 1 m\xC3\xA4p.x");
  BusChange removed{BusChange::Type::Removed,
                    dbus::objectPathOf(dbus::ObjectKind::Path, "sde"),
                    dbus::kPathInterface,
                    {},
                    {}};
  EXPECT_EQ(changeToText(removed), "- path sde");
  BusChange changed{BusChange::Type::PropertiesChanged,
                    dbus::objectPathOf(dbus::ObjectKind::Path, "sdc"),
                    dbus::kPathInterface,
                    {{"DmState", sdbus::Variant(std::string("failed"))},
                     {"State", sdbus::Variant(std::string("down"))}},
                    {}};
  EXPECT_EQ(changeToText(changed), "path sdc: DmState=failed State=down");
  const auto json = nlohmann::json::parse(changeToJson(changed));
  EXPECT_EQ(json["event"], "changed");
  EXPECT_EQ(json["properties"]["State"], "down");
  BusChange manager{BusChange::Type::PropertiesChanged,
                    dbus::kRootPath,
                    dbus::kManagerInterface,
                    {{"Status", sdbus::Variant(std::string("1 degraded"))}},
                    {}};
  EXPECT_EQ(changeToText(manager), "manager: Status=1 degraded");
}

TEST(DbusWatchText, RendersEveryPropertyType) {
  using Groups = std::vector<sdbus::Struct<std::uint32_t, std::int32_t, std::vector<std::string>>>;
  EXPECT_EQ(variantToText(sdbus::Variant(true)), "true");
  EXPECT_EQ(variantToText(sdbus::Variant(std::int64_t{-1})), "-1");
  EXPECT_EQ(variantToText(sdbus::Variant(std::uint16_t{3260})), "3260");
  EXPECT_EQ(variantToText(sdbus::Variant(
                std::map<std::string, std::string>{{"", "unknown"}, {"eth1", "reachable"}})),
            "[(unbound)=unknown, eth1=reachable]");
  EXPECT_EQ(variantToText(sdbus::Variant(Groups{{1U, 50, {"sdb", "sdc"}}, {2U, 10, {"sdd"}}})),
            "[1(prio 50): sdb sdc; 2(prio 10): sdd]");
  using Decisions = std::vector<sdbus::Struct<std::int64_t, std::string, std::string>>;
  EXPECT_EQ(variantToText(sdbus::Variant(Decisions{{1764460800, "reload", "m: weights a 100"},
                                                   {1764460900, "held", "m: sdb failing"}})),
            "[1764460800 reload: m: weights a 100; 1764460900 held: m: sdb failing]");
  EXPECT_EQ(variantToText(sdbus::Variant(std::vector<std::string>{"eth2", "eth1"})),
            "[eth2, eth1]");

  // watch --json gives arrays and group objects, as the state file does.
  BusChange finding{BusChange::Type::Added,
                    dbus::objectPathOf(dbus::ObjectKind::Finding, "arp-flux"),
                    dbus::kFindingInterface,
                    {{"NetDevs", sdbus::Variant(std::vector<std::string>{"eth2", "eth1"})}},
                    {}};
  EXPECT_EQ(nlohmann::json::parse(changeToJson(finding))["properties"]["NetDevs"],
            nlohmann::json::array({"eth2", "eth1"}));
  BusChange groups{BusChange::Type::PropertiesChanged,
                   dbus::objectPathOf(dbus::ObjectKind::Map, "m"),
                   dbus::kMapInterface,
                   {{"Groups", sdbus::Variant(Groups{{1U, 50, {"sdb", "sdc"}}})}},
                   {}};
  EXPECT_EQ(nlohmann::json::parse(changeToJson(groups))["properties"]["Groups"],
            nlohmann::json::parse(R"([{"number": 1, "priority": 50, "paths": ["sdb", "sdc"]}])"));
}

TEST(DbusClientErrors, SayWhetherTheDaemonRunsOrTheCallerMayNot) {
  auto notRunning =
      describeBusError(sdbus::Error("org.freedesktop.DBus.Error.ServiceUnknown", "x"));
  EXPECT_EQ(notRunning.status, 3);
  EXPECT_NE(notRunning.message.find("pathkeeperd is not running"), std::string::npos);
  auto denied = describeBusError(sdbus::Error(dbus::kErrorAccessDenied, "FailPath needs root"));
  EXPECT_EQ(denied.status, 4);
  EXPECT_EQ(denied.message, "not allowed: FailPath needs root");
  auto notFound = describeBusError(sdbus::Error(dbus::kErrorNotFound, "no path 'sdx'"));
  EXPECT_EQ(notFound.status, 1);
  EXPECT_EQ(notFound.message, "no path 'sdx'");
}

TEST(DbusClientErrors, SayWhatToDoWhenAPasswordWasNotToBeAskedFor) {
  auto needsPassword =
      describeBusError(sdbus::Error("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
                                    "FailPath needs authentication"));
  EXPECT_EQ(needsPassword.status, 4);
  EXPECT_EQ(needsPassword.message,
            "not allowed without asking for a password: run it as root, or without "
            "--no-ask-password where a polkit agent can ask (pathkeeperd: FailPath needs "
            "authentication)");
}

} // namespace
} // namespace pathkeeper::ctl
