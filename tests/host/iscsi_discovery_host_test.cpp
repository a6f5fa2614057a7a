// SendTargets discovery against a real tgtd, through real sockets and real
// libiscsi, inside network namespaces that tests/host/tgt-netns.sh builds
// (see the picture there). The test thread enters the initiator namespace,
// so every probe leaves through the veths made for it and nothing touches
// the host's own network.
//
// Needs root, tgtd and network namespaces; without them every test is
// reported SKIPPED with the reason, never passed.
#include "iscsi_discovery.hpp"
#include "iscsi_names.hpp"
#include "session_coverage.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace pathkeeper::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const std::string kUpper = "iqn.2024-01.org.pathkeeper.test:upper";
const std::string kLower = "iqn.2024-01.org.pathkeeper.test:lower";
const std::string kProbeName = "iqn.2024-01.org.pathkeeper.test:host:pathkeeper-probe";
const selector::Portal kPortalA{"10.200.1.20", 3260, 1};
const selector::Portal kPortalB{"10.200.2.21", 3260, 1};
const selector::Portal kBlackholed{"10.200.1.22", 3260, 1};
const selector::Portal kNobodyListens{"10.200.1.23", 3260, 1};

milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

class SendTargetsDiscovery : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    tag_ = "h" + std::to_string(getpid());
    work_ = std::filesystem::temp_directory_path() / ("pathkeeper-host-" + tag_);
    std::filesystem::create_directories(work_);
    const auto started = Clock::now();
    const int status =
        fixture("up", " " + std::to_string(getpid()) + " 2>" + (work_ / "up.err").string());
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::ifstream err(work_ / "up.err");
      std::stringstream text;
      text << err.rdbuf();
      skipReason_ = text.str().empty() ? "tgt-netns.sh up failed" : text.str();
      if (WIFEXITED(status) && WEXITSTATUS(status) != 77) {
        // A broken fixture is a failure, not a reason to skip.
        skipReason_.clear();
        setupError_ = "tgt-netns.sh up failed: " + text.str();
      }
      return;
    }
    std::cerr << "[ fixture  ] netns + tgtd up in " << since(started).count() << " ms\n";
  }

  static void TearDownTestSuite() {
    if (!tag_.empty()) {
      const auto started = Clock::now();
      fixture("down", "");
      std::cerr << "[ fixture  ] torn down in " << since(started).count() << " ms\n";
      std::filesystem::remove_all(work_);
    }
  }

  static int fixture(const std::string &command, const std::string &extra) {
    const std::string line = std::string(PK_TGT_NETNS_SCRIPT) + " " + command + " " + tag_ + " " +
                             work_.string() + extra;
    return std::system(line.c_str());
  }

  void SetUp() override {
    ASSERT_TRUE(setupError_.empty()) << setupError_;
    if (!skipReason_.empty()) {
      GTEST_SKIP() << skipReason_;
    }
    home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(home_, 0);
    const std::string path = "/var/run/netns/pki-" + tag_;
    const int initiator = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(initiator, 0) << path;
    ASSERT_EQ(setns(initiator, CLONE_NEWNET), 0) << "setns " << path;
    close(initiator);
  }

  void TearDown() override {
    if (home_ >= 0) {
      EXPECT_EQ(setns(home_, CLONE_NEWNET), 0);
      close(home_);
    }
  }

  static std::string nicA() { return "pkia-" + tag_; }
  static std::string nicB() { return "pkib-" + tag_; }
  static std::string nicDown() { return "pkic-" + tag_; }

  static DiscoveryRequest request(selector::Portal portal, std::string netdev,
                                  milliseconds timeout = milliseconds(5000)) {
    return {std::move(portal), std::move(netdev), kProbeName, timeout};
  }

  static std::vector<std::string> names(const DiscoveryResult &result) {
    std::vector<std::string> out;
    for (const auto &target : result.targets) {
      out.push_back(target.targetIqn);
    }
    return out;
  }

  static inline std::string tag_;
  static inline std::filesystem::path work_;
  static inline std::string skipReason_;
  static inline std::string setupError_;
  int home_ = -1;
};

