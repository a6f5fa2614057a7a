// pathkeeperctl: the command-line client. This stage offers `plan`, which
// shows the maps pathkeeper would build from the live sysfs, a captured sysfs
// tree or an inventory file, and `discover`, which probes the portals with
// SendTargets from each NIC and reports the paths the kernel lacks.

#include "config_files.hpp"
#include "dbus_client_commands.hpp"
#include "discover.hpp"
#include "doctor.hpp"
#include "export_conf.hpp"
#include "inventory_file.hpp"
#include "kernel_caps.hpp"
#include "names.hpp"
#include "plan.hpp"
#include "plan_output.hpp"
#include "sysfs_inventory.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace {

using namespace pathkeeper;

constexpr const char *kUsage = R"(Usage: pathkeeperctl [-v] COMMAND [OPTIONS]

Commands:
  plan      Print the multipath maps pathkeeper would build (like multipath -d -v2)
  discover  Probe each portal from each NIC (SendTargets) and report the targets
            and the expected paths the kernel has no session for
  doctor    Check the network for per-NIC iSCSI binding (egress NIC, source
            address, shared subnets, ARP flux, rp_filter, bonds, link, MTU) and
            print each finding with its fix; needs no daemon
  status, watch, fail-path, reinstate-path, switch-group, disable-queueing,
  restore-queueing, set-selector, reconfigure, rescan
            Show or change pathkeeperd's state over D-Bus (see D-Bus commands)
  export multipath-conf
            Print the multipath.conf that gives multipath-tools 0.9.4 the maps
            of plan (same WWIDs, aliases, selector; groups as close as it can)
  version   Print the version
  help      Print this help

plan options:
  --sysfs-root DIR   Read the kernel's iSCSI paths from this sysfs tree (default /sys;
                     a tree captured in the VM lab works offline)
  --inventory FILE   Paths to plan for, as [[path]] tables (TOML), instead of sysfs
  --config FILE      Main config file (default /etc/pathkeeper/pathkeeper.conf)
  --config-dir DIR   Drop-in directory (default /etc/pathkeeper/pathkeeper.conf.d)
  --bindings FILE    User-friendly name bindings (default /etc/multipath/bindings);
                     read only: plan never writes it
  --json             Print JSON (schema 1, see pathkeeperctl(8))

plan exit status: 0 on success, 1 on bad input or a failed read, 2 on bad usage.

export multipath-conf options: those of plan except --json; same exit status.
  The output is a whole /etc/multipath.conf: find_multipaths off, every WWID
  blacklisted but the planned ones, hardware handlers in devices entries, one
  multipaths entry per map. A comment line precedes each map whose groups
  multipathd cannot reproduce exactly (grouping by controller label).

discover options:
  --portal ADDR[:PORT]  Portal to probe (repeatable; IPv6 as [ADDR]:PORT; default
                        [discovery] portals). The portals of the kernel's sessions
                        are always probed too.
  --nic NIC             NIC to probe from (repeatable; default [discovery] nics,
                        else the NICs the sessions are bound to, else routing)
  --config FILE, --config-dir DIR   As for plan
  --sysfs-root DIR      Where to read the kernel's sessions (default /sys)
  --initiator-name IQN  The probes' initiator name (default [discovery]
                        initiator_name, else the host's name + ":pathkeeper-probe")
  --timeout DURATION    Per probe, e.g. "1500ms" or "5s" (default [discovery]
                        probe_timeout, 5s); all probes run at once
  --json                Print JSON (schema 1, see README)

discover exit status: 0 when every probe answered, no expected path is missing
and every kernel session is logged in; 1 on bad usage or configuration; 2 when
a probe failed, a path is missing or a session is not logged in.

doctor options:
  --nic NIC             NIC to check (repeatable); paired with every --portal, else
                        with every portal of the sessions and node records
  --portal ADDR[:PORT]  Portal to check (repeatable); paired with every --nic, else
                        with every NIC of the sessions and iface records
                        (default: the kernel's sessions plus /etc/iscsi's records)
  --json                Print JSON (schema 1, see README)
  --fix-script          Print a POSIX sh script that applies the fixes; doctor
                        itself never changes anything
  --sysfs-root DIR      Where to read sessions, link speed and bonds (default /sys)
  --iscsi-dir DIR       open-iscsi's records (default /etc/iscsi)

doctor exit status: 0 when no finding is a warning or worse (info only), 1 when
the network state or sessions cannot be read, 2 on bad usage, 3 when a finding
of severity warning or error was found.
)";

struct PlanOptions {
  std::optional<std::filesystem::path> inventory;
  std::filesystem::path sysfsRoot{"/sys"};
  bool verbose = false;
  std::filesystem::path config{daemon::kDefaultConfigFile};
  std::filesystem::path configDir{daemon::kDefaultDropInDir};
  std::filesystem::path bindings{"/etc/multipath/bindings"};
  bool json = false;
  bool exportConf = false; ///< export multipath-conf instead of the plan
};

