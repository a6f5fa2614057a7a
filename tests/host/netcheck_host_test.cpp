// The network check against real kernel routing: each test builds the
// seed's mistake (two NICs on one /24, no policy routing) in network
// namespaces of its own with tests/host/netcheck-netns.sh.
//
// Two ways in, both exercised:
//  - the library: the test thread enters the initiator namespace with
//    setns(CLONE_NEWNET), so NetworkChecker's netlink sockets and
//    /proc/sys/net reads see that namespace (the host's /sys stays, so link
//    speeds are unknown there, which the checks tolerate);
//  - the command: `ip netns exec NS pathkeeperctl doctor ...`, which also
//    remounts /sys for the namespace.
// The kernel's own answer (`ip route get`) is the independent witness for
// which NIC traffic really leaves by.
//
// Needs root and network namespaces; without them every test is SKIPPED
// with the reason, never passed.
#include "event_loop.hpp"
#include "net_netlink.hpp"
#include "netcheck.hpp"
#include "network_watch.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pathkeeper::daemon {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

const selector::Portal kPortal{"10.201.1.20", 3260, 1};

struct CommandResult {
  int status = -1; ///< exit status, or -1 when it did not exit
  std::string out;
};

CommandResult run(const std::string &command) {
  CommandResult result;
  FILE *pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string ctlBinary() {
  const char *override = std::getenv("PK_PATHKEEPERCTL"); // to test another build
  return override != nullptr ? override : PK_PATHKEEPERCTL;
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

class NetcheckNetns : public ::testing::Test {
protected:
  void SetUp() override {
    static int counter = 0;
    tag_ = std::to_string(getpid() % 100000) + "x" + std::to_string(counter++);
    work_ = std::filesystem::temp_directory_path() / ("pathkeeper-netcheck-" + tag_);
    std::filesystem::create_directories(work_ / "iscsi");
    const CommandResult up =
        run(fmt::format("{} up {} {} {} 2>{}", PK_NETCHECK_NETNS_SCRIPT, tag_, work_.string(),
                        getpid(), (work_ / "up.err").string()));
    if (up.status != 0) {
      std::ifstream err(work_ / "up.err");
      std::stringstream text;
      text << err.rdbuf();
      fixtureUp_ = false;
      if (up.status == 77) {
        GTEST_SKIP() << text.str();
      }
      FAIL() << "netcheck-netns.sh up failed (" << up.status << "): " << text.str();
    }
  }

  void TearDown() override {
    leave();
    if (fixtureUp_) {
      run(fmt::format("{} down {} {}", PK_NETCHECK_NETNS_SCRIPT, tag_, work_.string()));
    }
    std::filesystem::remove_all(work_);
  }

  std::string ns() const { return "pkn-" + tag_; }
  std::string nicA() const { return "pkna-" + tag_; }
  std::string nicB() const { return "pknb-" + tag_; }
  std::string sourceOf(const std::string &nic) const {
    return nic == nicA() ? "10.201.1.10" : "10.201.1.11";
  }

  void enter() {
    home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(home_, 0);
    const std::string path = "/var/run/netns/" + ns();
    const int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(target, 0) << path;
    ASSERT_EQ(setns(target, CLONE_NEWNET), 0) << "setns " << path;
    close(target);
  }

  void leave() {
    if (home_ >= 0) {
      EXPECT_EQ(setns(home_, CLONE_NEWNET), 0);
      close(home_);
      home_ = -1;
    }
  }

  std::vector<Binding> bindings() const {
    std::vector<Binding> out;
    for (const auto &nic : {nicA(), nicB()}) {
      Binding b;
      b.nic = nic;
      b.portal = kPortal;
      b.origins = {"test"};
      out.push_back(b);
    }
    return out;
  }

  /// The library, from inside the namespace.
  std::vector<Finding> analyseInside(NetworkSnapshot *snapshotOut = nullptr) {
    enter();
    const auto b = bindings();
    const NetworkSnapshot snapshot = NetworkChecker().snapshot(b);
    leave();
    if (snapshotOut != nullptr) {
      *snapshotOut = snapshot;
    }
    return analyse(snapshot, b);
  }

  /// The kernel's own answer for traffic from @p source, as `ip route get`.
  std::string kernelEgress(const std::string &source) const {
    const CommandResult r =
        run(fmt::format("ip -n {} -o route get {} from {}", ns(), kPortal.address, source));
    std::smatch m;
    if (r.status != 0 || !std::regex_search(r.out, m, std::regex(R"(\bdev (\S+))"))) {
      return "(ip route get failed: " + r.out + ")";
    }
    return m[1];
  }

  CommandResult doctor(const std::string &args) const {
    return run(fmt::format(
        "ip netns exec {} {} doctor --iscsi-dir {} --nic {} --nic {} --portal {} {}", ns(),
        ctlBinary(), (work_ / "iscsi").string(), nicA(), nicB(), kPortal.address, args));
  }

  std::string tag_;
  std::filesystem::path work_;
  bool fixtureUp_ = true;
  int home_ = -1;
};

TEST_F(NetcheckNetns, TwoNicsOnOneSubnetNameTheNicTheTrafficReallyLeavesBy) {
  const auto findings = analyseInside();
  // Exactly one of the two NICs' source addresses leaves by the other NIC:
  // the one whose route the main table does not list first.
  std::string misrouted;
  std::string egress;
  for (const auto &nic : {nicA(), nicB()}) {
    const std::string real = kernelEgress(sourceOf(nic));
    if (real != nic) {
      misrouted = nic;
      egress = real;
    }
  }
  ASSERT_FALSE(misrouted.empty()) << "the kernel routed both correctly; the fixture is wrong";
  const Finding *f = find(findings, "unbound-egress");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(f->summary, "traffic bound to " + misrouted + " leaves via " + egress);
  EXPECT_THAT(f->nics, ElementsAre(misrouted, egress));
  EXPECT_THAT(f->portals, ElementsAre("10.201.1.20:3260"));
  EXPECT_THAT(ids(findings), UnorderedElementsAre("unbound-egress", "shared-subnet", "arp-flux"));
}

// A NIC whose first address is in another subnet (a management address):
// iscsid binds by the device alone, and the kernel picks the source in the
// portal's subnet. The check must reason about that source, not the first.
TEST_F(NetcheckNetns, ABindingToANicAloneUsesTheSourceTheKernelPicks) {
  const std::string b = nicB();
  ASSERT_EQ(run(fmt::format("ip -n {0} addr del 10.201.1.11/24 dev {1} && "
                            "ip -n {0} addr add 192.168.77.11/24 dev {1} && "
                            "ip -n {0} addr add 10.201.1.11/24 dev {1}",
                            ns(), b))
                .status,
            0);
  const CommandResult got =
      run(fmt::format("ip -n {} -o route get {} oif {}", ns(), kPortal.address, b));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(got.out, m, std::regex(R"(\bsrc (\S+))"))) << got.out;
  ASSERT_EQ(m[1], "10.201.1.11") << "the kernel's own choice";
  NetworkSnapshot snapshot;
  analyseInside(&snapshot);
  const Nic *nic = snapshot.nic(b);
  ASSERT_NE(nic, nullptr);
  ASSERT_EQ(nic->addresses.front().address, "192.168.77.11") << "the fixture's premise";
  EXPECT_EQ(resolveBinding(snapshot, bindings()[1]).source, "10.201.1.11");
  EXPECT_NE(snapshot.route(kPortal.address, "10.201.1.11", b), nullptr)
      << "the bound lookup was not asked from the kernel's source";
}

TEST_F(NetcheckNetns, SessionBoundByAddressOnlyLeavingByTheOtherNicIsAnError) {
  std::string misrouted = nicA();
  if (kernelEgress(sourceOf(nicA())) == nicA()) {
    misrouted = nicB();
  }
  const std::string egress = kernelEgress(sourceOf(misrouted));
  ASSERT_NE(egress, misrouted);
  Binding byAddress;
  byAddress.source = sourceOf(misrouted);
  byAddress.boundByDevice = false;
  byAddress.portal = kPortal;
  enter();
  const std::vector<Binding> bindings{byAddress};
  const NetworkSnapshot snapshot = NetworkChecker().snapshot(bindings);
  leave();
  const auto findings = analyse(snapshot, bindings);
  ASSERT_FALSE(findings.empty());
  EXPECT_EQ(findings.front().id, "wrong-egress") << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(findings.front().severity, Severity::Error);
  EXPECT_EQ(findings.front().summary, "traffic bound to " + misrouted + " leaves via " + egress);
}

TEST_F(NetcheckNetns, DoctorWithoutOptionsChecksOpenIscsisRecords) {
  const std::string misrouted = kernelEgress("10.201.1.11") == nicB() ? nicA() : nicB();
  const auto iscsi = work_ / "iscsi";
  std::filesystem::create_directories(iscsi / "ifaces");
  for (const auto &nic : {nicA(), nicB()}) {
    std::ofstream(iscsi / "ifaces" / ("if-" + nic))
        << "iface.iscsi_ifacename = if-" << nic << "\niface.net_ifacename = " << nic
        << "\niface.transport_name = tcp\n";
    const auto node = iscsi / "nodes/iqn.2024-01.org.pathkeeper.test:upper/10.201.1.20,3260,1";
    std::filesystem::create_directories(node);
    std::ofstream(node / ("if-" + nic)) << "node.conn[0].address = 10.201.1.20\n"
                                        << "node.conn[0].port = 3260\n"
                                        << "iface.iscsi_ifacename = if-" << nic << "\n";
  }
  const CommandResult r = run(fmt::format("ip netns exec {} {} doctor --iscsi-dir {} --json", ns(),
                                          ctlBinary(), iscsi.string()));
  ASSERT_EQ(r.status, 3) << r.out;
  const auto document = nlohmann::json::parse(r.out);
  ASSERT_EQ(document["bindings"].size(), 2U) << r.out;
  EXPECT_EQ(document["bindings"][0]["origins"][0],
            "node iqn.2024-01.org.pathkeeper.test:upper via iface if-" + nicA());
  bool egressFound = false;
  for (const auto &finding : document["findings"]) {
    if (finding["id"] == "unbound-egress") {
      egressFound = true;
      EXPECT_EQ(finding["nics"][0], misrouted);
    }
  }
  EXPECT_TRUE(egressFound) << r.out;
}

TEST_F(NetcheckNetns, DoctorReportsTheSameAsJsonWithExitStatusThree) {
  const std::string misrouted = kernelEgress("10.201.1.11") == nicB() ? nicA() : nicB();
  const CommandResult r = doctor("--json");
  ASSERT_EQ(r.status, 3) << r.out;
  const auto document = nlohmann::json::parse(r.out);
  std::vector<std::string> found;
  for (const auto &finding : document["findings"]) {
    found.push_back(finding["id"]);
    if (finding["id"] == "unbound-egress") {
      EXPECT_EQ(finding["nics"][0], misrouted);
      EXPECT_EQ(finding["severity"], "warning");
    }
  }
  EXPECT_THAT(found, UnorderedElementsAre("unbound-egress", "shared-subnet", "arp-flux"));
  ASSERT_EQ(document["nics"].size(), 2U);
  // ip netns exec remounts /sys, so the namespace's veths are found there.
  EXPECT_EQ(document["nics"][0]["operstate"], "up");
  EXPECT_EQ(document["worst"], "warning");
}

TEST_F(NetcheckNetns, TheFixScriptMakesTheFindingsGoAndRunsTwice) {
  const CommandResult script = doctor("--fix-script");
  ASSERT_EQ(script.status, 3) << script.out;
  EXPECT_THAT(script.out, HasSubstr("ip rule add from "));
  const auto file = work_ / "fix.sh";
  std::ofstream(file) << script.out;
  for (int round = 0; round < 2; ++round) {
    const CommandResult applied =
        run(fmt::format("ip netns exec {} sh {} 2>&1", ns(), file.string()));
    ASSERT_EQ(applied.status, 0) << "round " << round << ": " << applied.out;
  }
  const CommandResult rules = run(fmt::format("ip -n {} rule show", ns()));
  EXPECT_EQ(std::count(rules.out.begin(), rules.out.end(), '\n'), 5) << rules.out;

  EXPECT_THAT(ids(analyseInside()), IsEmpty());
  EXPECT_EQ(kernelEgress("10.201.1.10"), nicA());
  EXPECT_EQ(kernelEgress("10.201.1.11"), nicB());
  const CommandResult after = doctor("");
  EXPECT_EQ(after.status, 0) << after.out;
  EXPECT_THAT(after.out, HasSubstr("Findings: 0 "));
}

// The daemon's side: NetworkWatch on an sd-event loop, inside the namespace.
// Its periodic re-check is pushed out of reach, so only rtnetlink's change
// notifications can make it notice that the fix script ran.
TEST_F(NetcheckNetns, TheDaemonsWatchSeesTheFixThroughNetlinkAlone) {
  enter();
  std::vector<std::vector<std::string>> reports;
  std::string fixError;
  {
    EventLoop loop;
    NetworkWatch::Options options;
    options.settle = std::chrono::milliseconds(100);
    options.periodic = std::chrono::hours(1);
    std::unique_ptr<NetworkWatch> watch;
    watch = std::make_unique<NetworkWatch>(
        loop, NetworkChecker(),
        [&](const std::vector<Finding> &findings) {
          reports.push_back(ids(findings));
          if (reports.size() == 1) {
            // Apply the fix from the loop's own callback: the loop learns of
            // it only from the netlink messages the commands cause.
            const auto file = work_ / "watch-fix.sh";
            std::ofstream(file) << renderFixScript(findings);
            const CommandResult applied =
                run(fmt::format("ip netns exec {} sh {} 2>&1", ns(), file.string()));
            if (applied.status != 0) {
              fixError = applied.out;
              loop.exit(1);
            }
          } else if (findings.empty()) {
            loop.exit(0);
          }
        },
        options);
    watch->setBindings(bindings());
    // A guard against a hang, not a timing assertion.
    auto guard =
        loop.addTimer(EventLoop::Clock::now() + std::chrono::seconds(30), [&] { loop.exit(2); });
    const int rc = loop.run();
    EXPECT_EQ(rc, 0) << "0: the findings went; 1: the fix failed; 2: no netlink-driven re-check";
  }
  leave();
  EXPECT_THAT(fixError, IsEmpty());
  ASSERT_GE(reports.size(), 2U);
  EXPECT_THAT(reports.front(), Contains("unbound-egress"));
  EXPECT_THAT(reports.back(), IsEmpty());
}

// Policy rules steer a bound session's traffic, for IPv6 as for IPv4: a
// rule added or removed must start a check, not wait for the periodic one.
TEST_F(NetcheckNetns, AnIpv6RuleChangeStartsACheck) {
  if (!std::filesystem::exists("/proc/sys/net/ipv6")) {
    GTEST_SKIP() << "SKIPPED: IPv6 is disabled in this kernel (ipv6.disable=1)";
  }
  enter();
  std::string added;
  unsigned runsAfterRule = 0;
  {
    EventLoop loop;
    NetworkWatch::Options options;
    options.settle = std::chrono::milliseconds(100);
    options.periodic = std::chrono::hours(1);
    NetworkWatch watch(
        loop, NetworkChecker(), [](const std::vector<Finding> &) {}, options);
    watch.setBindings(bindings());
    // Once the checks the start brings have settled (no new run for 3 s:
    // the fixture's link-local addresses end their DAD meanwhile, with
    // address notifications), add the rule; then wait for a check.
    unsigned before = 0;
    unsigned seen = 0;
    auto quietSince = EventLoop::Clock::now();
    // A guard against a hang, not a timing assertion.
    auto guard =
        loop.addTimer(EventLoop::Clock::now() + std::chrono::seconds(20), [&] { loop.exit(2); });
    EventSource poll;
    poll = loop.addTimer(EventLoop::Clock::now() + std::chrono::milliseconds(50), [&] {
      const auto now = EventLoop::Clock::now();
      if (watch.runs() != seen) {
        seen = watch.runs();
        quietSince = now;
      }
      if (before == 0 && seen >= 1 && now - quietSince >= std::chrono::seconds(3)) {
        before = seen;
        const CommandResult rule = run(fmt::format(
            "ip -n {} -6 rule add from 2001:db8::1 lookup 100 priority 1000 2>&1", ns()));
        added = rule.status == 0 ? "" : rule.out;
        if (!added.empty()) {
          loop.exit(1);
        }
      } else if (before != 0 && seen > before) {
        runsAfterRule = seen - before;
        loop.exit(0);
      }
      EventLoop::rearm(poll, now + std::chrono::milliseconds(50));
    });
    const int rc = loop.run();
    EXPECT_EQ(rc, 0) << "1: the rule could not be added; 2: no check after it";
  }
  leave();
  EXPECT_THAT(added, IsEmpty());
  EXPECT_GE(runsAfterRule, 1U);
}

TEST_F(NetcheckNetns, StrictRpFilterGivesAFinding) {
  ASSERT_EQ(
      run(fmt::format("ip netns exec {} sysctl -qw net.ipv4.conf.all.rp_filter=1", ns())).status,
      0);
  const std::string misrouted = kernelEgress("10.201.1.11") == nicB() ? nicA() : nicB();
  NetworkSnapshot snapshot;
  const auto findings = analyseInside(&snapshot);
  EXPECT_EQ(snapshot.all.rpFilter, 1) << "read from the namespace's /proc/sys/net";
  const Finding *f = find(findings, "rp-filter");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_EQ(f->severity, Severity::Error);
  EXPECT_THAT(f->nics, ElementsAre(misrouted));

  const CommandResult r = doctor("--json");
  EXPECT_EQ(r.status, 3);
  EXPECT_THAT(r.out, HasSubstr("\"rp-filter\""));
}

TEST_F(NetcheckNetns, ANicWithoutCarrierIsDown) {
  ASSERT_EQ(run(fmt::format("ip -n pknp-{} link set pknpb-{} down", tag_, tag_)).status, 0);
  // The kernel updates operstate from the carrier asynchronously.
  std::vector<Finding> findings;
  for (int i = 0; i < 30; ++i) {
    findings = analyseInside();
    if (find(findings, "link-down") != nullptr) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const Finding *f = find(findings, "link-down");
  ASSERT_NE(f, nullptr) << ::testing::PrintToString(ids(findings));
  EXPECT_THAT(f->nics, ElementsAre(nicB()));
}

} // namespace
} // namespace pathkeeper::daemon
