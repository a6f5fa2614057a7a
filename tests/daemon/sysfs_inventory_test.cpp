#include "sysfs_inventory.hpp"

#include "vpd_pages.hpp"

#include "config_files.hpp"
#include "plan.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

// The fake tree's specs are written with designated initializers that leave
// defaults out; GCC 12 warns about every omitted member even though each has
// a default member initializer (GCC 13 no longer does for designated ones).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;
using pathkeeper::testing::Bytes;
using pathkeeper::testing::descriptor;
using pathkeeper::testing::hex;
using pathkeeper::testing::page;
using selector::AluaState;
using selector::PathState;

/// Page 0x83 as LIO sends it: an NAA-6 logical-unit designator, and the
/// target port group of the port it was read through.
Bytes page83(std::string_view naaHex, std::optional<std::uint16_t> tpg = std::nullopt) {
  if (!tpg) {
    return page(0x83, {descriptor(0x01, 0x03, hex(naaHex))});
  }
  return page(0x83, {descriptor(0x01, 0x03, hex(naaHex)),
                     descriptor(0x01, 0x15,
                                {0, 0, static_cast<std::uint8_t>(*tpg >> 8U),
                                 static_cast<std::uint8_t>(*tpg & 0xffU)})});
}

Bytes page80(std::string_view serial) {
  return page(0x80, {Bytes(serial.begin(), serial.end())});
}

