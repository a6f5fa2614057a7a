#include "snapshot_diff.hpp"

#include "sample_state.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace pathkeeper::dbus {
namespace {

using ::testing::ElementsAre;
using Type = ObjectChange::Type;

daemon::PathView &pathOf(daemon::StateSnapshot &s, const std::string &device) {
  return *std::ranges::find(s.paths, device, &daemon::PathView::device);
}

TEST(DbusSnapshotDiff, FirstPublishAddsEveryObjectAndSetsManagerProperties) {
  const auto after = sample::sampleSnapshot();
  const auto changes = diffSnapshots({}, after);
  const auto added = std::ranges::count(changes, Type::Added, &ObjectChange::type);
  EXPECT_EQ(added,
            static_cast<long>(after.maps.size() + after.paths.size() + after.portals.size()));
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.back(),
            (ObjectChange{
                Type::PropertiesChanged, ObjectKind::Manager, "", {"Version", "Mode", "Status"}}));
}

TEST(DbusSnapshotDiff, SameSnapshotChangesNothing) {
  EXPECT_TRUE(diffSnapshots(sample::sampleSnapshot(), sample::sampleSnapshot()).empty());
}

TEST(DbusSnapshotDiff, FailedPathChangesOnlyItsChangedProperties) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  pathOf(after, "sdc").state = "down";
  pathOf(after, "sdc").dmState = "failed";
  pathOf(after, "sdc").failures += 1;
  EXPECT_THAT(
      diffSnapshots(before, after),
      ElementsAre(ObjectChange{
          Type::PropertiesChanged, ObjectKind::Path, "sdc", {"State", "DmState", "Failures"}}));
}

TEST(DbusSnapshotDiff, MapAndManagerChangesComeInKindOrderWithManagerLast) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  after.status = "3 maps, 6 paths, 1 degraded";
  after.maps[2].state = "degraded";
  after.maps[2].usablePaths = 1;
  after.maps[1].groups[0].paths.push_back("sdx");
  pathOf(after, "sdb").latencyUs = 9000;
  EXPECT_THAT(
      diffSnapshots(before, after),
      ElementsAre(
          ObjectChange{Type::PropertiesChanged, ObjectKind::Map, "xserve-lower", {"Groups"}},
          ObjectChange{
              Type::PropertiesChanged, ObjectKind::Map, "xserve-upper", {"State", "UsablePaths"}},
          ObjectChange{Type::PropertiesChanged, ObjectKind::Path, "sdb", {"LatencyUs"}},
          ObjectChange{Type::PropertiesChanged, ObjectKind::Manager, "", {"Status"}}));
}

TEST(DbusSnapshotDiff, PathsComingAndGoingAreAddedAndRemovedRemovalsFirst) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  std::erase_if(after.paths, [](const auto &p) { return p.device == "sde"; });
  after.paths.push_back(sample::samplePath("sda", "", "10.10.1.20", "eth1", "", 7));
  EXPECT_THAT(diffSnapshots(before, after),
              ElementsAre(ObjectChange{Type::Removed, ObjectKind::Path, "sde", {}},
                          ObjectChange{Type::Added, ObjectKind::Path, "sda", {}}));
}

TEST(DbusSnapshotDiff, RenamedMapIsANewObject) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  after.maps[1].alias = "xserve-lower2";
  EXPECT_THAT(diffSnapshots(before, after),
              ElementsAre(ObjectChange{Type::Removed, ObjectKind::Map, "xserve-lower", {}},
                          ObjectChange{Type::Added, ObjectKind::Map, "xserve-lower2", {}}));
}

TEST(DbusSnapshotDiff, DoesNotRelyOnSortedVectors) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  std::ranges::reverse(after.paths);
  std::ranges::reverse(after.maps);
  EXPECT_TRUE(diffSnapshots(before, after).empty());
}

TEST(DbusSnapshotDiff, PortalReachabilityChangeAndPortKeyedObjects) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  after.portals[1].reachability["eth2"] = "reachable";
  after.portals[2].port = 3260; // another port is another portal
  EXPECT_THAT(diffSnapshots(before, after),
              ElementsAre(ObjectChange{Type::Removed, ObjectKind::Portal, "[fd00::21]:3261", {}},
                          ObjectChange{Type::Added, ObjectKind::Portal, "[fd00::21]:3260", {}},
                          ObjectChange{Type::PropertiesChanged,
                                       ObjectKind::Portal,
                                       "10.10.1.21:3260",
                                       {"Reachability"}}));
}

