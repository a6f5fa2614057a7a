// A stand-in for pathkeeperd in the D-Bus host tests: it serves the sample
// inventory (sample_state.hpp) with the real DbusPublisher, BusAuthorizer and
// sd-event attachment on the bus named by DBUS_SYSTEM_BUS_ADDRESS, and
// records the commands it receives. The tests drive it over stdin, one
// command a line, and it answers on stdout:
//   set DEV STATE DMSTATE   change a path (its map's counts follow)
//   remove-path DEV         the path disappears
//   add-path DEV            a path in no map appears
//   paths N                 the sample plus N more paths in no map
//   squat-portal ADDR       registers the Portal interface at ADDR:3260's object
//                           path outside the publisher (its own registration fails)
//   add-portal ADDR DEV     a portal ADDR:3260 and a path DEV on it appear
//   calls                   prints "calls: <call>; <call>; ..." (what Commands got)
//   hold                    the next commands are answered later, as companion
//                           mode answers with multipathd's reply (answerWhenDone)
//   answer ok|TEXT          answers the held commands: success, or the error TEXT
//   quit
// Every command is answered with "ok" (after "calls:" for calls) once the
// snapshot is published, preceded by "publish-error: TEXT" when the
// publisher could not announce every change; "ready" is printed once the
// name is owned.

#include "bus_loop.hpp"
#include "bus_names.hpp"
#include "event_loop.hpp"
#include "publisher.hpp"
#include "sample_state.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sdbus-c++/sdbus-c++.h>

namespace {

using namespace pathkeeper;

class FakeDaemon final : public daemon::Commands {
public:
  FakeDaemon() : snapshot_(dbus::sample::sampleSnapshot()) {}

  void attach(dbus::DbusPublisher &publisher) {
    publisher_ = &publisher;
    publish();
  }

  Expected<void> reconfigure() override { return record("reconfigure"); }
  Expected<void> failPath(const std::string &device) override {
    if (device == "sdq") {
      calls_.push_back("failPath " + device);
      return fail("the kernel refused fail_path on sdq: Invalid argument");
    }
    setPath(device, "down", "failed");
    return record("failPath " + device);
  }
  Expected<void> reinstatePath(const std::string &device) override {
    setPath(device, "up", "active");
    return record("reinstatePath " + device);
  }
  Expected<void> switchGroup(const std::string &map, unsigned group) override {
    return record(fmt::format("switchGroup {} {}", map, group));
  }
  Expected<void> disableQueueing(const std::string &map) override {
    setNoPathRetry(map, "disabled");
    return record("disableQueueing " + map);
  }
  Expected<void> restoreQueueing(const std::string &map) override {
    setNoPathRetry(map, "12");
    return record("restoreQueueing " + map);
  }
  Expected<void> setSelector(const std::string &map, const std::string &selector) override {
    return record(fmt::format("setSelector {} {}", map, selector));
  }
  Expected<void> rescan() override { return record("rescan"); }
  void answerWhenDone(const std::function<Expected<void>()> &command, Done done) override {
    auto result = command();
    if (!hold_ || !result) {
      done(std::move(result));
      return;
    }
    held_.push_back(std::move(done));
  }

  // Registers the Portal interface at @p address's (port 3260) object path
  // itself, so that the publisher's own registration of that portal fails:
  // sd-bus takes a second vtable of one interface on one path, but not a
  // member (Address) that the first already has.
  void squatPortal(sdbus::IConnection &connection, const std::string &address) {
    daemon::PortalView portal;
    portal.address = address;
    squatter_ = sdbus::createObject(
        connection, dbus::objectPathOf(dbus::ObjectKind::Portal, dbus::portalKey(portal)));
    squatter_->registerProperty("Address")
        .onInterface(dbus::kPortalInterface)
        .withGetter([address] { return address; });
    squatter_->finishRegistration();
  }