void writeFile(const fs::path &file, std::string_view text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

void writeBytes(const fs::path &file, const Bytes &bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void link(const fs::path &at, const fs::path &target) {
  fs::create_directories(at.parent_path());
  fs::create_symlink(target, at);
}

/// A sysfs tree laid out as the kernel lays out iscsi_tcp sessions: one SCSI
/// host per session under devices/platform, with the class links relative.
class FakeSysfs {
public:
  explicit FakeSysfs(fs::path root) : root_(std::move(root)) {}

  struct Session {
    int id = 1;
    int host = 2;
    std::string target;
    std::string portal = "10.10.1.20";
    std::string iface = "iface0";
    std::string netdev = "eth1";
    std::string state = "LOGGED_IN";
    std::string hwaddress = "(null)"; ///< iface.hwaddress, set when bound by it
  };

  /// class/net/@p name with its ifindex, type (1: Ethernet) and address.
  void addNic(const std::string &name, int ifindex, const std::string &address, int type = 1) {
    const auto dir = root_ / "devices/virtual/net" / name;
    writeFile(dir / "ifindex", std::to_string(ifindex) + "\n");
    writeFile(dir / "type", std::to_string(type) + "\n");
    writeFile(dir / "address", address + "\n");
    link(root_ / "class/net" / name, "../../devices/virtual/net/" + name);
  }

  void addSession(const Session &s) {
    const auto sid = std::to_string(s.id);
    const auto host = "host" + std::to_string(s.host);
    const auto sessionDir = root_ / "devices/platform" / host / ("session" + sid);
    const auto attrs = sessionDir / "iscsi_session" / ("session" + sid);
    writeFile(attrs / "targetname", s.target + "\n");
    writeFile(attrs / "state", s.state + "\n");
    writeFile(attrs / "ifacename", s.iface + "\n");
    writeFile(attrs / "initiatorname", "iqn.2005-03.org.open-iscsi:lab-guest\n");
    writeFile(attrs / "recovery_tmo", "5\n");
    writeFile(attrs / "tpgt", "1\n");
    link(root_ / "class/iscsi_session" / ("session" + sid),
         "../../devices/platform/" + host + "/session" + sid + "/iscsi_session/session" + sid);
    const auto conn = "connection" + sid + ":0";
    const auto connDir = sessionDir / conn / "iscsi_connection" / conn;
    writeFile(connDir / "persistent_address", s.portal + "\n");
    writeFile(connDir / "persistent_port", "3260\n");
    writeFile(connDir / "address", s.portal + "\n");
    writeFile(connDir / "port", "3260\n");
    writeFile(connDir / "state", "up\n");
    link(root_ / "class/iscsi_connection" / conn, "../../devices/platform/" + host + "/session" +
                                                      sid + "/" + conn + "/iscsi_connection/" +
                                                      conn);
    const auto hostDir = root_ / "devices/platform" / host / "iscsi_host" / host;
    writeFile(hostDir / "netdev", s.netdev + "\n");
    writeFile(hostDir / "ipaddress", "10.10.1.10\n");
    writeFile(hostDir / "hwaddress", s.hwaddress + "\n");
    link(root_ / "class/iscsi_host" / host,
         "../../devices/platform/" + host + "/iscsi_host/" + host);
  }

  struct Disk {
    int host = 2;
    int session = 1;
    int lun = 0;
    std::string name = "sdb";
    std::string dev = "8:16";
    std::optional<Bytes> pg83;
    std::optional<Bytes> pg80;
    std::string wwid;
    std::string vendor = "APPLE   ";
    std::string model = "Xserve RAID     ";
    std::string state = "running";
    std::string accessState;
    /// scsi_dh's handler; default: alua with an access state, detached
    /// without. "" leaves the attribute out (a kernel without scsi_dh).
    std::optional<std::string> dhState;
  };

  /// @return the SCSI device directory (.../H:C:T:L).
  fs::path addDisk(const Disk &d) {
    const auto h = std::to_string(d.host);
    const auto hctl = h + ":0:0:" + std::to_string(d.lun);
    const auto rel = "devices/platform/host" + h + "/session" + std::to_string(d.session) +
                     "/target" + h + ":0:0/" + hctl;
    const auto dir = root_ / rel;
    writeFile(dir / "vendor", d.vendor + "\n");
    writeFile(dir / "model", d.model + "\n");
    writeFile(dir / "rev", "1.50\n");
    writeFile(dir / "state", d.state + "\n");
    writeFile(dir / "timeout", "30\n");
    const std::string dhState = d.dhState.value_or(d.accessState.empty() ? "detached" : "alua");
    if (!dhState.empty()) {
      writeFile(dir / "dh_state", dhState + "\n");
    }
    if (!d.wwid.empty()) {
      writeFile(dir / "wwid", d.wwid + "\n");
    }
    if (d.pg83) {
      writeBytes(dir / "vpd_pg83", *d.pg83);
    }
    if (d.pg80) {
      writeBytes(dir / "vpd_pg80", *d.pg80);
    }
    if (!d.accessState.empty()) {
      writeFile(dir / "access_state", d.accessState + "\n");
      writeFile(dir / "preferred_path", "0\n");
    }
    writeFile(dir / "block" / d.name / "dev", d.dev + "\n");
    writeFile(dir / "block" / d.name / "size", "524288\n");
    link(dir / "block" / d.name / "device", "../../../" + hctl);
    link(dir / "scsi_device" / hctl / "device", "../../../" + hctl);
    link(root_ / "block" / d.name, "../" + rel + "/block/" + d.name);
    link(root_ / "class/scsi_device" / hctl, "../../" + rel + "/scsi_device/" + hctl);
    return dir;
  }

  /// A local SATA disk: no iSCSI session above it.
  void addSataDisk(const std::string &name) {
    const auto rel = std::string("devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0");
    writeFile(root_ / rel / "vendor", "ATA     \n");
    writeFile(root_ / rel / "model", "QEMU HARDDISK   \n");
    writeFile(root_ / rel / "state", "running\n");
    writeFile(root_ / rel / "block" / name / "dev", "8:0\n");
    writeFile(root_ / rel / "block" / name / "size", "2097152\n");
    link(root_ / rel / "block" / name / "device", "../../../0:0:0:0");
    link(root_ / "block" / name, "../" + rel + "/block/" + name);
  }

private:
  fs::path root_;
};

// The lab's xserve LUN identities: LIO's NAA from the backstore serials.
constexpr std::string_view kUpperNaa = "60014050393a1b001000000000000000";
constexpr std::string_view kLowerNaa = "60014050393a1b002000000000000000";
constexpr std::string_view kUpperIqn20 = "iqn.1987-05.com.cisco:05.mds-gw.02-01.5000393000a1b001";
constexpr std::string_view kUpperIqn21 = "iqn.1987-05.com.cisco:05.mds-gw.02-02.5000393000a1b001";
constexpr std::string_view kLowerIqn20 = "iqn.1987-05.com.cisco:05.mds-gw.02-01.5000393000a1b002";
constexpr std::string_view kLowerIqn21 = "iqn.1987-05.com.cisco:05.mds-gw.02-02.5000393000a1b002";

class SysfsTree : public ::testing::Test {
protected:
  void SetUp() override {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() / ("pk-sysfs-" + std::to_string(::getpid()) + "-" +
                                         info->test_suite_name() + "-" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  /// The seed's four paths: 2 controllers x 2 portals, host N = session N + 1.
  void buildXserve() {
    FakeSysfs fake(root_);
    const struct {
      std::string_view iqn, portal, iface, netdev, naa, serial, sd, dev;
    } rows[] = {
        {kUpperIqn20, "10.10.1.20", "iface0", "eth1", kUpperNaa, "0393a1b00100", "sda", "8:0"},
        {kUpperIqn21, "10.10.1.21", "iface1", "eth2", kUpperNaa, "0393a1b00100", "sdb", "8:16"},
        {kLowerIqn20, "10.10.1.20", "iface0", "eth1", kLowerNaa, "0393a1b00200", "sdc", "8:32"},
        {kLowerIqn21, "10.10.1.21", "iface1", "eth2", kLowerNaa, "0393a1b00200", "sdd", "8:48"},
    };
    int id = 1;
    for (const auto &row : rows) {
      fake.addSession({.id = id,
                       .host = id + 1,
                       .target = std::string(row.iqn),
                       .portal = std::string(row.portal),
                       .iface = std::string(row.iface),
                       .netdev = std::string(row.netdev)});
      fake.addDisk({.host = id + 1,
                    .session = id,
                    .name = std::string(row.sd),
                    .dev = std::string(row.dev),
                    .pg83 = page83(row.naa),
                    .pg80 = page80(row.serial),
                    .wwid = "naa." + std::string(row.naa)});
      ++id;
    }
  }

  Inventory scan() const {
    auto inventory = SysfsInventory(root_).scan();
    EXPECT_TRUE(inventory.has_value()) << inventory.error();
    return inventory ? *inventory : Inventory{};
  }

  static selector::Config xserveConfig() {
    auto config = loadConfig(fs::path(PATHKEEPER_SOURCE_DIR) / "tests/data/config/xserve.conf",
                             "/nonexistent/pathkeeper.conf.d");
    EXPECT_TRUE(config.has_value()) << config.error();
    return config ? *config : selector::builtinConfig();
  }

  fs::path root_;
};

std::string allProblems(const Inventory &inventory) {
  std::string out;
  for (const auto &[name, path] : inventory.paths) {
    for (const auto &problem : path.problems) {
      out += name + ": " + problem + "\n";
    }
  }
  return out;
}

// --- pure helpers -----------------------------------------------------------

TEST(WwidFromSysfsAttribute, TurnsTheKernelsPrefixesIntoMultipathTypeDigits) {
  EXPECT_EQ(wwidFromSysfsAttribute("naa.6001405ABCDEF0123\n"), "36001405abcdef0123");
  EXPECT_EQ(wwidFromSysfsAttribute("eui.0011223344556677"), "20011223344556677");
  EXPECT_EQ(wwidFromSysfsAttribute("t10.ACME    SuperDisk  42  "), "1ACME_SuperDisk_42");
}

TEST(WwidFromSysfsAttribute, RefusesWhatItCannotName) {
  EXPECT_EQ(wwidFromSysfsAttribute(""), std::nullopt);
  EXPECT_EQ(wwidFromSysfsAttribute("naa."), std::nullopt);
  EXPECT_EQ(wwidFromSysfsAttribute("naa.60zz"), std::nullopt);
  EXPECT_EQ(wwidFromSysfsAttribute("iqn.2003-01.org.example:disk"), std::nullopt);
  EXPECT_EQ(wwidFromSysfsAttribute("t10.\x01\x02"), std::nullopt);
}

TEST(PathStateFromSysfs, IsUpOnlyForALoggedInSessionAndARunningDevice) {
  EXPECT_EQ(pathStateFromSysfs("LOGGED_IN", "running"), PathState::Up);
  EXPECT_EQ(pathStateFromSysfs("FAILED", "blocked"), PathState::Down);
  EXPECT_EQ(pathStateFromSysfs("FREE", "transport-offline"), PathState::Down);
  EXPECT_EQ(pathStateFromSysfs("LOGGED_IN", "offline"), PathState::Down);
}

TEST(ParseUdevAction, KnowsTheThreeActionsThatMatter) {
  EXPECT_EQ(parseUdevAction("add"), UdevEvent::Action::Add);
  EXPECT_EQ(parseUdevAction("change"), UdevEvent::Action::Change);
  EXPECT_EQ(parseUdevAction("remove"), UdevEvent::Action::Remove);
  EXPECT_EQ(parseUdevAction("bind"), UdevEvent::Action::Other);
}

// --- scanning hand-made trees ------------------------------------------------

// An iface bound by iface.hwaddress: the kernel's host shows the address and
// no netdev; iscsid bound the socket to the NIC that has the address.
TEST_F(SysfsTree, ASessionBoundByHardwareAddressIsOnTheNicWithIt) {
  FakeSysfs fake(root_);
  fake.addNic("lo", 1, "00:00:00:00:00:00", 772);
  fake.addNic("eth1", 2, "52:54:00:0a:01:0a");
  fake.addNic("eth2", 3, "52:54:00:0a:01:0b");
  fake.addSession({.id = 1,
                   .host = 2,
                   .target = std::string(kUpperIqn20),
                   .iface = "by-mac",
                   .netdev = "(null)",
                   .hwaddress = "52:54:00:0A:01:0B"});
  fake.addDisk({.host = 2,
                .session = 1,
                .name = "sda",
                .dev = "8:0",
                .pg83 = page83(kUpperNaa),
                .pg80 = page80("0393a1b00100"),
                .wwid = "naa." + std::string(kUpperNaa)});
  // Both set: iscsid binds by the address first (bind_conn_to_iface).
  fake.addSession({.id = 2,
                   .host = 3,
                   .target = std::string(kUpperIqn21),
                   .iface = "both",
                   .netdev = "eth1",
                   .hwaddress = "52:54:00:0a:01:0b"});
  const auto inventory = scan();
  EXPECT_EQ(allProblems(inventory), "");
  ASSERT_TRUE(inventory.paths.contains("sda"));
  EXPECT_EQ(inventory.paths.at("sda").path.netdev, "eth2");
  EXPECT_EQ(inventory.hosts.at("host2").hwAddress, "52:54:00:0A:01:0B");
  EXPECT_EQ(inventory.hosts.at("host3").netdev, "eth2");
}

// A bond shares its first slave's address; open-iscsi takes the lowest
// ifindex, an Ethernet one. No NIC with the address: no binding.
TEST_F(SysfsTree, TheNicOfAHardwareAddressIsOpenIscsisChoice) {
  FakeSysfs fake(root_);
  fake.addNic("bond0", 7, "52:54:00:0a:01:0a");
  fake.addNic("eth1", 3, "52:54:00:0a:01:0a");
  fake.addNic("ib0", 2, "52:54:00:0a:01:0a", 32); // not Ethernet
  fake.addNic("eth2", 4, "52:54:00:0a:01:0b");
  EXPECT_EQ(nicWithHardwareAddress(root_, "52:54:00:0A:01:0A"), "eth1");
  EXPECT_EQ(nicWithHardwareAddress(root_, "52:54:00:0a:01:0b\n"), "eth2");
  EXPECT_EQ(nicWithHardwareAddress(root_, "52:54:00:0a:01:0c"), "");
  EXPECT_EQ(nicWithHardwareAddress(root_, ""), "");
  EXPECT_EQ(nicWithHardwareAddress(root_ / "nowhere", "52:54:00:0a:01:0a"), "");
}

TEST_F(SysfsTree, ReadsTheXserveSessionsAndDerivesEveryPathField) {
  buildXserve();
  const auto inventory = scan();
  EXPECT_EQ(allProblems(inventory), "");
  ASSERT_EQ(inventory.paths.size(), 4U);
  EXPECT_EQ(inventory.sessions.size(), 4U);
  EXPECT_EQ(inventory.connections.size(), 4U);
  EXPECT_EQ(inventory.hosts.size(), 4U);

  const auto &sdb = inventory.paths.at("sdb").path;
  EXPECT_EQ(sdb.device, "sdb");
  EXPECT_EQ(sdb.devt.str(), "8:16");
  EXPECT_EQ(sdb.wwid, "3" + std::string(kUpperNaa));
  EXPECT_EQ(sdb.vendor, "APPLE");
  EXPECT_EQ(sdb.product, "Xserve RAID");
  EXPECT_EQ(sdb.serial, "0393a1b00100");
  EXPECT_EQ(sdb.sizeSectors, 524288U);
  EXPECT_EQ(sdb.targetIqn, kUpperIqn21);
  EXPECT_EQ(sdb.portal.str(), "10.10.1.21:3260,1");
  EXPECT_EQ(sdb.iface, "iface1");
  EXPECT_EQ(sdb.netdev, "eth2");
  EXPECT_EQ(sdb.sessionId, 2);
  EXPECT_EQ(sdb.state, PathState::Up);
  EXPECT_EQ(sdb.targetPortGroup, std::nullopt);
  EXPECT_EQ(sdb.alua, AluaState::None);
  EXPECT_EQ(sdb.priority, 0);

  const auto &session = inventory.sessions.at("session2");
  EXPECT_EQ(session.hostNo, 3);
  EXPECT_EQ(session.recoveryTmo, 5);
  EXPECT_EQ(session.tpgt, 1U);
  EXPECT_EQ(inventory.hosts.at("host3").hwAddress, ""); // "(null)" is no value
  EXPECT_EQ(inventory.disks.at("sdb").hctl, "3:0:0:0");
  EXPECT_EQ(inventory.disks.at("sdb").devpath,
            "/devices/platform/host3/session2/target3:0:0/3:0:0:0/block/sdb");
}

TEST_F(SysfsTree, XservePlanGivesOneMapPerControllerDespitePerPortalIqns) {
  buildXserve();
  const auto plan = selector::planMaps(scan().plannerPaths(), xserveConfig());
  EXPECT_TRUE(plan.warnings.empty());
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_EQ(plan.maps[0].spec.alias, "xserve-lower");
  EXPECT_EQ(plan.maps[1].spec.alias, "xserve-upper");
  EXPECT_EQ(plan.maps[1].controller, "upper");
  EXPECT_EQ(plan.maps[1].table,
            "0 524288 multipath 1 queue_if_no_path 0 1 1 service-time 0 2 2 8:0 1 1 8:16 1 1");
}

TEST_F(SysfsTree, AFailedSessionMakesItsPathDown) {
  FakeSysfs fake(root_);
  fake.addSession({.id = 1, .host = 2, .target = std::string(kUpperIqn20), .state = "FAILED"});
  fake.addDisk({.pg83 = page83(kUpperNaa), .state = "blocked"});
  const auto inventory = scan();
  EXPECT_EQ(inventory.paths.at("sdb").path.state, PathState::Down);
  EXPECT_TRUE(inventory.paths.at("sdb").complete()) << allProblems(inventory);
}

TEST_F(SysfsTree, ReadsAluaAccessStateAndTheTargetPortGroup) {
  FakeSysfs fake(root_);
  fake.addSession({.id = 1, .host = 2, .target = "iqn.2003-01.org.linux-iscsi.lab:alua"});
  fake.addDisk({.pg83 = page83(kUpperNaa, 2),
                .vendor = "LIO-ORG ",
                .model = "lun0            ",
                .accessState = "active/non-optimized"});
  const auto path = scan().paths.at("sdb").path;
  EXPECT_EQ(path.targetPortGroup, 2);
  EXPECT_EQ(path.alua, AluaState::ActiveNonOptimized);
  EXPECT_FALSE(path.aluaPreferred);
  EXPECT_EQ(path.priority, 0) << "the planner derives ALUA priorities";
}

TEST_F(SysfsTree, ReadsTheHandlerTheKernelAttached) {
  FakeSysfs fake(root_);
  fake.addSession({.id = 1, .host = 2});
  fake.addSession({.id = 2, .host = 3});
  fake.addSession({.id = 3, .host = 4});
  fake.addSession({.id = 4, .host = 5});
  // scsi_dh_rdac fills access_state too (an rdac array's paths).
  fake.addDisk({.host = 2,
                .session = 1,
                .pg83 = page83(kUpperNaa, 1),
                .accessState = "active/optimized",
                .dhState = "rdac"});
  fake.addDisk({.host = 3,
                .session = 2,
                .name = "sdc",
                .dev = "8:32",
                .pg83 = page83(kUpperNaa, 1),
                .dhState = "detached"});
  fake.addDisk({.host = 4,
                .session = 3,
                .name = "sdd",
                .dev = "8:48",
                .pg83 = page83(kUpperNaa, 1),
                .dhState = ""});
  fake.addDisk({.host = 5,
                .session = 4,
                .name = "sde",
                .dev = "8:64",
                .pg83 = page83(kUpperNaa, 1),
                .accessState = "standby"});
  const auto inventory = scan();
  EXPECT_EQ(inventory.paths.at("sdb").path.attachedHandler, "rdac");
  EXPECT_EQ(inventory.paths.at("sdc").path.attachedHandler, "") << "detached is no handler";
  EXPECT_EQ(inventory.paths.at("sdd").path.attachedHandler, "") << "no dh_state attribute";
  EXPECT_EQ(inventory.paths.at("sde").path.attachedHandler, "alua");
  for (const auto &[name, path] : inventory.paths) {
    EXPECT_TRUE(path.complete()) << name << ": " << path.problems.front();
  }
}

TEST_F(SysfsTree, FallsBackToPage80WithoutPage83) {
  FakeSysfs fake(root_);
  fake.addSession({.target = "iqn.2003-01.org.example:t"});
  fake.addDisk({.pg80 = page80("1234"), .vendor = "LIO-ORG ", .model = "disk0           "});
  const auto inventory = scan();
  EXPECT_EQ(inventory.paths.at("sdb").path.wwid, "SLIO-ORG_disk0_1234");
  EXPECT_EQ(inventory.paths.at("sdb").path.serial, "1234");
}

TEST_F(SysfsTree, FallsBackToTheWwidAttributeWithoutVpdPages) {
  FakeSysfs fake(root_);
  fake.addSession({.target = "iqn.2003-01.org.example:t"});
  fake.addDisk({.wwid = "naa.6001405ABCDEF0000000000000000001"});
  const auto inventory = scan();
  EXPECT_EQ(inventory.paths.at("sdb").path.wwid, "36001405abcdef0000000000000000001");
  EXPECT_TRUE(inventory.paths.at("sdb").complete()) << allProblems(inventory);
}

TEST_F(SysfsTree, AMalformedPage83IsAProblemNotAFallback) {
  FakeSysfs fake(root_);
  fake.addSession({.target = "iqn.2003-01.org.example:t"});
  fake.addDisk({.pg83 = Bytes{0, 0x83, 0, 40, 1, 3}, .wwid = "naa.6001405abc"});
  const auto inventory = scan();
  const auto &path = inventory.paths.at("sdb");
  EXPECT_EQ(path.path.wwid, "");
  ASSERT_FALSE(path.complete());
  EXPECT_NE(path.problems.front().find("vpd_pg83"), std::string::npos);
  const auto plan = selector::planMaps(inventory.plannerPaths(), selector::builtinConfig());
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].device, "sdb");
}

TEST_F(SysfsTree, WithoutAnyIdentityThePathIsIncomplete) {
  FakeSysfs fake(root_);
  fake.addSession({.target = "iqn.2003-01.org.example:t"});
  fake.addDisk({});
  const auto path = scan().paths.at("sdb");
  ASSERT_EQ(path.problems.size(), 1U);
  EXPECT_NE(path.problems[0].find("no WWID"), std::string::npos) << path.problems[0];
}

TEST_F(SysfsTree, ADeviceThatVanishedIsARemovedPathWithAReason) {
  buildXserve();
  // What a scan sees when the kernel deleted the device between listing
  // block/ and reading it: the link still there, its target gone.
  fs::remove_all(root_ / "devices/platform/host3/session2/target3:0:0");
  const auto inventory = scan();
  ASSERT_EQ(inventory.paths.size(), 4U);
  const auto &sdb = inventory.paths.at("sdb");
  EXPECT_EQ(sdb.path.state, PathState::Removed);
  ASSERT_EQ(sdb.problems.size(), 1U);
  EXPECT_NE(sdb.problems[0].find("vanished"), std::string::npos) << sdb.problems[0];
  EXPECT_EQ(sdb.path.sessionId, 2);

  const auto plan = selector::planMaps(inventory.plannerPaths(), xserveConfig());
  ASSERT_EQ(plan.maps.size(), 2U);
  EXPECT_EQ(plan.maps[1].spec.groups[0].paths.size(), 1U);
  ASSERT_EQ(plan.skipped.size(), 1U);
  EXPECT_EQ(plan.skipped[0].reason, "device was removed");
}

TEST_F(SysfsTree, AnUnreadableAttributeIsAProblemNotACrash) {
  FakeSysfs fake(root_);
  fake.addSession({.target = "iqn.2003-01.org.example:t"});
  const auto dir = fake.addDisk({.pg83 = page83(kUpperNaa)});
  // A directory in place of the attribute: read() fails with EISDIR, as an
  // attribute whose show() fails would with EIO.
  fs::remove(dir / "vendor");
  fs::create_directory(dir / "vendor");
  const auto path = scan().paths.at("sdb");
  ASSERT_EQ(path.problems.size(), 1U);
  EXPECT_NE(path.problems[0].find("vendor: unreadable"), std::string::npos) << path.problems[0];
  EXPECT_EQ(path.path.wwid, "3" + std::string(kUpperNaa)) << "the rest was still read";
}

TEST_F(SysfsTree, APathWhoseSessionIsGoneIsDownWithAReason) {
  FakeSysfs fake(root_);
  fake.addSession({.target = "iqn.2003-01.org.example:t"});
  fake.addDisk({.pg83 = page83(kUpperNaa)});
  fs::remove(root_ / "class/iscsi_session/session1");
  const auto path = scan().paths.at("sdb");
  EXPECT_EQ(path.path.state, PathState::Down);
  EXPECT_EQ(path.problems, std::vector<std::string>{"session1 is gone"});
}

TEST_F(SysfsTree, IgnoresDisksThatAreNotBehindAnIscsiSession) {
  buildXserve();
  FakeSysfs(root_).addSataDisk("sde");
  const auto inventory = scan();
  EXPECT_EQ(inventory.paths.size(), 4U);
  EXPECT_FALSE(inventory.paths.contains("sde"));
  ASSERT_TRUE(inventory.ignored.contains("sde"));
  EXPECT_NE(inventory.ignored.at("sde").find("not behind an iSCSI session"), std::string::npos);
}

TEST_F(SysfsTree, ADuplicateWwidAcrossControllersIsRefusedByThePlanner) {
  FakeSysfs fake(root_);
  // Two controllers (distinct MDS pWWNs) whose LUNs share one identifier, as
  // LIO gives two backstores whose serials have the same hex digits.
  fake.addSession({.id = 1, .host = 2, .target = std::string(kUpperIqn20)});
  fake.addSession({.id = 2, .host = 3, .target = std::string(kLowerIqn20)});
  fake.addDisk({.host = 2, .session = 1, .name = "sda", .dev = "8:0", .pg83 = page83(kUpperNaa)});
  fake.addDisk({.host = 3, .session = 2, .name = "sdb", .dev = "8:16", .pg83 = page83(kUpperNaa)});
  const auto inventory = scan();
  EXPECT_EQ(allProblems(inventory), "");
  const auto plan = selector::planMaps(inventory.plannerPaths(), selector::builtinConfig());
  EXPECT_TRUE(plan.maps.empty());
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("5000393000a1b001 and 5000393000a1b002"), std::string::npos)
      << plan.warnings[0];
  EXPECT_EQ(plan.skipped.size(), 2U);
}

TEST_F(SysfsTree, PlannerPathsComeInTheKernelsDeviceOrder) {
  FakeSysfs fake(root_);
  fake.addSession({.id = 1, .host = 2, .target = "iqn.2003-01.org.example:a"});
  fake.addSession({.id = 2, .host = 3, .target = "iqn.2003-01.org.example:b"});
  fake.addDisk(
      {.host = 2, .session = 1, .name = "sdaa", .dev = "65:160", .pg83 = page83(kUpperNaa)});
  fake.addDisk({.host = 3, .session = 2, .name = "sdb", .dev = "8:16", .pg83 = page83(kUpperNaa)});
  const auto paths = scan().plannerPaths();
  ASSERT_EQ(paths.size(), 2U);
  EXPECT_EQ(paths[0].device, "sdb");
  EXPECT_EQ(paths[1].device, "sdaa");
}

TEST_F(SysfsTree, AMissingRootIsAnError) {
  auto inventory = SysfsInventory(root_ / "nope").scan();
  ASSERT_FALSE(inventory.has_value());
  EXPECT_NE(inventory.error().find("nope"), std::string::npos);
}

TEST_F(SysfsTree, AnEmptyRootIsAnEmptyInventory) {
  const auto inventory = scan();
  EXPECT_TRUE(inventory.paths.empty());
  EXPECT_TRUE(inventory.sessions.empty());
}

TEST_F(SysfsTree, ManyDisksReadOnSeveralThreadsMatchTheDisksReadOneByOne) {
  // Enough disks that a scan shares them among threads (with 2 or more
  // CPUs); the same disks announced one by one go through the single read
  // of an event, and both must give the same inventory.
  FakeSysfs fake(root_);
  fake.addSession({.id = 1, .host = 2, .target = std::string(kUpperIqn20)});
  const Inventory before = scan();
  constexpr int kDisks = 300;
  std::vector<std::string> devpaths;
  for (int lun = 0; lun < kDisks; ++lun) {
    // sda..sdz, sdaa..: the kernel's names; LUN-specific NAA identities.
    std::string name = "sd";
    if (lun >= 26) {
      name += static_cast<char>('a' + lun / 26 - 1);
    }
    name += static_cast<char>('a' + lun % 26);
    const std::string naa = fmt::format("6001405{:025x}", lun + 1);
    const auto dir = fake.addDisk({.host = 2,
                                   .session = 1,
                                   .lun = lun,
                                   .name = name,
                                   .dev = fmt::format("65:{}", lun),
                                   .pg83 = page83(naa),
                                   .wwid = "naa." + naa});
    devpaths.push_back("/" + dir.lexically_relative(root_).string() + "/block/" + name);
  }

  const Inventory scanned = scan();
  ASSERT_EQ(scanned.paths.size(), static_cast<std::size_t>(kDisks)) << allProblems(scanned);
  EXPECT_EQ(allProblems(scanned), "");
  EXPECT_EQ(scanned.paths.at("sda").path.wwid, "36001405" + fmt::format("{:025x}", 1));
  EXPECT_EQ(scanned.paths.at("sdkn").path.wwid, "36001405" + fmt::format("{:025x}", kDisks));

  Inventory oneByOne = before;
  for (const auto &devpath : devpaths) {
    SysfsInventory(root_).apply(oneByOne, {UdevEvent::Action::Add, "block", devpath});
  }
  EXPECT_EQ(oneByOne, scanned);
}

// --- incremental updates ---------------------------------------------------

class SysfsUpdates : public SysfsTree {
protected:
  void SetUp() override {
    SysfsTree::SetUp();
    buildXserve();
    inventory_ = scan();
  }

  std::vector<std::string> apply(UdevEvent::Action action, std::string subsystem,
                                 std::string devpath) {
    return SysfsInventory(root_).apply(inventory_,
                                       {action, std::move(subsystem), std::move(devpath)});
  }

  Inventory inventory_;
};

constexpr std::string_view kSdbDevpath =
    "/devices/platform/host3/session2/target3:0:0/3:0:0:0/block/sdb";

TEST_F(SysfsUpdates, RemovingAndAddingADeviceMatchesAFreshScan) {
  const auto saved = root_.parent_path() / (root_.filename().string() + "-saved");
  fs::remove_all(saved);
  fs::copy(root_ / "devices/platform/host3/session2/target3:0:0", saved,
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);

  fs::remove_all(root_ / "devices/platform/host3/session2/target3:0:0");
  fs::remove(root_ / "block/sdb");
  fs::remove(root_ / "class/scsi_device/3:0:0:0");
  EXPECT_EQ(apply(UdevEvent::Action::Remove, "block", std::string(kSdbDevpath)),
            std::vector<std::string>{"sdb"});
  apply(UdevEvent::Action::Remove, "scsi_device",
        "/devices/platform/host3/session2/target3:0:0/3:0:0:0/scsi_device/3:0:0:0");
  EXPECT_FALSE(inventory_.paths.contains("sdb"));
  EXPECT_EQ(inventory_, scan());

  fs::copy(saved, root_ / "devices/platform/host3/session2/target3:0:0",
           fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove_all(saved);
  link(root_ / "block/sdb", "../devices/platform/host3/session2/target3:0:0/3:0:0:0/block/sdb");
  // The kernel announces the SCSI device first, then its disk.
  apply(UdevEvent::Action::Add, "scsi", "/devices/platform/host3/session2/target3:0:0/3:0:0:0");
  EXPECT_EQ(apply(UdevEvent::Action::Add, "block", std::string(kSdbDevpath)),
            std::vector<std::string>{});
  EXPECT_TRUE(inventory_.paths.contains("sdb"));
  EXPECT_EQ(inventory_, scan());
}

TEST_F(SysfsUpdates, ASessionStateChangeReReadsTheSessionAndItsDevices) {
  const auto session = root_ / "devices/platform/host3/session2/iscsi_session/session2";
  writeFile(session / "state", "FAILED\n");
  writeFile(root_ / "devices/platform/host3/session2/target3:0:0/3:0:0:0/state", "blocked\n");
  EXPECT_EQ(apply(UdevEvent::Action::Change, "iscsi_session",
                  "/devices/platform/host3/session2/iscsi_session/session2"),
            std::vector<std::string>{"sdb"});
  EXPECT_EQ(inventory_.paths.at("sdb").path.state, PathState::Down);
  EXPECT_EQ(inventory_.disks.at("sdb").state, "blocked");
  EXPECT_EQ(inventory_, scan());
}

TEST_F(SysfsUpdates, AConnectionChangeUpdatesThePortal) {
  writeFile(root_ / "devices/platform/host3/session2/connection2:0/iscsi_connection/connection2:0/"
                    "persistent_address",
            "10.10.1.22\n");
  EXPECT_EQ(apply(UdevEvent::Action::Change, "iscsi_connection",
                  "/devices/platform/host3/session2/connection2:0/iscsi_connection/connection2:0"),
            std::vector<std::string>{"sdb"});
  EXPECT_EQ(inventory_.paths.at("sdb").path.portal.address, "10.10.1.22");
  EXPECT_EQ(inventory_, scan());
}

TEST_F(SysfsUpdates, AnAluaChangeOnTheScsiDeviceIsReRead) {
  const auto dir = root_ / "devices/platform/host3/session2/target3:0:0/3:0:0:0";
  writeFile(dir / "access_state", "standby\n");
  EXPECT_EQ(apply(UdevEvent::Action::Change, "scsi_device",
                  "/devices/platform/host3/session2/target3:0:0/3:0:0:0/scsi_device/3:0:0:0"),
            std::vector<std::string>{"sdb"});
  EXPECT_EQ(inventory_.paths.at("sdb").path.alua, AluaState::Standby);
  EXPECT_EQ(inventory_, scan());
}

TEST_F(SysfsUpdates, RemovingASessionWithItsHostAndDeviceMatchesAFreshScan) {
  fs::remove_all(root_ / "devices/platform/host3");
  for (const auto *entry : {"class/iscsi_session/session2", "class/iscsi_connection/connection2:0",
                            "class/iscsi_host/host3", "block/sdb", "class/scsi_device/3:0:0:0"}) {
    fs::remove(root_ / entry);
  }
  // In the kernel's order: the disk, the connection, then the session.
  apply(UdevEvent::Action::Remove, "block", std::string(kSdbDevpath));
  apply(UdevEvent::Action::Remove, "iscsi_connection",
        "/devices/platform/host3/session2/connection2:0/iscsi_connection/connection2:0");
  apply(UdevEvent::Action::Remove, "iscsi_session",
        "/devices/platform/host3/session2/iscsi_session/session2");
  EXPECT_FALSE(inventory_.sessions.contains("session2"));
  EXPECT_FALSE(inventory_.hosts.contains("host3"));
  EXPECT_EQ(inventory_, scan());
}

TEST_F(SysfsUpdates, ARemoveEventWinsOverADirectoryThatIsStillThere) {
  // The kernel sends the event before it deletes the directory.
  EXPECT_EQ(apply(UdevEvent::Action::Remove, "block", std::string(kSdbDevpath)),
            std::vector<std::string>{"sdb"});
  EXPECT_FALSE(inventory_.paths.contains("sdb"));
}

TEST_F(SysfsUpdates, PartitionsAndUnrelatedSubsystemsChangeNothing) {
  const auto before = inventory_;
  EXPECT_TRUE(apply(UdevEvent::Action::Add, "block", std::string(kSdbDevpath) + "/sdb1").empty());
  EXPECT_TRUE(apply(UdevEvent::Action::Change, "net", "/devices/virtual/net/eth1").empty());
  EXPECT_TRUE(apply(UdevEvent::Action::Change, "block", "/devices/virtual/block/dm-0").empty());
  EXPECT_EQ(inventory_, before);
}

TEST_F(SysfsUpdates, DevpathOfResolvesAClassLinkBelowTheRoot) {
  EXPECT_EQ(SysfsInventory(root_).devpathOf("block/sdb"), kSdbDevpath);
  EXPECT_EQ(SysfsInventory(root_ / "").devpathOf("class/iscsi_session/session2"),
            "/devices/platform/host3/session2/iscsi_session/session2");
  EXPECT_EQ(SysfsInventory(root_).devpathOf("block/nope"), "");
}

// --- the VM lab's captured trees (tests/data/sysfs/README.md) ---------------

/// The committed capture, or nullopt while the lab has not produced it.
std::optional<fs::path> capturedTree(std::string_view scenario) {
  auto dir = fs::path(PATHKEEPER_SOURCE_DIR) / "tests/data/sysfs" / scenario;
  if (!fs::is_directory(dir / "class/iscsi_session")) {
    return std::nullopt;
  }
  return dir;
}

#define PK_CAPTURE_OR_SKIP(var, scenario)                                                          \
  const auto var = capturedTree(scenario);                                                         \
  if (!(var)) {                                                                                    \
    GTEST_SKIP() << "no capture of the '" << (scenario) << "' lab scenario in tests/data/sysfs";   \
  }

Inventory scanTree(const fs::path &tree) {
  auto inventory = SysfsInventory(tree).scan();
  EXPECT_TRUE(inventory.has_value()) << inventory.error();
  return inventory ? *inventory : Inventory{};
}

std::set<std::string> distinct(const Inventory &inventory,
                               const std::function<std::string(const selector::Path &)> &field) {
  std::set<std::string> out;
  for (const auto &[name, path] : inventory.paths) {
    out.insert(field(path.path));
  }
  return out;
}

TEST(SysfsCapture, XserveHasFourCompletePathsToTwoLuns) {
  PK_CAPTURE_OR_SKIP(tree, "xserve");
  const auto inventory = scanTree(*tree);
  EXPECT_EQ(allProblems(inventory), "");
  ASSERT_EQ(inventory.paths.size(), 4U);
  EXPECT_TRUE(inventory.ignored.empty());
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.wwid; }).size(), 2U);
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.targetIqn; }).size(), 4U)
      << "the MDS names each portal's target on its own";
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return std::string(toString(p.state)); }),
            std::set<std::string>{"up"});
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.iface + "/" + p.netdev; }),
            (std::set<std::string>{"iface0/eth1", "iface1/eth2"}));
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.vendor + "/" + p.product; }),
            std::set<std::string>{"APPLE/Xserve RAID"});
  for (const auto &[name, path] : inventory.paths) {
    // iface0 is bound to eth1 and logs in to portal .20; iface1 to .21.
    EXPECT_EQ(path.path.portal.address, path.path.iface == "iface0" ? "10.10.1.20" : "10.10.1.21")
        << name;
    EXPECT_NE(path.path.devt, selector::DevT{}) << name;
    EXPECT_EQ(path.path.sizeSectors, 524288U) << name;
    EXPECT_FALSE(path.path.serial.empty()) << name;
    // LIO offers implicit ALUA even for the Xserve's LUNs, so the kernel
    // attaches scsi_dh_alua; the built-in Xserve entry leaves the handler to
    // detection, and the plan says so (a real Xserve reports no ALUA).
    EXPECT_EQ(path.path.alua, AluaState::ActiveOptimized) << name;
  }
}

