// What the discovery adapter decides before it touches the network: the
// probe's initiator name, and requests it must refuse outright; and how it
// reports a portal that closes the connection (a listener on loopback). The
// exchanges with a real target are in tests/host/.
#include "iscsi_discovery.hpp"

#include "closing_portal.hpp"
#include "refusing_portal.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <poll.h>

namespace pathkeeper::daemon {
namespace {

using ::testing::HasSubstr;
using Clock = IscsiDiscovery::Clock;

class ProbeInitiatorNameFile : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("pk-initiatorname-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string &text) {
    const auto file = dir_ / "initiatorname.iscsi";
    std::ofstream(file) << text;
    return file;
  }

  std::filesystem::path dir_;
};

TEST_F(ProbeInitiatorNameFile, AppendsTheProbeSuffixToTheHostsName) {
  const auto name = defaultProbeInitiatorName(
      write("## DO NOT EDIT OR REMOVE THIS FILE!\nInitiatorName=iqn.1993-08.org.debian:01:abc\n"));
  ASSERT_TRUE(name) << name.error();
  EXPECT_EQ(*name, "iqn.1993-08.org.debian:01:abc:pathkeeper-probe");
}

TEST_F(ProbeInitiatorNameFile, NamesTheFileWhenItIsMissingOrWrong) {
  const auto missing = defaultProbeInitiatorName(dir_ / "absent");
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr((dir_ / "absent").string() + ": cannot read"));
  const auto file = write("InitiatorName=eui.02004567A425678D\n");
  const auto eui = defaultProbeInitiatorName(file);
  ASSERT_FALSE(eui);
  EXPECT_THAT(eui.error(), HasSubstr(file.string() + ": the host initiator name"));
  EXPECT_THAT(eui.error(), HasSubstr("configure a discovery initiator name explicitly"));
}

DiscoveryRequest goodRequest() {
  return {{"10.200.1.20", 3260, 1},
          "",
          "iqn.2024-01.org.pathkeeper.test:pathkeeper-probe",
          std::chrono::milliseconds(5000)};
}

void expectRefused(const DiscoveryRequest &request, const std::string &reason) {
  IscsiDiscovery probe(request, Clock::now());
  EXPECT_TRUE(probe.done());
  EXPECT_EQ(probe.fd(), -1);
  EXPECT_EQ(probe.events(), 0);
  ASSERT_FALSE(probe.result());
  EXPECT_THAT(probe.result().error(), HasSubstr(reason));
  EXPECT_EQ(probe.reach(), PortalReach::Unknown) << "nothing left the host";
  // A finished probe ignores whatever the loop still does with it.
  probe.service(0);
  probe.tick(Clock::now());
  EXPECT_FALSE(probe.result());
}

TEST(IscsiDiscoveryRequest, RefusesABadInitiatorName) {
  auto request = goodRequest();
  request.initiatorName = "not a name";
  expectRefused(request, "bad discovery initiator name");
}

TEST(IscsiDiscoveryRequest, RefusesAPortalThatIsNotAnAddress) {
  auto request = goodRequest();
  request.portal.address = "storage.example.com";
  expectRefused(request, "host name");
}

TEST(IscsiDiscoveryRequest, RefusesANicThatDoesNotExist) {
  auto request = goodRequest();
  request.netdev = "pk-no-such-nic";
  expectRefused(request, "network interface \"pk-no-such-nic\" does not exist");
  request.netdev = "a-name-too-long-for-linux";
  expectRefused(request, "does not exist");
}

TEST(IscsiDiscoveryRequest, RefusesANonPositiveTimeout) {
  auto request = goodRequest();
  request.timeout = std::chrono::milliseconds(0);
  expectRefused(request, "timeout must be positive");
}

/// Runs @p probe's loop, with @p portal answering in between. The limit
/// only keeps a broken probe from hanging the test.
template <typename Portal> void runProbe(IscsiDiscovery &probe, Portal &&serve) {
  const auto limit = Clock::now() + std::chrono::seconds(30);
  while (!probe.done() && Clock::now() < limit) {
    serve();
    pollfd fd{probe.fd(), probe.events(), 0};
    ASSERT_GE(::poll(&fd, 1, 10), 0);
    if (fd.revents != 0) {
      probe.service(fd.revents);
    }
    probe.tick(Clock::now());
  }
}

TEST(IscsiDiscoveryProbe, APortalThatClosesTheConnectionIsReportedAsLostAtItsStep) {
  fakes::ClosingPortal portal;
  DiscoveryRequest request = goodRequest();
  request.portal = {"127.0.0.1", portal.port(), 1};
  IscsiDiscovery probe(request, Clock::now());
  runProbe(probe, [&] { portal.connections(); });
  ASSERT_TRUE(probe.done());
  ASSERT_FALSE(probe.result());
  EXPECT_EQ(probe.result().error(), "portal 127.0.0.1:" + std::to_string(portal.port()) +
                                        ": the connection was lost (connected, no login response)");
  EXPECT_EQ(probe.reach(), PortalReach::Silent);
  EXPECT_EQ(portal.connections(), 1U) << "a probe never reconnects";
}

// Discovery CHAP, or an initiator list without the probe's name: the target
// answers, so the network to it works, and proactive failover must not
// take its refusal for an outage.
TEST(IscsiDiscoveryProbe, APortalThatRefusesTheLoginAnsweredTheProbe) {
  fakes::RefusingPortal portal;
  DiscoveryRequest request = goodRequest();
  request.portal = {"127.0.0.1", portal.port(), 1};
  IscsiDiscovery probe(request, Clock::now());
  runProbe(probe, [&] { portal.serve(); });
  ASSERT_TRUE(probe.done());
  ASSERT_FALSE(probe.result());
  EXPECT_THAT(probe.result().error(), HasSubstr("discovery login failed"));
  EXPECT_THAT(probe.result().error(), HasSubstr("Authentication failure"));
  EXPECT_EQ(probe.reach(), PortalReach::Answered);
  EXPECT_EQ(portal.serve(), 1U);
}

TEST(IscsiDiscoveryProbe, APortalNobodyListensOnIsSilent) {
  // A port of a listener that is closed again: the connection is refused.
  std::uint16_t port = 0;
  { port = fakes::ClosingPortal().port(); }
  DiscoveryRequest request = goodRequest();
  request.portal = {"127.0.0.1", port, 1};
  IscsiDiscovery probe(request, Clock::now());
  runProbe(probe, [] {});
  ASSERT_TRUE(probe.done());
  ASSERT_FALSE(probe.result());
  EXPECT_THAT(probe.result().error(), HasSubstr("Connection refused"));
  EXPECT_EQ(probe.reach(), PortalReach::Silent);
}

} // namespace
} // namespace pathkeeper::daemon
