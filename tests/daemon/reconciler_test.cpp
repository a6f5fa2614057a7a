#include "reconciler.hpp"

#include "dm_adapter.hpp"
#include "dm_table.hpp"
#include "fake_device_mapper.hpp"
#include "grouping.hpp"
#include "names.hpp"
#include "text.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <system_error>

namespace pathkeeper::daemon {
namespace {

using namespace std::chrono_literals;
using fakes::FakeDeviceMapper;
using fakes::FakeMap;
using selector::DevT;
using selector::MapSpec;
using selector::PlannedMap;
using selector::SelectorKind;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

// --- desired maps ----------------------------------------------------------

constexpr std::uint64_t kSize = 524288;
const std::string kWwid = "36001405aaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string kUuid = "mpath-" + kWwid;

selector::Path path(std::uint32_t minor) {
  selector::Path p;
  p.device = "sd" + std::to_string(minor);
  p.devt = {8, minor};
  return p;
}

/// xserve-upper: one group of two paths (8:16, 8:32), round-robin.
MapSpec upperSpec() {
  MapSpec spec;
  spec.alias = "xserve-upper";
  spec.wwid = kWwid;
  spec.sizeSectors = kSize;
  spec.selector = SelectorKind::RoundRobin;
  spec.groups.push_back({{path(16), path(32)}, "upper"});
  spec.initialGroup = 1;
  return spec;
}

PlannedMap planned(const MapSpec &spec) {
  auto table = selector::renderDmTable(spec);
  EXPECT_TRUE(table.has_value()) << table.error();
  PlannedMap map;
  map.spec = spec;
  map.table = table.value_or("");
  return map;
}

/// The planner's table, with the features field replaced (to mimic a table
/// rendered before the kernel's echo rules were applied).
PlannedMap plannedWithFeatures(const MapSpec &spec, const std::string &features) {
  auto map = planned(spec);
  auto table = selector::parseDmTable(map.table);
  auto words = selector::splitWords(map.table);
  const std::size_t skip = 4 + table->featureArgs.size();
  std::string line = "0 " + std::to_string(spec.sizeSectors) + " multipath " + features;
  for (std::size_t i = skip; i < words.size(); ++i) {
    line += " " + words[i];
  }
  map.table = line;
  return map;
}

struct Harness {
  FakeDeviceMapper dm;
  ReconcileInput input;

  ReconcilePlan plan() {
    input.live = readLiveMaps(dm);
    return planReconcile(input);
  }

  // xserve-lower (8:48 failed) then xserve-upper (8:32 failed), neither
  // made yet: create, message, create, message.
  ReconcilePlan planTwoNewMapsWithAFailedPathEach() {
    auto lower = upperSpec();
    lower.alias = "xserve-lower";
    lower.wwid = "36001405bbbbbbbbbbbbbbbbbbbbbbbbb";
    lower.groups[0].paths = {path(48), path(64)};
    input.desired = {planned(lower), planned(upperSpec())};
    input.usable = {{DevT{8, 48}, false}, {DevT{8, 32}, false}};
    return plan();
  }
};

std::vector<ActionKind> kinds(const ReconcilePlan &plan) {
  std::vector<ActionKind> out;
  for (const auto &action : plan.actions) {
    out.push_back(action.kind);
  }
  return out;
}

std::vector<std::string> messages(const ReconcilePlan &plan) {
  std::vector<std::string> out;
  for (const auto &action : plan.actions) {
    if (action.kind == ActionKind::Message) {
      out.push_back(action.message);
    }
  }
  return out;
}

// --- planning --------------------------------------------------------------

TEST(Reconcile, CreatesAMissingMapWithOurUuid) {
  Harness h;
  h.input.desired = {planned(upperSpec())};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Create));
  EXPECT_EQ(plan.actions[0].map, "xserve-upper");
  EXPECT_EQ(plan.actions[0].uuid, kUuid);
  EXPECT_EQ(plan.actions[0].sizeSectors, kSize);
  EXPECT_EQ(plan.actions[0].params, "0 0 1 1 round-robin 0 2 1 8:16 1 8:32 1");

  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_EQ(outcomes.size(), 1U);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].error;
  ASSERT_TRUE(h.dm.maps.contains("xserve-upper"));
  EXPECT_EQ(h.dm.maps["xserve-upper"].uuid, kUuid);
  EXPECT_FALSE(h.dm.maps["xserve-upper"].suspended);
}

TEST(Reconcile, SaysWhenTheCreateFinishedADeviceAStoppedCreateHadLeft) {
  Harness h;
  h.input.desired = {planned(upperSpec())};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Create));
  const Action &create = plan.actions[0];
  // The daemon killed between the halves: the device, its table not live.
  static_cast<void>(h.dm.prepareCreate(create.map, create.uuid, create.sizeSectors, create.params));
  EXPECT_THAT(readLiveMaps(h.dm), IsEmpty());
  EXPECT_THAT(h.plan().actions, SizeIs(1)) << "the next start plans the create again";
  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_EQ(outcomes.size(), 1U);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_TRUE(outcomes[0].tookOver);
  EXPECT_TRUE(h.dm.maps.at("xserve-upper").live);
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

TEST(Reconcile, FailsUnusablePathsRightAfterCreatingTheMap) {
  Harness h;
  h.input.desired = {planned(upperSpec())};
  h.input.usable = {{DevT{8, 16}, true}, {DevT{8, 32}, false}};
  auto plan = h.plan();
  EXPECT_THAT(kinds(plan), ElementsAre(ActionKind::Create, ActionKind::Message));
  EXPECT_THAT(messages(plan), ElementsAre("fail_path 8:32"));
  for (const auto &outcome : applyActions(plan.actions, h.dm)) {
    EXPECT_TRUE(outcome.ok) << outcome.error;
  }
  EXPECT_FALSE(h.dm.maps["xserve-upper"].pathActive["8:32"]);
}

TEST(Reconcile, AdoptsAMatchingMapWithoutAnyModifyingCall) {
  Harness h;
  const auto map = planned(upperSpec());
  h.dm.seed("xserve-upper", kUuid, map.table);
  h.dm.maps["xserve-upper"].eventNr = 7;
  h.input.desired = {map};
  h.input.usable = {{DevT{8, 16}, true}, {DevT{8, 32}, true}};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  EXPECT_THAT(plan.adopted, ElementsAre("xserve-upper"));
  EXPECT_THAT(plan.refused, IsEmpty());
  applyActions(plan.actions, h.dm);
  EXPECT_THAT(h.dm.modifyingCalls(), IsEmpty());
  EXPECT_EQ(h.dm.maps["xserve-upper"].eventNr, 7U);
}

TEST(Reconcile, ASecondPassAfterCreatingIsANoOp) {
  Harness h;
  h.input.desired = {planned(upperSpec())};
  applyActions(h.plan().actions, h.dm);
  h.dm.calls.clear();
  auto again = h.plan();
  EXPECT_THAT(again.actions, IsEmpty());
  EXPECT_THAT(again.adopted, ElementsAre("xserve-upper"));
}

/// One kind of change, and the single reason it must produce.
struct ChangeCase {
  const char *name;
  void (*change)(MapSpec &);
  ReloadReason reason;
};

class ReloadsOnRealChange : public ::testing::TestWithParam<ChangeCase> {};

