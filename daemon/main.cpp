// pathkeeperd: the multipath path-selector and health daemon. main() is the
// composition root: it alone knows the file locations, the sysfs root and
// the event loop.

#include "bus_loop.hpp"
#include "bus_names.hpp"
#include "config.hpp"
#include "config_files.hpp"
#include "daemon.hpp"
#include "dm_adapter.hpp"
#include "event_loop.hpp"
#include "log.hpp"
#include "publisher.hpp"
#include "udev_monitor.hpp"

#include <malloc.h>
#include <sys/prctl.h>

#include <sdbus-c++/Error.h>
#include <sdbus-c++/IConnection.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

namespace {

using namespace pathkeeper;

constexpr const char *kUsage = R"(Usage: pathkeeperd [OPTIONS]

Keeps the device-mapper multipath maps of the host's iSCSI LUNs right and
their paths healthy. Normally started by systemd (pathkeeperd.service).

Options:
  --config FILE        Main config file (default /etc/pathkeeper/pathkeeper.conf)
  --config-dir DIR     Drop-in directory (default /etc/pathkeeper/pathkeeper.conf.d)
  --mode MODE          owner, companion or auto; overrides the config's mode
  --sysfs-root DIR     sysfs mount (default /sys)
  --dev-root DIR       Device nodes for the TUR checker (default /dev)
  --state-file FILE    Where the published state goes (default
                       /run/pathkeeper/state.json; "" disables it)
  --owned-wwids FILE   Owner mode: the WWIDs of the maps pathkeeperd owns, one a
                       line, for the udev rule that marks their paths (default
                       /var/lib/pathkeeper/owned-wwids; "" disables it)
  --admin-holds FILE   The admin's fail-path and disable-queueing holds, kept
                       across restarts (default /run/pathkeeper/admin-holds;
                       "" disables it); cleared-maps beside it keeps the maps
                       whose inactive table the daemon cleared (see BUGS), and
                       map-models the vendor and product of each map's paths
  --no-udev-sync       Do not wait for udev after map changes (hosts without udevd)
  --no-dbus            Do not publish on the system bus (org.pathkeeper.PathKeeper1)
  --log-target TARGET  auto, journal or stderr (default auto: the journal when
                       started by systemd)
  --log-level LEVEL    error, warning, notice, info or debug (default info)
  --version            Print the version
  --help               Print this help

Signals: SIGTERM and SIGINT exit and leave the maps as they are; SIGHUP
re-reads the configuration (a bad one is refused and the old one kept).
Exit status: 0 after SIGTERM, 1 when startup fails, 2 on bad usage, 70
after an internal error (logged; the maps stay, systemd restarts the daemon).
)";

int usageError(const std::string &message) {
  std::cerr << "pathkeeperd: " << message << "\n\n" << kUsage;
  return 2;
}

std::optional<daemon::log::Level> parseLevel(std::string_view text) {
  using daemon::log::Level;
  if (text == "error")
    return Level::Error;
  if (text == "warning")
    return Level::Warning;
  if (text == "notice")
    return Level::Notice;
  if (text == "info")
    return Level::Info;
  if (text == "debug")
    return Level::Debug;
  return std::nullopt;
}

} // namespace