TEST(SysfsCapture, XserveControllersComeFromThePwwnWithOrWithoutRules) {
  PK_CAPTURE_OR_SKIP(tree, "xserve");
  const auto paths = scanTree(*tree).plannerPaths();
  const auto withoutRules = selector::planMaps(paths, selector::builtinConfig());
  ASSERT_EQ(withoutRules.maps.size(), 2U);
  EXPECT_TRUE(withoutRules.warnings.empty());
  std::set<std::string> controllers;
  for (const auto &map : withoutRules.maps) {
    controllers.insert(map.controller);
    ASSERT_EQ(map.spec.groups.size(), 1U) << "Xserve RAID is multibus";
    EXPECT_EQ(map.spec.groups[0].paths.size(), 2U);
    EXPECT_EQ(map.spec.hwHandler, "alua") << "the captured paths report ALUA";
  }
  EXPECT_EQ(controllers, (std::set<std::string>{"5000393000a1b001", "5000393000a1b002"}));

  auto config = loadConfig(fs::path(PATHKEEPER_SOURCE_DIR) / "tests/data/config/xserve.conf",
                           "/nonexistent/pathkeeper.conf.d");
  ASSERT_TRUE(config.has_value()) << config.error();
  const auto withRules = selector::planMaps(paths, *config);
  ASSERT_EQ(withRules.maps.size(), 2U);
  EXPECT_EQ(withRules.maps[0].spec.alias, "xserve-lower");
  EXPECT_EQ(withRules.maps[1].spec.alias, "xserve-upper");
}