TEST_P(ReloadsOnRealChange, WithExactlyThatReason) {
  Harness h;
  const auto old = upperSpec();
  h.dm.seed("xserve-upper", kUuid, planned(old).table);
  auto spec = upperSpec();
  GetParam().change(spec);
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_THAT(plan.actions[0].reasons, ElementsAre(GetParam().reason))
      << plan.actions[0].describe();
  EXPECT_THAT(plan.adopted, IsEmpty());

  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_THAT(h.dm.modifyingCalls(), ElementsAre("load xserve-upper", "resume xserve-upper"));
  // The kernel now holds the desired table: the next pass adopts it.
  h.dm.calls.clear();
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

/// xserve-upper live with upperSpec()'s table and wanted as service-time,
/// so that the next plan is one reload; returns the wanted spec.
MapSpec wantServiceTimeOnUpper(Harness &h) {
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  auto spec = upperSpec();
  spec.selector = SelectorKind::ServiceTime;
  h.input.desired = {planned(spec)};
  return spec;
}

// An adaptive reload waits for its lull while the old table carries the
// I/O, before it reads the map's group and loads the new table: a message
// sent meanwhile reaches the old table and is read back into the new one.
TEST(Reconcile, AReloadWithALullGateLooksAtTheIoInFlightBeforeReadingAndLoading) {
  Harness h;
  auto spec = wantServiceTimeOnUpper(h);
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  plan.actions[0].lull = LullGate{{{"sdb", 100.0}, {"sdc", 25.0}}, 50ms, 2000ms};
  // sdb has a request in flight (100 ms to drain) at the first look, none at the next.
  std::vector<std::uint64_t> sdb{1, 0};
  std::size_t looks = 0;
  const InFlightReader inFlight = [&](const std::string &device) -> std::optional<std::uint64_t> {
    h.dm.calls.push_back("inflight " + device);
    if (device != "sdb") {
      return 0;
    }
    return sdb[std::min(looks++, sdb.size() - 1)];
  };
  h.dm.calls.clear();
  auto outcomes = applyActions(plan.actions, h.dm, inFlight);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  ASSERT_TRUE(outcomes[0].lull.has_value());
  EXPECT_TRUE(outcomes[0].lull->found);
  EXPECT_EQ(outcomes[0].lull->drainMs, 0.0);
  // Two looks, the second finding the lull, then the group read, the load
  // and the swap.
  ASSERT_GE(h.dm.calls.size(), 5U);
  EXPECT_THAT(std::vector(h.dm.calls.begin(), h.dm.calls.begin() + 4),
              ElementsAre("inflight sdb", "inflight sdc", "inflight sdb", "inflight sdc"));
  EXPECT_THAT(h.dm.modifyingCalls(),
              ElementsAre("inflight sdb", "inflight sdc", "inflight sdb", "inflight sdc",
                          "load xserve-upper", "resume xserve-upper"));

  // Without a reader, or without a gate, nothing waits.
  h.dm.calls.clear();
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  auto again = h.plan();
  ASSERT_THAT(kinds(again), ElementsAre(ActionKind::Reload));
  again.actions[0].lull = plan.actions[0].lull;
  outcomes = applyActions(again.actions, h.dm);
  EXPECT_FALSE(outcomes[0].lull.has_value());
  spec.selector = SelectorKind::RoundRobin;
  h.input.desired = {planned(spec)};
  auto third = h.plan();
  ASSERT_THAT(kinds(third), ElementsAre(ActionKind::Reload));
  outcomes = applyActions(third.actions, h.dm, inFlight);
  EXPECT_FALSE(outcomes[0].lull.has_value());
  EXPECT_THAT(h.dm.calls, Not(Contains("inflight sdb")));
}

// The table worker waits no longer for all of a pass's lulls than for one:
// once the first gate's budget is spent, a second gated reload looks once.
TEST(Reconcile, TheLullGatesOfOnePassShareOneWait) {
  Harness h;
  auto spec = wantServiceTimeOnUpper(h);
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  plan.actions[0].lull = LullGate{{{"sdb", 100.0}}, 50ms, 20ms};
  plan.actions.push_back(plan.actions[0]);
  plan.actions[1].lull->maxWait = 2000ms; // its own would be long
  std::vector<std::size_t> looksAt;       // calls.size() at each look
  const InFlightReader busy = [&](const std::string &) -> std::optional<std::uint64_t> {
    looksAt.push_back(h.dm.calls.size());
    return 3;
  };
  h.dm.calls.clear();
  auto outcomes = applyActions(plan.actions, h.dm, busy);
  ASSERT_EQ(outcomes.size(), 2U);
  ASSERT_TRUE(outcomes[0].lull && outcomes[1].lull);
  EXPECT_FALSE(outcomes[0].lull->found);
  EXPECT_FALSE(outcomes[1].lull->found);
  EXPECT_GE(outcomes[0].lull->waited, 20ms);
  // The second reload's looks come after the first one's resume: one.
  auto firstResume = std::ranges::find(h.dm.calls, "resume xserve-upper") - h.dm.calls.begin();
  EXPECT_EQ(
      std::ranges::count_if(
          looksAt, [&](std::size_t at) { return at > static_cast<std::size_t>(firstResume); }),
      1);
}

INSTANTIATE_TEST_SUITE_P(
    Reconcile, ReloadsOnRealChange,
    ::testing::Values(
        ChangeCase{"Size", [](MapSpec &s) { s.sizeSectors *= 2; }, ReloadReason::Size},
        ChangeCase{"PathAdded", [](MapSpec &s) { s.groups[0].paths.push_back(path(48)); },
                   ReloadReason::Paths},
        ChangeCase{"PathRemoved", [](MapSpec &s) { s.groups[0].paths.pop_back(); },
                   ReloadReason::Paths},
        ChangeCase{"SplitIntoTwoGroups",
                   [](MapSpec &s) {
                     s.groups.push_back({{s.groups[0].paths.back()}, "lower"});
                     s.groups[0].paths.pop_back();
                   },
                   ReloadReason::Groups},
        ChangeCase{"Selector", [](MapSpec &s) { s.selector = SelectorKind::QueueLength; },
                   ReloadReason::Selector},
        ChangeCase{"PgInitRetries", [](MapSpec &s) { s.features.pgInitRetries = 3; },
                   ReloadReason::Features},
        ChangeCase{"HwHandler", [](MapSpec &s) { s.hwHandler = "emc"; }, ReloadReason::HwHandler}),
    [](const auto &testInfo) { return std::string(testInfo.param.name); });

TEST(Reconcile, ReloadsWhenAServiceTimeWeightChanges) {
  Harness h;
  auto old = upperSpec();
  old.selector = SelectorKind::ServiceTime;
  h.dm.seed("xserve-upper", kUuid, planned(old).table);
  auto spec = old;
  spec.groups[0].paths[1].relativeThroughput = 10;
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  // Same selector, other weights: the log says what changed.
  EXPECT_THAT(plan.actions[0].reasons, ElementsAre(ReloadReason::PathArgs));
  EXPECT_EQ(plan.actions[0].describe(), "reload xserve-upper (path weights)");
}

TEST(Reconcile, ASelectorChangeWithNewWeightsIsASelectorChange) {
  Harness h;
  auto old = upperSpec();
  old.selector = SelectorKind::ServiceTime;
  h.dm.seed("xserve-upper", kUuid, planned(old).table);
  auto spec = old;
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_THAT(plan.actions[0].reasons, ElementsAre(ReloadReason::Selector));
}

TEST(Reconcile, ReportsEveryReasonOfACombinedChange) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  auto spec = upperSpec();
  spec.selector = SelectorKind::ServiceTime;
  spec.groups[0].paths.push_back(path(48));
  spec.features.pgInitRetries = 5;
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_THAT(plan.actions[0].reasons,
              ElementsAre(ReloadReason::Paths, ReloadReason::Selector, ReloadReason::Features));
  EXPECT_EQ(plan.actions[0].describe(), "reload xserve-upper (paths, selector, features)");
}

TEST(Reconcile, PathOrderInsideAGroupIsNotAChange) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  auto spec = upperSpec();
  std::ranges::reverse(spec.groups[0].paths);
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  EXPECT_THAT(plan.adopted, ElementsAre("xserve-upper"));
}