TEST_F(SendTargetsDiscovery, FindsBothTargetsThroughEachPortalFromItsOwnNic) {
  for (const auto &[portal, nic] : {std::pair(kPortalA, nicA()), std::pair(kPortalB, nicB())}) {
    const auto started = Clock::now();
    const auto result = discoverBlocking(request(portal, nic));
    ASSERT_TRUE(result) << result.error();
    std::cerr << "[ measured ] " << portal.str() << " via " << nic << ": " << since(started).count()
              << " ms\n";
    EXPECT_THAT(names(*result), ElementsAre(kLower, kUpper)) << portal.str();
    for (const auto &target : result->targets) {
      EXPECT_EQ(target.portal, portal);
      EXPECT_EQ(target.probedPortal, portal);
      EXPECT_EQ(target.netdev, nic);
      EXPECT_TRUE(target.provenReachable());
    }
    EXPECT_TRUE(result->rejected.empty());
    EXPECT_TRUE(result->warnings.empty()) << result->warnings.front();
  }
}

TEST_F(SendTargetsDiscovery, LetsRoutingChooseWhenNoNicIsGiven) {
  const auto result = discoverBlocking(request(kPortalB, ""));
  ASSERT_TRUE(result) << result.error();
  EXPECT_THAT(names(*result), ElementsAre(kLower, kUpper));
  EXPECT_EQ(result->targets.front().netdev, "");
}

TEST_F(SendTargetsDiscovery, PortalThatDropsEverythingTimesOutWithAClearError) {
  const auto started = Clock::now();
  const auto result = discoverBlocking(request(kBlackholed, nicA(), milliseconds(1500)));
  const auto took = since(started);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error(), "portal 10.200.1.22:3260 via " + nicA() +
                                " did not answer within 1500 ms (no TCP connection)");
  EXPECT_GE(took, milliseconds(1500));
  std::cerr << "[ measured ] blackholed portal reported after " << took.count() << " ms\n";
}

TEST_F(SendTargetsDiscovery, PortalNobodyListensOnIsRefusedAtOnce) {
  const auto started = Clock::now();
  const auto result = discoverBlocking(request(kNobodyListens, nicA()));
  ASSERT_FALSE(result);
  EXPECT_THAT(result.error(),
              HasSubstr("portal 10.200.1.23:3260 via " + nicA() + ": cannot connect"));
  // Refused, not timed out: the answer came from the target's host.
  EXPECT_THAT(result.error(), HasSubstr("Connection refused"));
  std::cerr << "[ measured ] refused after " << since(started).count() << " ms\n";
}

TEST_F(SendTargetsDiscovery, BindingToANicThatCannotReachThePortalFails) {
  // Portal A is on NIC A's subnet only. Bound to NIC B, the kernel assumes
  // the portal is on B's link and asks for it there; the target does not
  // answer on the wrong link (arp_ignore=1), so nothing ever connects.
  const auto started = Clock::now();
  const auto result = discoverBlocking(request(kPortalA, nicB(), milliseconds(1500)));
  const auto took = since(started);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error(), "portal 10.200.1.20:3260 via " + nicB() +
                                " did not answer within 1500 ms (no TCP connection)");
  // The same portal answers through the right NIC, so the binding was the cause.
  EXPECT_TRUE(discoverBlocking(request(kPortalA, nicA())));
  std::cerr << "[ measured ] wrong NIC reported after " << took.count() << " ms\n";
}

// libiscsi wraps connect(2)'s error ("Couldn't connect transport: Connect
// failed with errno : ..."): a NIC that is down is the network's answer,
// which proactive failover acts on, not a probe that could not be sent.
TEST_F(SendTargetsDiscovery, ANicThatIsDownFailsTheConnectAtOnceAsNoAnswer) {
  IscsiDiscovery probe(request(kPortalA, nicDown()), Clock::now());
  ASSERT_TRUE(probe.done()) << "connect(2) refuses before any I/O";
  ASSERT_FALSE(probe.result());
  EXPECT_THAT(probe.result().error(), HasSubstr("via " + nicDown() + ": cannot connect"));
  EXPECT_THAT(probe.result().error(), HasSubstr("unreachable"));
  EXPECT_EQ(probe.reach(), PortalReach::Silent);
}

TEST_F(SendTargetsDiscovery, BindingToAMissingNicFailsBeforeConnecting) {
  const auto result = discoverBlocking(request(kPortalA, "pk-no-such-nic"));
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error(), "portal 10.200.1.20:3260 via pk-no-such-nic: network interface "
                            "\"pk-no-such-nic\" does not exist");
}