TEST(SysfsCapture, XserveFailedHasTheEth1PathsDown) {
  PK_CAPTURE_OR_SKIP(tree, "xserve-failed");
  const auto inventory = scanTree(*tree);
  EXPECT_EQ(allProblems(inventory), "") << "a FAILED session's unreadable address is no problem";
  ASSERT_EQ(inventory.paths.size(), 4U);
  for (const auto &[name, path] : inventory.paths) {
    const bool cut = path.path.netdev == "eth1";
    EXPECT_EQ(path.path.state, cut ? PathState::Down : PathState::Up) << name;
    EXPECT_EQ(inventory.disks.at(name).state, cut ? "blocked" : "running") << name;
    EXPECT_EQ(inventory.sessions.at("session" + std::to_string(path.path.sessionId)).state,
              cut ? "FAILED" : "LOGGED_IN")
        << name;
    EXPECT_EQ(path.path.portal.address, cut ? "10.10.1.20" : "10.10.1.21") << name;
  }
}

TEST(SysfsCapture, BondedHasFourPathsThroughBond0) {
  PK_CAPTURE_OR_SKIP(tree, "bonded");
  const auto inventory = scanTree(*tree);
  EXPECT_EQ(allProblems(inventory), "");
  ASSERT_EQ(inventory.paths.size(), 4U);
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.iface + "/" + p.netdev; }),
            std::set<std::string>{"iface0/bond0"});
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.portal.address; }),
            (std::set<std::string>{"10.10.1.20", "10.10.1.21"}));
  const auto plan = selector::planMaps(inventory.plannerPaths(), selector::builtinConfig());
  EXPECT_EQ(plan.maps.size(), 2U);
  EXPECT_TRUE(plan.warnings.empty());
}