int usageError(const std::string &message, int status = 2) {
  std::cerr << "pathkeeperctl: " << message << "\n\n" << kUsage;
  return status;
}

struct DiscoverOptions {
  std::vector<selector::Portal> portals;
  std::vector<std::string> nics;
  std::filesystem::path sysfsRoot{"/sys"};
  std::filesystem::path config{daemon::kDefaultConfigFile};
  std::filesystem::path configDir{daemon::kDefaultDropInDir};
  std::optional<std::string> initiatorName;
  std::optional<std::chrono::milliseconds> timeout;
  bool json = false;
};

// Exit status 1 for everything that stops discover before it probes.
int discoverError(const std::string &message) {
  std::cerr << "pathkeeperctl: " << message << "\n";
  return 1;
}

int runDiscover(const DiscoverOptions &options) {
  auto loaded = daemon::loadConfig(options.config, options.configDir);
  if (!loaded) {
    return discoverError(loaded.error());
  }
  // The command line overrides [discovery]; validating the result with the
  // config's own rules gives --nic and --timeout the same checks as the file.
  selector::Config config = *std::move(loaded);
  selector::DiscoverySettings &discovery = config.discovery;
  const bool nicsGiven = !options.nics.empty();
  const std::string nicSource = nicsGiven ? "--nic" : "config";
  if (!options.portals.empty()) {
    discovery.portals = options.portals;
    config.keyOrigins["discovery.portals"] = "--portal";
  }
  if (nicsGiven) {
    discovery.nics = options.nics;
    config.keyOrigins["discovery.nics"] = "--nic";
  }
  if (options.timeout) {
    discovery.probeTimeout = *options.timeout;
    config.keyOrigins["discovery.probe_timeout"] = "--timeout";
  }
  if (options.initiatorName) {
    discovery.initiatorName = *options.initiatorName;
    config.keyOrigins["discovery.initiator_name"] = "--initiator-name";
  }
  discovery.probeInterval = std::chrono::milliseconds{0}; // one round, not periodic
  if (auto valid = selector::validateConfig(config); !valid) {
    return discoverError(valid.error());
  }

  ctl::DiscoverReport report;
  auto inventory = daemon::SysfsInventory(options.sysfsRoot).scan();
  if (!inventory) {
    return discoverError(inventory.error());
  }
  const auto sessions = ctl::kernelSessions(*inventory, report.warnings);
  report.probeSet = ctl::chooseProbes(discovery.portals, discovery.nics, nicSource, sessions);
  if (report.probeSet.portals.empty()) {
    return discoverError("no portal to probe: give --portal, set [discovery] portals, or log in "
                         "to a portal first");
  }
  if (discovery.initiatorName.empty()) {
    auto name = daemon::defaultProbeInitiatorName();
    if (!name) {
      return discoverError(name.error() + " (give --initiator-name or set [discovery] "
                                          "initiator_name)");
    }
    discovery.initiatorName = *name;
  }
  report.initiatorName = discovery.initiatorName;
  report.timeout = discovery.probeTimeout;

  std::vector<daemon::DiscoveryRequest> requests;
  for (const auto &nic : report.probeSet.nics) {
    for (const auto &portal : report.probeSet.portals) {
      requests.push_back({portal, nic, discovery.initiatorName, discovery.probeTimeout});
    }
  }
  report.probes = ctl::runProbes(requests);
  ctl::compareWithKernel(report, sessions);
  if (options.json) {
    std::cout << ctl::discoverToJson(report);
  } else {
    for (const auto &warning : report.warnings) {
      std::cerr << "pathkeeperctl: warning: " << warning << "\n";
    }
    std::cout << ctl::discoverToText(report);
  }
  return report.exitStatus();
}

int parseDiscover(const std::vector<std::string> &args, std::size_t i) {
  DiscoverOptions options;
  for (; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    if (arg != "--portal" && arg != "--nic" && arg != "--config" && arg != "--config-dir" &&
        arg != "--sysfs-root" && arg != "--initiator-name" && arg != "--timeout") {
      return usageError("unknown option '" + arg + "' for discover", 1);
    }
    if (i + 1 >= args.size()) {
      return usageError(arg + " needs a value", 1);
    }
    const std::string &value = args[++i];
    if (arg == "--portal") {
      auto portal = selector::parsePortal(value);
      if (!portal) {
        return usageError("--portal: " + portal.error(), 1);
      }
      options.portals.push_back(*std::move(portal));
    } else if (arg == "--nic") {
      options.nics.push_back(value); // checked with the config's rules in runDiscover
    } else if (arg == "--config") {
      options.config = value;
    } else if (arg == "--config-dir") {
      options.configDir = value;
    } else if (arg == "--sysfs-root") {
      options.sysfsRoot = value;
    } else if (arg == "--initiator-name") {
      options.initiatorName = value;
    } else {
      auto timeout = selector::parseDuration(value);
      if (!timeout) {
        return usageError(
            "--timeout: expected a duration such as \"1500ms\" or \"5s\", got '" + value + "'", 1);
      }
      options.timeout = timeout;
    }
  }
  try {
    return runDiscover(options);
  } catch (const std::system_error &error) {
    return discoverError(error.what());
  }
}