TEST_F(SendTargetsDiscovery, RunsUnderALoopThatOnlyWatchesTheFdAndTicks) {
  std::vector<IscsiDiscovery> probes;
  probes.emplace_back(request(kPortalA, nicA()), Clock::now());
  probes.emplace_back(request(kPortalB, nicB()), Clock::now());
  probes.emplace_back(request(kBlackholed, nicA(), milliseconds(1000)), Clock::now());
  // Moving a running probe must not disturb libiscsi's pointer to it.
  std::vector<IscsiDiscovery> running;
  for (auto &probe : probes) {
    EXPECT_GE(probe.fd(), 0);
    EXPECT_NE(probe.events(), 0);
    running.push_back(std::move(probe));
  }
  const auto started = Clock::now();
  int wakeups = 0;
  while (std::any_of(running.begin(), running.end(), [](const auto &p) { return !p.done(); })) {
    // Every probe has a deadline of at most 5 s: this limit only keeps a
    // broken loop from hanging the suite.
    ASSERT_LT(since(started), milliseconds(60000)) << "the loop does not finish";
    std::vector<pollfd> fds;
    auto next = started + milliseconds(60000);
    for (const auto &probe : running) {
      fds.push_back({probe.fd(), probe.events(), 0});
      if (!probe.done()) {
        next = std::min(next, probe.nextTick());
      }
    }
    const auto wait = std::chrono::ceil<milliseconds>(next - Clock::now()).count();
    ASSERT_GE(poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0))), 0);
    ++wakeups;
    for (std::size_t i = 0; i < running.size(); ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0) {
        running[i].service(fds[i].revents);
      }
      running[i].tick(Clock::now());
    }
  }
  EXPECT_LT(wakeups, 100);
  for (const auto &probe : running) {
    EXPECT_EQ(probe.fd(), -1);
    EXPECT_EQ(probe.events(), 0);
  }
  ASSERT_TRUE(running[0].result()) << running[0].result().error();
  ASSERT_TRUE(running[1].result()) << running[1].result().error();
  EXPECT_THAT(names(*running[0].result()), ElementsAre(kLower, kUpper));
  EXPECT_THAT(names(*running[1].result()), ElementsAre(kLower, kUpper));
  ASSERT_FALSE(running[2].result());
  EXPECT_THAT(running[2].result().error(), HasSubstr("did not answer within 1 s"));
}

TEST_F(SendTargetsDiscovery, ReportsThePathsTheKernelHasNoSessionFor) {
  std::vector<selector::DiscoveredTarget> discovered;
  for (const auto &[portal, nic] : {std::pair(kPortalA, nicA()), std::pair(kPortalB, nicB())}) {
    auto result = discoverBlocking(request(portal, nic));
    ASSERT_TRUE(result) << result.error();
    discovered.insert(discovered.end(), result->targets.begin(), result->targets.end());
  }
  // The kernel has logged in to "upper" through both portals, "lower" through A only.
  std::vector<selector::Path> kernel(3);
  kernel[0].targetIqn = kUpper, kernel[0].portal = kPortalA, kernel[0].netdev = nicA();
  kernel[1].targetIqn = kUpper, kernel[1].portal = kPortalB, kernel[1].netdev = nicB();
  kernel[2].targetIqn = kLower, kernel[2].portal = kPortalA, kernel[2].netdev = nicA();
  const auto missing = selector::findMissingPaths(discovered, kernel);
  ASSERT_EQ(missing.size(), 1U);
  EXPECT_EQ(missing[0].str(), kLower + " via 10.200.2.21:3260,1 from " + nicB());
}

TEST_F(SendTargetsDiscovery, ProbesUnderTheHostNameWithTheProbeSuffix) {
  const auto file = work_ / "initiatorname.iscsi";
  std::ofstream(file)
      << "## generated by the test\nInitiatorName=iqn.2024-01.org.pathkeeper.test:host\n";
  const auto name = defaultProbeInitiatorName(file);
  ASSERT_TRUE(name) << name.error();
  EXPECT_EQ(*name, kProbeName);
  auto probe = request(kPortalA, nicA());
  probe.initiatorName = *name;
  const auto result = discoverBlocking(probe);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->targets.size(), 2U);
}

} // namespace
} // namespace pathkeeper::daemon
