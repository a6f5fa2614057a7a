#include "dbus_client_commands.hpp"

#include "dbus_client.hpp"
#include "status.hpp"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <optional>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sdbus-c++/sdbus-c++.h>

namespace pathkeeper::ctl {

const char *const kDbusCommandsUsage =
    R"(D-Bus commands (pathkeeperd must be running; DBUS_SYSTEM_BUS_ADDRESS
overrides the system bus):
  status [--json] [--color|--no-color]
                    Maps, groups and paths with their states, controllers and
                    NIC -> portal, and each portal's reachability per NIC
  watch [--json] [--count N]
                    Print every change as it happens (objects appearing and
                    going, changed properties); stop after N changes
  fail-path DEV     Fail a path (e.g. sdb) until it is reinstated
  reinstate-path DEV
                    Reinstate a path
  switch-group MAP N
                    Make group N (1-based) the active group of MAP (refused
                    if failback would undo it: see pathkeeperctl(8))
  disable-queueing MAP...|--all
                    Stop queueing I/O while MAP has no usable path: queued and
                    new I/O fail at once (dm fail_if_no_path), until
                    restore-queueing
  restore-queueing MAP...|--all
                    Let no_path_retry decide again
  set-selector MAP SELECTOR
                    round-robin, queue-length, service-time or historical-service-time
  reconfigure       Re-read the configuration
  rescan            Rescan the kernel's iSCSI paths
  The commands that change something need root or the polkit action
  org.pathkeeper.PathKeeper1.manage; polkit may ask for a password. With
  --no-ask-password they fail at once instead (exit status 4), for scripts.

D-Bus commands' exit status: 0 done, 1 failed, 2 bad usage, 3 pathkeeperd not
running or no bus, 4 not allowed.
)";

namespace {

int usage(const std::string &message) {
  std::cerr << "pathkeeperctl: " << message << "\n(see pathkeeperctl help)\n";
  return 2;
}

int report(const ClientFailure &failure) {
  std::cerr << "pathkeeperctl: " << failure.message << "\n";
  return failure.status;
}

std::optional<unsigned> parseUnsigned(const std::string &text) {
  unsigned value = 0;
  const auto *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || text.empty()) {
    return std::nullopt;
  }
  return value;
}

bool isQueueingCommand(const std::string &command) {
  return command == "disable-queueing" || command == "restore-queueing";
}

/// The commands that change something, which need root or polkit.
bool isManagingCommand(const std::string &command) {
  return command != "status" && command != "watch";
}

/// disable-queueing and restore-queueing: every map named, or all; each is
/// tried, and the first failure decides the exit status.
int runQueueing(DaemonClient &client, const std::string &command, std::vector<std::string> maps) {
  if (maps.empty()) {
    // Every map pathkeeperd maintains: a stale one is named explicitly,
    // so that --all neither fails on a foreign leftover nor turns queueing
    // back on for a deleted LUN the admin stopped.
    for (const auto &map : client.snapshot().maps) {
      if (map.state != "stale") {
        maps.push_back(map.alias);
      }
    }
    if (maps.empty()) {
      std::cerr << "pathkeeperctl: " << command << ": pathkeeperd has no map\n";
      return 0;
    }
  }
  int status = 0;
  for (const auto &map : maps) {
    try {
      if (command == "disable-queueing") {
        client.disableQueueing(map);
      } else {
        client.restoreQueueing(map);
      }
      std::cout << map << ": "
                << (command == "disable-queueing" ? "queueing disabled" : "queueing restored")
                << "\n";
    } catch (const sdbus::Error &error) {
      const auto failure = describeBusError(error);
      std::cerr << "pathkeeperctl: " << map << ": " << failure.message << "\n";
      if (status == 0) {
        status = failure.status;
      }
      if (failure.status == 3 || failure.status == 4) {
        return failure.status; // no daemon, or not allowed: the same for every map
      }
    }
  }
  return status;
}

std::unique_ptr<sdbus::IConnection> connect() {
  // sd-bus reads DBUS_SYSTEM_BUS_ADDRESS itself; named only for the message.
  return sdbus::createSystemBusConnection();
}

std::string busAddress() {
  const char *address = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
  return address != nullptr ? address : "the system bus";
}

