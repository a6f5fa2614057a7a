// pathkeeperctl: the command-line client. This stage offers `plan`, which
// shows the maps pathkeeper would build from the live sysfs, a captured sysfs
// tree or an inventory file.

#include "config_files.hpp"
#include "inventory_file.hpp"
#include "kernel_caps.hpp"
#include "names.hpp"
#include "plan.hpp"
#include "plan_output.hpp"
#include "sysfs_inventory.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace pathkeeper;

constexpr const char *kUsage = R"(Usage: pathkeeperctl [-v] COMMAND [OPTIONS]

Commands:
  plan      Print the multipath maps pathkeeper would build (like multipath -d -v2)
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

Exit status: 0 on success, 1 on bad input or a failed read, 2 on bad usage.
)";

struct PlanOptions {
  std::optional<std::filesystem::path> inventory;
  std::filesystem::path sysfsRoot{"/sys"};
  bool verbose = false;
  std::filesystem::path config{daemon::kDefaultConfigFile};
  std::filesystem::path configDir{daemon::kDefaultDropInDir};
  std::filesystem::path bindings{"/etc/multipath/bindings"};
  bool json = false;
};

int usageError(const std::string &message) {
  std::cerr << "pathkeeperctl: " << message << "\n\n" << kUsage;
  return 2;
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
  std::cout << (options.json ? ctl::planToJson(plan) : ctl::planToText(plan));
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
    std::cout << kUsage;
    return 0;
  }
  if (command == "version" || command == "--version") {
    std::cout << "pathkeeperctl " PATHKEEPER_VERSION "\n";
    return 0;
  }
  if (command != "plan") {
    return usageError("unknown command '" + command + "'");
  }
  PlanOptions options;
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
    if (arg == "--json") {
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
      return usageError("unknown option '" + arg + "' for plan");
    }
  }
  if (options.inventory && sysfsRootGiven) {
    return usageError("--inventory and --sysfs-root are two sources of paths; give one");
  }
  return runPlan(options);
}