TEST(SysfsCapture, AluaHasTwoGroupsPerLunWithTheOptimizedOneFirst) {
  PK_CAPTURE_OR_SKIP(tree, "alua");
  const auto inventory = scanTree(*tree);
  EXPECT_EQ(allProblems(inventory), "");
  ASSERT_EQ(inventory.paths.size(), 8U);
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return p.wwid; }).size(), 2U);
  EXPECT_EQ(distinct(inventory,
                     [](const auto &p) {
                       return p.targetPortGroup ? std::to_string(*p.targetPortGroup) : "none";
                     }),
            (std::set<std::string>{"1", "2"}));
  EXPECT_EQ(distinct(inventory, [](const auto &p) { return std::string(toString(p.alua)); }),
            (std::set<std::string>{std::string(toString(AluaState::ActiveOptimized)),
                                   std::string(toString(AluaState::ActiveNonOptimized))}));
  const auto plan = selector::planMaps(inventory.plannerPaths(), selector::builtinConfig());
  EXPECT_TRUE(plan.warnings.empty()) << plan.warnings.front();
  ASSERT_EQ(plan.maps.size(), 2U);
  for (const auto &map : plan.maps) {
    EXPECT_EQ(map.spec.hwHandler, "alua") << map.spec.alias;
    ASSERT_EQ(map.spec.groups.size(), 2U) << map.spec.alias;
    for (const auto &path : map.spec.groups[0].paths) {
      EXPECT_EQ(path.alua, AluaState::ActiveOptimized) << map.spec.alias << " " << path.device;
    }
  }
}