Expected<std::vector<selector::Path>> inventoryPaths(const PlanOptions &options) {
  if (options.inventory) {
    PK_TRY(text, daemon::readConfigFile(*options.inventory));
    return daemon::parseInventory(text, options.inventory->string());
  }
  PK_TRY(inventory, daemon::SysfsInventory(options.sysfsRoot).scan());
  // Incomplete paths still go to the planner, which skips those it cannot
  // use; say why here, since the plan only knows what is missing.
  for (const auto &[device, path] : inventory.paths) {
    for (const auto &problem : path.problems) {
      std::cerr << "pathkeeperctl: warning: " << device << ": " << problem << "\n";
    }
  }
  if (options.verbose) {
    for (const auto &[device, reason] : inventory.ignored) {
      std::cerr << "pathkeeperctl: " << device << " ignored: " << reason << "\n";
    }
  }
  return inventory.plannerPaths();
}

int runPlan(const PlanOptions &options) {
  auto paths = inventoryPaths(options);
  if (!paths) {
    std::cerr << "pathkeeperctl: " << paths.error() << "\n";
    return 1;
  }
  auto config = daemon::loadConfig(options.config, options.configDir);
  if (!config) {
    std::cerr << "pathkeeperctl: " << config.error() << "\n";
    return 1;
  }
  selector::Bindings bindings;
  std::error_code ec;
  if (std::filesystem::exists(options.bindings, ec)) {
    auto bindingsText = daemon::readConfigFile(options.bindings);
    if (!bindingsText) {
      std::cerr << "pathkeeperctl: " << bindingsText.error() << "\n";
      return 1;
    }
    auto parsed = selector::Bindings::parse(*bindingsText, options.bindings.string());
    if (!parsed) {
      std::cerr << "pathkeeperctl: " << parsed.error() << "\n";
      return 1;
    }
    bindings = std::move(*parsed);
    for (const auto &warning : bindings.warnings()) {
      std::cerr << "pathkeeperctl: warning: " << warning << "\n";
    }
  }
  auto plan =
      selector::planMaps(std::move(*paths), *config, std::move(bindings), daemon::probeKernel({}));
  if (options.exportConf) {
    std::cout << ctl::exportMultipathConf(plan, *config);
  } else {
    std::cout << (options.json ? ctl::planToJson(plan) : ctl::planToText(plan));
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::size_t i = 0;
  bool verbose = false;
  while (i < args.size() && (args[i] == "-v" || args[i] == "--verbose")) {
    verbose = true;
    ++i;
  }
  if (i == args.size()) {
    return usageError("missing command");
  }
  const std::string command = args[i++];
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage << "\n" << ctl::kDbusCommandsUsage;
    return 0;
  }
  if (command == "version" || command == "--version") {
    std::cout << "pathkeeperctl " PATHKEEPER_VERSION "\n";
    return 0;
  }
  if (ctl::isDbusCommand(command)) {
    return ctl::runDbusCommand(command, args, i);
  }
  if (command == "discover") {
    return parseDiscover(args, i);
  }
  if (command == "doctor") {
    auto options = ctl::parseDoctorOptions(args, i);
    if (!options) {
      return usageError(options.error());
    }
    return ctl::runDoctor(*options);
  }
  PlanOptions options;
  if (command == "export") {
    if (i == args.size() || args[i] != "multipath-conf") {
      return usageError("export: the only format is multipath-conf");
    }
    options.exportConf = true;
    ++i;
  } else if (command != "plan") {
    return usageError("unknown command '" + command + "'");
  }
  options.verbose = verbose;
  bool sysfsRootGiven = false;
  for (; i < args.size(); ++i) {
    const std::string &arg = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) {
        return std::nullopt;
      }
      return args[++i];
    };
    if (arg == "--json" && !options.exportConf) {
      options.json = true;
    } else if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "--inventory" || arg == "--sysfs-root" || arg == "--config" ||
               arg == "--config-dir" || arg == "--bindings") {
      auto v = value();
      if (!v) {
        return usageError(arg + " needs a value");
      }
      if (arg == "--inventory") {
        options.inventory = *v;
      } else if (arg == "--sysfs-root") {
        options.sysfsRoot = *v;
        sysfsRootGiven = true;
      } else if (arg == "--config") {
        options.config = *v;
      } else if (arg == "--config-dir") {
        options.configDir = *v;
      } else {
        options.bindings = *v;
      }
    } else {
      return usageError("unknown option '" + arg + "' for " + command);
    }
  }
  if (options.inventory && sysfsRootGiven) {
    return usageError("--inventory and --sysfs-root are two sources of paths; give one");
  }
  return runPlan(options);
}