int main(int argc, char **argv) {
  // One malloc arena. Almost everything is allocated on the loop thread;
  // glibc would give each other thread that allocates (checker, device-
  // mapper and startup scan threads) an arena of its own, whose free pages
  // stay resident: what the scan threads read lives on in the inventory,
  // and their arenas added 0.5 MiB at 1000 paths.
  ::mallopt(M_ARENA_MAX, 1);
  // No transparent huge pages. With THP "always" (Debian's kernels)
  // khugepaged folds any 2 MiB of the heap it finds in use into a huge
  // page; the 1000-path profile found 4 MiB of the 5.8 MiB heap so backed,
  // and runs whose reading came after such a fold had 2 MiB more RSS. A
  // heap of a few MiB gains nothing from huge pages.
  static_cast<void>(::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0));
  daemon::DaemonOptions options;
  options.configFile = daemon::kDefaultConfigFile;
  options.configDir = daemon::kDefaultDropInDir;
  auto target = daemon::log::Target::Auto;
  auto level = daemon::log::Level::Info;
  bool udevSync = true;
  bool useBus = true;

  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--version") {
      std::cout << "pathkeeperd " << PATHKEEPER_VERSION << "\n";
      return 0;
    }
    if (arg == "--no-udev-sync") {
      udevSync = false;
      continue;
    }
    if (arg == "--no-dbus") {
      useBus = false;
      continue;
    }
    if (arg == "--config" || arg == "--config-dir" || arg == "--mode" || arg == "--sysfs-root" ||
        arg == "--dev-root" || arg == "--state-file" || arg == "--owned-wwids" ||
        arg == "--admin-holds" || arg == "--log-target" || arg == "--log-level") {
      auto v = value();
      if (!v) {
        return usageError(std::string(arg) + " needs a value");
      }
      if (arg == "--config") {
        options.configFile = *v;
      } else if (arg == "--config-dir") {
        options.configDir = *v;
      } else if (arg == "--sysfs-root") {
        options.sysfsRoot = *v;
      } else if (arg == "--dev-root") {
        options.devRoot = *v;
      } else if (arg == "--state-file") {
        options.stateFile = *v;
      } else if (arg == "--owned-wwids") {
        options.ownedWwidsFile = *v;
      } else if (arg == "--admin-holds") {
        options.adminHoldsFile = *v;
      } else if (arg == "--mode") {
        auto mode = selector::parseMode(*v);
        if (!mode) {
          return usageError("--mode must be owner, companion or auto, not '" + *v + "'");
        }
        options.mode = *mode;
      } else if (arg == "--log-target") {
        if (*v == "auto") {
          target = daemon::log::Target::Auto;
        } else if (*v == "journal") {
          target = daemon::log::Target::Journal;
        } else if (*v == "stderr") {
          target = daemon::log::Target::Stderr;
        } else {
          return usageError("--log-target must be auto, journal or stderr, not '" + *v + "'");
        }
      } else {
        auto parsed = parseLevel(*v);
        if (!parsed) {
          return usageError("--log-level must be error, warning, notice, info or debug, not '" +
                            *v + "'");
        }
        level = *parsed;
      }
      continue;
    }
    return usageError("unknown option '" + std::string(arg) + "'");
  }

  daemon::log::configure(target, level);
  std::error_code ec;
  if (!std::filesystem::exists("/dev/mapper/control", ec)) {
    daemon::log::error("cannot start: device-mapper is not available (/dev/mapper/control is "
                       "missing; load dm_multipath, or run where the kernel has device-mapper)");
    return 1;
  }
  try {
    daemon::LibDevmapperOptions dmOptions;
    // libdevmapper takes any /run/udev/control for a running udevd, and
    // would wait for ever on cookies no udevd will complete. Asked once:
    // the daemon's event source follows the same answer.
    options.udevdAtStart = daemon::udevdStatus(options.udevRunDir.string());
    dmOptions.udevSync = udevSync && options.udevdAtStart == daemon::UdevdStatus::Running;
    if (!options.adminHoldsFile.empty()) {
      dmOptions.clearedMapsFile = options.adminHoldsFile.parent_path() / "cleared-maps";
    }
    options.mapModelsFile = options.adminHoldsFile.empty()
                                ? std::filesystem::path{}
                                : options.adminHoldsFile.parent_path() / "map-models";
    daemon::LibDevmapper dm(dmOptions);
    daemon::EventLoop loop;
    daemon::Daemon pathkeeperd(loop, options, dm);

    // The D-Bus API. The name is taken at the first publication, which is
    // the ready one (after the first pass over the maps): a client that sees
    // the name finds the whole tree, not a daemon still starting. Without a
    // system bus the daemon still does its job, and says so.
    std::unique_ptr<sdbus::IConnection> bus;
    std::unique_ptr<dbus::BusLoopAttachment> attachment;
    std::unique_ptr<dbus::BusAuthorizer> authorizer;
    std::unique_ptr<dbus::DbusPublisher> publisher;
    if (useBus) {
      try {
        bus = sdbus::createSystemBusConnection();
        attachment = std::make_unique<dbus::BusLoopAttachment>(*bus, loop);
        authorizer = std::make_unique<dbus::BusAuthorizer>(*bus);
        publisher = std::make_unique<dbus::DbusPublisher>(*bus, pathkeeperd, *authorizer);
        pathkeeperd.onPublish(
            [&publisher, &bus, named = false](const daemon::SharedSnapshot &snapshot) mutable {
              try {
                publisher->publish(snapshot);
              } catch (const sdbus::Error &e) {
                // Some change could not be announced (the bus went away, say,
                // when dbus-daemon restarted); the rest was. The maps and the
                // state file are the daemon's job, D-Bus is a view of them.
                daemon::log::error(std::string("D-Bus: ") + e.getMessage());
              }
              if (!named) {
                named = true;
                try {
                  bus->requestName(dbus::kBusName);
                  daemon::log::info(std::string("D-Bus: ") + dbus::kBusName + " on the system bus");
                } catch (const sdbus::Error &e) {
                  daemon::log::error(std::string("D-Bus: cannot own ") + dbus::kBusName + ": " +
                                     e.getMessage() + " (is the bus policy installed?)");
                }
              }
            });
      } catch (const sdbus::Error &e) {
        daemon::log::warning(std::string("no D-Bus API: ") + e.getMessage());
        publisher.reset();
        authorizer.reset();
        attachment.reset();
        bus.reset();
      }
    }
    pathkeeperd.start();
    return loop.run();
  } catch (const std::exception &e) {
    daemon::log::error(std::string("cannot start: ") + e.what());
    return 1;
  }
}
