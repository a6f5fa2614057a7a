// holdLatencyJitter(): which check latencies are published again;
// replaceInvalidUtf8(): what D-Bus and JSON are given; and snapshotToJson():
// the state file's and `pathkeeperctl status --json`'s text.

#include "state_model.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace pathkeeper::daemon {
namespace {

StateSnapshot withLatencies(std::initializer_list<std::pair<std::string, std::int64_t>> paths) {
  StateSnapshot snap;
  for (const auto &[device, latency] : paths) {
    PathView view;
    view.device = device;
    view.latencyUs = latency;
    snap.paths.push_back(view);
  }
  return snap;
}

TEST(HoldLatencyJitter, KeepsThePublishedLatencyWhileItMovesByLessThanAThird) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdc", 3000}});
  auto next = withLatencies({{"sdb", 3900}, {"sdc", 2100}});
  EXPECT_FALSE(holdLatencyJitter(next, published, false));
  EXPECT_EQ(next.paths[0].latencyUs, 3000);
  EXPECT_EQ(next.paths[1].latencyUs, 3000);
  EXPECT_EQ(next, published);
}

TEST(HoldLatencyJitter, HoldsEveryMoveWhenAskedButNotAFirstLatency) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdc", -1}});
  auto next = withLatencies({{"sdb", 30000}, {"sdc", 2000}});
  EXPECT_FALSE(holdLatencyJitter(next, published, true));
  EXPECT_EQ(next.paths[0].latencyUs, 3000);
  EXPECT_EQ(next.paths[1].latencyUs, 2000);
}

TEST(HoldLatencyJitter, PublishesARealMoveEitherWay) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdc", 3000}});
  auto next = withLatencies({{"sdb", 4600}, {"sdc", 1900}});
  EXPECT_TRUE(holdLatencyJitter(next, published, false));
  EXPECT_EQ(next.paths[0].latencyUs, 4600);
  EXPECT_EQ(next.paths[1].latencyUs, 1900);
}

TEST(HoldLatencyJitter, IgnoresMovesUnderOneMillisecondEvenWhenRelativelyLarge) {
  const auto published = withLatencies({{"sdb", 200}});
  auto next = withLatencies({{"sdb", 900}});
  holdLatencyJitter(next, published, false);
  EXPECT_EQ(next.paths[0].latencyUs, 200);
}

TEST(HoldLatencyJitter, AFirstLatencyAndAVanishedOneAreAlwaysPublished) {
  const auto published = withLatencies({{"sdb", -1}, {"sdc", 3000}});
  auto next = withLatencies({{"sdb", 3000}, {"sdc", -1}});
  holdLatencyJitter(next, published, false);
  EXPECT_EQ(next.paths[0].latencyUs, 3000);
  EXPECT_EQ(next.paths[1].latencyUs, -1);
}

TEST(HoldLatencyJitter, MatchesPathsByDeviceWhenPathsCameAndWent) {
  const auto published = withLatencies({{"sdb", 3000}, {"sdd", 5000}});
  auto next = withLatencies({{"sda", 100000}, {"sdc", 3100}, {"sdd", 5100}});
  holdLatencyJitter(next, published, false);
  EXPECT_EQ(next.paths[0].latencyUs, 100000); // new path
  EXPECT_EQ(next.paths[1].latencyUs, 3100);   // new path, not sdb's
  EXPECT_EQ(next.paths[2].latencyUs, 5000);   // held
}

TEST(StateModelUtf8, ReplacesInvalidSequencesAndKeepsValidOnes) {
  StateSnapshot snap;
  PathView path;
  path.device = "sdb";
  // A NIC name with a Latin-1 byte, a target with a truncated sequence, a
  // note with valid UTF-8 (kept), an overlong '/' and a surrogate.
  path.netdev = "eth\xE9";
  path.target = "iqn.x:\xE2\x82";
  path.note = "ok \xE2\x82\xAC \xF0\x9F\x92\xBE";
  path.checker = "\xC0\xAF \xED\xA0\x80";
  snap.paths.push_back(path);
  PortalView portal;
  portal.address = "10.0.0.1";
  portal.reachability = {{"eth\xFF", "reachable"}};
  snap.portals.push_back(portal);
  FindingView finding;
  finding.summary = "bound to eth\xE9";
  finding.nics = {"eth\xE9"};
  snap.findings.push_back(finding);

  replaceInvalidUtf8(snap);
  const std::string bad = "\xEF\xBF\xBD";
  EXPECT_EQ(snap.paths[0].netdev, "eth" + bad);
  EXPECT_EQ(snap.paths[0].target, "iqn.x:" + bad + bad);
  EXPECT_EQ(snap.paths[0].note, "ok \xE2\x82\xAC \xF0\x9F\x92\xBE");
  EXPECT_EQ(snap.paths[0].checker, bad + bad + " " + bad + bad + bad);
  EXPECT_EQ(snap.portals[0].reachability.begin()->first, "eth" + bad);
  EXPECT_EQ(snap.findings[0].summary, "bound to eth" + bad);
  EXPECT_EQ(snap.findings[0].nics[0], "eth" + bad);
  // The state file renders it (it would throw on the raw bytes).
  EXPECT_NE(snapshotToJson(snap).find("eth" + bad), std::string::npos);
}

