// The D-Bus layer against a real private dbus-daemon whose configuration is
// like the system bus (default deny) with our policy file included. A test
// server (pathkeeper_dbus_test_server) stands in for pathkeeperd with the real
// publisher, authorizer and sd-event attachment; busctl, dbus-send, the
// generated proxies and pathkeeperctl talk to it as root and as nobody.
// Skips, with the reason, without root or without dbus-daemon.

#include "bus_names.hpp"
#include "dbus_client.hpp"
#include "sample_state.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sdbus-c++/sdbus-c++.h>

namespace pathkeeper::dbus {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> asNobody() {
  return {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
}

std::vector<char *> argvOf(std::vector<std::string> &args) {
  std::vector<char *> argv;
  argv.reserve(args.size() + 1);
  for (auto &arg : args) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);
  return argv;
}

std::string slurp(const fs::path &file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs a command to completion, its output in files (no pipe can fill up).
RunResult run(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
  static int counter = 0;
  const fs::path dir = fs::temp_directory_path();
  const fs::path out =
      dir / ("pk-dbus-run-" + std::to_string(getpid()) + "-" + std::to_string(++counter));
  const fs::path err = fs::path(out.string() + ".err");
  auto argv = argvOf(args);
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(o, 1);
    dup2(e, 2);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  RunResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << args[0] << " did not finish in " << timeout.count() << " s";
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = slurp(out);
  result.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return result;
}

// A long-lived child: lines to its stdin, lines from its stdout and stderr.
class Process {
public:
  explicit Process(std::vector<std::string> args, bool worldWritableFiles = false) {
    int in[2];
    int out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    auto argv = argvOf(args);
    pid_ = fork();
    if (pid_ == 0) {
      if (worldWritableFiles) {
        umask(0); // the bus socket must be usable by nobody
      }
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(out[1], 2);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  ~Process() { stop(); }
  Process(const Process &) = delete;
  Process &operator=(const Process &) = delete;

  void send(const std::string &line) {
    const std::string text = line + "\n";
    ASSERT_EQ(write(stdin_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  std::optional<std::string> readLine(std::chrono::milliseconds timeout = 30000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      if (auto eol = buffer_.find('\n'); eol != std::string::npos) {
        std::string line = buffer_.substr(0, eol);
        buffer_.erase(0, eol + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return std::nullopt;
      }
      pollfd fd{stdout_, POLLIN, 0};
      if (poll(&fd, 1, static_cast<int>(left.count())) <= 0) {
        continue;
      }
      char chunk[4096];
      const ssize_t n = read(stdout_, chunk, sizeof chunk);
      if (n <= 0) {
        return std::nullopt;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // Lines until one equal to @p end (not included); nullopt on timeout.
  std::optional<std::vector<std::string>> readUntil(const std::string &end) {
    std::vector<std::string> lines;
    while (auto line = readLine()) {
      if (*line == end) {
        return lines;
      }
      lines.push_back(*line);
    }
    return std::nullopt;
  }

  int wait(std::chrono::seconds timeout = 30s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        return -1;
      }
      std::this_thread::sleep_for(10ms);
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  [[nodiscard]] pid_t pid() const { return pid_; }

  void stop() {
    if (stdin_ >= 0) {
      close(stdin_);
      stdin_ = -1;
    }
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (stdout_ >= 0) {
      close(stdout_);
      stdout_ = -1;
    }
  }

private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  std::string buffer_;
};

std::string busConfig(const fs::path &socket) {
  // The system bus's default policy (Debian's system.conf), minus activation,
  // plus our policy file, and polkitd's for the test that starts one.
  return R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=)" +
         socket.string() + R"(</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  <include>)" PK_DBUS_POLICY R"(</include>
  <include ignore_missing="yes">/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf</include>
</busconfig>
)";
}

// What the suite set up once: the bus, or why the tests skip.
struct SuiteState {
  std::string skipReason;
  std::string setupError;
  fs::path dir;
  Process *bus = nullptr;
};

SuiteState &suite() {
  static SuiteState state;
  return state;
}

class DbusHost : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      suite().skipReason = "needs root: the bus policy under test lets only root own the name, and "
                           "the unprivileged caller is made with setpriv";
      return;
    }
    for (const char *tool :
         {"/usr/bin/dbus-daemon", "/usr/bin/busctl", "/usr/bin/dbus-send", "/usr/bin/setpriv"}) {
      if (access(tool, X_OK) != 0) {
        suite().skipReason = std::string(tool) +
                             " is missing (Debian packages dbus-daemon, systemd, "
                             "dbus-bin, util-linux)";
        return;
      }
    }
    char dirTemplate[] = "/tmp/pk-dbus-XXXXXX";
    if (mkdtemp(dirTemplate) == nullptr) {
      suite().skipReason = "mkdtemp failed";
      return;
    }
    suite().dir = dirTemplate;
    fs::permissions(suite().dir, fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    std::ofstream(suite().dir / "bus.conf") << busConfig(suite().dir / "bus.socket");
    suite().bus = new Process({"dbus-daemon", "--nofork", "--print-address",
                               "--config-file=" + (suite().dir / "bus.conf").string()},
                              true);
    auto address = suite().bus->readLine(10000ms);
    if (!address || !address->starts_with("unix:")) {
      suite().setupError = "dbus-daemon did not start: " + address.value_or("(no output)");
      return;
    }
    setenv("DBUS_SYSTEM_BUS_ADDRESS", address->c_str(), 1);
  }

  static void TearDownTestSuite() {
    delete suite().bus;
    suite().bus = nullptr;
    if (!suite().dir.empty()) {
      fs::remove_all(suite().dir);
    }
  }

  void SetUp() override {
    if (!suite().skipReason.empty()) {
      GTEST_SKIP() << suite().skipReason;
    }
    ASSERT_EQ(suite().setupError, "");
  }

  void startServer() {
    server_ = std::make_unique<Process>(std::vector<std::string>{PK_DBUS_TEST_SERVER});
    auto ready = server_->readLine();
    ASSERT_EQ(ready.value_or("(nothing)"), "ready");
  }

  std::vector<std::string> server(const std::string &command) {
    server_->send(command);
    auto lines = server_->readUntil("ok");
    EXPECT_TRUE(lines) << "the test server did not answer " << command;
    return lines.value_or(std::vector<std::string>{});
  }

  // A client on a connection of its own that records every change the
  // daemon announces once this returns.
  struct ChangeWatch {
    std::unique_ptr<sdbus::IConnection> connection = sdbus::createSystemBusConnection();
    ctl::DaemonClient client{*connection};
    std::vector<ctl::BusChange> changes;
  };
  static std::unique_ptr<ChangeWatch> watchChanges() {
    auto watch = std::make_unique<ChangeWatch>();
    watch->client.watch(
        [changes = &watch->changes](const ctl::BusChange &change) { changes->push_back(change); });
    static_cast<void>(watch->client.snapshot()); // the matches are installed once this answers
    return watch;
  }

  std::string serverCalls() {
    auto lines = server("calls");
    return lines.empty() ? "" : lines.back();
  }

  static RunResult ctl(std::vector<std::string> args, bool nobody = false) {
    std::vector<std::string> command = nobody ? asNobody() : std::vector<std::string>{};
    command.emplace_back(PK_PATHKEEPERCTL);
    command.insert(command.end(), args.begin(), args.end());
    return run(command);
  }

  static RunResult busctl(std::vector<std::string> args, bool nobody = false) {
    std::vector<std::string> command = nobody ? asNobody() : std::vector<std::string>{};
    command.emplace_back("busctl");
    command.emplace_back("--system");
    command.insert(command.end(), args.begin(), args.end());
    return run(command);
  }

  static RunResult dbusSend(const std::string &method, std::vector<std::string> args, bool nobody) {
    std::vector<std::string> command = nobody ? asNobody() : std::vector<std::string>{};
    for (const char *part : {"dbus-send", "--system", "--print-reply",
                             "--dest=org.pathkeeper.PathKeeper1", "/org/pathkeeper/PathKeeper1"}) {
      command.emplace_back(part);
    }
    command.push_back(std::string(kManagerInterface) + "." + method);
    command.insert(command.end(), args.begin(), args.end());
    return run(command);
  }

  // Processes @p connection on this thread until @p done or 30 s pass.
  static bool pump(sdbus::IConnection &connection, const std::function<bool()> &done) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      while (connection.processPendingRequest()) {
      }
      if (done()) {
        break;
      }
      const auto data = connection.getEventLoopPollData();
      pollfd fd{data.fd, data.events, 0};
      poll(&fd, 1, 100);
    }
    return true;
  }

  std::unique_ptr<Process> server_;
};

// One XML tag: "<name a="1" b="2">", "</name>" or "<name ... />".
struct XmlTag {
  std::string name;
  std::map<std::string, std::string> attributes;
  bool closing = false;
  bool empty = false;
};

// The tags of @p xml in order, comments and declarations skipped. Enough for
// introspection XML; std::regex is avoided, GCC 12 warns inside it (-Werror).
std::vector<XmlTag> tagsOf(const std::string &xml) {
  std::vector<XmlTag> tags;
  std::size_t at = 0;
  while ((at = xml.find('<', at)) != std::string::npos) {
    if (xml.compare(at, 4, "<!--") == 0) {
      const auto end = xml.find("-->", at);
      at = end == std::string::npos ? xml.size() : end + 3;
      continue;
    }
    const auto end = xml.find('>', at);
    if (end == std::string::npos) {
      break;
    }
    std::string body = xml.substr(at + 1, end - at - 1);
    at = end + 1;
    if (body.empty() || body[0] == '!' || body[0] == '?') {
      continue;
    }
    XmlTag tag;
    tag.closing = body[0] == '/';
    if (tag.closing) {
      body.erase(0, 1);
    }
    tag.empty = !body.empty() && body.back() == '/';
    if (tag.empty) {
      body.pop_back();
    }
    const auto nameEnd = body.find_first_of(" \t\r\n");
    tag.name = body.substr(0, nameEnd);
    for (auto pos = body.find('='); pos != std::string::npos; pos = body.find('=', pos + 1)) {
      const auto keyStart = body.find_last_of(" \t\r\n", pos) + 1;
      const auto open = body.find('"', pos);
      const auto close = open == std::string::npos ? open : body.find('"', open + 1);
      if (close == std::string::npos) {
        break;
      }
      tag.attributes[body.substr(keyStart, pos - keyStart)] =
          body.substr(open + 1, close - open - 1);
      pos = close;
    }
    tags.push_back(std::move(tag));
  }
  return tags;
}

// Every member of every interface in introspection XML, as "Interface.Member"
// -> its kind, type or arguments and, for properties, access and the
// effective EmitsChangedSignal (the property's, else the interface's, else
// "true", as the D-Bus specification says). Elements with a namespace
// (doc:doc) are skipped, so the API reference and a served object compare.
std::map<std::string, std::string> membersOf(const std::string &xml) {
  std::map<std::string, std::string> members;
  std::string interface;
  std::string interfaceEmits = "true";
  std::string member; // "Interface.Member" while inside one
  std::map<std::string, std::string> property;
  for (auto &parsed : tagsOf(xml)) {
    const bool closing = parsed.closing;
    const bool empty = parsed.empty;
    const std::string &name = parsed.name;
    auto &attributes = parsed.attributes;
    if (name == "interface") {
      interface = closing ? "" : attributes["name"];
      interfaceEmits = "true";
    } else if (name == "annotation" &&
               attributes["name"] == "org.freedesktop.DBus.Property.EmitsChangedSignal") {
      (member.empty() ? interfaceEmits : property["emits"]) = attributes["value"];
    } else if ((name == "property" || name == "method" || name == "signal") && !closing) {
      member = interface + "." + attributes["name"];
      property = {{"kind", name}, {"type", attributes["type"]}, {"access", attributes["access"]}};
    } else if (name == "arg" && !closing && !member.empty()) {
      property["args"] += attributes["direction"] + ":" + attributes["type"] + " ";
    }
    if ((name == "property" || name == "method" || name == "signal") && (closing || empty)) {
      if (property["kind"] == "property" && !property.contains("emits")) {
        property["emits"] = interfaceEmits;
      }
      std::string description;
      for (const auto &[key, value] : property) {
        description += key + "=" + value + ";";
      }
      members[member] = description;
      member.clear();
    }
  }
  return members;
}

TEST_F(DbusHost, GeneratedProxyReadsTheWholeInventoryBack) {
  startServer();
  auto connection = sdbus::createSystemBusConnection();
  ctl::DaemonClient client(*connection);
  const auto snapshot = client.snapshot();
  EXPECT_EQ(snapshot, sample::sampleSnapshot());
}

// The Path and Map objects are served by hand-written sd-bus vtables (no
// adaptor per object, for memory); this holds them, and the generated Manager
// and Portal interfaces, to the XML reference: each member, its argument and
// property types, access and change signal (not argument names or other
// annotations). The sample state has no Finding object to read.
TEST_F(DbusHost, EveryServedInterfaceIsTheOneTheXmlDescribes) {
  startServer();
  std::ifstream file(PK_DBUS_XML);
  ASSERT_TRUE(file) << PK_DBUS_XML;
  const std::string reference{std::istreambuf_iterator<char>(file), {}};
  const auto expected = membersOf(reference);
  ASSERT_GT(expected.size(), 40U) << "the reference XML did not parse";

  const std::vector<std::pair<std::string, const char *>> objects = {
      {kRootPath, kManagerInterface},
      {objectPathOf(ObjectKind::Map, "xserve-lower"), kMapInterface},
      {objectPathOf(ObjectKind::Path, "sdb"), kPathInterface},
      {objectPathOf(ObjectKind::Portal, "10.10.1.20:3260"), kPortalInterface},
  };
  for (const auto &[path, interface] : objects) {
    auto served = busctl({"introspect", "--xml-interface", kBusName, path});
    ASSERT_EQ(served.status, 0) << path << ": " << served.err;
    std::map<std::string, std::string> want;
    std::map<std::string, std::string> got;
    const std::string prefix = std::string(interface) + ".";
    for (const auto &[name, description] : expected) {
      if (name.starts_with(prefix)) {
        want[name] = description;
      }
    }
    for (const auto &[name, description] : membersOf(served.out)) {
      if (name.starts_with(prefix)) {
        got[name] = description;
      }
    }
    EXPECT_FALSE(want.empty()) << interface;
    EXPECT_EQ(got, want) << path;
  }
}

TEST_F(DbusHost, BusctlReadsPropertiesTreeAndManagedObjects) {
  startServer();
  auto version = busctl({"get-property", kBusName, kRootPath, kManagerInterface, "Version"});
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_EQ(version.out, "s \"0.1.0-test\"\n");

  // The alias "1 mäp.x" escaped: '1' leading, ' ', 'ä' (two bytes) and '.'.
  const std::string oddMap = "/org/pathkeeper/PathKeeper1/maps/_31_20m_c3_a4p_2ex";
  auto alias = busctl({"get-property", kBusName, oddMap, kMapInterface, "Alias"});
  EXPECT_EQ(alias.status, 0) << alias.err;
  EXPECT_EQ(alias.out, "s \"1 m\\303\\244p.x\"\n"); // busctl prints bytes >= 0x80 in octal
  auto groups = busctl({"get-property", kBusName, objectPathOf(ObjectKind::Map, "xserve-lower"),
                        kMapInterface, "Groups"});
  EXPECT_EQ(groups.out, "a(uias) 2 1 50 1 \"sdd\" 2 10 1 \"sde\"\n");
  auto reach =
      busctl({"get-property", kBusName, objectPathOf(ObjectKind::Portal, "[fd00::21]:3261"),
              kPortalInterface, "Reachability"});
  EXPECT_EQ(reach.out, "a{ss} 1 \"\" \"unknown\"\n");

  auto tree = busctl({"tree", kBusName});
  EXPECT_EQ(tree.status, 0) << tree.err;
  EXPECT_THAT(tree.out, HasSubstr("/org/pathkeeper/PathKeeper1/paths/sdb"));
  EXPECT_THAT(tree.out, HasSubstr("/org/pathkeeper/PathKeeper1/portals/_310_2e10_2e1_2e20_3a3260"));

  auto introspect = busctl({"introspect", kBusName, kRootPath, kManagerInterface});
  EXPECT_THAT(introspect.out, HasSubstr(".SwitchGroup"));
  EXPECT_THAT(introspect.out, HasSubstr("su"));

  auto objects = busctl({"--json=short", "call", kBusName, kRootPath,
                         "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"});
  ASSERT_EQ(objects.status, 0) << objects.err;
  const auto json = nlohmann::json::parse(objects.out);
  const auto sample = sample::sampleSnapshot();
  EXPECT_EQ(json["data"][0].size(),
            sample.maps.size() + sample.paths.size() + sample.portals.size());
  EXPECT_EQ(
      json["data"][0]["/org/pathkeeper/PathKeeper1/paths/sdz"][kPathInterface]["Note"]["data"],
      "traffic bound to eth2 leaves via eth1");
}

TEST_F(DbusHost, ChangesArriveAsPropertiesChangedAndInterfacesAddedRemoved) {
  startServer();
  auto watch = watchChanges();
  auto &connection = watch->connection;
  auto &changes = watch->changes;

  server("set sdc down failed");
  auto has = [&](ctl::BusChange::Type type, const std::string &path,
                 const std::vector<std::string> &properties) {
    for (const auto &change : changes) {
      if (change.type != type || change.objectPath != path) {
        continue;
      }
      std::vector<std::string> names;
      for (const auto &[name, value] : change.properties) {
        names.push_back(name);
      }
      if (names == properties) {
        return true;
      }
    }
    return false;
  };
  using Type = ctl::BusChange::Type;
  const auto sdc = objectPathOf(ObjectKind::Path, "sdc");
  const auto upper = objectPathOf(ObjectKind::Map, "xserve-upper");
  EXPECT_TRUE(pump(*connection,
                   [&] {
                     return has(Type::PropertiesChanged, sdc, {"DmState", "State"}) &&
                            has(Type::PropertiesChanged, upper, {"State", "UsablePaths"}) &&
                            has(Type::PropertiesChanged, kRootPath, {"Status"});
                   }))
      << changes.size() << " changes seen";
  for (const auto &change : changes) {
    if (change.objectPath == sdc) {
      EXPECT_EQ(change.properties.at("State").get<std::string>(), "down");
      EXPECT_EQ(change.properties.at("DmState").get<std::string>(), "failed");
    }
  }
  EXPECT_EQ(changes.size(), 3U) << "only what changed is announced";

  changes.clear();
  // The signals themselves name every interface of the object, the
  // standard ones too, as GetManagedObjects lists them: a generic
  // ObjectManager client must see the whole object go.
  std::vector<std::string> removedInterfaces;
  auto removedMatch = connection->addMatch(std::string("type='signal',sender='") + kBusName +
                                               "',interface='org.freedesktop.DBus.ObjectManager',"
                                               "member='InterfacesRemoved'",
                                           [&](sdbus::Message &message) {
                                             sdbus::ObjectPath path;
                                             message >> path >> removedInterfaces;
                                           });
  server("remove-path sde");
  server("add-path sdy");
  const auto sde = objectPathOf(ObjectKind::Path, "sde");
  const auto sdy = objectPathOf(ObjectKind::Path, "sdy");
  EXPECT_TRUE(pump(*connection, [&] {
    return has(Type::Removed, sde, {}) && !changes.empty() && changes.back().objectPath == sdy &&
           !removedInterfaces.empty();
  }));
  EXPECT_THAT(removedInterfaces,
              ::testing::IsSupersetOf(
                  {std::string(kPathInterface), std::string("org.freedesktop.DBus.Properties")}));
  ASSERT_EQ(changes.size(), 2U);
  EXPECT_EQ(changes[1].type, Type::Added);
  EXPECT_EQ(changes[1].interface, kPathInterface);
  EXPECT_EQ(changes[1].properties.at("Device").get<std::string>(), "sdy");
  EXPECT_EQ(changes[1].properties.size(), 22U);
}

// One change the publisher cannot carry out (here, another object took the
// new portal's object path) must not cost the others: the new path and the
// Manager's Status are announced all the same, and the error says what was
// not.
TEST_F(DbusHost, AChangeThatCannotBeAnnouncedDoesNotHoldBackTheOthers) {
  startServer();
  auto watch = watchChanges();
  auto &connection = watch->connection;
  auto &changes = watch->changes;

  server("squat-portal 10.10.1.99");
  const auto reply = server("add-portal 10.10.1.99 sdm");
  const auto portal = objectPathOf(ObjectKind::Portal, "10.10.1.99:3260");
  const auto sdm = objectPathOf(ObjectKind::Path, "sdm");
  ASSERT_EQ(reply.size(), 1U);
  EXPECT_THAT(reply[0], ::testing::StartsWith("publish-error: 1 of 3 changes not announced, the "
                                              "first: " +
                                              portal + " added: "));
  using Type = ctl::BusChange::Type;
  const auto seen = [&](Type type, const std::string &path) {
    return std::ranges::any_of(changes, [&](const ctl::BusChange &change) {
      return change.type == type && change.objectPath == path;
    });
  };
  EXPECT_TRUE(
      pump(*connection,
           [&] { return seen(Type::Added, sdm) && seen(Type::PropertiesChanged, kRootPath); }))
      << changes.size() << " changes seen";
  EXPECT_FALSE(seen(Type::Added, portal));
  const auto sdmPortal = busctl({"get-property", kBusName, sdm, kPathInterface, "Portal"});
  EXPECT_EQ(sdmPortal.out, "s \"10.10.1.99:3260,1\"\n");
  const auto status = busctl({"get-property", kBusName, kRootPath, kManagerInterface, "Status"});
  EXPECT_THAT(status.out, ::testing::HasSubstr("3 maps, 7 paths, 4 portals"));
}

TEST_F(DbusHost, UnprivilegedCallerReadsEverythingAndIsRefusedEveryMethod) {
  startServer();
  auto version = busctl({"get-property", kBusName, kRootPath, kManagerInterface, "Status"}, true);
  EXPECT_EQ(version.status, 0) << version.err;
  EXPECT_EQ(version.out, "s \"3 maps, 6 paths, 0 degraded\"\n");
  auto objects = busctl({"--json=short", "call", kBusName, kRootPath,
                         "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"},
                        true);
  ASSERT_EQ(objects.status, 0) << objects.err;
  EXPECT_EQ(nlohmann::json::parse(objects.out)["data"][0].size(), 12U);
  auto status = ctl({"status", "--json"}, true);
  EXPECT_EQ(status.status, 0) << status.err;

  const std::vector<std::pair<std::string, std::vector<std::string>>> methods = {
      {"Reconfigure", {}},
      {"FailPath", {"string:sdb"}},
      {"ReinstatePath", {"string:sdb"}},
      {"SwitchGroup", {"string:xserve-lower", "uint32:2"}},
      {"DisableQueueing", {"string:xserve-lower"}},
      {"RestoreQueueing", {"string:xserve-lower"}},
      {"SetSelector", {"string:xserve-upper", "string:queue-length"}},
      {"Rescan", {}}};
  for (const auto &[method, args] : methods) {
    auto call = dbusSend(method, args, true);
    EXPECT_NE(call.status, 0) << method;
    EXPECT_THAT(call.err,
                HasSubstr("Error org.pathkeeper.PathKeeper1.Error.AccessDenied: " + method +
                          " needs root or the polkit action "
                          "org.pathkeeper.PathKeeper1.manage, and polkit is not running"))
        << method;
  }
  auto failPath = ctl({"fail-path", "sdb"}, true);
  EXPECT_EQ(failPath.status, 4);
  EXPECT_THAT(failPath.err, HasSubstr("pathkeeperctl: not allowed: FailPath needs root"));
  EXPECT_EQ(serverCalls(), "calls: ") << "no command may reach the daemon";
}

TEST_F(DbusHost, RootMayCallEveryMethodAndGetsNamedErrors) {
  startServer();
  for (const auto &[method, args] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"Reconfigure", {}},
           {"FailPath", {"string:sdb"}},
           {"ReinstatePath", {"string:sdb"}},
           {"SwitchGroup", {"string:xserve-lower", "uint32:2"}},
           {"DisableQueueing", {"string:xserve-lower"}},
           {"RestoreQueueing", {"string:xserve-lower"}},
           {"SetSelector", {"string:xserve-upper", "string:queue-length"}},
           {"Rescan", {}}}) {
    auto call = dbusSend(method, args, false);
    EXPECT_EQ(call.status, 0) << method << ": " << call.err;
  }
  EXPECT_EQ(serverCalls(), "calls: reconfigure; failPath sdb; reinstatePath sdb; switchGroup "
                           "xserve-lower 2; disableQueueing xserve-lower; restoreQueueing "
                           "xserve-lower; setSelector xserve-upper queue-length; rescan");
  auto noQueueingMap = dbusSend("DisableQueueing", {"string:nomap"}, false);
  EXPECT_THAT(noQueueingMap.err,
              HasSubstr("Error org.pathkeeper.PathKeeper1.Error.NotFound: no map named 'nomap'"));

  auto notFound = dbusSend("FailPath", {"string:sdx"}, false);
  EXPECT_THAT(notFound.err,
              HasSubstr("Error org.pathkeeper.PathKeeper1.Error.NotFound: no path 'sdx'"));
  auto noGroup = dbusSend("SwitchGroup", {"string:xserve-lower", "uint32:3"}, false);
  EXPECT_THAT(noGroup.err, HasSubstr("Error org.pathkeeper.PathKeeper1.Error.InvalidArgument: map "
                                     "'xserve-lower' has no group 3"));
  auto noMap = dbusSend("SetSelector", {"string:nomap", "string:round-robin"}, false);
  EXPECT_THAT(noMap.err,
              HasSubstr("Error org.pathkeeper.PathKeeper1.Error.NotFound: no map named 'nomap'"));
  auto badSelector = dbusSend("SetSelector", {"string:xserve-upper", "string:fastest"}, false);
  EXPECT_THAT(badSelector.err, HasSubstr("Error org.pathkeeper.PathKeeper1.Error.InvalidArgument: "
                                         "unknown path selector 'fastest'"));
  auto refused = dbusSend("FailPath", {"string:sdq"}, false);
  EXPECT_THAT(refused.err, HasSubstr("Error org.pathkeeper.PathKeeper1.Error.Failed: FailPath "
                                     "failed: the kernel refused fail_path on sdq"));
  EXPECT_THAT(serverCalls(), ::testing::EndsWith("; rescan; failPath sdq"))
      << "arguments that fail the checks never reach the daemon";
}

// Companion mode answers a method with multipathd's reply, later: the call
// stays open until then, and the caller gets multipathd's refusal.
TEST_F(DbusHost, AMethodWhoseAnswerComesLaterRepliesThen) {
  startServer();
  server("hold");
  auto call =
      std::async(std::launch::async, [] { return dbusSend("FailPath", {"string:sdb"}, false); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (serverCalls().find("failPath sdb") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_THAT(serverCalls(), HasSubstr("failPath sdb"));
  EXPECT_EQ(call.wait_for(200ms), std::future_status::timeout)
      << "the method replied before the answer came";
  server("answer multipathd: fail path sdb: multipathd refused the action (\"fail\")");
  const auto refused = call.get();
  EXPECT_THAT(refused.err, HasSubstr("Error org.pathkeeper.PathKeeper1.Error.Failed: FailPath "
                                     "failed: multipathd: fail path sdb: multipathd refused"));

  server("hold");
  auto again = std::async(std::launch::async,
                          [] { return dbusSend("ReinstatePath", {"string:sdb"}, false); });
  while (serverCalls().find("reinstatePath sdb") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  server("answer ok");
  const auto taken = again.get();
  EXPECT_EQ(taken.status, 0) << taken.err;
}

TEST_F(DbusHost, TwoThousandPathsGetManagedObjectsCompletesAndTheDaemonStaysResponsive) {
  startServer();
  server("paths 2000");
  auto connection = sdbus::createSystemBusConnection();
  ctl::DaemonClient client(*connection);
  const auto start = std::chrono::steady_clock::now();
  const auto objects = client.managedObjects();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::cout << "[ bench    ] GetManagedObjects with " << objects.size()
            << " objects: " << std::chrono::duration<double, std::milli>(elapsed).count()
            << " ms\n";
  EXPECT_EQ(objects.size(), 12U + 2000U);
  // The reply is several socket buffers long: it only arrives whole if the
  // server's loop watched POLLOUT. The next call must answer too.
  const auto again = std::chrono::steady_clock::now();
  const auto snapshot = client.snapshot();
  std::cout
      << "[ bench    ] the next call (Version, Mode, Status, GetManagedObjects): "
      << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - again).count()
      << " ms\n";
  EXPECT_EQ(snapshot.paths.size(), 2006U);
  EXPECT_EQ(snapshot.version, "0.1.0-test");
  auto busctlObjects = busctl({"--json=short", "call", kBusName, kRootPath,
                               "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"});
  ASSERT_EQ(busctlObjects.status, 0) << busctlObjects.err;
  EXPECT_EQ(nlohmann::json::parse(busctlObjects.out)["data"][0].size(), 2012U);
}

// sd-bus gives a root peer an 8 MB send buffer and the bus daemon drains it
// from another core, so even the 2000-path reply above leaves in one
// sendmsg(). To make the server's socket really fill up, the bus daemon is
// stopped while the server announces 20000 new paths (about 11 MB of
// InterfacesAdded): sd-bus keeps the rest in its write queue, and once the
// bus runs again only a loop that watches POLLOUT sends it; nothing else
// wakes the server, since no client asks it anything meanwhile.
TEST_F(DbusHost, SignalsQueuedWhileTheSocketIsFullAreFlushedWithoutNewRequests) {
  startServer();
  auto connection = sdbus::createSystemBusConnection();
  ctl::DaemonClient client(*connection);
  std::size_t added = 0;
  client.watch([&](const ctl::BusChange &change) {
    added += change.type == ctl::BusChange::Type::Added ? 1U : 0U;
  });
  static_cast<void>(client.snapshot());
  ASSERT_EQ(kill(suite().bus->pid(), SIGSTOP), 0);
  server_->send("paths 20000");
  auto published = server_->readLine(120000ms);
  kill(suite().bus->pid(), SIGCONT);
  ASSERT_EQ(published.value_or("(timeout)"), "ok");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(pump(*connection, [&] { return added == 20000U; }))
      << added << " of 20000 InterfacesAdded arrived";
  std::cout
      << "[ bench    ] 20000 queued InterfacesAdded delivered in "
      << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
      << " ms after the bus resumed\n";
}

TEST_F(DbusHost, PathkeeperctlShowsStatusWatchesAndFailsAPath) {
  startServer();
  auto status = ctl({"status"});
  EXPECT_EQ(status.status, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("pathkeeperd 0.1.0-test (owner mode): 3 maps, 6 paths"));
  EXPECT_THAT(status.out, HasSubstr("`-+- group 1 prio=50 active\n   |- sdb 8:16 up active "
                                    "ctrl=upper eth1 -> 10.10.1.20:3260,1"));
  EXPECT_THAT(status.out, Not(HasSubstr("\033["))) << "no colour when stdout is not a terminal";
  auto json = ctl({"status", "--json"});
  EXPECT_EQ(nlohmann::json::parse(json.out)["paths"].size(), 6U);

  Process watch({PK_PATHKEEPERCTL, "watch", "--count", "3"});
  auto watching = watch.readLine();
  ASSERT_THAT(watching.value_or(""), HasSubstr("pathkeeperctl: watching pathkeeperd"));
  auto failed = ctl({"fail-path", "sdb"});
  EXPECT_EQ(failed.status, 0) << failed.err;
  std::vector<std::string> lines;
  lines.reserve(3);
  for (int i = 0; i < 3; ++i) {
    lines.push_back(watch.readLine().value_or("(timeout)"));
  }
  EXPECT_EQ(watch.wait(), 0);
  EXPECT_THAT(lines[0], ::testing::EndsWith(" map xserve-upper: State=degraded UsablePaths=1"));
  EXPECT_THAT(lines[1], ::testing::EndsWith(" path sdb: DmState=failed State=down"));
  EXPECT_THAT(lines[2], ::testing::EndsWith(" manager: Status=3 maps, 6 paths, 1 degraded"));
  EXPECT_EQ(serverCalls(), "calls: failPath sdb");

  auto unknown = ctl({"reinstate-path", "sdx"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_EQ(unknown.err, "pathkeeperctl: no path 'sdx' (give a device name such as \"sdb\"; "
                         "pathkeeperctl status lists them)\n");
}

TEST_F(DbusHost, PathkeeperctlDisablesAndRestoresQueueingPerMapOrForAll) {
  startServer();
  auto one = ctl({"disable-queueing", "xserve-upper"});
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(one.out, "xserve-upper: queueing disabled\n");
  auto shown = busctl({"get-property", kBusName, objectPathOf(ObjectKind::Map, "xserve-upper"),
                       kMapInterface, "NoPathRetry"});
  EXPECT_EQ(shown.out, "s \"disabled\"\n") << shown.err;
  auto status = ctl({"status"});
  EXPECT_THAT(status.out, HasSubstr("selector=service-time paths=2/2 queueing-disabled"));
  EXPECT_THAT(status.out, HasSubstr("selector=round-robin paths=2/2\n"))
      << "only the disabled map says so";

  // Each map is tried; the first failure decides the exit status.
  auto some = ctl({"restore-queueing", "nomap", "xserve-upper"});
  EXPECT_EQ(some.status, 1);
  EXPECT_EQ(some.err, "pathkeeperctl: nomap: no map named 'nomap'\n");
  EXPECT_EQ(some.out, "xserve-upper: queueing restored\n");

  auto all = ctl({"disable-queueing", "--all"});
  EXPECT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(serverCalls(), "calls: disableQueueing xserve-upper; restoreQueueing xserve-upper; "
                           "disableQueueing 1 m\xC3\xA4p.x; disableQueueing xserve-lower; "
                           "disableQueueing xserve-upper");

  for (const auto &args : std::vector<std::vector<std::string>>{
           {"disable-queueing"}, {"restore-queueing", "--all", "xserve-upper"}}) {
    auto bad = ctl(args);
    EXPECT_EQ(bad.status, 2) << args.size();
    EXPECT_THAT(bad.err, HasSubstr("takes one or more maps, or --all"));
  }
}

// The README's busctl lines, exactly as written there.
TEST_F(DbusHost, ReadmeBusctlWalkthroughRuns) {
  std::ifstream readme(PK_README);
  std::vector<std::string> commands;
  bool inSection = false;
  bool inBlock = false;
  for (std::string line; std::getline(readme, line);) {
    if (line == "### busctl walk-through") {
      inSection = true;
    } else if (inSection && !inBlock && line == "```sh") {
      inBlock = true;
    } else if (inBlock && line == "```") {
      break;
    } else if (inBlock) {
      commands.push_back(line);
    }
  }
  ASSERT_EQ(commands.size(), 5U) << "the walk-through block in README.md changed shape";
  startServer();
  for (const auto &command : commands) {
    std::vector<std::string> args;
    std::istringstream words(command);
    for (std::string word; words >> word;) {
      args.push_back(word);
    }
    ASSERT_EQ(args.at(0), "busctl");
    if (args.at(1) == "monitor") {
      args.insert(args.begin(), {"timeout", "6"});
      Process monitor(args);
      // busctl buffers its output until it exits; toggling the path a few
      // times makes sure one change falls after the monitor is listening.
      for (int i = 0; i < 4; ++i) {
        std::this_thread::sleep_for(1s);
        server(i % 2 == 0 ? "set sdb down failed" : "set sdb up active");
      }
      std::string output;
      while (auto line = monitor.readLine(10000ms)) {
        output += *line + "\n";
      }
      EXPECT_THAT(output, HasSubstr("Path=/org/pathkeeper/PathKeeper1/paths/sdb  "
                                    "Interface=org.freedesktop.DBus.Properties  "
                                    "Member=PropertiesChanged"));
      EXPECT_THAT(output, HasSubstr("STRING \"down\";"));
      server("set sdb up active");
      continue;
    }
    auto result = run(args);
    EXPECT_EQ(result.status, 0) << command << ": " << result.err;
    if (args.at(1) == "tree") {
      EXPECT_THAT(result.out, HasSubstr("/org/pathkeeper/PathKeeper1/paths/sdb"));
    } else if (args.at(1) == "introspect") {
      EXPECT_THAT(result.out, HasSubstr("org.pathkeeper.PathKeeper1.Path"));
    } else if (args.at(1) == "get-property") {
      EXPECT_EQ(result.out, "s \"up\"\ns \"active\"\ns \"eth1\"\ns \"10.10.1.20:3260,1\"\n");
    }
  }
  EXPECT_THAT(serverCalls(), HasSubstr("failPath sdb"));
}

// A file the test puts in place and removes again, never one it found.
class TemporaryFile {
public:
  TemporaryFile(fs::path path, const std::string &content) : path_(std::move(path)) {
    std::ofstream(path_) << content;
  }
  ~TemporaryFile() { fs::remove(path_); }
  TemporaryFile(const TemporaryFile &) = delete;
  TemporaryFile &operator=(const TemporaryFile &) = delete;

private:
  fs::path path_;
};

// With polkitd on the bus, the daemon asks it about every caller but root:
// a polkit rule grants nobody the action, and uid 1 (daemon), outside any
// session, is told that authentication is needed, or, when its call did not
// allow interactive authorization, that it would have to. polkitd reads actions
// and rules only from the system directories, so the test installs the
// packaged action file and a rule for nobody there while it runs.
TEST_F(DbusHost, PolkitDecidesForCallersOtherThanRoot) {
  const fs::path polkitd = "/usr/lib/polkit-1/polkitd";
  const fs::path action = "/usr/share/polkit-1/actions/org.pathkeeper.PathKeeper1.policy";
  const fs::path rule = "/etc/polkit-1/rules.d/49-pathkeeper-dbus-host-test.rules";
  if (access(polkitd.c_str(), X_OK) != 0 || !fs::is_directory(rule.parent_path())) {
    GTEST_SKIP() << "polkitd is not installed (Debian package polkitd)";
  }
  if (fs::exists(action) || fs::exists(rule)) {
    GTEST_SKIP() << action << " or " << rule
                 << " exists already (pathkeeper installed?); not replacing it";
  }
  TemporaryFile actionFile(action, slurp(PK_POLKIT_POLICY));
  TemporaryFile ruleFile(rule, R"(polkit.addRule(function(action, subject) {
  if (action.id == "org.pathkeeper.PathKeeper1.manage" && subject.user == "nobody") {
    return polkit.Result.YES;
  }
});
)");
  Process polkit({polkitd.string(), "--no-debug"});
  bool onBus = false;
  for (int i = 0; i < 100 && !onBus; ++i) {
    onBus = busctl({"list"}).out.find("org.freedesktop.PolicyKit1") != std::string::npos;
    if (!onBus) {
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(onBus) << "polkitd did not appear on the test bus";
  startServer();

  auto allowed = dbusSend("FailPath", {"string:sdb"}, true);
  EXPECT_EQ(allowed.status, 0) << allowed.err;
  // dbus-send does not allow interactive authorization: the daemon must
  // not have polkit prompt anyone, and says what would do.
  const std::vector<std::string> asDaemonUser{"setpriv", "--reuid=1", "--regid=1", "--clear-groups",
                                              "--"};
  auto scripted = asDaemonUser;
  scripted.insert(scripted.end(),
                  {"dbus-send", "--system", "--print-reply", "--dest=org.pathkeeper.PathKeeper1",
                   "/org/pathkeeper/PathKeeper1",
                   "org.pathkeeper.PathKeeper1.Manager.ReinstatePath", "string:sdb"});
  auto notInteractive = run(scripted);
  EXPECT_NE(notInteractive.status, 0);
  EXPECT_THAT(notInteractive.err,
              HasSubstr("Error org.freedesktop.DBus.Error.InteractiveAuthorizationRequired: "
                        "ReinstatePath needs authentication for "
                        "org.pathkeeper.PathKeeper1.manage, and the call did not allow "
                        "interactive authorization"));
  // pathkeeperctl allows it: polkit may prompt, and finds no agent to.
  auto interactive = asDaemonUser;
  interactive.insert(interactive.end(), {PK_PATHKEEPERCTL, "reinstate-path", "sdb"});
  auto challenged = run(interactive);
  EXPECT_EQ(challenged.status, 4) << challenged.err;
  EXPECT_THAT(challenged.err,
              HasSubstr("ReinstatePath needs authentication for org.pathkeeper.PathKeeper1.manage; "
                        "run it as root or from a session with a polkit agent"));
  // --no-ask-password leaves the flag off, as dbus-send does.
  auto noPassword = asDaemonUser;
  noPassword.insert(noPassword.end(),
                    {PK_PATHKEEPERCTL, "reinstate-path", "--no-ask-password", "sdb"});
  auto refused = run(noPassword);
  EXPECT_EQ(refused.status, 4) << refused.err;
  EXPECT_THAT(
      refused.err,
      HasSubstr("not allowed without asking for a password: run it as root, or without "
                "--no-ask-password where a polkit agent can ask (pathkeeperd: "
                "ReinstatePath needs authentication for org.pathkeeper.PathKeeper1.manage"));
  // Reading needs no authorization, so it has no such option.
  auto status = ctl({"status", "--no-ask-password"});
  EXPECT_EQ(status.status, 2);
  EXPECT_THAT(status.err, HasSubstr("unknown option '--no-ask-password' for status"));
  EXPECT_EQ(serverCalls(), "calls: failPath sdb");
}

TEST_F(DbusHost, PathkeeperctlSaysWhenTheDaemonIsNotRunning) {
  auto status = ctl({"status"});
  EXPECT_EQ(status.status, 3);
  EXPECT_THAT(status.err, HasSubstr("pathkeeperd is not running"));
  auto noBus = run(
      {"env", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/pk-bus", PK_PATHKEEPERCTL, "status"});
  EXPECT_EQ(noBus.status, 3);
  EXPECT_THAT(noBus.err, HasSubstr("cannot connect to unix:path=/nonexistent/pk-bus"));
}

TEST_F(DbusHost, OnlyRootMayOwnTheName) {
  auto command = asNobody();
  command.insert(command.end(),
                 {"dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus",
                  "/org/freedesktop/DBus", "org.freedesktop.DBus.RequestName",
                  "string:org.pathkeeper.PathKeeper1", "uint32:0"});
  auto request = run(command);
  EXPECT_NE(request.status, 0);
  EXPECT_THAT(request.err, HasSubstr("AccessDenied"));
}

} // namespace
} // namespace pathkeeper::dbus