TEST(Reconcile, GroupOrderIsAChange) {
  Harness h;
  auto two = upperSpec();
  two.groups.push_back({{two.groups[0].paths.back()}, "lower"});
  two.groups[0].paths.pop_back();
  h.dm.seed("xserve-upper", kUuid, planned(two).table);
  auto swapped = two;
  std::ranges::reverse(swapped.groups);
  h.input.desired = {planned(swapped)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_THAT(plan.actions[0].reasons, ElementsAre(ReloadReason::Groups));
}

TEST(Reconcile, BioMapsEchoingRetainAttachedHwHandlerAreAdopted) {
  Harness h;
  auto spec = upperSpec();
  spec.features.queueMode = selector::QueueMode::Bio;
  // The kernel turns retain_attached_hw_handler on for bio maps and says so.
  auto live = plannedWithFeatures(spec, "3 retain_attached_hw_handler queue_mode bio");
  h.dm.seed("xserve-upper", kUuid, live.table);
  h.input.desired = {plannedWithFeatures(spec, "2 queue_mode bio")};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  EXPECT_THAT(plan.adopted, ElementsAre("xserve-upper"));
}

TEST(Reconcile, QueueModeMqThatTheKernelNeverEchoesIsAdopted) {
  Harness h;
  auto spec = upperSpec();
  spec.features.queueMode = selector::QueueMode::Mq;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table); // echo: "0"
  h.input.desired = {plannedWithFeatures(spec, "2 queue_mode mq")};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  EXPECT_THAT(plan.adopted, ElementsAre("xserve-upper"));
}

TEST(Reconcile, QueueModeBioAgainstARequestBasedMapIsAChange) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  auto spec = upperSpec();
  spec.features.queueMode = selector::QueueMode::Bio;
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_THAT(plan.actions[0].reasons, ElementsAre(ReloadReason::Features));
}

TEST(Reconcile, AHandlerTheKernelAttachedItselfIsNotAChange) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  h.dm.maps["xserve-upper"].attachedHandler = "alua"; // echoed as "1 alua"
  h.input.desired = {planned(upperSpec())};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  // ...and asking for that same handler explicitly is not one either.
  auto spec = upperSpec();
  spec.hwHandler = "alua";
  h.input.desired = {planned(spec)};
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

TEST(Reconcile, QueueIfNoPathDifferencesAreMessages) {
  Harness h;
  auto spec = upperSpec();
  spec.features.queueIfNoPath = true;
  h.dm.seed("xserve-upper", kUuid, planned(spec).table);
  h.dm.maps["xserve-upper"].queueIfNoPath = false; // no_path_retry ran out earlier
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  EXPECT_THAT(kinds(plan), ElementsAre(ActionKind::Message));
  EXPECT_THAT(messages(plan), ElementsAre("queue_if_no_path"));
  EXPECT_EQ(plan.actions[0].uuid, kUuid) << "sent by DM UUID";

  // The daemon counting no_path_retry down asks for failing instead.
  h.dm.maps["xserve-upper"].queueIfNoPath = true;
  h.input.queueIfNoPath = {{"xserve-upper", false}};
  plan = h.plan();
  EXPECT_THAT(messages(plan), ElementsAre("fail_if_no_path"));
  applyActions(plan.actions, h.dm);
  EXPECT_FALSE(h.dm.maps["xserve-upper"].queueIfNoPath);
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

TEST(Reconcile, AMapThatMustNotQueueIsLoadedWithoutQueueIfNoPath) {
  // no_path_retry ran out (or the admin disabled queueing): a reload's or a
  // create's table must not queue I/O until a message turns it off.
  Harness h;
  auto old = upperSpec();
  old.features.queueIfNoPath = true;
  h.dm.seed("xserve-upper", kUuid, planned(old).table);
  h.dm.maps["xserve-upper"].queueIfNoPath = false;
  auto spec = old;
  spec.selector = SelectorKind::QueueLength;
  auto lower = upperSpec();
  lower.alias = "xserve-lower";
  lower.wwid = "36001405bbbbbbbbbbbbbbbbbbbbbbbbb";
  lower.groups[0].paths = {path(48), path(64)};
  lower.features.queueIfNoPath = true;
  h.input.desired = {planned(spec), planned(lower)};
  h.input.queueIfNoPath = {{"xserve-upper", false}, {"xserve-lower", false}};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload, ActionKind::Create));
  for (const auto &action : plan.actions) {
    EXPECT_THAT(action.params, Not(HasSubstr("queue_if_no_path"))) << action.describe();
  }
  EXPECT_THAT(messages(plan), IsEmpty()) << "nothing to turn off afterwards";
  applyActions(plan.actions, h.dm);
  EXPECT_FALSE(h.dm.maps["xserve-upper"].queueIfNoPath);
  EXPECT_FALSE(h.dm.maps["xserve-lower"].queueIfNoPath);
  EXPECT_THAT(h.plan().actions, IsEmpty()) << "and no reload for the missing feature";

  // Allowed again (a path is back): a message, not a reload.
  h.input.queueIfNoPath.clear();
  plan = h.plan();
  EXPECT_THAT(messages(plan), ElementsAre("queue_if_no_path", "queue_if_no_path"));
}

TEST(Reconcile, PathStateDifferencesAreMessagesNeverReloads) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  h.dm.maps["xserve-upper"].pathActive["8:16"] = false;
  h.input.desired = {planned(upperSpec())};
  h.input.usable = {{DevT{8, 16}, true}, {DevT{8, 32}, false}};
  auto plan = h.plan();
  EXPECT_THAT(plan.adopted, ElementsAre("xserve-upper"));
  // Reinstate first: failing 8:32 first would leave no usable path.
  EXPECT_THAT(kinds(plan), ElementsAre(ActionKind::Message, ActionKind::Message));
  EXPECT_THAT(messages(plan), ElementsAre("reinstate_path 8:16", "fail_path 8:32"));
  for (const auto &outcome : applyActions(plan.actions, h.dm)) {
    EXPECT_TRUE(outcome.ok) << outcome.error;
  }
  EXPECT_TRUE(h.dm.maps["xserve-upper"].pathActive["8:16"]);
  EXPECT_FALSE(h.dm.maps["xserve-upper"].pathActive["8:32"]);
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

TEST(Reconcile, PathsWithoutAnOpinionAreLeftAsTheKernelHasThem) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  h.dm.maps["xserve-upper"].pathActive["8:16"] = false;
  h.input.desired = {planned(upperSpec())};
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

TEST(Reconcile, SwitchesGroupWhenTheFailbackPolicyAsks) {
  Harness h;
  auto two = upperSpec();
  two.groups.push_back({{two.groups[0].paths.back()}, "lower"});
  two.groups[0].paths.pop_back();
  h.dm.seed("xserve-upper", kUuid, planned(two).table);
  h.dm.maps["xserve-upper"].nextGroup = 2; // failed over earlier
  h.input.desired = {planned(two)};
  h.input.activeGroup = {{"xserve-upper", 1}};
  auto plan = h.plan();
  EXPECT_THAT(messages(plan), ElementsAre("switch_group 1"));
  applyActions(plan.actions, h.dm);
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

/// xserve-upper with two groups: 8:16 alone, then 8:32 alone.
MapSpec twoGroupSpec() {
  auto two = upperSpec();
  two.groups.push_back({{two.groups[0].paths.back()}, "lower"});
  two.groups[0].paths.pop_back();
  return two;
}

/// The group in use of a fake map, and the devices it holds.
std::pair<unsigned, std::vector<std::string>> groupInUse(FakeDeviceMapper &dm,
                                                         const std::string &name) {
  auto live = readLiveMaps(dm);
  auto found = std::ranges::find(live, name, [](const LiveMap &map) { return map.info.name; });
  if (found == live.end() || !found->status || !found->table) {
    return {0, {}};
  }
  const unsigned group = found->status->groupInUse();
  std::vector<std::string> devices;
  if (group >= 1 && group <= found->table->groups.size()) {
    for (const auto &path : found->table->groups[group - 1].paths) {
      devices.push_back(path.device);
    }
  }
  return {group, devices};
}

TEST(Reconcile, AReloadKeepsTheGroupInUse) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(twoGroupSpec()).table);
  h.dm.maps["xserve-upper"].nextGroup = 2; // failed over, or switched by the admin
  auto spec = twoGroupSpec();
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_EQ(plan.actions[0].params, "0 0 2 2 queue-length 0 1 1 8:16 1 queue-length 0 1 1 8:32 1");
  for (const auto &outcome : applyActions(plan.actions, h.dm)) {
    EXPECT_TRUE(outcome.ok) << outcome.error;
  }
  EXPECT_EQ(groupInUse(h.dm, "xserve-upper"), std::make_pair(2U, std::vector<std::string>{"8:32"}));
  EXPECT_THAT(h.plan().actions, IsEmpty());
}