TEST(DbusSnapshotDiff, FindingsComeAndGoAsObjectsAndChangeTheirProperties) {
  auto before = sample::sampleSnapshot();
  daemon::FindingView egress;
  egress.key = "wrong-egress:eth2,eth1";
  egress.id = "wrong-egress";
  egress.severity = "error";
  egress.paths = {"sdb"};
  before.findings = {egress};
  auto after = before;
  after.findings[0].paths = {"sdb", "sdd"};
  daemon::FindingView flux;
  flux.key = "arp-flux:eth1,eth2";
  flux.id = "arp-flux";
  after.findings.insert(after.findings.begin(), flux);
  EXPECT_THAT(diffSnapshots(before, after),
              ElementsAre(ObjectChange{Type::Added, ObjectKind::Finding, "arp-flux:eth1,eth2", {}},
                          ObjectChange{Type::PropertiesChanged,
                                       ObjectKind::Finding,
                                       "wrong-egress:eth2,eth1",
                                       {"Paths"}}));
  EXPECT_THAT(
      diffSnapshots(after, sample::sampleSnapshot()),
      ElementsAre(ObjectChange{Type::Removed, ObjectKind::Finding, "arp-flux:eth1,eth2", {}},
                  ObjectChange{Type::Removed, ObjectKind::Finding, "wrong-egress:eth2,eth1", {}}));
}

TEST(DbusSnapshotDiff, EveryFindingFieldIsAProperty) {
  daemon::FindingView a;
  daemon::FindingView b;
  b.id = "x";
  b.severity = "x";
  b.summary = "x";
  b.explanation = "x";
  b.nics = {"x"};
  b.portals = {"x"};
  b.paths = {"x"};
  b.fix = {"x"};
  EXPECT_THAT(changedProperties(a, b), ElementsAre("Id", "Severity", "Summary", "Explanation",
                                                   "NetDevs", "Portals", "Paths", "Fix"));
}

TEST(DbusSnapshotDiff, EveryPathFieldIsAProperty) {
  daemon::PathView a;
  daemon::PathView b;
  b.devt = "x";
  b.map = "x";
  b.state = "x";
  b.dmState = "x";
  b.checker = "x";
  b.failures = 1;
  b.shaky = true;
  b.latencyUs = 1;
  b.alua = "x";
  b.wwid = "x";
  b.target = "x";
  b.portal = "x";
  b.netdev = "x";
  b.controller = "x";
  b.sessionId = 1;
  b.note = "x";
  b.throughputBps = 1;
  b.capacityBps = 1;
  b.ioLatencyUs = 1;
  b.confidence = 1;
  b.weight = 1;
  EXPECT_EQ(changedProperties(a, b).size(), 21U);
}

TEST(DbusSnapshotDiff, NewWeightsAndADecisionChangeTheirPropertiesOnly) {
  const auto before = sample::sampleSnapshot();
  auto after = before;
  after.maps[2].adaptiveReloads = 2;
  after.maps[2].adaptiveDecisions.push_back({1764460900, "reload", "xserve-upper: weights ..."});
  pathOf(after, "sdc").weight = 40;
  pathOf(after, "sdc").capacityBps = 2000000;
  EXPECT_THAT(diffSnapshots(before, after),
              ElementsAre(ObjectChange{Type::PropertiesChanged,
                                       ObjectKind::Map,
                                       "xserve-upper",
                                       {"AdaptiveReloads", "AdaptiveDecisions"}},
                          ObjectChange{Type::PropertiesChanged,
                                       ObjectKind::Path,
                                       "sdc",
                                       {"CapacityBytesPerSecond", "Weight"}}));
}

TEST(DbusSnapshotDiff, EveryMapFieldIsAProperty) {
  daemon::MapView a;
  daemon::MapView b;
  b.wwid = "x";
  b.dmUuid = "x";
  b.selector = "x";
  b.state = "x";
  b.activeGroup = 1;
  b.usablePaths = 1;
  b.totalPaths = 1;
  b.queueing = true;
  b.groups = {{1, 1, {"x"}}};
  b.adaptive = "weights";
  b.adaptiveReloads = 1;
  b.adaptiveDecisions = {{1, "reload", "x"}};
  EXPECT_EQ(changedProperties(a, b).size(), 12U);
}

} // namespace
} // namespace pathkeeper::dbus
