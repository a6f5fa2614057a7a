// The pure parts of the daemon's network check: how findings are published
// (stable keys) and how a path's note names the finding that concerns it.
#include "network_watch.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pathkeeper::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Finding wrongEgress() {
  Finding f;
  f.id = "wrong-egress";
  f.severity = Severity::Error;
  f.nics = {"eth2", "eth1"};
  f.portals = {"10.10.1.21:3260"};
  f.paths = {"sdb", "sdd"};
  f.summary = "traffic bound to eth2 leaves via eth1";
  f.fix = {{"ip rule add from 10.10.1.11 table 102", ""}, {"ip route flush cache", ""}};
  return f;
}

Finding arpFlux() {
  Finding f;
  f.id = "arp-flux";
  f.severity = Severity::Warning;
  f.nics = {"eth1", "eth2"};
  f.summary = "ARP flux on eth1, eth2 (arp_ignore/arp_announce 0 in all)";
  return f;
}

TEST(FindingNote, APathBoundToTheMisroutedNicSaysWhereItsTrafficLeaves) {
  EXPECT_EQ(findingNoteFor({wrongEgress(), arpFlux()}, "sdb", "eth2", "10.10.1.21:3260,1"),
            "its traffic leaves via eth1 although bound to eth2 (network check: wrong-egress)");
}

TEST(FindingNote, ASessionBoundByAddressOnlyIsNamedByTheFindingsFirstNic) {
  EXPECT_EQ(findingNoteFor({wrongEgress()}, "sdd", "", "10.10.1.21:3260,1"),
            "its traffic leaves via eth1 although bound to eth2 (network check: wrong-egress)");
}

TEST(FindingNote, AFindingListingThePathConcernsItEvenWithoutItsNic) {
  Finding mtu;
  mtu.id = "mtu-mismatch";
  mtu.severity = Severity::Warning;
  mtu.nics = {"eth1", "eth2"};
  mtu.paths = {"sdd"};
  mtu.summary = "MTU differs between NICs serving xserve-upper (eth1 9000, eth2 1500)";
  EXPECT_EQ(findingNoteFor({mtu}, "sdd", "", "10.10.1.21:3260,1"),
            "network check: MTU differs between NICs serving xserve-upper (eth1 9000, eth2 "
            "1500) (mtu-mismatch)");
}

TEST(FindingNote, APathOnTheNicButAnotherPortalIsNotConcerned) {
  EXPECT_THAT(findingNoteFor({wrongEgress()}, "sdx", "eth2", "10.10.1.99:3260,1"), IsEmpty());
}

TEST(FindingNote, AFindingWithoutPortalsConcernsEveryPathOnItsNics) {
  EXPECT_EQ(findingNoteFor({arpFlux()}, "sda", "eth1", "10.10.1.20:3260,1"),
            "network check: ARP flux on eth1, eth2 (arp_ignore/arp_announce 0 in all) (arp-flux)");
}

TEST(FindingNote, InformationalFindingsAreNotBlamedForFailures) {
  Finding info = arpFlux();
  info.severity = Severity::Info;
  EXPECT_THAT(findingNoteFor({info}, "sda", "eth1", "10.10.1.20:3260,1"), IsEmpty());
}

TEST(FindingViews, KeysAreTheKindAndTheNicsAndStaySortedAndUnique) {
  Finding again = wrongEgress();
  again.portals = {"10.10.1.20:3260"};
  const auto views = toViews({wrongEgress(), arpFlux(), again});
  ASSERT_EQ(views.size(), 3U);
  EXPECT_EQ(views[0].key, "arp-flux:eth1,eth2");
  EXPECT_EQ(views[1].key, "wrong-egress:eth2,eth1");
  EXPECT_EQ(views[2].key, "wrong-egress:eth2,eth1#2");
  EXPECT_EQ(views[1].severity, "error");
  EXPECT_THAT(views[1].fix,
              ElementsAre("ip rule add from 10.10.1.11 table 102", "ip route flush cache"));
  EXPECT_THAT(views[1].paths, ElementsAre("sdb", "sdd"));
}

} // namespace
} // namespace pathkeeper::daemon