TEST(StateModelUtf8, TheStateFileNeverThrowsOnInvalidBytes) {
  StateSnapshot snap;
  PathView path;
  path.device = "sdb";
  path.netdev = "eth\xE9"; // not cleaned: the renderer's own guard
  snap.paths.push_back(path);
  EXPECT_NO_THROW(static_cast<void>(snapshotToJson(snap)));
}

// Every kind of value the schema holds: empty and full arrays and objects,
// negative and 64-bit numbers, and the characters JSON must escape.
StateSnapshot everyKindOfValue() {
  StateSnapshot snap;
  snap.version = "0.9.0";
  snap.mode = "owner";
  snap.status = "2 maps, 2 paths, 1 degraded";
  MapView upper;
  upper.alias = "xserve-upper";
  upper.wwid = "36000393000001234";
  upper.dmUuid = "mpath-36000393000001234";
  upper.selector = "service-time";
  upper.state = "degraded";
  upper.activeGroup = 1;
  upper.usablePaths = 1;
  upper.totalPaths = 2;
  upper.queueing = true;
  upper.noPathRetry = "12";
  upper.groups = {{1, 50, {"sdb", "sdc"}}, {2, 10, {}}};
  upper.adaptive = "weights";
  upper.adaptiveReloads = 3;
  upper.adaptiveDecisions = {{1764806400, "reload", "weights 80/20 \"measured\""},
                             {1764806460, "held", "a path is failing"}};
  snap.maps.push_back(upper);
  MapView lower;
  lower.alias = "xserve-lower";
  snap.maps.push_back(lower);
  PathView sdb;
  sdb.device = "sdb";
  sdb.devt = "8:16";
  sdb.map = "xserve-upper";
  sdb.state = "up";
  sdb.dmState = "active";
  sdb.checker = "TUR ok";
  sdb.failures = std::numeric_limits<std::uint64_t>::max();
  sdb.shaky = true;
  sdb.latencyUs = 1234;
  sdb.alua = "active/optimized";
  sdb.wwid = "36000393000001234";
  sdb.target = "iqn.2003-01.org.linux-iscsi:xserve.upper";
  sdb.portal = "10.10.1.20:3260,1";
  sdb.netdev = "eth1";
  sdb.controller = "upper";
  sdb.sessionId = 7;
  sdb.note = "quote \" backslash \\ slash / tab \t newline \n cr \r bs \b ff \f "
             "control \x01\x1f del \x7f euro \xE2\x82\xAC disk \xF0\x9F\x92\xBE";
  sdb.throughputBps = 5000000;
  sdb.capacityBps = std::numeric_limits<std::uint64_t>::max();
  sdb.ioLatencyUs = std::numeric_limits<std::int64_t>::min();
  sdb.confidence = 90;
  sdb.weight = 80;
  snap.paths.push_back(sdb);
  PathView sdc;
  sdc.device = "sdc";
  snap.paths.push_back(sdc);
  PortalView gateway;
  gateway.address = "10.10.1.20";
  gateway.reachability = {{"", "unknown"},
                          {"eth1", "reachable"},
                          {"eth2", "refused: no"},
                          {"eth\"3\x02", "a key to escape"}};
  snap.portals.push_back(gateway);
  PortalView v6;
  v6.address = "fd00::20";
  v6.port = 65535;
  snap.portals.push_back(v6);
  FindingView wrongEgress;
  wrongEgress.key = "wrong-egress:eth2,eth1";
  wrongEgress.id = "wrong-egress";
  wrongEgress.severity = "warning";
  wrongEgress.summary = "traffic leaves via eth1";
  wrongEgress.explanation = std::string("two lines\nof text\0nul", 21);
  wrongEgress.nics = {"eth2", "eth1"};
  wrongEgress.portals = {"10.10.1.20:3260"};
  wrongEgress.paths = {"sdc"};
  wrongEgress.fix = {"sysctl -w net.ipv4.conf.all.arp_ignore=1"};
  snap.findings.push_back(wrongEgress);
  FindingView bare;
  bare.key = "bare";
  snap.findings.push_back(bare);
  return snap;
}

std::string readText(const std::filesystem::path &file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The layout the state file has had since schema 1, byte for byte: admins'
// scripts and `jq` filters read it, and a diff of two state files should
// show only what changed.
TEST(StateModelJson, RendersSchemaOneByteForByte) {
  const auto dir = std::filesystem::path(PATHKEEPER_SOURCE_DIR) / "tests/data/state";
  const auto snap = everyKindOfValue();
  EXPECT_EQ(snapshotToJson(snap, true), readText(dir / "every-kind-ready.json"));
  EXPECT_EQ(snapshotToJson(snap), readText(dir / "every-kind.json"));
  EXPECT_EQ(snapshotToJson(StateSnapshot{}, false), readText(dir / "empty-not-ready.json"));
}

TEST(StateModelJson, RendersInvalidBytesAsTheCleanedSnapshotWouldRead) {
  auto raw = everyKindOfValue();
  raw.paths[0].netdev = "eth\xE9";
  raw.paths[0].target = "iqn.x:\xE2\x82";
  raw.paths[0].checker = "\xC0\xAF \xED\xA0\x80";
  raw.portals[0].reachability.emplace("eth\xFF", "unreachable: \xFE");
  raw.findings[0].fix.push_back("ip link set \xE9 up");
  auto cleaned = raw;
  replaceInvalidUtf8(cleaned);
  ASSERT_NE(cleaned, raw);
  EXPECT_EQ(snapshotToJson(raw), snapshotToJson(cleaned));
}

} // namespace
} // namespace pathkeeper::daemon