TEST(Reconcile, AReloadThatRenumbersTheGroupsKeepsTheSamePathsInUse) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(twoGroupSpec()).table); // on group 1: 8:16
  auto swapped = twoGroupSpec();
  std::ranges::reverse(swapped.groups);
  h.input.desired = {planned(swapped)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  applyActions(plan.actions, h.dm);
  EXPECT_EQ(groupInUse(h.dm, "xserve-upper"), std::make_pair(2U, std::vector<std::string>{"8:16"}));
}

TEST(Reconcile, AReloadKeepsAGroupSwitchedAfterThePassReadTheMap) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(twoGroupSpec()).table); // on group 1
  auto spec = twoGroupSpec();
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  // Between the pass's read and its reload, a switch_group on the message
  // lane (failback, the admin) moves the map.
  h.dm.message("xserve-upper", "switch_group 2");
  for (const auto &outcome : applyActions(plan.actions, h.dm)) {
    EXPECT_TRUE(outcome.ok) << outcome.error;
  }
  EXPECT_EQ(groupInUse(h.dm, "xserve-upper"), std::make_pair(2U, std::vector<std::string>{"8:32"}));
}

TEST(Reconcile, AReloadWithAFailbackDecisionSwitchesAfterIt) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(twoGroupSpec()).table);
  h.dm.maps["xserve-upper"].nextGroup = 2;
  auto spec = twoGroupSpec();
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  h.input.activeGroup = {{"xserve-upper", 1}};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload, ActionKind::Message));
  EXPECT_THAT(messages(plan), ElementsAre("switch_group 1"));
  applyActions(plan.actions, h.dm);
  EXPECT_EQ(groupInUse(h.dm, "xserve-upper").first, 1U);
}

TEST(Reconcile, CompanionModeNeverLoadsATable) {
  Harness h;
  h.input.mode = ReconcileMode::Companion;
  // multipathd's name for the map, its own (different) selector.
  auto mine = upperSpec();
  mine.selector = SelectorKind::ServiceTime;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.dm.maps["mpatha"].pathActive["8:32"] = false;
  auto other = upperSpec();
  other.alias = "xserve-lower";
  other.wwid = "36001405bbbbbbbbbbbbbbbbbbbbbbbbb";
  h.input.desired = {planned(mine), planned(other)};
  h.input.usable = {{DevT{8, 32}, true}};
  auto plan = h.plan();
  EXPECT_THAT(kinds(plan), ElementsAre(ActionKind::Message));
  ASSERT_EQ(plan.actions.size(), 1U);
  EXPECT_EQ(plan.actions[0].map, "mpatha");
  EXPECT_EQ(plan.actions[0].message, "reinstate_path 8:32");
  ASSERT_EQ(plan.refused.size(), 1U);
  EXPECT_EQ(plan.refused[0].map, "xserve-lower");
  EXPECT_THAT(plan.stale, IsEmpty());
  applyActions(plan.actions, h.dm);
  for (const auto &call : h.dm.modifyingCalls()) {
    EXPECT_TRUE(call.starts_with("message ")) << call;
  }
  EXPECT_EQ(h.dm.maps.size(), 1U);
}

TEST(Reconcile, RefusesAForeignMapHoldingTheName) {
  Harness h;
  h.dm.seed("xserve-upper", "LVM-someoneelse", planned(upperSpec()).table);
  h.dm.maps["xserve-upper"].pathActive["8:16"] = false;
  auto spec = upperSpec();
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  h.input.usable = {{DevT{8, 16}, true}};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  ASSERT_EQ(plan.refused.size(), 1U);
  EXPECT_EQ(plan.refused[0].map, "xserve-upper");
  EXPECT_THAT(plan.refused[0].reason, ::testing::HasSubstr("LVM-someoneelse"));
  EXPECT_THAT(plan.stale, IsEmpty());
}

TEST(Reconcile, RefusesANonMultipathMapHoldingTheName) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, "0 1024 linear 8:16 0");
  h.input.desired = {planned(upperSpec())};
  // list() shows multipath maps only, so read this one like the daemon's
  // name check would: by name.
  auto info = h.dm.info("xserve-upper");
  auto table = h.dm.table("xserve-upper");
  auto status = h.dm.status("xserve-upper");
  h.input.live = {makeLiveMap(*info, *table, *status)};
  auto plan = planReconcile(h.input);
  EXPECT_THAT(plan.actions, IsEmpty());
  ASSERT_EQ(plan.refused.size(), 1U);
  EXPECT_THAT(plan.refused[0].reason, ::testing::HasSubstr("linear"));
}

TEST(Reconcile, RefusesWhenTheWwidIsMappedUnderAnotherName) {
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.input.desired = {planned(upperSpec())};
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  ASSERT_EQ(plan.refused.size(), 1U);
  EXPECT_THAT(plan.refused[0].reason, ::testing::HasSubstr("'mpatha'"));
  EXPECT_THAT(plan.stale, IsEmpty());
}

// --- renames ---------------------------------------------------------------

/// "<old> to <new>" per rename, in order.
std::vector<std::string> renamesOf(const std::vector<Action> &actions) {
  std::vector<std::string> out;
  for (const auto &action : actions) {
    EXPECT_EQ(action.kind, ActionKind::Rename);
    out.push_back(action.oldName + " to " + action.map);
  }
  return out;
}

/// A second LUN's map, xserve-lower, on 8:48 and 8:64.
MapSpec lowerSpec() {
  auto lower = upperSpec();
  lower.alias = "xserve-lower";
  lower.wwid = "36001405bbbbbbbbbbbbbbbbbbbbbbbbb";
  lower.groups[0].paths = {path(48), path(64)};
  return lower;
}

TEST(Renames, AWwidMappedUnderAnotherNameIsRenamedAndKeepsItsDevice) {
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  const auto devt = h.dm.maps.at("mpatha").devt;
  const std::vector<PlannedMap> desired{planned(upperSpec())};
  auto renames = planRenames(desired, readLiveMaps(h.dm));
  EXPECT_THAT(renamesOf(renames), ElementsAre("mpatha to xserve-upper"));
  EXPECT_EQ(renames[0].describe(), "rename mpatha to xserve-upper");

  auto outcomes = applyActions(renames, h.dm);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_FALSE(h.dm.maps.contains("mpatha"));
  EXPECT_EQ(h.dm.maps.at("xserve-upper").devt, devt);
  EXPECT_EQ(h.dm.maps.at("xserve-upper").uuid, kUuid);
  // Planned again, the map matches: adopted, nothing to do.
  h.input.desired = desired;
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  EXPECT_THAT(plan.adopted, ElementsAre("xserve-upper"));
  EXPECT_THAT(planRenames(desired, h.input.live), IsEmpty());
}

TEST(Renames, AReloadBeforeTheRenameIsReportedWithItsPause) {
  // LibDevmapper reloads a map it cleared before renaming it (dm-ima); the
  // outcome says so, with how long I/O was held, for the log.
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.dm.renameReport.reloadedFirst = std::chrono::microseconds{1500};
  const std::vector<PlannedMap> desired{planned(upperSpec())};
  auto outcomes = applyActions(planRenames(desired, readLiveMaps(h.dm)), h.dm);
  ASSERT_EQ(outcomes.size(), 1U);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_TRUE(outcomes[0].reloadedFirst);
  EXPECT_EQ(outcomes[0].held, std::chrono::microseconds{1500});

  h.dm.renameReport = {};
  Action back;
  back.kind = ActionKind::Rename;
  back.oldName = "xserve-upper";
  back.map = "mpatha";
  outcomes = applyActions({back}, h.dm);
  ASSERT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_FALSE(outcomes[0].reloadedFirst);
  EXPECT_EQ(outcomes[0].held, std::chrono::microseconds{0});
}