  // One stdin line; false on quit.
  bool command(const std::string &line) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "quit") {
      return false;
    }
    if (verb == "set") {
      std::string device, state, dmState;
      in >> device >> state >> dmState;
      setPath(device, state, dmState);
    } else if (verb == "remove-path") {
      std::string device;
      in >> device;
      std::erase_if(snapshot_.paths, [&](const auto &path) { return path.device == device; });
      publish();
    } else if (verb == "add-path") {
      std::string device;
      in >> device;
      snapshot_.paths.push_back(dbus::sample::samplePath(device, "", "10.10.1.20", "eth1", "", 9));
      std::ranges::sort(snapshot_.paths, {}, &daemon::PathView::device);
      publish();
    } else if (verb == "paths") {
      unsigned count = 0;
      in >> count;
      auto big = dbus::sample::sampleSnapshot();
      for (unsigned i = 0; i < count; ++i) {
        big.paths.push_back(dbus::sample::samplePath(fmt::format("bulk{:05}", i), "", "10.10.1.20",
                                                     "eth1", "upper", 10));
      }
      std::ranges::sort(big.paths, {}, &daemon::PathView::device);
      snapshot_ = big;
      publish();
    } else if (verb == "add-portal") {
      std::string address, device;
      in >> address >> device;
      daemon::PortalView portal;
      portal.address = address;
      portal.reachability = {{"eth1", "reachable"}};
      snapshot_.portals.push_back(portal);
      std::ranges::sort(snapshot_.portals, {}, &daemon::PortalView::address);
      snapshot_.paths.push_back(dbus::sample::samplePath(device, "", address, "eth1", "", 11));
      std::ranges::sort(snapshot_.paths, {}, &daemon::PathView::device);
      snapshot_.status = fmt::format("{} maps, {} paths, {} portals", snapshot_.maps.size(),
                                     snapshot_.paths.size(), snapshot_.portals.size());
      publish();
    } else if (verb == "hold") {
      hold_ = true;
    } else if (verb == "answer") {
      std::string text;
      std::getline(in >> std::ws, text);
      hold_ = false;
      for (auto &done : std::exchange(held_, {})) {
        done(text == "ok" ? Expected<void>{} : Expected<void>(fail(text)));
      }
    } else if (verb == "squat-portal") {
      std::string address;
      in >> address;
      squatPortal(*bus, address);
    } else if (verb == "calls") {
      std::cout << "calls: " << fmt::format("{}", fmt::join(calls_, "; ")) << "\n";
    } else {
      std::cout << "error: unknown command '" << verb << "'\n";
    }
    std::cout << "ok" << std::endl;
    return true;
  }

  sdbus::IConnection *bus = nullptr; ///< for squat-portal

private:
  // Publishes a copy of the snapshot, as the daemon hands out each of its
  // own; what could not be announced is printed before the "ok".
  void publish() {
    try {
      publisher_->publish(std::make_shared<const daemon::StateSnapshot>(snapshot_));
    } catch (const sdbus::Error &e) {
      std::cout << "publish-error: " << e.getMessage() << "\n";
    }
  }

  Expected<void> record(std::string call) {
    calls_.push_back(std::move(call));
    return {};
  }

  void setNoPathRetry(const std::string &alias, const std::string &value) {
    for (auto &map : snapshot_.maps) {
      if (map.alias == alias) {
        map.noPathRetry = value;
      }
    }
    if (publisher_ != nullptr) {
      publish();
    }
  }

  void setPath(const std::string &device, const std::string &state, const std::string &dmState) {
    auto it = std::ranges::find(snapshot_.paths, device, &daemon::PathView::device);
    if (it == snapshot_.paths.end()) {
      return;
    }
    it->state = state;
    it->dmState = dmState;
    for (auto &map : snapshot_.maps) {
      if (map.alias != it->map) {
        continue;
      }
      map.usablePaths =
          static_cast<unsigned>(std::ranges::count_if(snapshot_.paths, [&](const auto &p) {
            return p.map == map.alias && p.dmState == "active";
          }));
      map.state = map.usablePaths == map.totalPaths ? "ok"
                  : map.usablePaths == 0            ? "down"
                                                    : "degraded";
    }
    const auto degraded =
        std::ranges::count_if(snapshot_.maps, [](const auto &m) { return m.state != "ok"; });
    snapshot_.status = fmt::format("{} maps, {} paths, {} degraded", snapshot_.maps.size(),
                                   snapshot_.paths.size(), degraded);
    publish();
  }

  daemon::StateSnapshot snapshot_;
  dbus::DbusPublisher *publisher_ = nullptr;
  std::vector<std::string> calls_;
  bool hold_ = false;
  std::vector<Done> held_;
  std::unique_ptr<sdbus::IObject> squatter_;
};

} // namespace

int main() {
  try {
    daemon::EventLoop loop;
    auto connection = sdbus::createSystemBusConnection();
    FakeDaemon fake;
    dbus::BusAuthorizer authorizer(*connection);
    dbus::DbusPublisher publisher(*connection, fake, authorizer);
    fake.bus = connection.get();
    fake.attach(publisher);
    dbus::BusLoopAttachment attachment(*connection, loop);
    connection->requestName(dbus::kBusName);

    std::string pending;
    auto input = loop.addIo(STDIN_FILENO, EPOLLIN, [&](unsigned) {
      char buffer[4096];
      const ssize_t n = read(STDIN_FILENO, buffer, sizeof buffer);
      if (n <= 0) {
        loop.exit(0);
        return;
      }
      pending.append(buffer, static_cast<std::size_t>(n));
      for (auto eol = pending.find('\n'); eol != std::string::npos; eol = pending.find('\n')) {
        const std::string line = pending.substr(0, eol);
        pending.erase(0, eol + 1);
        if (!fake.command(line)) {
          loop.exit(0);
          return;
        }
      }
    });
    std::cout << "ready" << std::endl;
    return loop.run();
  } catch (const std::exception &error) {
    std::cerr << "pathkeeper_dbus_test_server: " << error.what() << "\n";
    return 1;
  }
}