int runWatch(sdbus::IConnection &connection, DaemonClient &client, bool json,
             std::optional<unsigned> count) {
  unsigned seen = 0;
  client.watch([&](const BusChange &change) {
    if (json) {
      std::cout << changeToJson(change) << "\n";
    } else {
      const auto now = std::chrono::system_clock::now();
      std::cout << fmt::format("{:%H:%M:%S} {}",
                               fmt::localtime(std::chrono::system_clock::to_time_t(now)),
                               changeToText(change))
                << "\n";
    }
    std::cout.flush();
    if (count && ++seen >= *count) {
      connection.leaveEventLoop();
    }
  });
  // The matches are in place once this call returns, and it fails clearly
  // when the daemon is not running.
  static_cast<void>(client.snapshot());
  std::cerr << "pathkeeperctl: watching pathkeeperd on " << busAddress() << "\n";
  if (count && *count == 0) {
    return 0;
  }
  connection.enterEventLoop();
  return 0;
}

int run(const std::string &command, const std::vector<std::string> &args, std::size_t i) {
  bool json = false;
  std::optional<bool> colour;
  std::optional<unsigned> count;
  bool all = false;
  bool askPassword = true;
  std::vector<std::string> operands;
  for (; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--json" && (command == "status" || command == "watch")) {
      json = true;
    } else if ((arg == "--color" || arg == "--colour") && command == "status") {
      colour = true;
    } else if ((arg == "--no-color" || arg == "--no-colour") && command == "status") {
      colour = false;
    } else if (arg == "--all" && isQueueingCommand(command)) {
      all = true;
    } else if (arg == "--no-ask-password" && isManagingCommand(command)) {
      askPassword = false;
    } else if (arg == "--count" && command == "watch") {
      if (i + 1 >= args.size() || !parseUnsigned(args[i + 1])) {
        return usage("--count needs a number");
      }
      count = parseUnsigned(args[++i]);
    } else if (arg.starts_with("-") && arg.size() > 1) {
      return usage(fmt::format("unknown option '{}' for {}", arg, command));
    } else {
      operands.push_back(arg);
    }
  }
  std::size_t wanted = 0;
  if (isQueueingCommand(command)) {
    if (all != operands.empty()) {
      return usage(command + " takes one or more maps, or --all");
    }
    wanted = operands.size();
  } else if (command == "fail-path" || command == "reinstate-path") {
    wanted = 1;
  } else if (command == "switch-group" || command == "set-selector") {
    wanted = 2;
  }
  if (operands.size() != wanted) {
    return usage(fmt::format("{} takes {} argument{}, got {}", command, wanted,
                             wanted == 1 ? "" : "s", operands.size()));
  }
  std::optional<unsigned> group;
  if (command == "switch-group") {
    group = parseUnsigned(operands[1]);
    if (!group || *group == 0) {
      return usage(
          fmt::format("switch-group: group must be a number from 1, got '{}'", operands[1]));
    }
  }

  std::unique_ptr<sdbus::IConnection> connection;
  try {
    connection = connect();
  } catch (const sdbus::Error &error) {
    return report({3, fmt::format("cannot connect to {}: {}", busAddress(), error.getMessage())});
  }
  try {
    DaemonClient client(*connection);
    client.allowInteractiveAuthorization(askPassword);
    if (command == "status") {
      const auto snapshot = client.snapshot();
      const bool tty = isatty(STDOUT_FILENO) == 1;
      std::cout << (json ? statusToJson(snapshot) : statusToText(snapshot, colour.value_or(tty)));
      return 0;
    }
    if (command == "watch") {
      return runWatch(*connection, client, json, count);
    }
    if (isQueueingCommand(command)) {
      return runQueueing(client, command, operands);
    }
    if (command == "fail-path") {
      client.failPath(operands[0]);
    } else if (command == "reinstate-path") {
      client.reinstatePath(operands[0]);
    } else if (command == "switch-group") {
      client.switchGroup(operands[0], *group);
    } else if (command == "set-selector") {
      client.setSelector(operands[0], operands[1]);
    } else if (command == "reconfigure") {
      client.reconfigure();
    } else {
      client.rescan();
    }
    return 0;
  } catch (const sdbus::Error &error) {
    return report(describeBusError(error));
  }
}

} // namespace

bool isDbusCommand(const std::string &command) {
  return command == "status" || command == "watch" || command == "fail-path" ||
         command == "reinstate-path" || command == "switch-group" || command == "set-selector" ||
         isQueueingCommand(command) || command == "reconfigure" || command == "rescan";
}

int runDbusCommand(const std::string &command, const std::vector<std::string> &args,
                   std::size_t i) {
  return run(command, args, i);
}

} // namespace pathkeeper::ctl