TEST(Renames, AReloadBeforeARenameThatFailsIsStillReported) {
  // The reload held I/O even though the rename after it failed: the
  // outcome carries it, so the log can say so.
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.dm.renameReport.reloadedFirst = std::chrono::microseconds{2500};
  h.dm.failures["rename"] = 1;
  const std::vector<PlannedMap> desired{planned(upperSpec())};
  auto outcomes = applyActions(planRenames(desired, readLiveMaps(h.dm)), h.dm);
  ASSERT_EQ(outcomes.size(), 1U);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_THAT(outcomes[0].error, HasSubstr("rename mpatha xserve-upper"));
  EXPECT_TRUE(outcomes[0].reloadedFirst);
  EXPECT_EQ(outcomes[0].held, std::chrono::microseconds{2500});
  EXPECT_TRUE(h.dm.maps.contains("mpatha"));
}

TEST(Renames, AMessagePlannedBeforeASwapReachesItsMap) {
  // Planned under one name, sent after a script swapped two maps' names:
  // by DM UUID it still reaches the map it was planned for.
  Harness h;
  auto spec = upperSpec();
  spec.features.queueIfNoPath = true;
  h.dm.seed("xserve-upper", kUuid, planned(spec).table);
  h.dm.seed("other", "mpath-36001405other", planned(spec).table);
  h.dm.maps["other"].queueIfNoPath = true;
  h.input.desired = {planned(spec)};
  h.input.queueIfNoPath = {{"xserve-upper", false}};
  const auto plan = h.plan();
  ASSERT_THAT(messages(plan), ElementsAre("fail_if_no_path"));
  h.dm.rename("xserve-upper", "tmp");
  h.dm.rename("other", "xserve-upper");
  h.dm.rename("tmp", "other");
  for (const auto &outcome : applyActions(plan.actions, h.dm)) {
    EXPECT_TRUE(outcome.ok) << outcome.error;
  }
  EXPECT_FALSE(h.dm.maps.at("other").queueIfNoPath);
  EXPECT_TRUE(h.dm.maps.at("xserve-upper").queueIfNoPath) << "the map that took the name";
}

TEST(Renames, NothingWhenEveryMapHasItsPlannedNameOrNoneIsLive) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  h.dm.seed("xserve-old", "mpath-36001405ccc", planned(upperSpec()).table);
  h.dm.seed("vg-root", "LVM-abc", "0 1024 linear 8:0 0");
  const std::vector<PlannedMap> desired{planned(upperSpec()), planned(lowerSpec())};
  EXPECT_THAT(planRenames(desired, readLiveMaps(h.dm)), IsEmpty());
}

TEST(Renames, NeverOntoANameAnotherDeviceHas) {
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.dm.seed("xserve-upper", "LVM-someoneelse", planned(lowerSpec()).table);
  const std::vector<PlannedMap> desired{planned(upperSpec())};
  EXPECT_THAT(planRenames(desired, readLiveMaps(h.dm)), IsEmpty());
  // The pass then refuses it, naming the map that has the WWID.
  h.input.desired = desired;
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  ASSERT_EQ(plan.refused.size(), 1U);
  EXPECT_THAT(plan.refused[0].reason, HasSubstr("LVM-someoneelse"));
}

TEST(Renames, AChainComesOutInTheOrderThatWorks) {
  // The configuration moved upper to the lower map's old name, and lower
  // to a new one: lower must move first.
  Harness h;
  h.dm.seed("old-upper", kUuid, planned(upperSpec()).table);
  auto lower = lowerSpec();
  h.dm.seed("xserve-upper", lower.dmUuid(), planned(lower).table);
  lower.alias = "xserve-lower";
  const std::vector<PlannedMap> desired{planned(upperSpec()), planned(lower)};
  auto renames = planRenames(desired, readLiveMaps(h.dm));
  EXPECT_THAT(renamesOf(renames),
              ElementsAre("xserve-upper to xserve-lower", "old-upper to xserve-upper"));
  auto outcomes = applyActions(renames, h.dm);
  EXPECT_TRUE(std::ranges::all_of(outcomes, [](const auto &o) { return o.ok; }));
  EXPECT_EQ(h.dm.maps.at("xserve-upper").uuid, kUuid);
  EXPECT_EQ(h.dm.maps.at("xserve-lower").uuid, lower.dmUuid());
}

TEST(Renames, ASwapsTemporaryNameFitsDeviceMappersLimit) {
  // Aliases of 126 and 127 characters (DM_NAME_LEN less the NUL) swapped:
  // the temporary name is cut short, not refused by the kernel every pass,
  // also when a device holds the first one.
  Harness h;
  auto upper = upperSpec();
  auto lower = lowerSpec();
  upper.alias = std::string(120, 'u') + "-upper";
  lower.alias = std::string(121, 'l') + "-lower";
  ASSERT_EQ(lower.alias.size(), selector::kMaxMapNameLength);
  h.dm.seed(lower.alias, upper.dmUuid(), planned(upper).table);
  h.dm.seed(upper.alias, lower.dmUuid(), planned(lower).table);
  const std::string held = upper.alias.substr(0, selector::kMaxMapNameLength - kSwapSuffix.size()) +
                           std::string(kSwapSuffix);
  ASSERT_EQ(held.size(), selector::kMaxMapNameLength);
  h.dm.seed(held, "LVM-in-the-way", "0 1024 linear 8:0 0");
  auto live = readLiveMaps(h.dm);
  if (std::ranges::none_of(live, [&](const LiveMap &map) { return map.info.name == held; })) {
    live.push_back(makeLiveMap(*h.dm.info(held), *h.dm.table(held), *h.dm.status(held)));
  }
  auto renames = planRenames({planned(upper), planned(lower)}, live);
  const std::string aside =
      upper.alias.substr(0, selector::kMaxMapNameLength - kSwapSuffix.size() - 1) +
      std::string(kSwapSuffix) + "_";
  EXPECT_THAT(renamesOf(renames),
              ElementsAre(upper.alias + " to " + aside, lower.alias + " to " + upper.alias,
                          aside + " to " + lower.alias));
  for (const auto &rename : renames) {
    EXPECT_LE(rename.map.size(), selector::kMaxMapNameLength) << rename.map;
  }
  ASSERT_EQ(renames.size(), 3U);
  EXPECT_TRUE(renames[0].stepAside);
  EXPECT_FALSE(renames[1].stepAside);
  EXPECT_FALSE(renames[2].stepAside);
  auto outcomes = applyActions(renames, h.dm);
  EXPECT_TRUE(std::ranges::all_of(outcomes, [](const auto &o) { return o.ok; }));
  EXPECT_EQ(h.dm.maps.at(upper.alias).uuid, upper.dmUuid());
  EXPECT_EQ(h.dm.maps.at(lower.alias).uuid, lower.dmUuid());
}

TEST(Renames, ASwapGoesThroughATemporaryName) {
  Harness h;
  auto lower = lowerSpec();
  h.dm.seed("xserve-lower", kUuid, planned(upperSpec()).table);
  h.dm.seed("xserve-upper", lower.dmUuid(), planned(lower).table);
  h.dm.seed("xserve-upper.pathkeeper-swap", "LVM-in-the-way", "0 1024 linear 8:0 0");
  const std::vector<PlannedMap> desired{planned(upperSpec()), planned(lower)};
  auto live = readLiveMaps(h.dm);
  live.push_back(makeLiveMap(*h.dm.info("xserve-upper.pathkeeper-swap"),
                             *h.dm.table("xserve-upper.pathkeeper-swap"),
                             *h.dm.status("xserve-upper.pathkeeper-swap")));
  auto renames = planRenames(desired, live);
  EXPECT_THAT(renamesOf(renames), ElementsAre("xserve-upper to xserve-upper.pathkeeper-swap_",
                                              "xserve-lower to xserve-upper",
                                              "xserve-upper.pathkeeper-swap_ to xserve-lower"));
  auto outcomes = applyActions(renames, h.dm);
  EXPECT_TRUE(std::ranges::all_of(outcomes, [](const auto &o) { return o.ok; }));
  EXPECT_EQ(h.dm.maps.at("xserve-upper").uuid, kUuid);
  EXPECT_EQ(h.dm.maps.at("xserve-lower").uuid, lower.dmUuid());
  EXPECT_EQ(h.dm.maps.at("xserve-upper.pathkeeper-swap").uuid, "LVM-in-the-way");
  EXPECT_EQ(h.dm.maps.size(), 3U);
}