/// A captured tree copied to a temporary directory, for tests that change it.
class SysfsCaptureCopy : public SysfsTree {
protected:
  bool copyCapture(std::string_view scenario) {
    auto tree = capturedTree(scenario);
    if (!tree) {
      return false;
    }
    fs::copy(*tree, root_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    return true;
  }

  fs::path diskDir(const std::string &disk) const {
    auto target = fs::read_symlink(root_ / "block" / disk);
    return (root_ / "block" / target).lexically_normal().parent_path().parent_path();
  }
};

TEST_F(SysfsCaptureCopy, XserveRescanAndEventsAgree) {
  if (!copyCapture("xserve")) {
    GTEST_SKIP() << "no capture of the 'xserve' lab scenario in tests/data/sysfs";
  }
  auto inventory = scan();
  const SysfsInventory sysfs(root_);
  const auto devpath = sysfs.devpathOf("block/sdb");
  const auto device = diskDir("sdb");
  const auto saved = root_.parent_path() / (root_.filename().string() + "-saved");
  fs::remove_all(saved);
  fs::copy(device, saved, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  const auto linkText = fs::read_symlink(root_ / "block/sdb");

  fs::remove_all(device);
  fs::remove(root_ / "block/sdb");
  EXPECT_EQ(sysfs.apply(inventory, {UdevEvent::Action::Remove, "block", devpath}),
            std::vector<std::string>{"sdb"});
  EXPECT_EQ(inventory, scan());

  fs::copy(saved, device, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  fs::remove_all(saved);
  fs::create_symlink(linkText, root_ / "block/sdb");
  EXPECT_EQ(sysfs.apply(inventory, {UdevEvent::Action::Add, "block", devpath}),
            std::vector<std::string>{"sdb"});
  EXPECT_EQ(inventory, scan());

  // eth1 cut: its sessions go FAILED and the kernel blocks their devices.
  const auto sessionDevpath = sysfs.devpathOf("class/iscsi_session/session1");
  writeFile(root_ / fs::path(sessionDevpath).relative_path() / "state", "FAILED\n");
  writeFile(diskDir("sda") / "state", "blocked\n");
  EXPECT_EQ(sysfs.apply(inventory, {UdevEvent::Action::Change, "iscsi_session", sessionDevpath}),
            std::vector<std::string>{"sda"});
  EXPECT_EQ(inventory.paths.at("sda").path.state, PathState::Down);
  EXPECT_EQ(inventory, scan());
}

TEST_F(SysfsCaptureCopy, XserveWithADuplicateWwidAcrossControllersIsFlagged) {
  if (!copyCapture("xserve")) {
    GTEST_SKIP() << "no capture of the 'xserve' lab scenario in tests/data/sysfs";
  }
  // The lower controller's LUN answers with the upper one's identity, as two
  // LIO backstores whose serials share their hex digits would.
  for (const auto *disk : {"sdc", "sdd"}) {
    fs::copy_file(diskDir("sda") / "vpd_pg83", diskDir(disk) / "vpd_pg83",
                  fs::copy_options::overwrite_existing);
  }
  FakeSysfs(root_).addSataDisk("sde");
  const auto inventory = scan();
  EXPECT_EQ(allProblems(inventory), "");
  EXPECT_TRUE(inventory.ignored.contains("sde"));
  const auto plan = selector::planMaps(inventory.plannerPaths(), selector::builtinConfig());
  EXPECT_TRUE(plan.maps.empty());
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("5000393000a1b001 and 5000393000a1b002"), std::string::npos)
      << plan.warnings[0];
  EXPECT_EQ(plan.skipped.size(), 4U);
}

} // namespace
} // namespace pathkeeper::daemon
