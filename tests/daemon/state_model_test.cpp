// holdLatencyJitter(): which check latencies are published again; and
// replaceInvalidUtf8(): what D-Bus and JSON are given.

#include "state_model.hpp"

#include <gtest/gtest.h>

#include <cstdint>
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

} // namespace
} // namespace pathkeeper::daemon