TEST(Renames, AChainEndingAtANameHeldElsewhereIsNoCycle) {
  // upper is live as "a" and wants "xserve-upper", which a stale map has;
  // lower is live as "c" and wants "a". Nothing may step aside: upper
  // would be left on a temporary name for good.
  Harness h;
  auto upper = upperSpec();
  auto lower = lowerSpec();
  lower.alias = "a";
  h.dm.seed("a", kUuid, planned(upperSpec()).table);
  h.dm.seed("c", lower.dmUuid(), planned(lower).table);
  h.dm.seed("xserve-upper", "mpath-36001405ddd", planned(upperSpec()).table);
  const std::vector<PlannedMap> desired{planned(upper), planned(lower)};
  EXPECT_THAT(planRenames(desired, readLiveMaps(h.dm)), IsEmpty());
}

TEST(Renames, ACycleOfThreeTakesOneStepAside) {
  Harness h;
  auto lower = lowerSpec();
  auto third = upperSpec();
  third.alias = "xserve-third";
  third.wwid = "36001405ccccccccccccccccccccccccc";
  third.groups[0].paths = {path(80), path(96)};
  // upper is live as "xserve-third", lower as "xserve-upper", third as
  // "xserve-lower": each wants the name another has.
  h.dm.seed("xserve-third", kUuid, planned(upperSpec()).table);
  h.dm.seed("xserve-upper", lower.dmUuid(), planned(lower).table);
  h.dm.seed("xserve-lower", third.dmUuid(), planned(third).table);
  const std::vector<PlannedMap> desired{planned(upperSpec()), planned(lower), planned(third)};
  auto renames = planRenames(desired, readLiveMaps(h.dm));
  EXPECT_EQ(renames.size(), 4U);
  auto outcomes = applyActions(renames, h.dm);
  EXPECT_TRUE(std::ranges::all_of(outcomes, [](const auto &o) { return o.ok; }));
  EXPECT_EQ(h.dm.maps.at("xserve-upper").uuid, kUuid);
  EXPECT_EQ(h.dm.maps.at("xserve-lower").uuid, lower.dmUuid());
  EXPECT_EQ(h.dm.maps.at("xserve-third").uuid, third.dmUuid());
  EXPECT_EQ(h.dm.maps.size(), 3U);
  EXPECT_THAT(planRenames(desired, readLiveMaps(h.dm)), IsEmpty());
}

TEST(Renames, AFailedRenameSkipsNothingElseAndLeavesTheMap) {
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  auto lower = lowerSpec();
  h.dm.seed("mpathb", lower.dmUuid(), planned(lower).table);
  const std::vector<PlannedMap> desired{planned(upperSpec()), planned(lower)};
  auto renames = planRenames(desired, readLiveMaps(h.dm));
  ASSERT_EQ(renames.size(), 2U);
  h.dm.failures["rename"] = 1;
  auto outcomes = applyActions(renames, h.dm);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_FALSE(outcomes[1].skipped);
  EXPECT_TRUE(outcomes[1].ok) << outcomes[1].error;
  EXPECT_TRUE(h.dm.maps.contains("mpatha"));
  EXPECT_TRUE(h.dm.maps.contains("xserve-lower"));
}

TEST(Renames, ANameAnotherKindOfDeviceHasIsLookedUpNotRenamedOnto) {
  // The live maps are the multipath ones: an LVM volume with the name is
  // found only when the rename looks.
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.dm.seed("xserve-upper", "LVM-someoneelse", "0 1024 linear 8:0 0");
  auto renames = planRenames({planned(upperSpec())}, readLiveMaps(h.dm));
  ASSERT_EQ(renames.size(), 1U);
  auto outcomes = applyActions(renames, h.dm);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_THAT(outcomes[0].error, HasSubstr("LVM-someoneelse"));
  EXPECT_THAT(outcomes[0].error, HasSubstr("linear"));
  EXPECT_THAT(h.dm.modifyingCalls(), IsEmpty());
  EXPECT_EQ(h.dm.maps.at("mpatha").uuid, kUuid);
}

TEST(Renames, PartitionMapsGoWithTheirMapAndKeepTheirSuffix) {
  Harness h;
  h.dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  h.dm.seed("mpatha-part1", "part1-" + kUuid, "0 1024 linear 253:0 2048");
  h.dm.seed("mpatha-part2", "part2-" + kUuid, "0 1024 linear 253:0 4096");
  h.dm.seed("mpathab", "mpath-36001405eee", planned(lowerSpec()).table);
  auto outcomes = applyActions(planRenames({planned(upperSpec())}, readLiveMaps(h.dm)), h.dm);
  ASSERT_EQ(outcomes.size(), 1U);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_EQ(h.dm.maps.at("xserve-upper-part1").uuid, "part1-" + kUuid);
  EXPECT_EQ(h.dm.maps.at("xserve-upper-part2").uuid, "part2-" + kUuid);
  EXPECT_TRUE(h.dm.maps.contains("mpathab")) << "another map whose name starts alike stays";
  EXPECT_FALSE(h.dm.maps.contains("mpatha-part1"));
}

TEST(Renames, TheKernelRefusesATakenName) {
  FakeDeviceMapper dm;
  dm.seed("mpatha", kUuid, planned(upperSpec()).table);
  dm.seed("xserve-upper", "LVM-someoneelse", "0 1024 linear 8:0 0");
  try {
    dm.rename("mpatha", "xserve-upper");
    FAIL() << "renamed onto a taken name";
  } catch (const std::system_error &e) {
    EXPECT_EQ(e.code().value(), EBUSY);
  }
  EXPECT_EQ(dm.maps.at("mpatha").uuid, kUuid);
}

TEST(Reconcile, ReportsMapsNoLongerWantedAsStaleWithoutRemovingThem) {
  Harness h;
  h.dm.seed("xserve-old", "mpath-36001405ccc", planned(upperSpec()).table);
  h.dm.maps["xserve-old"].pathActive["8:16"] = false;
  h.dm.seed("vg-root", "LVM-abc", "0 1024 linear 8:0 0");
  auto plan = h.plan();
  EXPECT_THAT(plan.actions, IsEmpty());
  ASSERT_EQ(plan.stale.size(), 1U);
  EXPECT_EQ(plan.stale[0].map, "xserve-old");
  EXPECT_EQ(plan.stale[0].activePaths, 1U);
  applyActions(plan.actions, h.dm);
  EXPECT_THAT(h.dm.modifyingCalls(), IsEmpty());
}

TEST(Reconcile, AnUnparsableLiveTableIsReloaded) {
  const auto line = planned(upperSpec()).table;
  DmMapInfo info;
  info.name = "xserve-upper";
  info.uuid = kUuid;
  info.targetType = "multipath";
  auto live = makeLiveMap(info, {{0, kSize, "multipath", "0 0 1 1 round-robin 0 2 1 8:16"}}, {});
  EXPECT_FALSE(live.table.has_value());
  EXPECT_FALSE(live.parseError.empty());
  ReconcileInput input;
  input.desired = {planned(upperSpec())};
  input.live = {live};
  auto plan = planReconcile(input);
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload));
  EXPECT_THAT(plan.actions[0].reasons, ElementsAre(ReloadReason::Unreadable));
}

// --- the executor and the never-left-suspended rule --------------------------

/// A reload whose step @p op fails @p times times.
struct FailureCase {
  const char *name;
  const char *op;
  int times;
};

class ReloadFailure : public ::testing::TestWithParam<FailureCase> {};

TEST_P(ReloadFailure, LeavesTheMapResumedAndSkipsItsMessages) {
  Harness h;
  const auto oldTable = planned(upperSpec()).table;
  h.dm.seed("xserve-upper", kUuid, oldTable);
  const auto oldParams = h.dm.maps["xserve-upper"].params;
  auto spec = upperSpec();
  spec.selector = SelectorKind::QueueLength;
  h.input.desired = {planned(spec)};
  h.input.usable = {{DevT{8, 32}, false}};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Reload, ActionKind::Message));

  h.dm.failures[GetParam().op] = GetParam().times;
  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_EQ(outcomes.size(), 2U);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_THAT(outcomes[0].error, ::testing::HasSubstr(GetParam().op));
  EXPECT_TRUE(outcomes[1].skipped);
  EXPECT_FALSE(outcomes[1].ok);

  const auto &map = h.dm.maps["xserve-upper"];
  EXPECT_FALSE(map.suspended) << ::testing::PrintToString(h.dm.calls);
  EXPECT_FALSE(map.inactive.has_value()) << "a half-done reload must not wait in the inactive slot";
  EXPECT_EQ(map.params, oldParams) << "the old table stays live";
  EXPECT_TRUE(map.pathActive.at("8:32")) << "no message after a failed reload";
}

INSTANTIATE_TEST_SUITE_P(Reconcile, ReloadFailure,
                         ::testing::Values(FailureCase{"Load", "load", 1},
                                           FailureCase{"ResumeOnce", "resume", 1},
                                           FailureCase{"ResumeTwice", "resume", 2}),
                         [](const auto &testInfo) { return std::string(testInfo.param.name); });

TEST(Reconcile, ACreateFailureSkipsThatMapsMessagesOnly) {
  Harness h;
  auto plan = h.planTwoNewMapsWithAFailedPathEach();
  ASSERT_EQ(plan.actions.size(), 4U);
  h.dm.failures["create"] = 1; // the first create: xserve-lower
  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_EQ(outcomes.size(), 4U);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_TRUE(outcomes[1].skipped);
  EXPECT_TRUE(outcomes[2].ok) << outcomes[2].error;
  EXPECT_TRUE(outcomes[3].ok) << outcomes[3].error;
  EXPECT_FALSE(h.dm.maps.contains("xserve-lower"));
  EXPECT_FALSE(h.dm.maps["xserve-upper"].pathActive["8:32"]);
  // One udev batch around every action, ended after the last one even
  // though an action failed.
  const std::size_t before = h.dm.calls.size() - h.dm.modifyingCalls().size();
  EXPECT_THAT(h.dm.batchBegins, ElementsAre(before));
  EXPECT_THAT(h.dm.batchEnds, ElementsAre(h.dm.calls.size()));
}

TEST(Reconcile, EveryNewMapIsLoadedBeforeTheFirstGoesLive) {
  Harness h;
  auto plan = h.planTwoNewMapsWithAFailedPathEach();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Create, ActionKind::Message, ActionKind::Create,
                                       ActionKind::Message));
  auto outcomes = applyActions(plan.actions, h.dm);
  for (const auto &outcome : outcomes) {
    EXPECT_TRUE(outcome.ok) << outcome.error;
  }
  // Both tables loaded first; each map's message once it is live.
  EXPECT_THAT(h.dm.modifyingCalls(),
              ElementsAre("create xserve-lower", "create xserve-upper", "resume-new xserve-lower",
                          "message xserve-lower fail_path 8:48", "resume-new xserve-upper",
                          "message xserve-upper fail_path 8:32"));
  EXPECT_THAT(readLiveMaps(h.dm), SizeIs(2));
  EXPECT_FALSE(h.dm.maps["xserve-lower"].pathActive["8:48"]);
  EXPECT_FALSE(h.dm.maps["xserve-upper"].pathActive["8:32"]);
}

TEST(Reconcile, ANewMapThatCannotGoLiveIsGoneAndSkipsItsMessagesOnly) {
  Harness h;
  auto plan = h.planTwoNewMapsWithAFailedPathEach();
  ASSERT_EQ(plan.actions.size(), 4U);
  h.dm.failures["resume-new"] = 1; // xserve-lower's
  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_EQ(outcomes.size(), 4U);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_THAT(outcomes[0].error, HasSubstr("resume-new xserve-lower"));
  EXPECT_TRUE(outcomes[1].skipped);
  EXPECT_TRUE(outcomes[2].ok) << outcomes[2].error;
  EXPECT_TRUE(outcomes[3].ok) << outcomes[3].error;
  EXPECT_FALSE(h.dm.maps.contains("xserve-lower"));
  EXPECT_TRUE(h.dm.maps.at("xserve-upper").live);
}

TEST(Reconcile, ALaterCreatesFailedFirstHalfIsThatCreatesOutcomeAlone) {
  Harness h;
  auto plan = h.planTwoNewMapsWithAFailedPathEach();
  ASSERT_EQ(plan.actions.size(), 4U);
  // Another tool's device without a table holds xserve-upper's name; the
  // plan cannot see it (no live table), the kernel refuses the create.
  static_cast<void>(h.dm.prepareCreate("xserve-upper", "other-tool", kSize, "whatever"));
  h.dm.calls.clear();
  auto outcomes = applyActions(plan.actions, h.dm);
  ASSERT_EQ(outcomes.size(), 4U);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].error;
  EXPECT_TRUE(outcomes[1].ok) << outcomes[1].error;
  EXPECT_FALSE(outcomes[2].ok);
  EXPECT_THAT(outcomes[2].error, HasSubstr("create xserve-upper"));
  EXPECT_TRUE(outcomes[3].skipped);
  EXPECT_TRUE(h.dm.maps.at("xserve-lower").live);
  EXPECT_FALSE(h.dm.maps.at("xserve-lower").pathActive["8:48"]);
  EXPECT_EQ(h.dm.maps.at("xserve-upper").uuid, "other-tool") << "left as it was";
}

TEST(Reconcile, ADevicePreparedForASkippedCreateIsRemoved) {
  Harness h;
  h.input.desired = {planned(upperSpec())};
  auto plan = h.plan();
  ASSERT_THAT(kinds(plan), ElementsAre(ActionKind::Create));
  // A list no plan makes: a failing table action on the map before its
  // create, which is then skipped after its first half ran.
  Action reload = plan.actions[0];
  reload.kind = ActionKind::Reload;
  h.dm.failures["load"] = 1;
  auto outcomes = applyActions({reload, plan.actions[0]}, h.dm);
  ASSERT_EQ(outcomes.size(), 2U);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_TRUE(outcomes[1].skipped);
  EXPECT_FALSE(h.dm.maps.contains("xserve-upper")) << ::testing::PrintToString(h.dm.calls);
  EXPECT_THAT(h.dm.calls, Contains("remove xserve-upper"));
}

TEST(Reconcile, AFailedMessageDoesNotStopTheNextOnes) {
  Harness h;
  h.dm.seed("xserve-upper", kUuid, planned(upperSpec()).table);
  h.input.desired = {planned(upperSpec())};
  h.input.usable = {{DevT{8, 16}, false}, {DevT{8, 32}, false}};
  auto plan = h.plan();
  ASSERT_EQ(plan.actions.size(), 2U);
  h.dm.failures["message"] = 1;
  auto outcomes = applyActions(plan.actions, h.dm);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_FALSE(outcomes[0].skipped);
  EXPECT_TRUE(outcomes[1].ok);
}

TEST(SuspendGuard, ResumesWhenTheScopeThrows) {
  FakeDeviceMapper dm;
  dm.seed("m", kUuid, planned(upperSpec()).table);
  EXPECT_THROW(
      {
        SuspendGuard guard(dm, "m");
        EXPECT_TRUE(dm.maps["m"].suspended);
        throw std::runtime_error("something in between failed");
      },
      std::runtime_error);
  EXPECT_FALSE(dm.maps["m"].suspended);
}

TEST(SuspendGuard, ResumesAfterAFailedSuspend) {
  FakeDeviceMapper dm;
  dm.seed("m", kUuid, planned(upperSpec()).table);
  dm.failures["suspend"] = 1;
  EXPECT_THROW(SuspendGuard(dm, "m"), std::system_error);
  EXPECT_FALSE(dm.maps["m"].suspended);
}

TEST(SuspendGuard, ReportsAResumeFailureInsteadOfThrowingFromTheDestructor) {
  FakeDeviceMapper dm;
  dm.seed("m", kUuid, planned(upperSpec()).table);
  std::string reported;
  {
    SuspendGuard guard(dm, "m", [&](const std::exception &e) { reported = e.what(); });
    dm.failures["resume"] = 1;
  }
  EXPECT_THAT(reported, ::testing::HasSubstr("resume m"));
  EXPECT_TRUE(dm.maps["m"].suspended); // the fake kernel refused: nothing else to do
}

TEST(SuspendGuard, AnExplicitResumeEndsTheGuard) {
  FakeDeviceMapper dm;
  dm.seed("m", kUuid, planned(upperSpec()).table);
  {
    SuspendGuard guard(dm, "m");
    guard.resume();
    EXPECT_FALSE(dm.maps["m"].suspended);
    dm.calls.clear();
  }
  EXPECT_THAT(dm.calls, IsEmpty());
}

TEST(RemoveUnfinishedMaps, RemovesOurDevicesWithoutALiveTableOnly) {
  FakeDeviceMapper dm;
  const auto table = planned(upperSpec()).table;
  dm.seed("ours-live", "mpath-1", table);
  static_cast<void>(dm.prepareCreate("ours-half-made", "mpath-2", kSize, "0 0 0 1 1"));
  static_cast<void>(dm.prepareCreate("foreign-half-made", "CRYPT-3", kSize, "0 0 0 1 1"));
  static_cast<void>(dm.prepareCreate("ours-open", "mpath-4", kSize, "0 0 0 1 1"));
  dm.maps["ours-open"].openCount = 1;
  auto removed = removeUnfinishedMaps(dm);
  ASSERT_EQ(removed.size(), 1U);
  EXPECT_EQ(removed[0].name, "ours-half-made");
  EXPECT_EQ(removed[0].uuid, "mpath-2");
  EXPECT_TRUE(removed[0].error.empty()) << removed[0].error;
  EXPECT_FALSE(dm.maps.contains("ours-half-made"));
  EXPECT_TRUE(dm.maps.contains("ours-live"));
  EXPECT_TRUE(dm.maps.contains("foreign-half-made"));
  EXPECT_TRUE(dm.maps.contains("ours-open"));
}

TEST(RemoveUnfinishedMaps, SaysWhichRemovalFailedAndGoesOn) {
  FakeDeviceMapper dm;
  static_cast<void>(dm.prepareCreate("a-half-made", "mpath-1", kSize, "0 0 0 1 1"));
  static_cast<void>(dm.prepareCreate("b-half-made", "mpath-2", kSize, "0 0 0 1 1"));
  dm.failures["remove"] = 1;
  auto removed = removeUnfinishedMaps(dm);
  ASSERT_EQ(removed.size(), 2U);
  EXPECT_THAT(removed[0].error, HasSubstr("remove a-half-made"));
  EXPECT_TRUE(removed[1].error.empty()) << removed[1].error;
  EXPECT_TRUE(dm.maps.contains("a-half-made"));
  EXPECT_FALSE(dm.maps.contains("b-half-made"));
}

TEST(ResumeSuspendedMaps, ResumesOurSuspendedMapsOnly) {
  FakeDeviceMapper dm;
  const auto table = planned(upperSpec()).table;
  dm.seed("ours-suspended", "mpath-1", table);
  dm.seed("ours-running", "mpath-2", table);
  dm.seed("foreign-suspended", "CRYPT-3", table);
  dm.seed("half-reloaded", "mpath-4", table);
  dm.maps["ours-suspended"].suspended = true;
  dm.maps["foreign-suspended"].suspended = true;
  // Killed between load and resume: the new table waits in the inactive slot.
  dm.maps["half-reloaded"].suspended = true;
  dm.maps["half-reloaded"].inactive = {kSize, "0 0 1 1 queue-length 0 1 1 8:16 1"};
  const auto before = dm.maps["half-reloaded"].params;

  auto resumed = resumeSuspendedMaps(dm);
  ASSERT_EQ(resumed.size(), 2U);
  EXPECT_EQ(resumed[0].name, "half-reloaded");
  EXPECT_TRUE(resumed[0].clearedInactive);
  EXPECT_EQ(resumed[1].name, "ours-suspended");
  EXPECT_FALSE(resumed[1].clearedInactive);
  EXPECT_TRUE(resumed[0].error.empty());
  EXPECT_FALSE(dm.maps["ours-suspended"].suspended);
  EXPECT_FALSE(dm.maps["half-reloaded"].suspended);
  EXPECT_EQ(dm.maps["half-reloaded"].params, before);
  EXPECT_TRUE(dm.maps["foreign-suspended"].suspended);
  EXPECT_THAT(dm.modifyingCalls(),
              ElementsAre("clear half-reloaded", "resume half-reloaded", "resume ours-suspended"));
}

TEST(ResumeSuspendedMaps, ReportsAMapThatWillNotResumeAndGoesOn) {
  FakeDeviceMapper dm;
  const auto table = planned(upperSpec()).table;
  dm.seed("a", "mpath-1", table);
  dm.seed("b", "mpath-2", table);
  dm.maps["a"].suspended = true;
  dm.maps["b"].suspended = true;
  dm.failures["resume"] = 1;
  auto resumed = resumeSuspendedMaps(dm);
  ASSERT_EQ(resumed.size(), 2U);
  EXPECT_THAT(resumed[0].error, ::testing::HasSubstr("resume a"));
  EXPECT_TRUE(resumed[1].error.empty());
  EXPECT_FALSE(dm.maps["b"].suspended);
}

// --- pathsForTables -------------------------------------------------------

selector::Path aluaPath(const std::string &device, std::uint32_t minor,
                        const std::string &controller, int priority, selector::PathState state) {
  selector::Path path;
  path.device = device;
  path.devt = DevT{8, minor};
  path.controller = controller;
  path.priority = priority;
  path.state = state;
  return path;
}

TEST(PathsForTables, KeepsTheOptimizedGroupFirstWhileAllItsPathsAreDown) {
  // Controller a is active/optimized (50) and all its paths are down; b is
  // non-optimized (10) and up. The table must not change with that.
  std::vector<selector::Path> paths{
      aluaPath("sda", 0, "a", 50, selector::PathState::Down),
      aluaPath("sdc", 32, "a", 50, selector::PathState::Down),
      aluaPath("sde", 64, "b", 10, selector::PathState::Up),
      aluaPath("sdg", 96, "b", 10, selector::PathState::Shaky),
  };
  ASSERT_EQ(
      selector::groupPaths(paths, selector::GroupingPolicy::GroupByController).front().controller,
      "b"); // what the planner would do with the health in it

  const auto groups =
      selector::groupPaths(pathsForTables(paths), selector::GroupingPolicy::GroupByController);
  ASSERT_EQ(groups.size(), 2U);
  EXPECT_EQ(groups[0].controller, "a");
  EXPECT_EQ(groups[0].priority(), 50);
  EXPECT_EQ(groups[1].controller, "b");
}

TEST(PathsForTables, LeavesRemovedPathsRemoved) {
  const auto paths = pathsForTables({aluaPath("sda", 0, "a", 50, selector::PathState::Removed),
                                     aluaPath("sdb", 16, "a", 50, selector::PathState::Pending)});
  EXPECT_EQ(paths[0].state, selector::PathState::Removed);
  EXPECT_EQ(paths[1].state, selector::PathState::Up);
}

} // namespace
} // namespace pathkeeper::daemon
