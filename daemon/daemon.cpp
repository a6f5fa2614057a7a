#include "daemon.hpp"

#include "config_files.hpp"
#include "dm_status.hpp"
#include "dm_table.hpp"
#include "iscsi_names.hpp"
#include "kernel_caps.hpp"
#include "log.hpp"
#include "names.hpp"
#include "net_iscsi_records.hpp"
#include "per_map_state.hpp"
#include "reconciler.hpp"
#include "session_coverage.hpp"
#include "text.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <nlohmann/json.hpp>
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

namespace pathkeeper::daemon {
namespace fs = std::filesystem;
using selector::PathState;

namespace {

/// What the daemon keeps of a map's plan between passes. Not the whole
/// selector::PlannedMap: its paths are copies of the inventory's, about
/// 0.5 MB at 1000 paths, held twice while a pass plans beside the last
/// pass's maps.
struct MapPlan {
  std::string controller; ///< the controller label(s) behind the map
  selector::SelectorKind selector = selector::SelectorKind::ServiceTime;
  bool autoSelector = false;
  selector::NoPathRetry noPathRetry;
  /// (device, relative_throughput) of the planned table, sorted by device.
  std::vector<std::pair<std::string, unsigned>> weights;

  explicit MapPlan(const selector::PlannedMap &planned)
      : controller(planned.controller), selector(planned.spec.selector),
        autoSelector(planned.autoSelector), noPathRetry(planned.noPathRetry) {
    for (const auto &group : planned.spec.groups) {
      for (const auto &path : group.paths) {
        weights.emplace_back(path.device, path.relativeThroughput);
      }
    }
    std::ranges::sort(weights);
  }

  [[nodiscard]] std::optional<unsigned> weightOf(std::string_view device) const {
    auto found = std::ranges::lower_bound(weights, device, std::less<>{},
                                          &std::pair<std::string, unsigned>::first);
    if (found == weights.end() || found->first != device) {
      return std::nullopt;
    }
    return found->second;
  }
};

} // namespace

/// The facts about one map that the daemon keeps between reconciles.
struct Daemon::MapState {
  std::optional<MapPlan> desired; ///< empty in companion mode
  std::string wwid;
  std::string uuid;
  std::string selector;
  std::vector<std::vector<std::string>> groups; ///< devices per priority group, 1-based order
  std::vector<int> groupPriorities;
  std::map<std::string, bool> dmFailed;        ///< device -> F in dm status
  std::map<std::string, unsigned> liveWeights; ///< device -> relative_throughput in the live table
  unsigned activeGroup = 0;                    ///< 1-based; 0 when unknown
  bool queueing = false;
  bool tableQueues = false; ///< queue_if_no_path in the kernel's table (its current flag)
  /// Of its paths, for a device entry of the configuration: while the
  /// inventory has one of them, else as last known (a stale map's devices
  /// are mostly gone); empty when none was ever known in this run.
  std::string vendor;
  std::string product;
  std::string devt; ///< the map's own device number, "253:0"
};

namespace {

/// Which device a path name stands for now: the kernel reuses sdX names.
std::string identityOf(const InventoryPath &path) {
  return path.path.devt.str() + " " + path.path.wwid;
}

/// Replaces @p file with what @p write writes: written beside it, then
/// renamed over it, so that a reader (udev's rule, a script, the next start)
/// never sees half of it. The error says which step failed.
Expected<void> replaceFile(const fs::path &file, const std::function<void(std::ostream &)> &write,
                           std::string_view tmpSuffix = ".tmp") {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = file.string() + std::string(tmpSuffix);
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out.is_open()) {
      return fail(fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
    }
    errno = 0; // what the flush's failure leaves is its own
    try {
      write(out);
    } catch (...) {
      out.close();
      fs::remove(tmp, ec);
      throw;
    }
    if (!out.flush()) {
      const int error = errno;
      out.close();
      fs::remove(tmp, ec); // no half-written file left beside it
      return fail(fmt::format("cannot write {}{}", tmp.string(),
                              error != 0 ? std::string(": ") + std::strerror(error) : ""));
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    return fail(fmt::format("cannot replace {}: {}", file.string(), ec.message()));
  }
  return {};
}

/// A file an earlier run left for this one: nothing to read (nullopt) when
/// @p file is empty (disabled) or absent; else its text, or why not.
std::optional<Expected<std::string>> readLeftByEarlierRun(const fs::path &file) {
  std::error_code ec;
  if (file.empty() || !fs::exists(file, ec)) {
    return std::nullopt;
  }
  return readConfigFile(file);
}

Expected<void> replaceFile(const fs::path &file, std::string_view text,
                           std::string_view tmpSuffix = ".tmp") {
  return replaceFile(
      file, [text](std::ostream &out) { out << text; }, tmpSuffix);
}

// The first line of a sysfs attribute; "" when it cannot be read. One
// open and one read, no stream: the loop reads thousands of these a minute
// at 1000 paths (session and device states, I/O counters).
std::string readSmallFile(const fs::path &file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return {};
  }
  std::array<char, 512> buffer{};
  ssize_t got = -1;
  do {
    got = ::read(fd, buffer.data(), buffer.size());
  } while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got <= 0) {
    return {};
  }
  const std::string_view text(buffer.data(), static_cast<std::size_t>(got));
  return std::string(text.substr(0, text.find('\n')));
}

// A whole procfs file (/proc/diskstats: about 100 bytes per block device);
// "" when it cannot be read. procfs answers each read() with whole lines.
std::string readProcFile(const fs::path &file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return {};
  }
  std::string text;
  std::array<char, 16384> buffer{};
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      if (got < 0) {
        text.clear(); // a partial read would drop devices: the caller reads each file
      }
      break;
    }
    text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  ::close(fd);
  return text;
}

SessionState sessionStateOf(std::string_view text) {
  if (text == "LOGGED_IN") {
    return SessionState::LoggedIn;
  }
  if (text == "FAILED") {
    return SessionState::Failed;
  }
  if (text == "FREE") {
    return SessionState::Free;
  }
  return SessionState::Unknown;
}

DeviceState deviceStateOf(std::string_view text) {
  if (text == "running") {
    return DeviceState::Running;
  }
  if (text == "blocked" || text == "created-blocked") {
    return DeviceState::Blocked;
  }
  if (text == "offline") {
    return DeviceState::Offline;
  }
  if (text == "transport-offline") {
    return DeviceState::TransportOffline;
  }
  return DeviceState::Unknown;
}

// For the published counts: a path without a verdict yet (unknown, pending)
// carries I/O when dm has it active, as it does in a fresh table.
bool carriesIo(std::optional<PathState> state, const std::map<std::string, bool> &dmFailed,
               const std::string &device) {
  if (!state || *state == PathState::Unknown || *state == PathState::Pending) {
    auto it = dmFailed.find(device);
    return it != dmFailed.end() && !it->second;
  }
  return selector::isUsable(*state);
}

CheckStatus checkStatusOf(TurStatus status) {
  switch (status) {
  case TurStatus::Up:
    return CheckStatus::Ok;
  case TurStatus::Ghost:
    return CheckStatus::Standby;
  case TurStatus::Timeout:
    return CheckStatus::TimedOut;
  case TurStatus::Transitioning:
    return CheckStatus::Transitioning;
  case TurStatus::Down:
  case TurStatus::Retry:
    break;
  }
  return CheckStatus::Failed;
}

// What auto mode makes of what it sees of multipathd.
struct AutoChoice {
  selector::Mode mode = selector::Mode::Owner;
  std::string why;
  bool startMultipathd = false; ///< only systemd's socket listens: start it now
};

AutoChoice chooseAutoMode(const MultipathdSighting &seen, const std::string &socket) {
  if (seen.process && !seen.listening) {
    return {selector::Mode::Companion,
            fmt::format("multipathd runs, though nothing listens on @{} yet", socket)};
  }
  if (seen.process) {
    return {selector::Mode::Companion, "multipathd is running"};
  }
  if (seen.listening) {
    // systemd's multipathd.socket: multipathd is not running yet, but
    // multipath -u (60-multipath.rules) connects for every new disk and so
    // starts it. An owner would soon share its maps with it.
    return {selector::Mode::Companion,
            "multipathd's socket listens, so multipathd starts on demand", true};
  }
  return {selector::Mode::Owner, "no multipathd"};
}

void logResumed(const std::vector<ResumedMap> &maps) {
  for (const auto &resumed : maps) {
    if (resumed.error.empty()) {
      log::warning(fmt::format("map {} was left suspended; resumed it{}", resumed.name,
                               resumed.clearedInactive ? " and dropped a half-loaded table" : ""),
                   {{"MAP", resumed.name}});
    } else {
      log::error(fmt::format("map {} is suspended and could not be resumed: {}", resumed.name,
                             resumed.error),
                 {{"MAP", resumed.name}});
    }
  }
}

void logRemovedUnfinished(const std::vector<RemovedMap> &maps) {
  for (const auto &removed : maps) {
    if (removed.error.empty()) {
      log::warning(fmt::format("device {} (DM UUID {}) had no live table, as a create stopped half "
                               "way leaves it; removed it",
                               removed.name, removed.uuid),
                   {{"MAP", removed.name}});
    } else {
      log::error(fmt::format("device {} (DM UUID {}) has no live table, as a create stopped half "
                             "way leaves it, and could not be removed: {}",
                             removed.name, removed.uuid, removed.error),
                 {{"MAP", removed.name}});
    }
  }
}

// An explicit owner beside a running multipathd leaves suspended maps
// alone (its reload may be under way), but says so: I/O to them waits.
void warnSuspendedBesideMultipathd(const std::vector<LiveMap> &live) {
  for (const auto &map : live) {
    // Multipath maps only, as the resume it stands for (an LVM volume in a
    // pvmove is suspended for reasons of its own).
    if (map.info.suspended && map.info.uuid.starts_with(kMultipathUuidPrefix)) {
      log::warning(fmt::format("map {} is suspended; not resumed, as multipathd runs and may be "
                               "reloading it (dmsetup resume {} if it stays so)",
                               map.info.name, map.info.name),
                   {{"MAP", map.info.name}});
    }
  }
}

std::string ownerBesideMultipathd(const MultipathdSighting &seen, const std::string &socket) {
  return fmt::format(
      "owner mode, but {}: multipathd will manage the same maps as pathkeeperd. Stop and "
      "disable it (systemctl disable --now multipathd.socket multipathd.service), or run "
      "pathkeeperd in companion or auto mode",
      seen.process ? "multipathd is running"
                   : fmt::format("something listens on multipathd's socket @{} (systemd's "
                                 "multipathd.socket): multipath -u in 60-multipath.rules "
                                 "connects for every new disk and so starts multipathd",
                                 socket));
}

} // namespace

Daemon::Daemon(EventLoop &loop, DaemonOptions options, DeviceMapper &dm)
    : loop_(loop), options_(std::move(options)), dm_(dm), sysfs_(options_.sysfsRoot),
      health_(selector::HealthSettings{}, static_cast<std::uint32_t>(::getpid())) {}

Daemon::~Daemon() {
  // A job that runs is finished (a reload is never left half done); the
  // queued ones are dropped: the next start reads the kernel afresh.
  for (auto *worker : {tableWorker_.get(), messageWorker_.get()}) {
    if (worker == nullptr) {
      continue;
    }
    const auto dropped = worker->stop();
    if (!dropped.empty()) {
      log::info(fmt::format("exit: {} queued device-mapper job(s) dropped: {}", dropped.size(),
                            fmt::join(dropped, "; ")));
    }
  }
}

void Daemon::start() {
  if (!options_.stateFile.empty()) {
    // The previous run's (the unit keeps /run/pathkeeper across restarts):
    // it must not say "ready" for this one, nor for a start that fails. The
    // first publication writes it.
    std::error_code ec;
    fs::remove(options_.stateFile, ec);
  }
  auto config = loadConfig(options_.configFile, options_.configDir);
  if (!config) {
    throw std::runtime_error(fmt::format("configuration: {}", config.error()));
  }
  config_ = std::move(*config);
  health_.setSettings(config_.defaults.health);
  adaptive_.setSettings(config_.adaptive);
  kernel_ = probeKernel({options_.sysfsRoot, "/lib/modules", ""});

  const selector::Mode configured = configuredMode();
  // Looked for without a connect: with systemd's multipathd.socket, a
  // connect starts multipathd.
  const auto seen = lookForMultipathd(options_.multipathdSocket, options_.procRoot.string());
  multipathdSeen_ = seen.process || seen.listening;
  const AutoChoice choice = chooseAutoMode(seen, options_.multipathdSocket);
  mode_ = configured == selector::Mode::Auto ? choice.mode : configured;
  if (configured == selector::Mode::Owner && multipathdSeen_) {
    log::warning(ownerBesideMultipathd(seen, options_.multipathdSocket));
  }
  log::notice(fmt::format("starting in {} mode{}", selector::toString(mode_),
                          configured == selector::Mode::Auto ? " (" + choice.why + ")" : ""));
  if (mode_ == selector::Mode::Companion) {
    connectMultipathd(configured == selector::Mode::Auto && choice.startMultipathd);
  }

  // Signals first, so that the worker threads inherit the blocked mask.
  signals_.push_back(loop_.addSignal(SIGTERM, [this] {
    log::notice("SIGTERM: exiting; the maps stay as they are");
    loop_.exit(0);
  }));
  signals_.push_back(loop_.addSignal(SIGINT, [this] {
    log::notice("SIGINT: exiting; the maps stay as they are");
    loop_.exit(0);
  }));
  signals_.push_back(loop_.addSignal(SIGHUP, [this] {
    log::notice("SIGHUP: reloading the configuration");
    (void)reloadConfig();
  }));

  TurChecker::Options checkerOptions;
  checkerOptions.workers = 4;
  checkerOptions.runner = options_.turRunner;
  checker_ = std::make_unique<TurChecker>(checkerOptions);
  checkerSource_ = loop_.addIo(checker_->fd(), EPOLLIN, [this](unsigned) { onCheckerResults(); });

  // Subscribe before the scan, so that nothing between the two is lost.
  const UdevdStatus udevd =
      options_.udevdAtStart ? *options_.udevdAtStart : udevdStatus(options_.udevRunDir.string());
  if (udevd == UdevdStatus::StaleSocket) {
    log::warning(fmt::format("{} exists but nothing listens on it (udevd exited): taking the "
                             "kernel's events, without udev",
                             (options_.udevRunDir / "control").string()));
  }
  const UdevSource source = udevd == UdevdStatus::Running ? UdevSource::Udev : UdevSource::Kernel;
  if (options_.deviceEvents) {
    monitor_ = options_.deviceEvents(source);
  } else {
    auto monitor = std::make_unique<UdevMonitor>(source);
    log::debug(fmt::format("device events: {} KiB of socket buffer (a burst beyond it is "
                           "recovered by a rescan)",
                           monitor->receiveBufferBytes() / 1024));
    monitor_ = std::move(monitor);
  }
  udevSource_ = loop_.addIo(monitor_->fd(), EPOLLIN, [this](unsigned) { onDeviceEvents(); });

  auto scanned = sysfs_.scan();
  if (!scanned) {
    throw std::runtime_error(fmt::format("sysfs: {}", scanned.error()));
  }
  inventory_ = std::move(*scanned);
  if (!inventory_.ignored.empty()) {
    // pathkeeper manages iSCSI paths only; say which disks it leaves alone.
    std::string names;
    std::size_t shown = 0;
    for (const auto &[name, reason] : inventory_.ignored) {
      if (shown++ == 8) {
        names += fmt::format(" and {} more", inventory_.ignored.size() - 8);
        break;
      }
      names += (names.empty() ? "" : ", ") + name + " (" + reason + ")";
    }
    log::info(fmt::format("ignoring {} sd device(s): {}", inventory_.ignored.size(), names));
  }

  const bool resumeLeftSuspended = mode_ == selector::Mode::Owner && !seen.process;
  if (resumeLeftSuspended) {
    logResumed(resumeSuspendedMaps(dm_));
    logRemovedUnfinished(removeUnfinishedMaps(dm_));
  }

  loadMapModels(); // before the first refreshMaps, which remembers the models
  try {
    auto live = daemon::readLiveMaps(dm_);
    if (mode_ == selector::Mode::Owner && !resumeLeftSuspended) {
      warnSuspendedBesideMultipathd(live);
    }
    refreshMaps(live, {}, /*everyMultipathMap=*/true);
  } catch (const std::exception &e) {
    throw std::runtime_error(fmt::format("device-mapper: {}", e.what()));
  }
  loadOwnedWwids();
  loadAdminHolds();
  if (mode_ == selector::Mode::Companion) {
    // multipathd may have reinstated them while pathkeeperd was stopped.
    for (const auto &[device, identity] : adminFailed_) {
      sendPathMessage(device, true, "held failed by the admin");
    }
  }
  // From here on every device-mapper call goes through a worker, so that
  // suspends and udev waits never stall the loop (see dm_worker.hpp). Two
  // lanes: table work (reads, create, reload) can wait for udev for
  // seconds, or for ever if udev hangs; a path message must not wait behind
  // it. A message that overtakes a reload of its map is not lost: a health
  // change during a reconcile pass asks for one more pass (apply()).
  tableWorker_ = std::make_unique<DmWorker>(dm_, "pk-dm-table");
  tableSource_ =
      loop_.addIo(tableWorker_->fd(), EPOLLIN, [this](unsigned) { tableWorker_->drain(); });
  messageWorker_ = std::make_unique<DmWorker>(dm_, "pk-dm-msg");
  messageSource_ =
      loop_.addIo(messageWorker_->fd(), EPOLLIN, [this](unsigned) { messageWorker_->drain(); });
  const auto now = Clock::now();
  for (const auto &[name, path] : inventory_.paths) {
    addToHealth(path, now);
  }
  reconcile(); // READY once it is done: finishStartup()

  const auto far = Clock::now() + std::chrono::hours(24);
  healthTimer_ = loop_.addTimer(far, [this] { onHealthTimer(); });
  reconcileTimer_ = loop_.addTimer(far, [this] { reconcile(); });
  publishTimer_ = loop_.addTimer(far, [this] { publish(); });
  sessionTimer_ = loop_.addTimer(Clock::now() + options_.sessionPoll, [this] { pollSessions(); });
  adaptiveTimer_ =
      loop_.addTimer(Clock::now() + config_.adaptive.sampleInterval, [this] { sampleAdaptive(); });
  reaper_ = loop_.addTimer(far, [this] {
    retired_.clear();
    deadProbes_.clear();
  });
  probeTimer_ = loop_.addTimer(far, [this] { startProbes(); });
  lostEventsTimer_ = loop_.addTimer(far, [this] {
    lostEventsRescanDue_ = false;
    if (auto rescanned = rescan(); !rescanned) {
      log::error(rescanned.error());
    }
  });
  modeTimer_ = loop_.addTimer(Clock::now() + options_.multipathdWatch, [this] {
    watchMultipathd(/*processes=*/false);
    EventLoop::rearm(modeTimer_, Clock::now() + options_.multipathdWatch);
  });
  startProbes();
  startNetworkWatch();
  startDueChecks(Clock::now());
  rearmHealthTimer();

  // The watchdog now: the loop runs (and answers it) while the first
  // reconcile's device-mapper work is on the worker.
  loop_.enableWatchdog();
}

void Daemon::loadAdminHolds() {
  const auto text = readLeftByEarlierRun(options_.adminHoldsFile);
  if (!text) {
    return;
  }
  if (!*text) {
    log::error(fmt::format("cannot read the admin's holds from before this start: {}; they "
                           "are lost (see pathkeeperctl status)",
                           text->error()));
    return;
  }
  const std::string where = options_.adminHoldsFile.string();
  std::vector<std::string> problems;
  const AdminHolds holds = parseAdminHolds(**text, problems);
  for (const auto &problem : problems) {
    log::error(fmt::format("{}: {}; that hold is lost", where, problem));
  }
  for (const auto &[device, identity] : holds.failedPaths) {
    const InventoryPath *path = pathByDevice(device);
    if (path != nullptr && identityOf(*path) == identity) {
      adminFailed_[device] = identity;
      log::notice(fmt::format("path {}: still failed by the admin (held since before this "
                              "start); held until reinstated",
                              device),
                  {{"PATH", device}});
    } else {
      log::notice(fmt::format("path {}: the admin's hold from before this start ends: {}", device,
                              path == nullptr ? "the device is gone"
                                              : "the name now belongs to another device"),
                  {{"PATH", device}});
    }
  }
  for (const auto &alias : holds.queueingDisabled) {
    // The hold is the kernel map's: found by its DM UUID where the file
    // has it (a rename while the daemon was stopped; a name that another
    // LUN's map has now), by its name otherwise.
    const auto uuid = holds.mapUuids.find(alias);
    std::string heldMap;
    std::string why = "the map is gone";
    if (uuid == holds.mapUuids.end()) {
      heldMap = maps_.contains(alias) ? alias : "";
    } else if (auto map = std::ranges::find_if(
                   maps_, [&](const auto &entry) { return entry.second.uuid == uuid->second; });
               map != maps_.end()) {
      heldMap = map->first;
    } else if (auto same = maps_.find(alias); same != maps_.end()) {
      why = fmt::format("the name now belongs to another map (DM UUID {}, not {})",
                        same->second.uuid, uuid->second);
    }
    if (heldMap.empty() && mode_ == selector::Mode::Companion && uuid != holds.mapUuids.end()) {
      // Not read now (its table unreadable for a moment, or multipathd
      // renamed it): handed over once a pass finds it by its DM UUID; the
      // first pass ends it if the map is gone (endWithGoneMaps).
      queueingHandover_.insert_or_assign(uuid->second, Handover{alias});
      log::notice(fmt::format("map {}: the admin's disable-queueing from before this start is "
                              "handed to multipathd once the map (DM UUID {}) is read",
                              alias, uuid->second),
                  {{"MAP", alias}});
      continue;
    }
    if (heldMap.empty()) {
      log::notice(fmt::format("map {}: the admin's disable-queueing from before this start ends: "
                              "{}",
                              alias, why),
                  {{"MAP", alias}});
      continue;
    }
    if (mode_ == selector::Mode::Companion) {
      // As at a switch to companion mode: multipathd gets it after the
      // first pass, and the file keeps it until then.
      queueingHandover_.insert_or_assign(maps_.at(heldMap).uuid, Handover{heldMap});
      log::notice(fmt::format("map {}: the admin's disable-queueing from before this start is "
                              "handed to multipathd",
                              heldMap),
                  {{"MAP", heldMap}});
      continue;
    }
    queueingDisabled_.insert(heldMap);
    if (heldMap == alias) {
      log::notice(fmt::format("map {}: queueing still disabled by the admin (since before this "
                              "start), until restore-queueing",
                              alias),
                  {{"MAP", alias}});
    } else {
      log::notice(fmt::format("map {}: renamed to {} while pathkeeperd was stopped; queueing "
                              "still disabled by the admin, until restore-queueing",
                              alias, heldMap),
                  {{"MAP", heldMap}});
    }
  }
  saveAdminHolds();
}

void Daemon::loadMapModels() {
  const auto text = readLeftByEarlierRun(options_.mapModelsFile);
  if (!text) {
    return;
  }
  if (!*text) {
    log::warning(fmt::format("{}; a map whose devices went before this start gets the "
                             "defaults' policy, not its [[device]] entry's",
                             text->error()));
    return;
  }
  const std::string where = options_.mapModelsFile.string();
  std::istringstream in(**text);
  unsigned lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const auto first = line.find('\t');
    const auto second = first == std::string::npos ? first : line.find('\t', first + 1);
    if (second == std::string::npos || line.find('\t', second + 1) != std::string::npos ||
        first == 0) {
      log::warning(
          fmt::format("{}:{}: not \"WWID<tab>vendor<tab>product\"; ignored", where, lineNo));
      continue;
    }
    knownModels_.insert_or_assign(
        line.substr(0, first),
        std::pair{line.substr(first + 1, second - first - 1), line.substr(second + 1)});
  }
}

void Daemon::syncMapModels() {
  if (options_.mapModelsFile.empty()) {
    return;
  }
  // The maps the kernel has now, planned or stale: a map that is gone
  // needs no policy, and a LUN that comes back brings its paths.
  std::map<std::string, std::pair<std::string, std::string>> models;
  // SCSI INQUIRY strings are printable ASCII; anything else would break the
  // line, and is left out.
  const auto clean = [](const std::string &field) {
    return field.find_first_of("\t\n") == std::string::npos;
  };
  for (const auto *known : {&maps_, &staleMaps_}) {
    for (const auto &[alias, map] : *known) {
      if (!map.wwid.empty() && clean(map.wwid) && (!map.vendor.empty() || !map.product.empty()) &&
          clean(map.vendor) && clean(map.product)) {
        models.insert_or_assign(map.wwid, std::pair{map.vendor, map.product});
      }
    }
  }
  std::string text = "# The SCSI vendor and product of each multipath map's paths, by WWID\n"
                     "# (WWID<tab>vendor<tab>product), so that a [[device]] policy still\n"
                     "# applies after a restart to a map whose devices are gone. Written by\n"
                     "# pathkeeperd.\n";
  for (const auto &[wwid, model] : models) {
    text += fmt::format("{}\t{}\t{}\n", wwid, model.first, model.second);
  }
  if (text == modelsText_) {
    return;
  }
  if (auto written = replaceFile(options_.mapModelsFile, text); !written) {
    if (written.error() != modelsWriteError_) { // tried at every publication, said once
      log::warning(written.error() + "; after a restart, a map whose devices are gone would get "
                                     "the defaults' policy, not its [[device]] entry's");
      modelsWriteError_ = written.error();
    }
    return;
  }
  modelsText_ = std::move(text);
  modelsWriteError_.clear();
}

void Daemon::saveAdminHolds() {
  if (options_.adminHoldsFile.empty()) {
    return;
  }
  AdminHolds holds;
  holds.failedPaths = adminFailed_;
  holds.queueingDisabled = queueingDisabled_;
  for (const auto &alias : queueingDisabled_) {
    for (const auto *known : {&maps_, &staleMaps_}) {
      if (auto map = known->find(alias); map != known->end() && !map->second.uuid.empty()) {
        holds.mapUuids[alias] = map->second.uuid;
      }
    }
  }
  // Not yet multipathd's: a restart must not lose them. (The two never
  // hold at once: queueingDisabled_ is owner mode's, these companion's.)
  for (const auto &[uuid, handover] : queueingHandover_) {
    holds.queueingDisabled.insert(handover.alias);
    holds.mapUuids[handover.alias] = uuid;
  }
  std::string text = renderAdminHolds(holds);
  if (text == savedHolds_) {
    return;
  }
  if (auto written = replaceFile(options_.adminHoldsFile, text); !written) {
    log::error(written.error() + "; the admin's holds would not survive a restart");
    return;
  }
  savedHolds_ = std::move(text);
}

void Daemon::finishStartup() {
  ready_ = true;
  publish();
  sd_notify(0, "READY=1");
  log::notice(fmt::format("ready: {}", snapshot().status));
}

// --- events ------------------------------------------------------------------

void Daemon::onDeviceEvents() {
  const auto now = Clock::now();
  std::vector<std::string> changed;
  bool mapsChanged = false;
  bool foreignMap = false;
  bool nameFreed = false;
  bool inventoryTouched = false;
  for (DeviceEvent &ev : monitor_->receive()) {
    if (!ev.dmAction.empty()) {
      const std::string device = deviceOfDevt(ev.dmPath);
      log::debug(fmt::format("dm event {} for {} ({}) on {}", ev.dmAction, ev.dmPath,
                             device.empty() ? "unknown path" : device, ev.dmName),
                 {{"PATH", device}, {"MAP", ev.dmName}});
      if (auto stale = staleMaps_.find(ev.dmName); stale != staleMaps_.end()) {
        // A stale map's paths are not checked (their devices are mostly
        // gone): dm's word is all there is, and its no_path_retry count
        // runs on it. I/O on a deleted LUN fails its paths only now.
        // Only a path the stale map lists: a pass that plans the map
        // again may already have sent messages for its new paths.
        auto path = stale->second.dmFailed.find(device.empty() ? ev.dmPath : device);
        if (path != stale->second.dmFailed.end()) {
          path->second = ev.dmAction == "PATH_FAILED";
          runNoPathRetry(now);
          rearmHealthTimer();
          requestPublish();
          continue;
        }
      }
      if (device.empty()) {
        continue;
      }
      if (ev.dmAction == "PATH_FAILED") {
        for (auto &[alias, map] : maps_) {
          if (map.dmFailed.contains(device)) {
            map.dmFailed[device] = true;
          }
        }
        const bool echo = echoes_.isEcho(device, true, now);
        noteKernelReport(device, true, echo);
        if (echo || adminFailed_.contains(device)) {
          // The echo of our own fail_path (dm_echo.hpp), or of the admin's:
          // it says nothing about the path's health. Counting the admin's
          // would make a path the admin fails a few times "shaky" (flap
          // damping) and down until its next check after the release.
          log::debug(fmt::format("dm event PATH_FAILED for {}: {}", device,
                                 echo ? "the echo of our fail_path" : "the admin holds it failed"),
                     {{"PATH", device}});
          requestPublish();
          continue;
        }
        apply(health_.kernelFailed(device, now));
      } else if (ev.dmAction == "PATH_REINSTATED") {
        for (auto &[alias, map] : maps_) {
          if (map.dmFailed.contains(device)) {
            map.dmFailed[device] = false;
          }
        }
        const bool echo = echoes_.isEcho(device, false, now);
        noteKernelReport(device, false, echo);
        if (echo) {
          log::debug(fmt::format("dm event PATH_REINSTATED for {}: the echo of our "
                                 "reinstate_path",
                                 device),
                     {{"PATH", device}});
          requestPublish();
          continue;
        }
        auto decisions = health_.kernelReinstated(device, now);
        if (mode_ == selector::Mode::Companion) {
          // multipathd reinstated it on its own checker's word: it owns the
          // map, and failing the path again would start a tug of war.
          for (auto &decision : decisions) {
            if (decision.action == DmAction::Fail) {
              decision.action = DmAction::None;
              decision.reason += "; left to multipathd, which owns the map";
            }
          }
        }
        apply(decisions);
      }
      continue;
    }
    if (ev.event.subsystem == "block" && ev.sysname.starts_with("dm-")) {
      mapsChanged = true; // a map appeared, changed or went away
      foreignMap = foreignMap || isForeignMapEvent(ev);
      if (ev.event.action == UdevEvent::Action::Remove) {
        lastCreates_.erase(ev.dmName); // a failed create undone: over
        noteRemoved(ev);
        // The device that held a name a failing rename wants (an LVM
        // volume, another tool's map) may be the one gone. A remove event
        // need not carry DM_NAME: any removal while a rename waits.
        nameFreed = nameFreed || !renameFailures_.empty();
      }
      continue;
    }
    auto names = sysfs_.apply(inventory_, ev.event);
    changed.insert(changed.end(), names.begin(), names.end());
    inventoryTouched = true;
  }
  if (inventoryTouched) {
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    syncHealth(changed, now);
  }
  if (mapsChanged && mode_ == selector::Mode::Owner && configuredMode() == selector::Mode::Auto) {
    // A multipathd started meanwhile loads its tables at once: companion
    // now, rather than a pass that loads ours back. One read of
    // /proc/net/unix per batch of dm events.
    watchMultipathd(/*processes=*/false);
  }
  if (mapsChanged && mode_ == selector::Mode::Companion) {
    requestReconcile("a map changed");
  } else if (foreignMap) {
    // Typically the dmsetup remove of a stale map: its hold, its count and
    // its publication end now, not at whatever pass comes next.
    requestReconcile("a map was removed, renamed or made by another tool");
  } else if (nameFreed && mode_ == selector::Mode::Owner) {
    requestReconcile("a device-mapper device went while a rename waits for its name");
  }
  if (monitor_->takeLostEvents() && !std::exchange(lostEventsRescanDue_, true)) {
    // A burst (a mass login or logout) overflowed the socket: a path added
    // or removed, a session's change or a dm path event may be among the
    // lost. What they would have said is in sysfs and in the maps.
    log::warning("device events were lost (the event socket's buffer overflowed): rescanning "
                 "sysfs and the maps in 1 s");
    EventLoop::rearm(lostEventsTimer_, now + std::chrono::seconds(1));
  }
}

void Daemon::noteKernelReport(const std::string &device, bool failed, bool echo) {
  if (!forwards_.kernelReported(device, failed, echo) || !failed) {
    return;
  }
  // Our reinstate never reached multipathd, and the path failed since:
  // multipathd's checker or the kernel, whose word is newer.
  log::notice(fmt::format("path {}: dm reports it failed while pathkeeper's \"reinstate path\" "
                          "for it was not taken by multipathd; it is not sent again",
                          device),
              {{"PATH", device}});
}

void Daemon::noteRemoved(const DeviceEvent &ev) {
  for (const auto *maps : {&maps_, &staleMaps_}) {
    for (const auto &[alias, map] : *maps) {
      if (alias == ev.dmName || (!ev.devnum.empty() && map.devt == ev.devnum)) {
        removedMaps_[alias] = passes_;
      }
    }
  }
}

bool Daemon::isForeignMapEvent(const DeviceEvent &ev) const {
  // Owner mode never removes a map itself, and renames only in a pass's
  // rename step (its new names are in lastCreates_): the removal of a map
  // it knows (by name, or by its device number should udev not pass the
  // name on), or a multipath map under a name it neither knows nor just
  // created (a dmsetup rename, a map another tool made), is the admin's
  // doing. Not: a map it never knew going (libdevmapper removes a map
  // whose create failed; another tool's LVM or crypt device), its own
  // creations and reloads.
  const auto known = [&](const std::string &name) {
    return maps_.contains(name) || staleMaps_.contains(name);
  };
  if (ev.event.action == UdevEvent::Action::Remove) {
    if (known(ev.dmName)) {
      return true;
    }
    for (const auto *maps : {&maps_, &staleMaps_}) {
      for (const auto &[alias, map] : *maps) {
        if (!ev.devnum.empty() && map.devt == ev.devnum) {
          return true;
        }
      }
    }
    return false;
  }
  return ev.dmUuid.starts_with(kMultipathUuidPrefix) && !ev.dmName.empty() && !known(ev.dmName) &&
         !lastCreates_.contains(ev.dmName);
}

void Daemon::pollSessions() {
  const auto now = Clock::now();
  std::vector<std::string> changed;
  // Session state changes (a login after recovery) send no uevent; neither
  // does a device going from blocked to running. Re-read the cheap state
  // files and feed real changes through the inventory's event path.
  // Every session and disk each sessionPoll; in between, every
  // recoveringPoll, only those out of their healthy state.
  const bool full = now >= nextFullSessionPoll_;
  if (full) {
    nextFullSessionPoll_ = now + options_.sessionPoll;
  }
  std::vector<std::string> sessions;
  for (const auto &[name, session] : inventory_.sessions) {
    if (!full && session.state == "LOGGED_IN") {
      continue;
    }
    const std::string state =
        readSmallFile(options_.sysfsRoot / "class/iscsi_session" / name / "state");
    if (!state.empty() && state != session.state) {
      log::debug(fmt::format("{}: {} -> {}", name, session.state, state), {{"SESSION", name}});
      sessions.push_back(name);
    }
  }
  bool stateChanged = !sessions.empty();
  for (const auto &name : sessions) {
    UdevEvent ev{UdevEvent::Action::Change, "iscsi_session",
                 sysfs_.devpathOf(fs::path("class/iscsi_session") / name)};
    if (ev.devpath.empty()) {
      log::warning(fmt::format("{} changed state but has no device path in sysfs", name));
      continue;
    }
    auto names = sysfs_.apply(inventory_, ev);
    std::string list;
    for (const auto &n : names) {
      list += (list.empty() ? "" : " ") + n;
    }
    log::debug(fmt::format("{}: re-read, paths changed: {}", name, list.empty() ? "none" : list));
    changed.insert(changed.end(), names.begin(), names.end());
  }
  // Disks. A disk's state follows its session's (blocked while the session
  // recovers, transport-offline when recovery gives up). What reinstatement
  // waits for is a disk of a logged-in session going back to running, so
  // every poll reads those. The disks of a session that is out are re-read
  // with the session whenever its state changes; on their own they are read
  // at the full polls only: at 1000 paths one failed session holds 250
  // disks, which every 100 ms would be 2500 reads a second for nothing. The
  // settled ones only change on their own when SCSI error handling offlines
  // one, which its failing TUR reports too: they are read in a sweep, a
  // slice per full poll, each once every kDiskSweep. At 1000 paths reading
  // all of them every 500 ms cost a third of the daemon's CPU.
  constexpr std::chrono::milliseconds kDiskSweep{5000};
  const auto sessionLoggedIn = [this](const std::string &session) {
    auto it = inventory_.sessions.find(session);
    return it != inventory_.sessions.end() && it->second.state == "LOGGED_IN";
  };
  std::vector<UdevEvent> diskEvents; // applied after the walk: apply() edits the map
  const auto readDisk = [&](const std::string &name, const ScsiDisk &disk) {
    const std::string state = readSmallFile(options_.sysfsRoot / "block" / name / "device/state");
    if (!state.empty() && state != disk.state) {
      log::debug(fmt::format("{}: device {} -> {}", name, disk.state, state), {{"PATH", name}});
      diskEvents.push_back({UdevEvent::Action::Change, "block", disk.devpath});
    }
  };
  const auto settled = [&](const ScsiDisk &disk) {
    return disk.state == "running" && sessionLoggedIn(disk.session);
  };
  for (const auto &[name, disk] : inventory_.disks) {
    if (!disk.session.empty() && !settled(disk) && (full || sessionLoggedIn(disk.session))) {
      readDisk(name, disk);
    }
  }
  if (full && !inventory_.disks.empty()) {
    const auto polls = static_cast<std::size_t>(std::max<std::int64_t>(
        1, kDiskSweep / std::max(options_.sessionPoll, std::chrono::milliseconds(1))));
    std::size_t slice = (inventory_.disks.size() + polls - 1) / polls;
    auto it = inventory_.disks.upper_bound(diskSweepCursor_);
    for (std::size_t visited = 0; visited < inventory_.disks.size() && slice > 0; ++visited) {
      if (it == inventory_.disks.end()) {
        it = inventory_.disks.begin();
      }
      if (!it->second.session.empty() && settled(it->second)) {
        readDisk(it->first, it->second);
        --slice;
      }
      diskSweepCursor_ = it->first;
      ++it;
    }
  }
  for (const auto &ev : diskEvents) {
    stateChanged = true;
    auto names = sysfs_.apply(inventory_, ev);
    changed.insert(changed.end(), names.begin(), names.end());
  }
  if (stateChanged) {
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    syncHealth(changed, now);
  }
  bool recovering = false;
  for (const auto &[name, session] : inventory_.sessions) {
    recovering = recovering || session.state != "LOGGED_IN";
  }
  for (const auto &[name, disk] : inventory_.disks) {
    recovering = recovering || (!disk.session.empty() && disk.state != "running");
  }
  const auto next = recovering
                        ? std::min(Clock::now() + options_.recoveringPoll, nextFullSessionPoll_)
                        : nextFullSessionPoll_;
  EventLoop::rearm(sessionTimer_, next);
}

void Daemon::sampleAdaptive() {
  const auto now = Clock::now();
  const auto wall = std::chrono::system_clock::now();
  std::string reloaded;
  bool recordedAny = false;
  // Every device's counters in one read; a device missing from it (or no
  // /proc/diskstats at all) is read from its own stat file.
  const std::string diskstatsText = readProcFile(options_.procRoot / "diskstats");
  const auto diskstats = parseDiskstats(diskstatsText);
  const auto statOf = [&](const std::string &device) {
    if (auto it = diskstats.find(device); it != diskstats.end()) {
      return std::string(it->second);
    }
    return readSmallFile(options_.sysfsRoot / "block" / device / "stat");
  };
  for (const auto &[alias, map] : maps_) {
    if (!map.desired) {
      continue; // companion mode, or not ours: multipathd or nobody sets its weights
    }
    const MapPlan &planned = *map.desired;
    const bool wanted = adaptiveWanted(planned.autoSelector, planned.selector);
    // Service-time maps are measured even with fixed weights: the estimates
    // are published, and they show what "auto" would do.
    if (!wanted && planned.selector != selector::SelectorKind::ServiceTime) {
      continue;
    }
    AdaptiveMapInput input;
    std::vector<PathSettling> settling;
    input.alias = alias;
    input.autoSelector = planned.autoSelector;
    input.currentSelector = selector::parseSelectorKind(map.selector).value_or(planned.selector);
    for (const auto &group : map.groups) {
      for (const auto &device : group) {
        if (pathByDevice(device) == nullptr) {
          continue; // a devt the inventory does not know: nothing to read
        }
        adaptive_.sample(device, statOf(device), now);
        unsigned weight = 1;
        if (auto live = map.liveWeights.find(device); live != map.liveWeights.end()) {
          weight = live->second;
        } else {
          weight = planned.weightOf(device).value_or(weight);
        }
        input.paths.push_back({device, weight});
        auto failed = map.dmFailed.find(device);
        settling.push_back(
            {device, health_.state(device),
             failed == map.dmFailed.end() ? std::nullopt : std::optional<bool>(failed->second)});
      }
    }
    input.transitionDevice = firstUnsettledPath(settling);
    if (!wanted || selectorOverrides_.contains(alias) || adaptiveLoading_.contains(alias)) {
      continue;
    }
    const auto decision = adaptive_.evaluate(input, now, wall);
    const auto &history = adaptive_.history(alias);
    const bool recorded =
        !history.empty() && history.back().at == wall && history.back().reason == decision.reason;
    using Adaptive = selector::AdaptiveDecision::Action;
    if (decision.action == Adaptive::Reload) {
      log::write(log::Level::Notice, decision.reason, {{"MAP", alias}}, log::id::kAdaptiveDecision);
      reloaded += (reloaded.empty() ? "" : ", ") + alias;
      AdaptiveLoad load{passes_, std::nullopt};
      if (decision.atLull) {
        // The lull was seen at this sample; the pass swaps a few hundred
        // ms later. Wait there for one more, for up to one sample interval
        // but no more than 2 s: the rest of the pass's table work (a new
        // LUN's create) waits behind it on the table worker.
        LullGate gate;
        gate.target = config_.adaptive.reloadHoldTarget;
        gate.maxWait = std::min(config_.adaptive.sampleInterval, std::chrono::milliseconds{2000});
        for (const auto &path : input.paths) {
          const auto *estimate = adaptive_.estimate(path.device);
          if (auto perRequest =
                  estimate != nullptr ? selector::msPerRequest(*estimate) : std::nullopt) {
            gate.paths.push_back({path.device, *perRequest});
          }
        }
        if (!gate.paths.empty()) {
          load.gate = std::move(gate);
        }
      }
      adaptiveLoading_.insert_or_assign(alias, std::move(load));
    } else if (recorded) {
      recordedAny = true;
      log::write(log::Level::Info, decision.reason, {{"MAP", alias}}, log::id::kAdaptiveDecision);
    } else {
      log::debug(decision.reason, {{"MAP", alias}});
    }
  }
  if (!reloaded.empty()) {
    requestReconcile("adaptive selection: " + reloaded); // publishes when done
  }
  // Only when something visible moved: the state file is rewritten and
  // D-Bus diffed on every publish.
  if (adaptive_.refreshPublished() || recordedAny) {
    requestPublish();
  }
  EventLoop::rearm(adaptiveTimer_, now + config_.adaptive.sampleInterval);
}

void Daemon::syncHealth(const std::vector<std::string> &changed, Clock::time_point now) {
  bool membership = false;
  for (const auto &device : changed) {
    const InventoryPath *path = pathByDevice(device);
    const bool known = health_.state(device).has_value();
    // The admin failed a device, not a name: once it is gone, or its name
    // belongs to another LU, nothing is held (and nobody could release it).
    if (auto hold = adminFailed_.find(device);
        hold != adminFailed_.end() && (path == nullptr || identityOf(*path) != hold->second)) {
      log::notice(fmt::format("path {}: the admin's hold ends: {}", device,
                              path == nullptr ? "the device is gone"
                                              : "the name now belongs to another device"),
                  {{"PATH", device}});
      adminFailed_.erase(hold);
    }
    if (path == nullptr) {
      if (known) {
        log::info(fmt::format("path {} removed", device), {{"PATH", device}});
        apply(health_.removePath(device, now));
        adaptive_.forgetPath(device);
        echoes_.forget(device);
        forwards_.forget(device);
      }
    } else if (!known) {
      addToHealth(*path, now);
    }
    membership = true; // added, removed, or its WWID, size or priority changed
  }
  // Push every path's facts, not only the changed paths': a session that
  // fails after the kernel already blocked its disk leaves the derived path
  // as it was (down either way), yet the health engine must hear of it. The
  // engine ignores facts that did not change, so this is cheap.
  for (const auto &device : health_.devices()) {
    const InventoryPath *path = pathByDevice(device);
    if (path == nullptr) {
      continue;
    }
    const PathFacts facts = factsOf(*path);
    health_.setRoute(device, facts.route);
    apply(health_.sessionChanged(device, facts.session, now));
    apply(health_.deviceChanged(device, facts.device, now));
    apply(health_.aluaChanged(device, facts.alua, now));
  }
  if (membership) {
    requestReconcile("paths changed");
  }
  startDueChecks(now);
  rearmHealthTimer();
  requestPublish();
}

void Daemon::addToHealth(const InventoryPath &path, Clock::time_point now) {
  PathFacts facts = factsOf(path);
  const std::string map = mapOfDevice(path.path.device);
  if (!map.empty()) {
    auto it = maps_.at(map).dmFailed.find(path.path.device);
    facts.failedInDm = it != maps_.at(map).dmFailed.end() && it->second;
  }
  log::info(fmt::format("path {} ({} via {} from {}) added", path.path.device, path.path.targetIqn,
                        path.path.portal.str(),
                        path.path.netdev.empty() ? "any NIC" : path.path.netdev),
            {{"PATH", path.path.device},
             {"WWID", path.path.wwid},
             {"PORTAL", path.path.portal.str()},
             {"IFACE", path.path.netdev}});
  apply(health_.addPath(path.path.device, facts, now));
}

void Daemon::onCheckerResults() {
  const auto now = Clock::now();
  for (const auto &result : checker_->drain()) {
    CheckResult outcome;
    outcome.status = checkStatusOf(result.verdict.status);
    outcome.reason = result.verdict.reason;
    outcome.latency = result.latency;
    log::debug(fmt::format("TUR {}: {} {}", result.device, toString(result.verdict.status),
                           result.verdict.reason),
               {{"PATH", result.device}});
    apply(health_.checkCompleted(result.device, outcome, now));
  }
  startDueChecks(now);
  rearmHealthTimer();
  // A state change went out through apply(); what is left (the check's
  // verdict text and latency) can wait for the slow lane.
  requestPublish(options_.quietPublish);
}

void Daemon::onHealthTimer() {
  const auto now = Clock::now();
  apply(health_.tick(now, checker_->queued()));
  startDueChecks(now);
  if (mapPoliciesDue(now)) {
    runMapPolicies(now);
  }
  resendForwards(now);
  if (mode_ == selector::Mode::Companion && !queueingHandover_.empty()) {
    handOverQueueing(now);
  }
  rearmHealthTimer();
  requestPublish(options_.quietPublish);
}

void Daemon::startDueChecks(Clock::time_point now) {
  for (const auto &device : health_.dueChecks(now)) {
    startCheck(device, now);
  }
}

void Daemon::startCheck(const std::string &device, Clock::time_point now) {
  apply(health_.markCheckStarted(device, now));
  TurCheckRequest request;
  request.device = device;
  request.devnode = (options_.devRoot / device).string();
  request.timeout = config_.defaults.health.checkerTimeout;
  // A silent portal hangs every TUR through its session: one at a time.
  if (const InventoryPath *path = pathByDevice(device); path && path->path.sessionId >= 0) {
    request.group = fmt::format("session{}", path->path.sessionId);
  }
  checker_->submit(std::move(request));
}

void Daemon::rearmHealthTimer() {
  if (!healthTimer_.active()) {
    return; // start(): paths are added before the timers exist; it arms them after
  }
  auto next = health_.nextDeadline();
  for (auto other :
       {failback_.nextDeadline(), noPathRetry_.nextDeadline(), forwards_.nextDeadline()}) {
    if (other && (!next || *other < *next)) {
      next = other;
    }
  }
  for (const auto &[uuid, handover] : queueingHandover_) {
    if (!handover.inFlight && handover.delay != Clock::duration{} &&
        (!next || handover.nextTry < *next)) {
      next = handover.nextTry;
    }
  }
  const auto now = Clock::now();
  // Never busy-loop on a deadline in the past, never sleep past a minute.
  auto when =
      next ? std::max(*next, now + std::chrono::milliseconds(5)) : now + std::chrono::minutes(1);
  when = std::min(when, now + std::chrono::minutes(1));
  EventLoop::rearm(healthTimer_, when);
}

Expected<void> Daemon::reloadConfig() {
  auto config = loadConfig(options_.configFile, options_.configDir);
  if (!config) {
    log::write(log::Level::Error,
               fmt::format("config rejected, keeping the running one: {}", config.error()), {},
               log::id::kConfigRejected);
    return pathkeeper::fail("config rejected, keeping the running one: " + config.error());
  }
  const bool probesChanged = config->discovery != config_.discovery;
  const selector::Mode modeBefore = configuredMode();
  if (options_.mode && config->defaults.mode != config_.defaults.mode &&
      config->defaults.mode != *options_.mode) {
    log::notice(fmt::format("the configuration's mode = {} does not apply: --mode {} overrides it",
                            selector::toString(config->defaults.mode),
                            selector::toString(*options_.mode)));
  }
  config_ = std::move(*config);
  health_.setSettings(config_.defaults.health, Clock::now());
  rearmHealthTimer();
  adaptive_.setSettings(config_.adaptive);
  log::notice("configuration reloaded");
  if (probesChanged) {
    // A new initiator_name (or the host's, once it is unset) applies to the
    // next probe.
    probeInitiator_.clear();
  }
  if (probesChanged && probeTimer_.active()) {
    // New portals, NICs or interval: probe now and keep the new rhythm.
    // startProbes() re-arms the timer while probing is periodic; "0s" stops it.
    if (config_.discovery.probeInterval.count() == 0) {
      EventLoop::disable(probeTimer_);
    }
    startProbes();
  }
  if (const selector::Mode wanted = configuredMode(); wanted != modeBefore) {
    followConfiguredMode(wanted);
  }
  requestReconcile("configuration reloaded");
  return {};
}

void Daemon::followConfiguredMode(selector::Mode wanted) {
  multipathdGoneSince_.reset();
  if (wanted == selector::Mode::Auto) {
    multipathdSeen_ = false;
    watchMultipathd(/*processes=*/true); // to companion now; to owner after the grace
    return;
  }
  const auto seen = lookForMultipathd(options_.multipathdSocket, options_.procRoot.string());
  multipathdSeen_ = seen.process || seen.listening;
  if (wanted == selector::Mode::Owner && multipathdSeen_) {
    log::warning(ownerBesideMultipathd(seen, options_.multipathdSocket));
  } else if (wanted == selector::Mode::Companion && !multipathdSeen_) {
    log::warning(fmt::format("companion mode, but multipathd is not running and nothing listens "
                             "on @{}: path commands fail until it starts",
                             options_.multipathdSocket));
  }
  switchMode(wanted, fmt::format("the configuration says mode = {}", selector::toString(wanted)),
             wanted == selector::Mode::Companion && seen.listening && !seen.process);
}

// --- commands --------------------------------------------------------------------------

void Daemon::answerWhenDone(const std::function<Expected<void>()> &command, Done done) {
  if (mode_ != selector::Mode::Companion) {
    done(command());
    return;
  }
  auto waiter = std::make_shared<ForwardWaiter>(std::move(done));
  waiter_ = waiter;
  Expected<void> result;
  try {
    result = command();
  } catch (...) {
    waiter_.reset();
    waiter->abandon();
    throw;
  }
  waiter_.reset();
  waiter->returned(std::move(result));
}

Expected<void> Daemon::reconfigure() {
  return reloadConfig();
}

Expected<void> Daemon::failPath(const std::string &device) {
  if (pathByDevice(device) == nullptr) {
    return pathkeeper::fail("no such path: '" + device + "'");
  }
  if (mapOfDevice(device).empty()) {
    return pathkeeper::fail("path " + device + " is in no map");
  }
  adminFailed_[device] = identityOf(*pathByDevice(device));
  if (reconcileRunning_) {
    // A reload in flight starts its table with every path active, and a
    // message to the old table is lost: one more pass fails it again.
    reconcileAgain_ = true;
  }
  saveAdminHolds();
  log::write(log::Level::Notice,
             fmt::format("path {}: failed by the admin; held until reinstated", device),
             {{"PATH", device}, {"MAP", mapOfDevice(device)}}, log::id::kPathFailed);
  // It may have been its map's last stable path: a shaky one that is
  // healthy is reinstated first, so that the map is never left without one.
  refreshLastResort(Clock::now());
  sendPathMessage(device, true, "failed by the admin", waiter_);
  requestPublish();
  return {};
}

Expected<void> Daemon::reinstatePath(const std::string &device) {
  if (pathByDevice(device) == nullptr) {
    return pathkeeper::fail("no such path: '" + device + "'");
  }
  if (mapOfDevice(device).empty()) {
    return pathkeeper::fail("path " + device + " is in no map");
  }
  const bool held = adminFailed_.erase(device) > 0;
  saveAdminHolds();
  if (held && reconcileRunning_) {
    reconcileAgain_ = true; // the pass in flight may fail it again: one more puts it right
  }
  auto state = health_.state(device);
  if (state && !selector::isUsable(*state) && *state != PathState::Unknown &&
      *state != PathState::Pending) {
    if (held) {
      log::notice(fmt::format("path {}: released by the admin; checking it now (it is {})", device,
                              selector::toString(*state)),
                  {{"PATH", device}});
      // Check at once: a passing TUR reinstates it, rather than the next
      // round of failed-path checks.
      const auto now = Clock::now();
      if (auto h = health_.health(device); h && !h->checkInFlight) {
        startCheck(device, now);
      }
      return {};
    }
    return pathkeeper::fail(fmt::format("path {} is {}; it is reinstated once its checks pass",
                                        device, selector::toString(*state)));
  }
  log::write(log::Level::Notice, fmt::format("path {}: reinstated by the admin", device),
             {{"PATH", device}}, log::id::kPathReinstated);
  sendPathMessage(device, false, "reinstated by the admin", waiter_);
  refreshLastResort(Clock::now()); // after it: a shaky last resort is failed only now
  requestPublish();
  return {};
}

Expected<void> Daemon::switchGroup(const std::string &map, unsigned group) {
  auto it = maps_.find(map);
  if (it == maps_.end()) {
    return pathkeeper::fail(noSuchMap(map));
  }
  if (group == 0 || group > it->second.groups.size()) {
    return pathkeeper::fail(fmt::format("map {} has {} group(s); there is no group {}", map,
                                        it->second.groups.size(), group));
  }
  if (mode_ == selector::Mode::Companion) {
    auto command = switchGroupCommand(map, group);
    if (!command) {
      return pathkeeper::fail("cannot build a multipathd switchgroup command for '" + map + "'");
    }
    forwardToMultipathd(*command, {"MAP", map}, false, {}, waiter_);
    return {};
  }
  if (auto refused = refuseSwitch(map, it->second, group)) {
    return pathkeeper::fail(*refused);
  }
  // Validated above; the kernel's answer comes from the worker and is
  // logged (a reload queued before it may take seconds).
  const std::string text = fmt::format("switch_group {}", group);
  messageWorker_->post(
      fmt::format("{} on {}", text, map),
      [this, posted = map, uuid = uuidOfMap(map), text,
       group](DeviceMapper &dm) -> DmWorker::Continuation {
        try {
          sendMessage(dm, uuid, posted, text);
        } catch (const std::exception &e) {
          return [this, posted, uuid, text, what = std::string(e.what())] {
            const std::string now = nameNow(uuid, posted);
            log::error(fmt::format("map {}: {} (asked by the admin) failed: {}", now, text, what),
                       {{"MAP", now}});
          };
        }
        return [this, posted, uuid, group] {
          const std::string now = nameNow(uuid, posted);
          // The group in use as failback sees it: the admin's, from now on.
          if (auto *state = plannedMapNow(uuid, posted)) {
            state->activeGroup = group;
          }
          log::notice(fmt::format("map {}: switched to group {} by the admin", now, group),
                      {{"MAP", now}});
          runMapPolicies(Clock::now());
          requestPublish();
        };
      });
  return {};
}

std::optional<std::string> Daemon::refuseSwitch(const std::string &alias, const MapState &map,
                                                unsigned group) const {
  const auto groups = failbackGroups(map);
  if (group > groups.size()) {
    return std::nullopt; // checked by the caller
  }
  // Refused only on what the checks know: a path not checked yet (pending,
  // e.g. just after a restart) may well carry I/O.
  std::vector<std::string> states;
  bool maybeUsable = false;
  for (const auto &device : map.groups[group - 1]) {
    maybeUsable = maybeUsable || verdictOf(device) != Verdict::Unusable;
    const auto state = health_.state(device);
    states.push_back(fmt::format("{} {}{}", device,
                                 state ? selector::toString(*state) : std::string_view{"unknown"},
                                 adminFailed_.contains(device) ? " (failed by the admin)" : ""));
  }
  if (!maybeUsable) {
    return fmt::format("group {} of map {} has no usable path ({}): the kernel would not use it",
                       group, alias, fmt::join(states, ", "));
  }
  const auto &policy = config_.defaults.failback;
  const unsigned best = bestGroup(groups);
  if (best == 0 || group == best ||
      (policy.kind != selector::Failback::Kind::Immediate &&
       policy.kind != selector::Failback::Kind::Deferred)) {
    return std::nullopt;
  }
  // Immediate (or deferred) failback would undo the switch at once (or
  // after its delay): say so instead of doing something that does not last.
  const bool immediate = policy.kind == selector::Failback::Kind::Immediate;
  return fmt::format(
      "failback is {}: the daemon would move map {} back to group {}, its preferred group, {}. "
      "To keep I/O off group {}, fail its paths (pathkeeperctl fail-path holds them until "
      "reinstate-path), or set failback to \"manual\" or \"followover\" and reload the "
      "configuration",
      immediate ? std::string{"\"immediate\""}
                : fmt::format("deferred by {}s", policy.delay.count()),
      alias, best,
      immediate ? std::string{"at once"} : fmt::format("{}s later", policy.delay.count()), best);
}

std::string Daemon::noSuchMap(const std::string &map) const {
  if (staleMaps_.contains(map)) {
    return fmt::format("map {} is stale: no planned map names it (are its devices gone?), so "
                       "pathkeeperd no longer maintains its table or groups",
                       map);
  }
  return "no such map: '" + map + "'";
}

Expected<bool> Daemon::forwardQueueing(const std::string &map, bool queue) {
  auto it = maps_.find(map);
  if (it == maps_.end()) {
    auto stale = staleMaps_.find(map);
    if (stale == staleMaps_.end()) {
      return pathkeeper::fail("no such map: '" + map + "'");
    }
    if (!maintainsStale(map, stale->second)) {
      return pathkeeper::fail(fmt::format(
          "map {} is stale and not one pathkeeperd made or maintained (its WWID {} is not in {}); "
          "use dmsetup message {} 0 {}",
          map, stale->second.wwid, options_.ownedWwidsFile.string(), map,
          queue ? "queue_if_no_path" : "fail_if_no_path"));
    }
    return false; // a LUN whose devices are gone: what the command is for
  }
  if (mode_ == selector::Mode::Companion) {
    auto command = queueingCommand(map, queue);
    if (!command) {
      return pathkeeper::fail(fmt::format("cannot build a multipathd {} command for '{}'",
                                          queue ? "restorequeueing" : "disablequeueing", map));
    }
    const std::string uuid = uuidOfMap(map);
    if (queue) {
      // The admin's newest word on the map: a handover still under way of
      // an older disable-queueing must not come after it.
      if (queueingHandover_.erase(uuid) > 0) {
        saveAdminHolds();
      }
      forwardToMultipathd(*command, {"MAP", map}, true, {}, waiter_);
      return true;
    }
    // The same as a handover under way: that one ends once this is taken,
    // and goes on if multipathd does not take it.
    forwardToMultipathd(
        *command, {"MAP", map}, true,
        [this, uuid](bool ok) {
          if (ok && queueingHandover_.erase(uuid) > 0) {
            saveAdminHolds();
          }
        },
        waiter_);
    return true;
  }
  if (!it->second.desired) {
    return pathkeeper::fail("map " + map + " is not one pathkeeperd maintains");
  }
  return false;
}

Expected<void> Daemon::disableQueueing(const std::string &map) {
  auto forwarded = forwardQueueing(map, false);
  if (!forwarded || *forwarded) {
    return forwarded ? Expected<void>{} : pathkeeper::fail(forwarded.error());
  }
  queueingDisabled_.insert(map);
  saveAdminHolds();
  if (reconcileRunning_) {
    reconcileAgain_ = true; // a reload in flight brings the table's queue_if_no_path back
  }
  log::notice(fmt::format("map {}: queueing disabled by the admin: while no path is usable, "
                          "queued and new I/O fail, until restore-queueing",
                          map),
              {{"MAP", map}});
  sendQueueing(map, false, "disabled by the admin", false);
  requestPublish();
  return {};
}

Expected<void> Daemon::restoreQueueing(const std::string &map) {
  auto forwarded = forwardQueueing(map, true);
  if (!forwarded || *forwarded) {
    return forwarded ? Expected<void>{} : pathkeeper::fail(forwarded.error());
  }
  auto it = maps_.find(map);
  if (it == maps_.end()) {
    it = staleMaps_.find(map); // forwardQueueing found it in one of the two
  }
  const bool wasDisabled = queueingDisabled_.erase(map) > 0;
  saveAdminHolds();
  if (!wasDisabled) {
    log::info(fmt::format("map {}: restore-queueing: queueing was not disabled", map),
              {{"MAP", map}});
    return {};
  }
  if (reconcileRunning_) {
    reconcileAgain_ = true; // the pass in flight may still send fail_if_no_path
  }
  // no_path_retry decides, as if the admin had never disabled queueing: its
  // count went on meanwhile.
  using Kind = selector::NoPathRetry::Kind;
  const selector::NoPathRetry policy = policyOf(it->second);
  const bool expired = noPathRetry_.expired(map);
  if (policy.kind == Kind::Queue || (policy.kind == Kind::Count && !expired)) {
    log::notice(fmt::format("map {}: queueing restored by the admin", map), {{"MAP", map}});
    sendQueueing(map, true, "restored by the admin", false);
  } else {
    log::notice(fmt::format("map {}: queueing restored by the admin; I/O still fails while no "
                            "path is usable: {}",
                            map,
                            expired ? "no_path_retry ran out, queueing returns with the first "
                                      "usable path"
                                    : "no_path_retry is \"fail\""),
                {{"MAP", map}});
  }
  requestPublish();
  return {};
}

Expected<void> Daemon::setSelector(const std::string &map, const std::string &selector) {
  if (!maps_.contains(map)) {
    return pathkeeper::fail(noSuchMap(map));
  }
  if (mode_ != selector::Mode::Owner) {
    return pathkeeper::fail("companion mode: multipathd owns the tables; set the selector in "
                            "multipath.conf");
  }
  auto kind = selector::parseSelectorKind(selector);
  if (!kind) {
    return pathkeeper::fail("unknown selector '" + selector +
                            "' (round-robin, queue-length, service-time, historical-service-time)");
  }
  if (*kind == selector::SelectorKind::HistoricalServiceTime && !kernel_.historicalServiceTime) {
    return pathkeeper::fail("this kernel has no dm-historical-service-time");
  }
  selectorOverrides_[map] = *kind;
  log::notice(fmt::format("map {}: selector {} set by the admin", map, selector), {{"MAP", map}});
  pendingReconcileWhy_ = "selector set by the admin";
  reconcile();
  return {};
}

Expected<void> Daemon::rescan() {
  auto scanned = sysfs_.scan();
  if (!scanned) {
    return pathkeeper::fail("rescan: " + scanned.error());
  }
  std::vector<std::string> changed;
  for (const auto &[name, path] : scanned->paths) {
    auto old = inventory_.paths.find(name);
    if (old == inventory_.paths.end() || !(old->second == path)) {
      changed.push_back(name);
    }
  }
  for (const auto &[name, path] : inventory_.paths) {
    if (!scanned->paths.contains(name)) {
      changed.push_back(name);
    }
  }
  inventory_ = std::move(*scanned);
  log::info(fmt::format("rescan: {} path(s) changed", changed.size()));
  syncHealth(changed, Clock::now());
  requestReconcile("rescan");
  return {};
}

// --- actions -------------------------------------------------------------------

void Daemon::apply(const HealthTracker::Decisions &decisions) {
  for (const auto &decision : decisions) {
    if (decision.state == PathState::Shaky) {
      shakyPaths_.insert(decision.device);
    } else {
      shakyPaths_.erase(decision.device);
    }
    const InventoryPath *path = pathByDevice(decision.device);
    const std::string map = mapOfDevice(decision.device);
    const std::string state{selector::toString(decision.state)};
    std::string_view id;
    log::Level level = log::Level::Info;
    if (decision.action == DmAction::Fail) {
      id = decision.state == PathState::Shaky ? log::id::kPathShaky : log::id::kPathFailed;
      level = log::Level::Warning;
    } else if (decision.action == DmAction::Reinstate) {
      id = log::id::kPathReinstated;
      level = log::Level::Notice;
    } else if (decision.state == PathState::Shaky) {
      id = log::id::kPathShaky;
      level = log::Level::Warning;
    }
    const std::string verb = decision.action == DmAction::Fail        ? "fail"
                             : decision.action == DmAction::Reinstate ? "reinstate"
                                                                      : "state";
    // Correlation (issue #8): a failing path whose NIC or portal has a
    // network finding says so, e.g. "its traffic leaves via eth1 although
    // bound to eth2".
    std::string cause;
    if (path != nullptr &&
        (decision.action == DmAction::Fail || decision.state == PathState::Shaky)) {
      cause = findingNoteFor(networkFindings_, decision.device, path->path.netdev,
                             path->path.portal.str());
    }
    log::write(
        level,
        fmt::format("path {} {}: {} ({}){}", decision.device, verb, state, decision.reason,
                    cause.empty() ? std::string{} : "; " + cause),
        {{"PATH", decision.device},
         {"MAP", map},
         {"WWID", path != nullptr ? path->path.wwid : ""},
         {"CONTROLLER", path != nullptr ? path->path.controller : ""},
         {"SESSION",
          path != nullptr && path->path.sessionId >= 0 ? std::to_string(path->path.sessionId) : ""},
         {"PORTAL", path != nullptr ? path->path.portal.str() : ""},
         {"IFACE", path != nullptr ? path->path.netdev : ""}},
        id);
    if (decision.action == DmAction::Reinstate && adminFailed_.contains(decision.device)) {
      log::info(fmt::format("path {} passes its checks but stays failed: the admin failed it",
                            decision.device),
                {{"PATH", decision.device}});
      continue;
    }
    if (decision.action != DmAction::None) {
      sendPathMessage(decision.device, decision.action == DmAction::Fail, decision.reason);
    }
  }
  if (!decisions.empty()) {
    if (reconcileRunning_) {
      // The pass in flight planned with the old states; a path it does not
      // know yet got no message. One more pass puts dm right.
      reconcileAgain_ = true;
    }
    // A path that changed may have been its map's last stable one, or a
    // stable one again. (Applies its own decisions first, through here; a
    // second round changes no mark.)
    refreshLastResort(Clock::now());
    runMapPolicies(Clock::now());
    requestPublish();
  }
}

void Daemon::forwardToMultipathd(const std::string &command, const log::Field &field, bool reread,
                                 std::function<void(bool ok)> done,
                                 const std::shared_ptr<ForwardWaiter> &waiter) {
  if (waiter) {
    waiter->sent();
  }
  multipathd_->request(
      command, kMultipathdTimeout,
      [this, command, field, reread, done = std::move(done), waiter](Expected<std::string> reply) {
        Expected<void> ok = reply ? checkMultipathdActionReply(*reply)
                                  : Expected<void>(pathkeeper::fail(reply.error()));
        if (done) {
          done(ok.has_value());
        }
        if (waiter) {
          waiter->answered(command, ok);
        }
        if (ok) {
          log::info(fmt::format("multipathd: {}: ok", command), {field});
          if (reread) {
            requestReconcile("multipathd: " + command);
          }
        } else {
          log::error(fmt::format("multipathd: {}: {}", command, ok.error()), {field});
        }
      },
      Clock::now(), queueLimitFor(waiter));
  syncMultipathd();
}

void Daemon::forwardPathCommand(const PendingForwards::Forward &forward,
                                const std::shared_ptr<ForwardWaiter> &waiter) {
  const std::string command =
      (forward.fail ? failPathCommand(forward.device) : reinstatePathCommand(forward.device))
          .value_or("");
  // multipathd's dm message raises the same uevent as ours would: its echo
  // says nothing of the path's health (dm_echo.hpp).
  echoes_.expect(forward.device, forward.fail, Clock::now());
  if (waiter) {
    waiter->sent();
  }
  multipathd_->request(
      command, kMultipathdTimeout,
      [this, forward, command, waiter](Expected<std::string> reply) {
        const Expected<void> ok = reply ? checkMultipathdActionReply(*reply)
                                        : Expected<void>(pathkeeper::fail(reply.error()));
        const log::Field field{"PATH", forward.device};
        if (!ok) {
          echoes_.cancel(forward.device, forward.fail); // most likely not done: no event
        }
        const auto retry = forwards_.answered(forward, ok.has_value(), Clock::now());
        if (waiter) {
          // A refusal that no longer matters (dm already shows what was
          // asked, or a newer verdict replaced it) is not the admin's error.
          waiter->answered(command, ok || !retry ? Expected<void>{} : ok, true);
        }
        if (ok) {
          if (forward.attempt == 1) {
            log::info(fmt::format("multipathd: {}: ok", command), {field});
          } else {
            log::notice(fmt::format("multipathd: {}: ok at try {}", command, forward.attempt),
                        {field});
          }
        } else if (!retry) {
          // A newer verdict replaced it, or the kernel already reports the
          // path as it asked.
          log::info(fmt::format("multipathd: {}: {}; no longer needed", command, ok.error()),
                    {field});
        } else {
          // The first failure is an error; a command that keeps failing is
          // reminded of now and then rather than every 30 s.
          const auto level = forward.attempt == 1        ? log::Level::Error
                             : forward.attempt % 10 == 0 ? log::Level::Warning
                                                         : log::Level::Debug;
          const auto delay = std::chrono::ceil<std::chrono::seconds>(*retry - Clock::now());
          log::write(level,
                     fmt::format("multipathd: {}: {} (try {}); sending it again in {} s", command,
                                 ok.error(), forward.attempt, std::max<long>(delay.count(), 0)),
                     {field});
          rearmHealthTimer();
        }
      },
      Clock::now(), queueLimitFor(waiter));
  syncMultipathd();
}

void Daemon::resendForwards(Clock::time_point now) {
  for (const auto &forward : forwards_.due(now)) {
    const InventoryPath *path = pathByDevice(forward.device);
    if (path == nullptr) {
      forwards_.forget(forward.device); // the path went meanwhile
      continue;
    }
    if (identityOf(*path) != forward.identity) {
      // The kernel gave the name to another device (a LUN removed and
      // another added in one batch of uevents): the verdict was on the old one.
      log::info(fmt::format("multipathd: \"{} path {}\" is not sent again: the name now "
                            "belongs to another device",
                            forward.fail ? "fail" : "reinstate", forward.device),
                {{"PATH", forward.device}});
      forwards_.forget(forward.device);
      continue;
    }
    auto map = maps_.find(mapOfDevice(forward.device));
    if (map == maps_.end()) {
      // Blacklisted by multipathd, or not (yet) in one of its maps: it
      // refuses the command for as long as that lasts.
      log::info(fmt::format("multipathd: path {} is in none of its maps; \"{} path {}\" is not "
                            "sent again",
                            forward.device, forward.fail ? "fail" : "reinstate", forward.device),
                {{"PATH", forward.device}});
      forwards_.forget(forward.device);
      continue;
    }
    if (!forward.fail) {
      auto dm = map->second.dmFailed.find(forward.device);
      if (dm != map->second.dmFailed.end() && !dm->second) {
        log::debug(fmt::format("multipathd: path {} is already active in dm; not asked again",
                               forward.device),
                   {{"PATH", forward.device}});
        forwards_.forget(forward.device);
        continue;
      }
    }
    if (auto again = forwards_.resent(forward)) {
      forwardPathCommand(*again);
    }
  }
}

void Daemon::sendPathMessage(const std::string &device, bool fail, const std::string &reason,
                             const std::shared_ptr<ForwardWaiter> &waiter) {
  if (mode_ == selector::Mode::Companion) {
    if (!failPathCommand(device)) {
      log::error(fmt::format("cannot ask multipathd about '{}': not a valid device name", device));
      return;
    }
    const InventoryPath *path = pathByDevice(device);
    forwardPathCommand(forwards_.sent(device, fail, path != nullptr ? identityOf(*path) : ""),
                       waiter);
    return;
  }
  const std::string map = mapOfDevice(device);
  const InventoryPath *path = pathByDevice(device);
  if (map.empty() || path == nullptr) {
    return; // not in a map yet: the reconciler creates it with this state
  }
  const std::string text =
      fmt::format("{} {}", fail ? "fail_path" : "reinstate_path", path->path.devt.str());
  const auto posted = Clock::now();
  echoes_.expect(device, fail, posted);
  messageWorker_->post(
      fmt::format("{} on {}", text, map),
      [this, postedTo = map, uuid = uuidOfMap(map), text, device, fail, reason,
       posted](DeviceMapper &dm) -> DmWorker::Continuation {
        try {
          sendMessage(dm, uuid, postedTo, text);
        } catch (const std::exception &e) {
          return [this, postedTo, uuid, text, device, fail, reason, what = std::string(e.what())] {
            const std::string now = nameNow(uuid, postedTo);
            echoes_.cancel(device, fail);
            log::error(
                fmt::format("{} on {} failed: {} (wanted because: {})", text, now, what, reason),
                {{"PATH", device}, {"MAP", now}});
          };
        }
        const auto done = Clock::now();
        return [this, postedTo, uuid, device, fail, text, wait = done - posted] {
          const std::string now = nameNow(uuid, postedTo);
          log::debug(
              fmt::format("{} on {}: done {} ms after the decision", text, now,
                          std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()),
              {{"PATH", device}, {"MAP", now}});
          if (auto *state = plannedMapNow(uuid, postedTo)) {
            // Only a path the map still has: a reload may have dropped it.
            if (auto entry = state->dmFailed.find(device); entry != state->dmFailed.end()) {
              entry->second = fail;
            }
            requestPublish();
          }
        };
      });
}

namespace {

/// The group the kernel uses for @p map now (its active group, else the one
/// it will use next); nullopt when the status cannot be read.
std::optional<unsigned> kernelGroup(DeviceMapper &dm, const std::string &map) {
  auto lines = dm.status(map);
  if (!lines || lines->size() != 1) {
    return std::nullopt;
  }
  auto status = selector::parseDmStatus(lines->front().params, false);
  const unsigned group = status ? status->groupInUse() : 0U;
  return group != 0 ? std::optional<unsigned>(group) : std::nullopt;
}

} // namespace

void Daemon::runMapPolicies(Clock::time_point now) {
  nextPolicySweep_ = now + config_.defaults.health.checkerInterval;
  runNoPathRetry(now);
  runFailback(now);
}

bool Daemon::mapPoliciesDue(Clock::time_point now) const {
  if (now >= nextPolicySweep_) {
    return true;
  }
  for (const auto deadline : {failback_.nextDeadline(), noPathRetry_.nextDeadline()}) {
    if (deadline && *deadline <= now) {
      return true;
    }
  }
  return false;
}

void Daemon::runNoPathRetry(Clock::time_point now) {
  if (mode_ != selector::Mode::Owner) {
    return; // multipathd runs its own count on its maps
  }
  const auto interval = config_.defaults.health.checkerInterval;
  for (const auto &[alias, map] : maps_) {
    if (!map.desired) {
      continue;
    }
    unsigned usable = 0;
    unsigned unknown = 0;
    for (const auto &group : map.groups) {
      for (const auto &device : group) {
        const auto verdict = verdictOf(device);
        usable += verdict == Verdict::Usable ? 1U : 0U;
        unknown += verdict == Verdict::Unchecked ? 1U : 0U;
      }
    }
    auto decision =
        noPathRetry_.evaluate(alias, map.desired->noPathRetry, usable, unknown, interval, now);
    if (!decision) {
      continue;
    }
    if (queueingDisabled_.contains(alias)) {
      // The count goes on, so that RestoreQueueing finds it where it is.
      log::info(fmt::format("map {}: no_path_retry would {} ({}), but the admin disabled queueing",
                            alias, decision->queue ? "queue again" : "stop queueing",
                            decision->reason),
                {{"MAP", alias}});
      continue;
    }
    sendQueueing(alias, decision->queue, decision->reason, true);
  }
  // Maps the planner dropped while the kernel still has them (their paths'
  // devices are gone, e.g. a LUN deleted on the array): the kernel's view
  // of their paths decides, and the count must still run out.
  for (const auto &[alias, map] : staleMaps_) {
    if (!maintainsStale(alias, map)) {
      continue;
    }
    const auto usable = static_cast<unsigned>(std::ranges::count_if(
        map.dmFailed, [&](const auto &path) { return staleCarriesIo(map, path.first); }));
    auto decision = noPathRetry_.evaluate(alias, policyOf(map), usable, 0, interval, now);
    if (decision && !queueingDisabled_.contains(alias)) {
      sendQueueing(alias, decision->queue,
                   decision->reason + "; the map is stale (no planned map names it)", true);
    }
  }
}

void Daemon::stopStaleQueueing() {
  // The reconciler keeps a planned map's queueing as the count and the
  // admin say; a stale map has no plan, so this pass does it: a
  // fail_if_no_path that failed, or a foreign queue_if_no_path, is sent
  // again. Only towards not queueing: that is what the admin and the count
  // asked for, and a stale map's table is not pathkeeperd's to change.
  for (const auto &[alias, map] : staleMaps_) {
    if (!map.tableQueues || !maintainsStale(alias, map)) {
      continue;
    }
    if (queueingDisabled_.contains(alias)) {
      sendQueueing(alias, false, "disabled by the admin", false);
    } else if (noPathRetry_.expired(alias)) {
      sendQueueing(alias, false, "no_path_retry ran out", false);
    } else if (policyOf(map).kind == selector::NoPathRetry::Kind::Fail) {
      sendQueueing(alias, false, "no_path_retry = fail", false); // after a reload, say
    }
  }
}

bool Daemon::maintainsStale(const std::string &alias, const MapState &map) const {
  return ownedWwids_.contains(map.wwid) || noPathRetry_.lastPolicy(alias).has_value() ||
         queueingDisabled_.contains(alias);
}

bool Daemon::staleCarriesIo(const MapState &map, const std::string &device) const {
  auto path = map.dmFailed.find(device);
  if (path == map.dmFailed.end() || path->second) {
    return false;
  }
  if (auto known = inventory_.paths.find(device); known != inventory_.paths.end()) {
    return known->second.path.wwid == map.wwid; // not a name the kernel gave another LU
  }
  // A path refreshMaps could not name: by its devt ("8:0"), as the table
  // gives it. One not in the inventory (not iSCSI) exists as long as
  // sysfs lists its devt; a name the inventory no longer has is gone.
  return device.find(':') != std::string::npos &&
         fs::exists(options_.sysfsRoot / "dev/block" / device);
}

selector::NoPathRetry Daemon::policyOf(const MapState &map) const {
  if (map.desired) {
    return map.desired->noPathRetry;
  }
  // As the planner would give it, so that a configuration reload applies
  // to a stale map too.
  return selector::policyFor(config_, map.wwid, map.vendor, map.product).noPathRetry;
}

void Daemon::rememberModel(const std::string &alias, MapState &map) {
  for (const auto &[device, failed] : map.dmFailed) {
    if (auto path = inventory_.paths.find(device);
        path != inventory_.paths.end() && path->second.path.wwid == map.wwid) {
      map.vendor = path->second.path.vendor;
      map.product = path->second.path.product;
      if (!map.wwid.empty()) {
        knownModels_.insert_or_assign(map.wwid, std::pair{map.vendor, map.product});
      }
      return;
    }
  }
  for (const auto *known : {&maps_, &staleMaps_}) {
    if (auto before = known->find(alias);
        before != known->end() && before->second.uuid == map.uuid) {
      map.vendor = before->second.vendor;
      map.product = before->second.product;
      return;
    }
  }
  if (auto saved = knownModels_.find(map.wwid); saved != knownModels_.end()) {
    map.vendor = saved->second.first; // its devices are gone, or unread
    map.product = saved->second.second;
  }
}

void Daemon::sendQueueing(const std::string &alias, bool queue, const std::string &reason,
                          bool fromCount) {
  const std::string text = queue ? "queue_if_no_path" : "fail_if_no_path";
  const auto interval = config_.defaults.health.checkerInterval;
  messageWorker_->post(
      fmt::format("{} on {}", text, alias),
      [this, posted = alias, uuid = uuidOfMap(alias), text, queue, reason, fromCount,
       interval](DeviceMapper &dm) -> DmWorker::Continuation {
        try {
          sendMessage(dm, uuid, posted, text);
        } catch (const std::exception &e) {
          return [this, posted, uuid, text, fromCount, interval, what = std::string(e.what())] {
            const std::string now = nameNow(uuid, posted);
            log::error(fmt::format("{} on {} failed: {}", text, now, what), {{"MAP", now}});
            if (!isMap(now, uuid)) {
              return; // gone meanwhile
            }
            if (fromCount) {
              noPathRetry_.sendFailed(now, Clock::now() + interval);
              rearmHealthTimer();
            } else if (maps_.contains(now)) {
              requestReconcile(text + " failed on " + now); // it sends what is due
            }
          };
        }
        return [this, posted, uuid, queue, reason] {
          const std::string now = nameNow(uuid, posted);
          if (queue) {
            log::notice(fmt::format("map {}: queue_if_no_path again ({}): I/O queues while no "
                                    "path is usable",
                                    now, reason),
                        {{"MAP", now}});
          } else {
            log::write(
                log::Level::Warning,
                fmt::format("map {}: queueing stopped, queued and new I/O fail: {}", now, reason),
                {{"MAP", now}});
          }
          requestPublish();
        };
      });
}

std::string Daemon::noPathRetryOf(const std::string &alias, const MapState &map) const {
  if (!map.desired && !(staleMaps_.contains(alias) && maintainsStale(alias, map))) {
    return map.tableQueues ? "queue" : "fail"; // multipathd's map (or one not ours)
  }
  if (queueingDisabled_.contains(alias)) {
    return "disabled";
  }
  const selector::NoPathRetry policy = policyOf(map);
  switch (policy.kind) {
  case selector::NoPathRetry::Kind::Fail:
    return "fail";
  case selector::NoPathRetry::Kind::Queue:
    return "queue";
  case selector::NoPathRetry::Kind::Count:
    break;
  }
  return noPathRetry_.expired(alias) ? "expired" : std::to_string(policy.count);
}

Daemon::Verdict Daemon::verdictOf(const std::string &device) const {
  const auto state = health_.state(device);
  if (!state || *state == PathState::Unknown || *state == PathState::Pending) {
    return Verdict::Unchecked;
  }
  return usableForIo(device) ? Verdict::Usable : Verdict::Unusable;
}

bool Daemon::stableAndUsable(const std::string &device) const {
  const auto state = health_.state(device);
  return state && selector::isUsable(*state) && !adminFailed_.contains(device);
}

bool Daemon::usableForIo(const std::string &device) const {
  return stableAndUsable(device) ||
         (health_.inUseAsLastResort(device) && !adminFailed_.contains(device));
}

void Daemon::refreshLastResort(Clock::time_point now) {
  HealthTracker::Decisions decisions;
  for (const auto &device : shakyPaths_) {
    // Every other path of its map counts, whatever its group: a shaky
    // path is held failed only while the map has a stable path to use.
    // Other shaky paths do not count, so all of them carry the I/O then.
    bool lastResort = false;
    if (auto map = maps_.find(mapOfDevice(device)); map != maps_.end()) {
      lastResort = std::ranges::none_of(map->second.dmFailed, [&](const auto &other) {
        return other.first != device && stableAndUsable(other.first);
      });
    }
    auto changed = health_.setLastResort(device, lastResort, now);
    decisions.insert(decisions.end(), changed.begin(), changed.end());
  }
  if (!decisions.empty()) {
    apply(decisions);
  }
}

std::vector<FailbackGroup> Daemon::failbackGroups(const MapState &map) const {
  std::vector<FailbackGroup> groups;
  for (std::size_t g = 0; g < map.groups.size(); ++g) {
    FailbackGroup group;
    group.number = static_cast<unsigned>(g + 1);
    group.priority = g < map.groupPriorities.size() ? map.groupPriorities[g] : 0;
    for (const auto &device : map.groups[g]) {
      group.usable += usableForIo(device) ? 1U : 0U;
    }
    groups.push_back(group);
  }
  return groups;
}

void Daemon::runFailback(Clock::time_point now) {
  if (mode_ != selector::Mode::Owner) {
    return;
  }
  for (auto &[alias, map] : maps_) {
    if (!map.desired) {
      continue; // not planned (yet): right after a switch from companion mode
    }
    const auto groups = failbackGroups(map);
    // The kernel leaves a group with no usable path at the map's next I/O
    // and says so nowhere the daemon listens (no reconcile runs when paths
    // fail on their checks alone). Once the group in use has none, which
    // group the kernel uses is unknown until a switch job asks it; keeping
    // the old number would make the group's return look like no change.
    if (map.activeGroup >= 1 && map.activeGroup <= groups.size() &&
        groups[map.activeGroup - 1].usable == 0) {
      map.activeGroup = 0;
    }
    auto decision =
        failback_.evaluate(alias, config_.defaults.failback, groups, map.activeGroup, now);
    if (!decision) {
      continue;
    }
    messageWorker_->post(
        fmt::format("switch_group {} on {}", decision->group, alias),
        [this, posted = alias, uuid = map.uuid,
         decision = *decision](DeviceMapper &dm) -> DmWorker::Continuation {
          try {
            // Renamed since the decision (a swap may have given the name
            // to another map): decided again under the new name.
            if (auto info = dm.info(posted); !info || info->uuid != uuid) {
              return [this, posted, uuid] {
                const std::string current = nameNow(uuid, posted);
                if (isMap(current, uuid)) {
                  failback_.switchFailed(current);
                }
                log::debug(fmt::format("map {}: renamed before its switch_group; failback "
                                       "decides again",
                                       current));
              };
            }
            // The daemon's idea of the active group is as old as its last
            // reconcile; the kernel may have moved already (it leaves a
            // group whose paths all failed on its own). Ask it first: a
            // switch_group to the group in use would only clear the
            // kernel's current group until the next I/O.
            auto inUse = kernelGroup(dm, posted);
            if (auto info = dm.info(posted); !info || info->uuid != uuid) {
              inUse.reset(); // renamed while its status was read: not its group
            }
            if (inUse && *inUse == decision.group) {
              return [this, posted, uuid, decision] {
                const std::string current = nameNow(uuid, posted);
                if (auto *state = plannedMapNow(uuid, posted)) {
                  state->activeGroup = decision.group;
                }
                log::debug(fmt::format("map {}: already on group {}; no switch needed ({})",
                                       current, decision.group, decision.reason),
                           {{"MAP", current}});
              };
            }
            sendMessage(dm, uuid, posted, fmt::format("switch_group {}", decision.group));
          } catch (const std::exception &e) {
            return [this, posted, uuid, decision, what = std::string(e.what())] {
              const std::string current = nameNow(uuid, posted);
              if (isMap(current, uuid)) {
                failback_.switchFailed(current);
              }
              log::error(
                  fmt::format("switch_group {} on {} failed: {}", decision.group, current, what),
                  {{"MAP", current}});
            };
          }
          return [this, posted, uuid, decision] {
            const std::string current = nameNow(uuid, posted);
            if (auto *state = plannedMapNow(uuid, posted)) {
              state->activeGroup = decision.group;
            }
            log::notice(fmt::format("map {}: switch to group {} ({})", current, decision.group,
                                    decision.reason),
                        {{"MAP", current}});
          };
        });
  }
  // A deferred failback may have started waiting just now (e.g. in a
  // reconcile's continuation): the timer must know its deadline.
  rearmHealthTimer();
}

// --- reconciling -------------------------------------------------------------------

void Daemon::reconcile() {
  if (reconcileRunning_) {
    reconcileAgain_ = true; // one more pass once this one is done
    return;
  }
  reconcileRunning_ = true;
  renamesTried_ = false;
  ++passes_;
  std::string why = std::exchange(pendingReconcileWhy_, {});
  tableWorker_->post(
      "read the live maps",
      [this, why = std::move(why)](DeviceMapper &dm) mutable -> DmWorker::Continuation {
        try {
          return [this, why = std::move(why), live = daemon::readLiveMaps(dm)]() mutable {
            reconcileWith(std::move(live), why);
          };
        } catch (const std::exception &e) {
          return [this, what = std::string(e.what())] {
            log::error(fmt::format("cannot read the live maps: {}", what));
            finishReconcile();
          };
        }
      });
}

void Daemon::finishReconcile() {
  reconcileRunning_ = false;
  std::erase_if(adaptiveLoading_,
                [this](const auto &entry) { return entry.second.pass < passes_; });
  if (!ready_) {
    finishStartup();
    // Startup's scan, plan and first rendering leave megabytes free in the
    // heap at 1000 paths that glibc keeps unless asked: give them back.
    ::malloc_trim(0);
  }
  if (auto change = std::exchange(pendingMode_, std::nullopt)) {
    applyMode(change->to, change->why, change->startMultipathd);
  } else if (mode_ == selector::Mode::Companion && !queueingHandover_.empty()) {
    handOverQueueing(Clock::now());
  }
  if (std::exchange(reconcileAgain_, false)) {
    reconcile();
  }
}

void Daemon::reconcileWith(std::vector<LiveMap> liveMaps, const std::string &why) {
  ReconcileInput input;
  input.mode = mode_ == selector::Mode::Owner ? ReconcileMode::Owner : ReconcileMode::Companion;
  input.live = std::move(liveMaps); // not copied: at 1000 paths, 0.3 MB at the heap's peak
  const std::vector<LiveMap> &live = input.live;
  // Before planning: a map removed since the last pass (dmsetup remove)
  // that this pass creates again is a new map, with a fresh count and
  // without the old one's hold. A pass that some other event started
  // (a rescan) may do both. A renamed map is the same map.
  followRenames(live);
  endWithGoneMaps(live);
  if (mode_ == selector::Mode::Owner) {
    selector::Bindings bindings;
    const fs::path bindingsFile = config_.defaults.bindingsFile;
    std::error_code ec;
    if (fs::exists(bindingsFile, ec)) {
      auto text = readConfigFile(bindingsFile);
      auto parsed = text ? selector::Bindings::parse(*text, bindingsFile.string())
                         : Expected<selector::Bindings>(fail(text.error()));
      if (!parsed) {
        log::error(fmt::format("bindings: {}; not reconciling until it is fixed", parsed.error()));
        finishReconcile();
        return;
      }
      bindings = std::move(*parsed);
    }
    selector::Plan plan = selector::planMaps(pathsForTables(inventory_.plannerPaths()), config_,
                                             std::move(bindings), kernel_);
    // Renamed first, so that this pass, its per-map state and its plan all
    // see the maps under their planned names.
    if (!std::exchange(renamesTried_, true)) {
      auto renames = planRenames(plan.maps, live);
      // A failure no longer planned is forgotten: if it comes back, it is news.
      std::erase_if(renameFailures_, [&](const auto &failure) {
        return std::ranges::none_of(renames,
                                    [&](const Action &r) { return r.map == failure.first; });
      });
      if (!renames.empty()) {
        renameThenReconcile(std::move(renames), why);
        return;
      }
    }
    for (const auto &warning : plan.warnings) {
      if (std::find(planWarnings_.begin(), planWarnings_.end(), warning) == planWarnings_.end()) {
        log::warning(warning);
      }
    }
    planWarnings_ = plan.warnings;
    if (plan.bindingsChanged) {
      // A suffix of our own: the directory is multipath-tools' too.
      if (auto written = replaceFile(bindingsFile, plan.bindings.render(), ".pathkeeper-tmp");
          !written) {
        log::error(written.error());
      }
    }
    std::map<std::string, unsigned, std::less<>> speeds;
    if (config_.defaults.relativeThroughput == selector::ThroughputWeights::Auto) {
      speeds = linkSpeeds();
    }
    for (auto &planned : plan.maps) {
      auto override = selectorOverrides_.find(planned.spec.alias);
      if (override != selectorOverrides_.end() && planned.spec.selector != override->second) {
        planned.spec.selector = override->second;
        planned.table.clear(); // the reconciler renders it again
      }
      if (!speeds.empty() && selector::applyLinkSpeedWeights(planned, speeds)) {
        log::debug(fmt::format("map {}: {}", planned.spec.alias, planned.notes.back()),
                   {{"MAP", planned.spec.alias}});
      }
      // Measurement wins over link speed; an admin's SetSelector wins over both.
      if (!adaptiveWanted(planned) || override != selectorOverrides_.end()) {
        adaptive_.forgetMap(planned.spec.alias);
      } else if (adaptive_.applyTo(planned)) {
        log::debug(fmt::format("map {}: {}", planned.spec.alias, planned.notes.back()),
                   {{"MAP", planned.spec.alias}});
      }
    }
    input.desired = std::move(plan.maps);
  }
  for (const auto &[name, path] : inventory_.paths) {
    auto state = health_.state(name);
    if (!state || *state == PathState::Unknown || *state == PathState::Pending ||
        *state == PathState::Removed) {
      continue; // no verdict yet: leave dm as it is
    }
    input.usable[path.path.devt] = usableForIo(name);
  }
  if (!queueingAdopted_) {
    // After a restart: a map that does not queue although its no_path_retry
    // count says it should ran out of its count (or the admin stopped it)
    // before this start. Queueing it again now would hang I/O on a map that
    // may have no path at all; the first usable path brings it back.
    queueingAdopted_ = true;
    for (const auto &map : live) {
      if (!map.table || map.table->features.queueIfNoPath ||
          !map.info.uuid.starts_with(kMultipathUuidPrefix)) {
        continue;
      }
      auto wanted = std::ranges::find_if(
          input.desired, [&](const auto &d) { return d.spec.alias == map.info.name; });
      const std::string wwid = map.info.uuid.substr(kMultipathUuidPrefix.size());
      // A map not planned now (its devices gone) may be planned later:
      // then too it queues again only with a usable path.
      std::optional<selector::NoPathRetry> policy;
      if (wanted != input.desired.end()) {
        policy = wanted->noPathRetry;
      } else if (mode_ == selector::Mode::Owner && ownedWwids_.contains(wwid)) {
        MapState stale;
        stale.wwid = wwid;
        stale.uuid = map.info.uuid;
        for (const auto &group : map.table->groups) {
          for (const auto &path : group.paths) {
            stale.dmFailed.emplace(deviceOfDevt(path.device), false);
          }
        }
        rememberModel(map.info.name, stale);
        policy = policyOf(stale);
      }
      if (!policy || policy->kind != selector::NoPathRetry::Kind::Count) {
        continue;
      }
      noPathRetry_.adoptExpired(map.info.name);
      if (queueingDisabled_.contains(map.info.name)) {
        continue; // the admin's hold says it; RestoreQueueing waits for a path
      }
      log::notice(fmt::format("map {}: found not queueing (no_path_retry ran out, or queueing "
                              "was disabled, before this start); it queues again once a path "
                              "is usable",
                              map.info.name),
                  {{"MAP", map.info.name}});
    }
  }
  // A map whose no_path_retry ran out must not queue again because a
  // reload's table says queue_if_no_path.
  for (const auto &planned : input.desired) {
    const auto &alias = planned.spec.alias;
    if (noPathRetry_.expired(alias) || queueingDisabled_.contains(alias)) {
      input.queueIfNoPath[alias] = false;
    }
  }

  ReconcilePlan plan = planReconcile(input);
  for (auto &action : plan.actions) {
    if (action.kind != ActionKind::Reload) {
      continue;
    }
    if (auto loading = adaptiveLoading_.find(action.map); loading != adaptiveLoading_.end()) {
      action.lull = loading->second.gate;
    }
  }
  for (const auto &alias : plan.adopted) {
    if (announced_.insert(alias).second) {
      log::notice(fmt::format("map {} adopted as it is (its table already matches)", alias),
                  {{"MAP", alias}});
    }
  }
  for (const auto &refusal : plan.refused) {
    log::error(fmt::format("map {} refused: {}", refusal.map, refusal.reason),
               {{"MAP", refusal.map}});
  }
  for (const auto &stale : plan.stale) {
    log::debug(fmt::format("map {} ({}) is no longer wanted; left in place ({} active paths)",
                           stale.map, stale.uuid, stale.activePaths),
               {{"MAP", stale.map}});
  }
  if (plan.actions.empty()) {
    refreshMaps(live, std::move(input.desired), false);
    stopStaleQueueing();
    runMapPolicies(Clock::now());
    requestPublish();
    finishReconcile();
    return;
  }
  log::info(fmt::format("reconcile ({}): {} action(s)", why.empty() ? "startup" : why,
                        plan.actions.size()));
  lastCreates_.clear();
  for (const auto &action : plan.actions) {
    if (action.kind == ActionKind::Create) {
      lastCreates_.insert(action.map);
    }
  }
  for (const auto &action : plan.actions) {
    if (auto echo = echoOf(action)) {
      echoes_.expect(echo->first, echo->second, Clock::now());
    }
  }
  // Named first, as in renameThenReconcile.
  std::string what = fmt::format("{} reconcile action(s)", plan.actions.size());
  tableWorker_->post(
      std::move(what),
      [this, actions = std::move(plan.actions), live = std::move(input.live),
       desired = std::move(input.desired), inFlight = sysfsInFlight(options_.sysfsRoot)](
          DeviceMapper &dm) mutable -> DmWorker::Continuation {
        const auto started = Clock::now();
        auto outcomes = applyActions(actions, dm, inFlight);
        const auto applied = Clock::now() - started; // udev's processing included
        std::string readError;
        try {
          live = daemon::readLiveMaps(dm);
        } catch (const std::exception &e) {
          readError = e.what(); // refresh from what was read before the actions
        }
        return [this, outcomes = std::move(outcomes), live = std::move(live),
                desired = std::move(desired), readError = std::move(readError), applied]() mutable {
          logOutcomes(outcomes);
          log::debug(fmt::format(
              "{} action(s) applied in {} ms, udev's processing of them included", outcomes.size(),
              std::chrono::duration_cast<std::chrono::milliseconds>(applied).count()));
          if (!readError.empty()) {
            // What was just created or reloaded is missing from the maps
            // refreshed below, and their paths' messages would be dropped
            // as "in no map": read again in another pass.
            log::error(fmt::format("cannot read the live maps after the actions: {}; reading "
                                   "them again in another pass",
                                   readError));
            requestReconcile("re-read after a failed read");
          }
          refreshMaps(live, std::move(desired), false);
          stopStaleQueueing();
          runMapPolicies(Clock::now());
          requestPublish();
          finishReconcile();
        };
      });
}

void Daemon::renameThenReconcile(std::vector<Action> renames, std::string why) {
  for (const auto &rename : renames) {
    lastCreates_.insert(rename.map); // its uevent is ours
  }
  // Named first: the job's capture takes the renames, and the order in
  // which a call's arguments are made is the compiler's.
  std::string what = fmt::format("{} rename(s)", renames.size());
  tableWorker_->post(
      std::move(what),
      [this, renames = std::move(renames),
       why = std::move(why)](DeviceMapper &dm) mutable -> DmWorker::Continuation {
        auto outcomes = applyActions(renames, dm);
        std::vector<LiveMap> live;
        std::string readError;
        try {
          live = daemon::readLiveMaps(dm);
        } catch (const std::exception &e) {
          readError = e.what();
        }
        return [this, outcomes = std::move(outcomes), live = std::move(live),
                readError = std::move(readError), why = std::move(why)]() mutable {
          // One old name -> new name per map, a swap's steps through a
          // temporary name composed: moveMapState moves them all at once.
          MapRenames done;
          for (const auto &outcome : outcomes) {
            if (!outcome.ok) {
              // No uevent of ours will come for it; one that does is
              // somebody else's (the admin's rename, once the name is free).
              lastCreates_.erase(outcome.action.map);
              continue;
            }
            const Action &rename = outcome.action;
            auto earlier = std::ranges::find_if(
                done, [&](const auto &entry) { return entry.second == rename.oldName; });
            if (earlier != done.end()) {
              earlier->second = rename.map;
            } else {
              done.emplace(rename.oldName, rename.map);
            }
          }
          moveMapState(done);
          for (const auto &outcome : outcomes) {
            if (outcome.reloadedFirst) {
              // As after a reload action (logOutcomes): a switch_group the
              // message worker sent meanwhile went to the replaced table.
              auto moved = done.find(outcome.action.oldName);
              failback_.switchFailed(outcome.ok && moved != done.end() ? moved->second
                                                                       : outcome.action.oldName);
            }
          }
          logOutcomes(outcomes);
          if (!readError.empty()) {
            log::error(fmt::format("cannot read the live maps after renaming: {}; reading them "
                                   "again in another pass",
                                   readError));
            requestReconcile("re-read after a failed read");
            finishReconcile();
            return;
          }
          reconcileWith(std::move(live), why);
        };
      });
}

std::optional<std::pair<std::string, bool>> Daemon::echoOf(const Action &action) const {
  if (action.kind != ActionKind::Message) {
    return std::nullopt;
  }
  const auto words = selector::splitWords(action.message);
  if (words.size() != 2 || (words[0] != "fail_path" && words[0] != "reinstate_path")) {
    return std::nullopt;
  }
  std::string device = deviceOfDevt(words[1]);
  if (device.empty()) {
    return std::nullopt;
  }
  return std::make_pair(std::move(device), words[0] == "fail_path");
}

namespace {

/// What a rename's log line adds when LibDevmapper reloaded the map first.
std::string reloadNote(const ActionOutcome &outcome) {
  if (!outcome.reloadedFirst) {
    return {};
  }
  return fmt::format(". Its table was loaded again first (I/O held {:.1f} ms): its inactive "
                     "table had been cleared, and renaming such a map makes Linux's dm-ima "
                     "corrupt memory",
                     static_cast<double>(outcome.held.count()) / 1000.0);
}

} // namespace

void Daemon::logOutcomes(const std::vector<ActionOutcome> &outcomes) {
  for (const auto &outcome : outcomes) {
    if (!outcome.ok) {
      if (auto echo = echoOf(outcome.action)) {
        echoes_.cancel(echo->first, echo->second); // no event will come
      }
    }
    const Action &action = outcome.action;
    if (outcome.skipped) {
      log::warning(fmt::format("{}: skipped after an earlier failure", action.describe()),
                   {{"MAP", action.map}});
    } else if (!outcome.ok && action.kind == ActionKind::Rename && !outcome.reloadedFirst &&
               renameFailures_.contains(action.map) &&
               renameFailures_.at(action.map) == outcome.error) {
      // Every pass tries again; the admin heard the reason the first time.
      log::debug(fmt::format("{}: still {}", action.describe(), outcome.error),
                 {{"MAP", action.map}});
    } else if (!outcome.ok) {
      if (action.kind == ActionKind::Rename) {
        renameFailures_.insert_or_assign(action.map, outcome.error);
      }
      log::error(fmt::format("{}: {}{}{}", action.describe(), outcome.error,
                             action.kind == ActionKind::Rename
                                 ? "; every pass tries again, and says so only if the reason "
                                   "changes"
                                 : "",
                             reloadNote(outcome)),
                 {{"MAP", action.map}});
    } else if (action.kind == ActionKind::Rename && action.stepAside) {
      log::info(fmt::format("map {} renamed to {} for a moment: another map's alias in the "
                            "configuration is its name{}",
                            action.oldName, action.map, reloadNote(outcome)),
                {{"MAP", action.map}, {"OLD_MAP", action.oldName}});
    } else if (action.kind == ActionKind::Rename) {
      renameFailures_.erase(action.map);
      // moveMapState has moved its state already.
      log::write(
          log::Level::Notice,
          fmt::format("map {} renamed to {}, the name the configuration gives it; its "
                      "no_path_retry count, failback and selector set by the admin go with it{}{}",
                      action.oldName, action.map,
                      queueingDisabled_.contains(action.map)
                          ? ", and so does the admin's disable-queueing"
                          : "",
                      reloadNote(outcome)),
          {{"MAP", action.map}, {"OLD_MAP", action.oldName}}, log::id::kMapRenamed);
    } else if (action.kind == ActionKind::Create) {
      announced_.insert(action.map);
      log::write(log::Level::Notice,
                 fmt::format("map {} created{}", action.map,
                             outcome.tookOver
                                 ? ": its device was there already, with this DM UUID and no "
                                   "live table, as a create stopped half way leaves it "
                                   "(pathkeeperd killed in the middle of one, say), and was "
                                   "finished"
                                 : ""),
                 {{"MAP", action.map}, {"WWID", action.uuid.substr(kMultipathUuidPrefix.size())}},
                 log::id::kMapCreated);
    } else if (action.kind == ActionKind::Reload) {
      // A switch_group or fail_if_no_path the message worker sent while
      // this pass ran went to the old table and is gone with it; the
      // reload kept the group and queueing read before the pass. Failback
      // decides again (runMapPolicies after the pass), and one more pass
      // puts an expired no_path_retry back into the new table.
      failback_.switchFailed(action.map);
      if (noPathRetry_.expired(action.map) || queueingDisabled_.contains(action.map)) {
        reconcileAgain_ = true;
      }
      // "I/O held": the resume ioctl (suspend, swap, resume), what new I/O
      // waited; the total adds loading the table. udev's processing comes
      // after, once for the whole pass (applyActions' udev batch).
      std::string lull;
      if (outcome.lull) {
        const double waited = static_cast<double>(outcome.lull->waited.count()) / 1000.0;
        lull = outcome.lull->found
                   ? fmt::format(" (of it {:.1f} ms waiting for a lull; about {:.0f} ms of I/O "
                                 "in flight when it loaded)",
                                 waited, outcome.lull->drainMs)
                   : fmt::format(" (of it {:.1f} ms waiting for a lull that did not come; "
                                 "about {:.0f} ms of I/O in flight when it loaded)",
                                 waited, outcome.lull->drainMs);
      }
      log::write(log::Level::Notice,
                 fmt::format("{} in {:.1f} ms{}; I/O held {:.1f} ms", action.describe(),
                             static_cast<double>(outcome.elapsed.count()) / 1000.0, lull,
                             static_cast<double>(outcome.held.count()) / 1000.0),
                 {{"MAP", action.map}, {"HELD_US", std::to_string(outcome.held.count())}},
                 log::id::kMapReloaded);
    } else {
      log::info(action.describe(), {{"MAP", action.map}});
    }
  }
}

void Daemon::refreshMaps(const std::vector<LiveMap> &live,
                         std::vector<selector::PlannedMap> desired, bool everyMultipathMap) {
  followRenames(live);
  std::map<std::string, MapState> maps;
  std::map<std::string, MapState> stale;
  for (const LiveMap &map : live) {
    if (!map.info.uuid.starts_with(kMultipathUuidPrefix) || !map.table) {
      continue;
    }
    auto wanted = std::find_if(desired.begin(), desired.end(),
                               [&](const auto &d) { return d.spec.alias == map.info.name; });
    // Owner mode: a map no desired map names is not maintained, only kept
    // in sight (its queueing, the commands on it, its publication).
    const bool isStale =
        mode_ == selector::Mode::Owner && !everyMultipathMap && wanted == desired.end();
    MapState state;
    state.wwid = map.info.uuid.substr(kMultipathUuidPrefix.size());
    state.uuid = map.info.uuid;
    state.devt = map.info.devt.str();
    if (!map.table->groups.empty()) {
      state.selector = map.table->groups.front().selector;
    }
    const bool weighted = state.selector == selector::toString(selector::SelectorKind::ServiceTime);
    for (std::size_t g = 0; g < map.table->groups.size(); ++g) {
      std::vector<std::string> devices;
      for (const auto &p : map.table->groups[g].paths) {
        std::string device = deviceOfDevt(p.device);
        if (device.empty()) {
          device = p.device; // a path the inventory does not know (yet)
        }
        unsigned weight = 0;
        if (weighted && p.args.size() >= 2) {
          auto [end, ec] =
              std::from_chars(p.args[1].data(), p.args[1].data() + p.args[1].size(), weight);
          if (ec == std::errc() && weight > 0) {
            state.liveWeights[device] = weight;
          }
        }
        devices.push_back(device);
        bool failed = false;
        if (map.status) {
          if (auto found = map.status->findPath(p.device)) {
            failed = !found->second->active;
          }
        }
        state.dmFailed[device] = failed;
      }
      state.groups.push_back(std::move(devices));
      int priority = 0;
      if (wanted != desired.end() && g < wanted->spec.groups.size()) {
        priority = wanted->spec.groups[g].priority();
      }
      state.groupPriorities.push_back(priority);
    }
    state.tableQueues = map.table->features.queueIfNoPath;
    rememberModel(map.info.name, state);
    if (map.status) {
      state.queueing = map.status->queueIo;
      // As kernelGroup() sees it: an idle map, or one just switched, has
      // no group marked active yet, only the one it will use.
      state.activeGroup = map.status->groupInUse();
    }
    if (wanted != desired.end()) {
      state.desired.emplace(*wanted);
    }
    (isStale ? stale : maps).emplace(map.info.name, std::move(state));
  }
  for (const auto &[alias, old] : maps_) {
    // A map that went, or whose groups were reloaded with other paths (a
    // group number then names other paths), starts its failback afresh: a
    // deferred wait must not carry over to a group it was not measured on.
    auto now = maps.find(alias);
    if (now == maps.end() || now->second.groups != old.groups) {
      failback_.forget(alias);
    }
  }
  endWithGoneMaps(live);
  for (const auto &[alias, map] : stale) {
    if (staleMaps_.contains(alias) || everyMultipathMap) {
      continue;
    }
    // Its LUN's devices gone is the usual cause; an alias changed in the
    // configuration is the other, and needs other advice.
    auto renamed =
        std::ranges::find(desired, map.uuid, [](const auto &d) { return d.spec.dmUuid(); });
    const std::string cause =
        renamed != desired.end()
            ? fmt::format("its WWID is planned as map {} now; it is renamed to that name "
                          "once no other device has it (a pass follows the removal of a "
                          "device-mapper device), and a failing rename is retried at every "
                          "pass (see the log)",
                          renamed->spec.alias)
            : std::string("no planned map names it (are its devices gone?)");
    log::notice(
        fmt::format(
            "map {}: stale: {}; left in place, its table no longer maintained{}", alias, cause,
            maintainsStale(alias, map) ? "; no_path_retry and disable-queueing still apply" : ""),
        {{"MAP", alias}});
  }
  staleMaps_ = std::move(stale);
  maps_ = std::move(maps);
  // A map made is known from now on; a name the admin gives a map later
  // must count as theirs (isForeignMapEvent).
  std::erase_if(lastCreates_, [this](const std::string &name) { return maps_.contains(name); });
  // This pass read the maps after those removals: maps_ shows them now.
  std::erase_if(removedMaps_, [this](const auto &entry) { return entry.second < passes_; });
  mapOfDevice_.clear();
  for (const auto &[alias, map] : maps_) {
    for (const auto &[device, failed] : map.dmFailed) {
      mapOfDevice_.emplace(device, alias);
    }
  }
  refreshLastResort(Clock::now()); // a map's paths may have changed
}

void Daemon::followRenames(const std::vector<LiveMap> &live) {
  // A rename keeps the kernel's map: its DM UUID and its device number.
  // Matched by those, not by which names are live, so that a swap through
  // a third name, all between two reads, lands right. Not a rename: a map
  // one of our passes just made, and one whose remove uevent came (another
  // tool making a map with its UUID would get the freed minor).
  MapRenames renames;
  for (const auto *known : {&maps_, &staleMaps_}) {
    for (const auto &[alias, map] : *known) {
      if (removedMaps_.contains(alias)) {
        continue;
      }
      auto now = std::ranges::find_if(live, [&](const LiveMap &m) {
        return m.info.uuid == map.uuid && m.info.devt.str() == map.devt;
      });
      if (now != live.end() && now->info.name != alias && !lastCreates_.contains(now->info.name)) {
        renames.emplace(alias, now->info.name);
      }
    }
  }
  if (renames.empty()) {
    return;
  }
  std::set<std::string> planned; // owner mode: a pass names them back
  if (mode_ == selector::Mode::Owner) {
    for (const auto &[from, to] : renames) {
      if (maps_.contains(from)) {
        planned.insert(from);
      }
    }
  }
  moveMapState(renames);
  for (const auto &[from, to] : renames) {
    if (mode_ != selector::Mode::Owner) {
      // multipathd keeps the count, the failback and the tables here.
      log::notice(
          fmt::format("map {}: renamed to {} in the kernel; pathkeeperd follows it", from, to),
          {{"MAP", to}});
      continue;
    }
    log::notice(
        fmt::format("map {}: renamed to {} in the kernel; its no_path_retry count, failback and "
                    "selector set by the admin go with it{}{}",
                    from, to,
                    queueingDisabled_.contains(to) ? ", and so does the admin's disable-queueing"
                                                   : "",
                    planned.contains(from)
                        ? fmt::format("; a pass renames it back to {} while the configuration "
                                      "names it so",
                                      from)
                        : ""),
        {{"MAP", to}});
  }
}

void Daemon::moveMapState(const MapRenames &renames) {
  if (renames.empty()) {
    return;
  }
  renameMaps(maps_, renames);
  // Rebuilt with maps_ at the pass's end; a snapshot before then must find
  // the maps it names.
  for (auto &[device, alias] : mapOfDevice_) {
    if (auto renamed = renames.find(alias); renamed != renames.end()) {
      alias = renamed->second;
    }
  }
  renameMaps(staleMaps_, renames);
  renameMaps(selectorOverrides_, renames);
  noPathRetry_.rename(renames);
  failback_.rename(renames);
  adaptive_.renameMaps(renames);
  std::set<std::string, std::less<>> held;
  std::set<std::string> announced;
  for (const auto &[from, to] : renames) {
    if (queueingDisabled_.contains(from)) {
      held.insert(to);
    }
    if (announced_.contains(from)) {
      announced.insert(to);
    }
  }
  for (const auto &[from, to] : renames) {
    queueingDisabled_.erase(from);
    queueingDisabled_.erase(to); // a gone map's, whose name the renamed map took
    announced_.erase(from);
    announced_.erase(to);
  }
  queueingDisabled_.merge(held);
  announced_.merge(announced);
  saveAdminHolds(); // writes only when the holds changed
}

void Daemon::endWithGoneMaps(const std::vector<LiveMap> &live) {
  // no_path_retry's count and the admin's disable-queueing belong to the
  // kernel's map, whatever its paths: they end only with it. A map the
  // planner drops for a while (its paths removed, e.g. the sd devices of a
  // LUN deleted on the array) keeps them, and a reload does not restart
  // the count.
  std::set<std::string, std::less<>> liveNames;
  for (const LiveMap &map : live) {
    liveNames.insert(map.info.name);
  }
  const auto gone = [&](std::string_view alias) { return !liveNames.contains(alias); };
  noPathRetry_.forgetIf(gone);
  // A disable-queueing on its way to multipathd ends with its map too.
  const bool handoverEnded =
      std::erase_if(queueingHandover_, [&](const auto &entry) {
        const bool ended = std::ranges::none_of(
            live, [&](const LiveMap &map) { return map.info.uuid == entry.first; });
        if (ended) {
          log::notice(
              fmt::format("the admin's disable-queueing of the map with DM UUID {} ends: the "
                          "map is gone",
                          entry.first));
        }
        return ended;
      }) > 0;
  // So do the admin's SetSelector, a deferred failback's wait, the adaptive
  // governor's record and the "created"/"adopted" notice: a map made again
  // under the name is new. Every name not live, not only the maps known to
  // the last pass: a map can leave those while still live (its table
  // unreadable for a pass) and go later.
  std::erase_if(selectorOverrides_, [&](const auto &entry) { return gone(entry.first); });
  failback_.forgetIf(gone);
  adaptive_.forgetMapsIf(gone);
  // A map this pass created is missing from a list read before the create
  // (the read after the actions failed): it is announced all the same.
  std::erase_if(announced_, [&](const std::string &name) {
    return gone(name) && !lastCreates_.contains(name);
  });
  bool holdEnded = false;
  for (auto it = queueingDisabled_.begin(); it != queueingDisabled_.end();) {
    if (liveNames.contains(*it)) {
      ++it;
      continue;
    }
    log::notice(fmt::format("map {}: gone; the admin's disable-queueing ends with it", *it),
                {{"MAP", *it}});
    it = queueingDisabled_.erase(it);
    holdEnded = true;
  }
  if (holdEnded || handoverEnded) {
    saveAdminHolds();
  }
}

void Daemon::connectMultipathd(bool start) {
  multipathd_ = std::make_unique<MultipathdClient>(options_.multipathdSocket);
  if (!start) {
    return;
  }
  // Now rather than at the next new disk: the maps are multipathd's.
  multipathd_->request(
      "show daemon", kMultipathdTimeout,
      [](Expected<std::string> reply) {
        if (reply) {
          log::notice("multipathd started through its socket: " +
                      selector::printableQuoted(*reply, 200));
        } else {
          log::error("starting multipathd through its socket: " + reply.error());
        }
      },
      Clock::now());
  syncMultipathd();
}

void Daemon::watchMultipathd(bool processes) {
  const selector::Mode configured = configuredMode();
  if (configured == selector::Mode::Companion) {
    multipathdGoneSince_.reset();
    return; // the admin said so; a missing multipathd shows in the forwards' errors
  }
  MultipathdSighting seen;
  seen.listening = multipathdListening(options_.multipathdSocket, options_.procRoot.string());
  if (!seen.listening && (processes || mode_ == selector::Mode::Companion ||
                          (pendingMode_ && pendingMode_->to == selector::Mode::Companion))) {
    // Rare: only while multipathd seems gone. A multipathd that is starting
    // or stopping runs without its socket for a moment.
    seen = lookForMultipathd(options_.multipathdSocket, options_.procRoot.string());
  }
  const bool present = seen.process || seen.listening;
  const bool appeared = present && !std::exchange(multipathdSeen_, present);
  if (pendingMode_ && (pendingMode_->to == selector::Mode::Companion) == present) {
    return; // that switch waits for the pass under way already
  }
  if (configured == selector::Mode::Owner) {
    if (appeared) {
      log::warning(ownerBesideMultipathd(seen, options_.multipathdSocket));
    }
    return;
  }
  const auto now = Clock::now();
  if (present) {
    multipathdGoneSince_.reset();
    if (pendingMode_ && pendingMode_->to == selector::Mode::Owner) {
      pendingMode_.reset(); // back before the pass under way ended
    }
    if (mode_ == selector::Mode::Owner) {
      if (!processes) {
        // Whether it runs or only its socket listens: the reason given, and
        // whether to start it.
        seen = lookForMultipathd(options_.multipathdSocket, options_.procRoot.string());
        if (!seen.process && !seen.listening) {
          return; // gone again meanwhile
        }
      }
      const AutoChoice choice = chooseAutoMode(seen, options_.multipathdSocket);
      switchMode(selector::Mode::Companion, choice.why, choice.startMultipathd);
    }
    return;
  }
  if (pendingMode_ && pendingMode_->to == selector::Mode::Companion) {
    pendingMode_.reset(); // gone again before the pass under way ended
  }
  if (mode_ != selector::Mode::Companion) {
    return;
  }
  if (!multipathdGoneSince_) {
    multipathdGoneSince_ = now;
    log::warning(fmt::format("multipathd is gone (no process, nothing listens on @{}); "
                             "pathkeeperd takes its maps over in {:.3g} s unless it comes back",
                             options_.multipathdSocket,
                             std::chrono::duration<double>(options_.multipathdGoneGrace).count()));
    return;
  }
  if (const auto gone = now - *multipathdGoneSince_; gone >= options_.multipathdGoneGrace) {
    multipathdGoneSince_.reset();
    switchMode(selector::Mode::Owner,
               fmt::format("multipathd has been gone for {:.3g} s; pathkeeperd maintains its "
                           "maps now",
                           std::chrono::duration<double>(gone).count()),
               false);
  }
}

void Daemon::switchMode(selector::Mode to, const std::string &why, bool startMultipathd) {
  if (reconcileRunning_) {
    // A pass plans and applies in one mode: the switch waits for its end,
    // and applyMode() asks for a pass in the new mode.
    pendingMode_ = ModeSwitch{to, why, startMultipathd};
    return;
  }
  applyMode(to, why, startMultipathd);
}

void Daemon::applyMode(selector::Mode to, const std::string &why, bool startMultipathd) {
  if (to == mode_) {
    return;
  }
  const selector::Mode from = std::exchange(mode_, to);
  log::write(
      log::Level::Notice,
      fmt::format("{} mode → {} mode: {}", selector::toString(from), selector::toString(to), why),
      {}, log::id::kModeChanged);
  renameFailures_.clear();
  planWarnings_.clear();
  forgetPerMapState();
  if (to == selector::Mode::Companion) {
    connectMultipathd(startMultipathd);
    // Nothing is planned or stale in companion mode; the next pass follows
    // multipathd's maps.
    for (auto &[alias, map] : maps_) {
      map.desired.reset();
    }
    // The admin's holds go to multipathd: a failed path now (multipathd
    // knows these maps already, or takes them with their paths' states), a
    // disable-queueing once a pass has seen the map under multipathd.
    for (const auto &[device, identity] : adminFailed_) {
      log::notice(fmt::format("path {}: the admin's hold is handed to multipathd", device),
                  {{"PATH", device}});
      sendPathMessage(device, true, "held failed by the admin");
    }
    for (const auto &map : queueingDisabled_) {
      if (const std::string uuid = uuidOfMap(map); !uuid.empty()) {
        queueingHandover_.emplace(uuid, Handover{map});
      } else {
        log::warning(fmt::format("map {}: the admin's disable-queueing cannot be handed to "
                                 "multipathd: the map has no DM UUID; it ends here",
                                 map),
                     {{"MAP", map}});
      }
    }
    queueingDisabled_.clear();
    staleMaps_.clear(); // after the UUIDs above: a stale map's hold is handed over too
    saveAdminHolds();
    syncOwnedWwids(); // removed: pathkeeper's udev rule leaves the paths to multipathd
  } else {
    retire(std::move(multipathdSource_));
    EventLoop::disable(multipathdTimer_);
    multipathdFd_ = -1;
    multipathdConnection_ = 0;
    multipathd_.reset();
    forwards_.clear();
    // A disable-queueing multipathd never took stays the admin's hold.
    for (const auto &[uuid, handover] : queueingHandover_) {
      const auto map =
          std::ranges::find_if(maps_, [&](const auto &entry) { return entry.second.uuid == uuid; });
      if (map != maps_.end()) {
        queueingDisabled_.insert(map->first);
      } else {
        log::warning(fmt::format("map {}: the admin's disable-queueing, not yet taken by "
                                 "multipathd, ends: the map (DM UUID {}) was not read in the "
                                 "last pass",
                                 handover.alias, uuid),
                     {{"MAP", handover.alias}});
      }
    }
    queueingHandover_.clear();
    saveAdminHolds();
    loadOwnedWwids();
    queueingAdopted_ = false; // take over the queueing multipathd left, as at a start
    // A multipathd killed during a reload can leave a map suspended, and
    // all I/O to it waits: resumed first, on the worker that then reads
    // the maps for the pass. Not while a multipathd process runs (an
    // explicit owner): that could be its reload under way. Its socket alone
    // (systemd's) reloads nothing.
    const bool multipathdRuns =
        lookForMultipathd(options_.multipathdSocket, options_.procRoot.string()).process;
    tableWorker_->post(
        "resume maps left suspended", [multipathdRuns](DeviceMapper &dm) -> DmWorker::Continuation {
          if (multipathdRuns) {
            try {
              auto live = daemon::readLiveMaps(dm);
              return [live = std::move(live)] { warnSuspendedBesideMultipathd(live); };
            } catch (const std::exception &) {
              return {}; // the pass's own read says what is wrong
            }
          }
          auto resumed = resumeSuspendedMaps(dm);
          return [resumed = std::move(resumed)] { logResumed(resumed); };
        });
  }
  requestReconcile(fmt::format("now in {} mode", selector::toString(to)));
  requestPublish();
}

void Daemon::forgetPerMapState() {
  const auto every = [](std::string_view) { return true; };
  noPathRetry_.forgetIf(every);
  failback_.forgetIf(every);
  adaptive_.forgetMapsIf(every);
}

void Daemon::backOff(Handover &handover, Clock::time_point now) {
  handover.delay = handover.delay == Clock::duration{}
                       ? PendingForwards::kFirstRetry
                       : std::min(handover.delay * 2, PendingForwards::kLongestRetry);
  handover.nextTry = now + handover.delay;
}

void Daemon::handOverQueueing(Clock::time_point now) {
  for (auto it = queueingHandover_.begin(); it != queueingHandover_.end();) {
    Handover &handover = it->second;
    const std::string uuid = it->first;
    auto map =
        std::ranges::find_if(maps_, [&](const auto &entry) { return entry.second.uuid == uuid; });
    ++it;
    if (map == maps_.end()) {
      // Its table unreadable this pass (a map gone ends in
      // endWithGoneMaps): after the next pass, not on a timer that would
      // find it missing again.
      handover.delay = {};
      handover.nextTry = {};
      continue;
    }
    handover.alias = map->first;
    if (handover.inFlight || now < handover.nextTry) {
      continue;
    }
    auto command = queueingCommand(map->first, false);
    if (!command) {
      // A name multipathd's protocol cannot carry: maybe not for long (a
      // rename). Asked again later, not at every tick.
      backOff(handover, now);
      log::debug(fmt::format("map {}: cannot ask multipathd to disable queueing under this name",
                             map->first),
                 {{"MAP", map->first}});
      continue;
    }
    handover.inFlight = true;
    forwardToMultipathd(
        *command, {"MAP", map->first}, true, [this, uuid, alias = map->first](bool ok) {
          auto entry = queueingHandover_.find(uuid);
          if (entry == queueingHandover_.end()) {
            return; // the admin's newer command replaced it
          }
          if (ok) {
            log::notice(fmt::format("map {}: multipathd took over the admin's disable-queueing "
                                    "(until restore-queueing)",
                                    alias),
                        {{"MAP", alias}});
            queueingHandover_.erase(entry);
            saveAdminHolds();
            return;
          }
          // Not yet (multipathd still starting, or without the map): again
          // after 1 s, 2 s, ... at most every 30 s.
          entry->second.inFlight = false;
          backOff(entry->second, Clock::now());
          rearmHealthTimer();
        });
  }
  saveAdminHolds(); // a map multipathd renamed: the file names it as it is now
  rearmHealthTimer();
}

void Daemon::syncMultipathd() {
  if (!multipathd_) {
    return;
  }
  const int fd = multipathd_->fd();
  const std::uint64_t connection = multipathd_->connection();
  if (fd != multipathdFd_ || connection != multipathdConnection_) {
    retire(std::move(multipathdSource_));
    multipathdFd_ = fd;
    multipathdConnection_ = connection;
    if (fd >= 0) {
      multipathdSource_ =
          loop_.addIo(fd, static_cast<unsigned>(multipathd_->events()), [this](unsigned revents) {
            multipathd_->service(static_cast<short>(revents), Clock::now());
            syncMultipathd();
          });
    }
  } else if (fd >= 0) {
    EventLoop::setIoEvents(multipathdSource_, static_cast<unsigned>(multipathd_->events()));
  }
  const auto next = multipathd_->nextTick();
  if (next) {
    if (!multipathdTimer_.active()) {
      multipathdTimer_ = loop_.addTimer(*next, [this] {
        multipathd_->tick(Clock::now());
        syncMultipathd();
      });
    } else {
      EventLoop::rearm(multipathdTimer_, std::max(*next, Clock::now()));
    }
  }
}

void Daemon::retire(EventSource source) {
  if (!source.active()) {
    return;
  }
  EventLoop::disable(source);
  retired_.push_back(std::move(source));
  EventLoop::rearm(reaper_, Clock::now());
}

// --- probes --------------------------------------------------------------------------

namespace {
std::string portalKey(const selector::Portal &portal) {
  return portal.address.find(':') != std::string::npos
             ? fmt::format("[{}]:{}", portal.address, portal.port)
             : fmt::format("{}:{}", portal.address, portal.port);
}
} // namespace

void Daemon::startProbes() {
  const auto &discovery = config_.discovery;
  if (discovery.probeInterval.count() > 0) {
    EventLoop::rearm(probeTimer_, Clock::now() + discovery.probeInterval);
  }
  if (probeInitiator_.empty()) {
    if (!discovery.initiatorName.empty()) {
      probeInitiator_ = discovery.initiatorName;
    } else if (auto name = defaultProbeInitiatorName()) {
      probeInitiator_ = *name;
    } else {
      log::warning(fmt::format("SendTargets probes disabled: {}", name.error()));
      return;
    }
  }
  // Every (NIC, portal) pair a kernel session uses, plus the configured
  // portals from the configured NICs (or from every NIC a session uses).
  std::set<std::pair<std::string, selector::Portal>> pairs;
  std::set<std::string> sessionNics;
  for (const auto &[name, path] : inventory_.paths) {
    selector::Portal portal = path.path.portal;
    portal.tpgt = 1;
    pairs.emplace(path.path.netdev, portal);
    sessionNics.insert(path.path.netdev);
  }
  std::vector<std::string> nics = discovery.nics;
  if (nics.empty()) {
    nics.assign(sessionNics.begin(), sessionNics.end());
  }
  if (nics.empty()) {
    nics.emplace_back(); // unbound: routing chooses
  }
  for (selector::Portal portal : discovery.portals) {
    portal.tpgt = 1;
    for (const auto &nic : nics) {
      pairs.emplace(nic, portal);
    }
  }
  const auto now = Clock::now();
  for (const auto &[nic, portal] : pairs) {
    startProbe(nic, portal, now);
  }
}

void Daemon::startProbe(const std::string &nic, const selector::Portal &portal,
                        Clock::time_point now) {
  const std::string key = nic + "|" + portalKey(portal);
  if (probes_.contains(key) || probeInitiator_.empty()) {
    return; // still running from the last round
  }
  DiscoveryRequest request;
  request.portal = portal;
  request.netdev = nic;
  request.initiatorName = probeInitiator_;
  request.timeout = config_.discovery.probeTimeout;
  try {
    ActiveProbe active;
    active.probe = std::make_unique<IscsiDiscovery>(std::move(request), now);
    probes_.emplace(key, std::move(active));
  } catch (const std::exception &e) {
    log::error(fmt::format("cannot start a SendTargets probe of {} from {}: {}", portalKey(portal),
                           nic.empty() ? "any NIC" : nic, e.what()));
    return;
  }
  syncProbe(key);
}

void Daemon::syncProbe(const std::string &key) {
  auto it = probes_.find(key);
  if (it == probes_.end()) {
    return;
  }
  ActiveProbe &active = it->second;
  if (active.probe->done()) {
    finishProbe(key);
    return;
  }
  const int fd = active.probe->fd();
  if (fd != active.fd) {
    retire(std::move(active.io));
    active.fd = fd;
    if (fd >= 0) {
      active.io = loop_.addIo(fd, static_cast<unsigned>(active.probe->events()),
                              [this, key](unsigned revents) {
                                auto found = probes_.find(key);
                                if (found != probes_.end()) {
                                  found->second.probe->service(static_cast<short>(revents));
                                  syncProbe(key);
                                }
                              });
    }
  } else if (fd >= 0) {
    EventLoop::setIoEvents(active.io, static_cast<unsigned>(active.probe->events()));
  }
  const auto next = active.probe->nextTick();
  if (!active.timer.active()) {
    active.timer = loop_.addTimer(next, [this, key] {
      auto found = probes_.find(key);
      if (found != probes_.end()) {
        found->second.probe->tick(Clock::now());
        syncProbe(key);
      }
    });
  } else {
    EventLoop::rearm(active.timer, next);
  }
}

void Daemon::finishProbe(const std::string &key) {
  auto it = probes_.find(key);
  const DiscoveryRequest request = it->second.probe->request();
  const auto &result = it->second.probe->result();
  const PortalReach reach = it->second.probe->reach();
  const std::string nic = request.netdev;
  const std::string where =
      fmt::format("{} from {}", portalKey(request.portal), nic.empty() ? "any NIC" : nic);
  PortalState &portal = portals_[portalKey(request.portal)];
  portal.portal = request.portal;
  const auto now = Clock::now();
  if (result) {
    const bool changed = portal.reachability[nic] != "reachable";
    portal.reachability[nic] = "reachable";
    if (changed) {
      log::info(fmt::format("SendTargets {}: {} target(s)", where, result->targets.size()),
                {{"PORTAL", portalKey(request.portal)}, {"IFACE", nic}});
    }
    for (const auto &rejected : result->rejected) {
      log::warning(fmt::format("SendTargets {}: rejected {}", where, rejected),
                   {{"PORTAL", portalKey(request.portal)}});
    }
    apply(health_.probeResult(nic, request.portal, true, "", now));
    const auto kernelPaths = inventory_.plannerPaths();
    for (const auto &missing : selector::findMissingPaths(result->targets, kernelPaths)) {
      if (reportedMissing_.insert(missing.str()).second) {
        log::warning(fmt::format("expected path missing: {} (SendTargets offers it, the kernel "
                                 "has no session)",
                                 missing.str()),
                     {{"PORTAL", portalKey(missing.portal)}, {"IFACE", missing.netdev}});
      }
    }
  } else if (reach == PortalReach::Silent) {
    const std::string state = "unreachable: " + result.error();
    if (portal.reachability[nic] != state) {
      log::warning(fmt::format("SendTargets {} failed: {}", where, result.error()),
                   {{"PORTAL", portalKey(request.portal)}, {"IFACE", nic}});
    }
    portal.reachability[nic] = state;
    apply(health_.probeResult(nic, request.portal, false, result.error(), now));
  } else {
    // The target refused the probe (discovery CHAP, an initiator list): the
    // network to it works, and its sessions are not the probe's. Or the
    // probe never left the host. Neither may fail a path.
    const bool refused = reach == PortalReach::Answered;
    const std::string state = (refused ? "refused: " : "unknown: ") + result.error();
    if (portal.reachability[nic] != state) {
      log::warning(fmt::format("SendTargets {} failed: {} ({})", where, result.error(),
                               refused ? "the portal answered; no path is failed for this"
                                       : "the probe could not be sent; it says nothing of "
                                         "the network"),
                   {{"PORTAL", portalKey(request.portal)}, {"IFACE", nic}});
    }
    portal.reachability[nic] = state;
    log::debug(fmt::format("SendTargets {}: {}", where, state),
               {{"PORTAL", portalKey(request.portal)}, {"IFACE", nic}});
    if (refused) {
      apply(health_.probeResult(nic, request.portal, true, "", now));
    }
  }
  retire(std::move(it->second.io));
  retire(std::move(it->second.timer));
  // The probe's context may be on this stack frame's callers; keep it
  // alive until the reaper runs.
  auto probe = std::move(it->second.probe);
  probes_.erase(it);
  deadProbes_.push_back(std::move(probe));
  // Also when retire() had nothing to retire: a probe that failed inside
  // its start never had a source.
  EventLoop::rearm(reaper_, Clock::now());
  requestPublish();
  const auto &health = config_.defaults.health;
  const unsigned inARow = health_.probeFailuresInARow(nic, request.portal);
  if (reach == PortalReach::Silent && health.proactiveFailover &&
      inARow < health.proactiveFailoverProbes) {
    // One lost reply on a busy host must not fail every path of the pair:
    // confirm at once instead of after probe_interval.
    log::info(fmt::format("SendTargets {}: {} of {} failed probe(s) in a row before its paths are "
                          "failed; probing again now",
                          where, inARow, health.proactiveFailoverProbes),
              {{"PORTAL", portalKey(request.portal)}, {"IFACE", nic}});
    startProbe(nic, request.portal, now);
  }
}

// --- publishing ------------------------------------------------------------------

void Daemon::startNetworkWatch() {
  try {
    networkWatch_ = std::make_unique<NetworkWatch>(
        loop_, NetworkChecker(options_.sysfsRoot),
        [this](const std::vector<Finding> &findings) { onNetworkFindings(findings); },
        NetworkWatch::Options{});
  } catch (const std::system_error &error) {
    log::warning(fmt::format("network check disabled: {}", error.what()));
    return;
  }
  networkWatch_->setBindings(mergeBindings(bindingsFromSessions(inventory_)));
}

void Daemon::onNetworkFindings(const std::vector<Finding> &findings) {
  const auto before = toViews(networkFindings_);
  const auto after = toViews(findings);
  auto has = [](const std::vector<FindingView> &views, const std::string &key) {
    return std::any_of(views.begin(), views.end(),
                       [&](const FindingView &v) { return v.key == key; });
  };
  for (const auto &view : after) {
    if (has(before, view.key)) {
      continue;
    }
    const auto level = view.severity == "error"     ? log::Level::Error
                       : view.severity == "warning" ? log::Level::Warning
                                                    : log::Level::Info;
    log::write(level,
               fmt::format("network check: {} ({}); fix: {}", view.summary, view.id,
                           view.fix.empty() ? std::string("see pathkeeperctl doctor")
                                            : fmt::format("{}", fmt::join(view.fix, "; "))),
               {{"FINDING", view.id},
                {"NICS", fmt::format("{}", fmt::join(view.nics, ","))},
                {"PORTALS", fmt::format("{}", fmt::join(view.portals, ","))},
                {"PATHS", fmt::format("{}", fmt::join(view.paths, ","))}},
               log::id::kNetworkFinding);
  }
  for (const auto &view : before) {
    if (!has(after, view.key)) {
      log::notice(fmt::format("network check: resolved: {} ({})", view.summary, view.id),
                  {{"FINDING", view.id}});
    }
  }
  networkFindings_ = findings;
  requestPublish();
}

void Daemon::requestPublish(std::optional<std::chrono::milliseconds> delay) {
  // The earliest request wins and later ones ride along: a stream of check
  // results (hundreds a second at 1000 paths) must not push the
  // publication out for as long as it lasts.
  if (!ready_ || !publishTimer_.active()) {
    return;
  }
  const auto when = Clock::now() + delay.value_or(options_.debounce);
  if (!publishAt_ || when < *publishAt_) {
    publishAt_ = when;
    EventLoop::rearm(publishTimer_, when);
  }
}

StateSnapshot Daemon::snapshot() const {
  StateSnapshot snap;
  snap.version = PATHKEEPER_VERSION;
  snap.mode = std::string(selector::toString(mode_));
  std::size_t degraded = 0;
  std::size_t down = 0;
  std::size_t paths = 0;
  std::size_t stale = 0;
  const auto viewOf = [&](const std::string &alias, const MapState &map, bool isStale) {
    MapView view;
    view.alias = alias;
    view.wwid = map.wwid;
    view.dmUuid = map.uuid;
    view.selector = map.selector;
    view.activeGroup = map.activeGroup;
    view.queueing = map.queueing;
    view.noPathRetry = noPathRetryOf(alias, map);
    if (map.desired && adaptiveWanted(map.desired->autoSelector, map.desired->selector) &&
        !selectorOverrides_.contains(alias)) {
      view.adaptive = map.desired->autoSelector ? "selector" : "weights";
    }
    view.adaptiveReloads = adaptive_.reloads(alias);
    for (const auto &record : adaptive_.history(alias)) {
      view.adaptiveDecisions.push_back(
          {std::chrono::duration_cast<std::chrono::seconds>(record.at.time_since_epoch()).count(),
           std::string(selector::toString(record.action)), record.reason});
    }
    for (std::size_t g = 0; g < map.groups.size(); ++g) {
      GroupView group;
      group.number = static_cast<unsigned>(g + 1);
      group.priority = g < map.groupPriorities.size() ? map.groupPriorities[g] : 0;
      group.paths = map.groups[g];
      for (const auto &device : map.groups[g]) {
        ++view.totalPaths;
        const bool usable = isStale ? staleCarriesIo(map, device)
                                    : carriesIo(health_.state(device), map.dmFailed, device);
        view.usablePaths += usable ? 1U : 0U;
      }
      view.groups.push_back(std::move(group));
    }
    if (isStale) {
      view.state = "stale";
      ++stale;
      return view;
    }
    paths += view.totalPaths;
    if (view.usablePaths == 0) {
      view.state = "down";
      ++down;
    } else if (view.usablePaths < view.totalPaths) {
      view.state = "degraded";
      ++degraded;
    } else {
      view.state = "ok";
    }
    return view;
  };
  for (const auto &[alias, map] : maps_) {
    snap.maps.push_back(viewOf(alias, map, false));
  }
  for (const auto &[alias, map] : staleMaps_) {
    snap.maps.push_back(viewOf(alias, map, true));
  }
  // A D-Bus object per map, and the state file, list them by alias.
  std::ranges::sort(snap.maps, {}, &MapView::alias);
  for (const auto &device : health_.devices()) {
    auto h = health_.health(device);
    if (!h) {
      continue;
    }
    PathView view;
    view.device = device;
    view.map = mapOfDevice(device);
    view.state = std::string(selector::toString(h->state));
    if (view.map.empty()) {
      view.dmState = "none";
    } else {
      view.dmState = maps_.at(view.map).dmFailed.at(device) ? "failed" : "active";
    }
    view.checker = h->lastCheckReason;
    if (view.checker.empty() && h->lastCheck) {
      view.checker = h->lastCheck == CheckStatus::Ok ? "TUR: ready" : "";
    }
    view.failures = h->failures;
    view.shaky = h->shaky;
    view.latencyUs = h->lastCheckLatency ? h->lastCheckLatency->count() : -1;
    const PublishedEstimate estimate = adaptive_.published(device);
    view.throughputBps = estimate.throughputBps;
    view.capacityBps = estimate.capacityBps;
    view.ioLatencyUs = estimate.latencyUs;
    view.confidence = estimate.confidencePercent;
    if (auto m = maps_.find(view.map); m != maps_.end()) {
      if (auto w = m->second.liveWeights.find(device); w != m->second.liveWeights.end()) {
        view.weight = w->second;
      }
    }
    if (const InventoryPath *path = pathByDevice(device)) {
      view.devt = path->path.devt.str();
      view.wwid = path->path.wwid;
      view.target = path->path.targetIqn;
      view.portal = path->path.portal.str();
      view.netdev = path->path.netdev;
      view.controller = path->path.controller;
      // The planner labels controllers on its own copies of the paths.
      if (auto m = maps_.find(view.map); m != maps_.end() && m->second.desired) {
        view.controller = m->second.desired->controller;
      }
      view.alua = std::string(selector::toString(path->path.alua));
      view.sessionId = path->path.sessionId;
      view.note = findingNoteFor(networkFindings_, device, view.netdev, view.portal);
    }
    if (adminFailed_.contains(device)) {
      view.note = "failed by the admin; held until reinstate-path" +
                  (view.note.empty() ? std::string{} : "; " + view.note);
    }
    snap.paths.push_back(std::move(view));
  }
  for (const auto &[key, portal] : portals_) {
    PortalView view;
    view.address = portal.portal.address;
    view.port = portal.portal.port;
    view.reachability = portal.reachability;
    snap.portals.push_back(std::move(view));
  }
  snap.findings = toViews(networkFindings_);
  const std::size_t maintained = snap.maps.size() - stale;
  snap.status = fmt::format("{} map{}, {} path{}", maintained, maintained == 1 ? "" : "s", paths,
                            paths == 1 ? "" : "s");
  if (degraded > 0) {
    snap.status += fmt::format(", {} degraded", degraded);
  }
  if (down > 0) {
    snap.status += fmt::format(", {} without a usable path", down);
  }
  if (stale > 0) {
    snap.status += fmt::format(", {} stale map{}", stale, stale == 1 ? "" : "s");
  }
  replaceInvalidUtf8(snap); // D-Bus and JSON take UTF-8 only
  return snap;
}

void Daemon::publish() {
  if (networkWatch_) {
    // Sessions come and go with the inventory; the watch re-checks only
    // when the bindings really changed.
    networkWatch_->setBindings(mergeBindings(bindingsFromSessions(inventory_)));
  }
  syncOwnedWwids();
  syncMapModels();
  publishAt_.reset();
  StateSnapshot snap = snapshot();
  if (lastPublished_) {
    // Check latencies move at most every latencyHold: each move re-renders
    // everything and sends PropertiesChanged.
    const auto now = Clock::now();
    if (holdLatencyJitter(snap, *lastPublished_, now < nextLatencyMove_)) {
      nextLatencyMove_ = now + options_.latencyHold;
    }
    if (snap == *lastPublished_) {
      return; // most check results change nothing that is published
    }
  }
  if (snap.status != lastStatus_) {
    sd_notify(0, fmt::format("STATUS={}", snap.status).c_str());
    lastStatus_ = snap.status;
  }
  // One copy, shared with the listeners (the D-Bus publisher keeps it).
  lastPublished_ = std::make_shared<const StateSnapshot>(std::move(snap));
  const SharedSnapshot published = lastPublished_; // whatever a listener does
  // D-Bus first: whoever reads "ready" in the state file finds the same on
  // the bus (main takes the bus name at the first, ready, publication).
  for (const auto &listener : listeners_) {
    listener(published);
  }
  if (!options_.stateFile.empty()) {
    writeStateFile(*published);
  }
  saveAdminHolds(); // holds that ended with their device or map
}

void Daemon::loadOwnedWwids() {
  // Keep what an earlier run listed: paths are marked at boot, before the
  // daemon starts, and a WWID is never dropped behind the admin's back. It
  // also tells which stale maps are pathkeeperd's (maintainsStale).
  if (options_.ownedWwidsFile.empty() || mode_ != selector::Mode::Owner) {
    return;
  }
  std::ifstream in(options_.ownedWwidsFile);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() != '#') {
      ownedWwids_.insert(line);
    }
  }
}

void Daemon::syncOwnedWwids() {
  const auto &file = options_.ownedWwidsFile;
  if (file.empty()) {
    return;
  }
  std::error_code ec;
  if (mode_ != selector::Mode::Owner) {
    // multipathd owns the maps: pathkeeper's rule must not mark any path.
    if (fs::remove(file, ec)) {
      log::notice(fmt::format("companion mode: removed {}", file.string()));
    }
    ownedWwids_.clear();
    return;
  }
  bool grew = false;
  for (const auto &[alias, map] : maps_) {
    // Planned maps only: right after a switch from companion mode maps_
    // still holds every map multipathd had, until the first owner pass.
    if (map.desired && !map.wwid.empty() && ownedWwids_.insert(map.wwid).second) {
      grew = true;
    }
  }
  if (!grew && fs::exists(file, ec)) {
    handBackUnmarkedPaths();
    return;
  }
  std::string text = "# WWIDs of the multipath maps pathkeeperd owns (owner mode), one a line.\n"
                     "# Read by 62-pathkeeper.rules; written by pathkeeperd, never pruned by it.\n";
  for (const auto &wwid : ownedWwids_) {
    text += wwid + '\n';
  }
  if (auto written = replaceFile(file, text); !written) {
    log::warning(written.error());
    return;
  }
  log::info(fmt::format("{} lists {} WWID(s)", file.string(), ownedWwids_.size()));

  handBackUnmarkedPaths();
}

void Daemon::handBackUnmarkedPaths() {
  // 62-pathkeeper.rules marks a path only if its WWID was in owned-wwids
  // when udev processed the path: on a first start, and for a second path
  // that appeared while the daemon was creating its map, it was not. Those
  // paths get a change uevent, once, so that udev runs the rules again now
  // rather than at their next uevent (multipathd does the same for the
  // WWIDs it adds to its wwids file). Whether udev marked a path is in its
  // database; a path udev has not processed yet needs nothing, since the
  // list is written by then, and neither does one the rule did not see
  // (not installed, as in a build tree): another uevent would change
  // nothing, and at 1000 paths would keep udevd busy for minutes.
  if (mode_ != selector::Mode::Owner || options_.ownedWwidsFile.empty() ||
      !udevdRunning(options_.udevRunDir.string())) {
    return;
  }
  std::erase_if(markChecked_,
                [this](const std::string &device) { return !mapOfDevice_.contains(device); });
  std::vector<std::string> sent;
  std::vector<std::string> failed;
  for (const auto &[alias, map] : maps_) {
    if (map.wwid.empty() || !ownedWwids_.contains(map.wwid)) {
      continue;
    }
    for (const auto &group : map.groups) {
      for (const auto &device : group) {
        const InventoryPath *path = markChecked_.contains(device) ? nullptr : pathByDevice(device);
        if (path == nullptr) {
          continue;
        }
        std::ifstream db(options_.udevRunDir / "data" / ("b" + path->path.devt.str()));
        if (!db) {
          continue; // not processed yet: the rules will find the WWID listed
        }
        markChecked_.insert(device);
        bool marked = false;
        bool ruleRan = false; // the rule tags every iSCSI path it sees
        for (std::string line; !marked && std::getline(db, line);) {
          marked = line == "E:DM_MULTIPATH_DEVICE_PATH=1";
          ruleRan = ruleRan || line == "E:PATHKEEPER_ISCSI_PATH=1";
        }
        if (marked || !ruleRan) {
          continue; // marked, or the rule is not installed: a uevent would not help
        }
        std::ofstream uevent(options_.sysfsRoot / "block" / device / "uevent");
        uevent << "change";
        (uevent.flush() ? sent : failed).push_back(device);
      }
    }
  }
  if (!sent.empty() || !failed.empty()) {
    log::info(fmt::format(
        "paths of owned WWIDs that udev had not marked as multipath members: {}{}",
        sent.empty() ? "" : fmt::format("sent a change uevent to {}", fmt::join(sent, ", ")),
        failed.empty() ? ""
                       : fmt::format("{}could not send one to {} (their next uevent marks them)",
                                     sent.empty() ? "" : "; ", fmt::join(failed, ", "))));
  }
}

void Daemon::writeStateFile(const StateSnapshot &snap) const {
  // Streamed: at 1000 paths the text is about 1 MiB, rewritten at every change.
  const auto write = [&](std::ostream &out) { writeSnapshotJson(snap, ready_, out); };
  if (auto written = replaceFile(options_.stateFile, write); !written) {
    log::warning(written.error());
  }
}

std::map<std::string, unsigned, std::less<>> Daemon::linkSpeeds() const {
  std::map<std::string, unsigned, std::less<>> speeds;
  for (const auto &[name, path] : inventory_.paths) {
    const std::string &nic = path.path.netdev;
    if (nic.empty() || speeds.contains(nic)) {
      continue;
    }
    // "speed" is Mb/s; -1 or unreadable when the driver does not know (link
    // down, virtual NICs without a set speed).
    const std::string text = readSmallFile(options_.sysfsRoot / "class/net" / nic / "speed");
    long speed = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), speed);
    if (ec == std::errc() && speed > 0 && speed <= 10'000'000) {
      speeds.emplace(nic, static_cast<unsigned>(speed));
    }
  }
  return speeds;
}

// --- helpers --------------------------------------------------------------------------

PathFacts Daemon::factsOf(const InventoryPath &path) const {
  PathFacts facts;
  const ScsiDisk *disk = nullptr;
  if (auto it = inventory_.disks.find(path.path.device); it != inventory_.disks.end()) {
    disk = &it->second;
    facts.device = deviceStateOf(disk->state);
    if (auto s = inventory_.sessions.find(disk->session); s != inventory_.sessions.end()) {
      facts.session = sessionStateOf(s->second.state);
    }
  }
  facts.alua = path.path.alua;
  if (path.path.sessionId >= 0) {
    facts.sessionId = static_cast<unsigned>(path.path.sessionId);
  }
  facts.route.netdev = path.path.netdev;
  facts.route.portal = path.path.portal;
  return facts;
}

const InventoryPath *Daemon::pathByDevice(const std::string &device) const {
  auto it = inventory_.paths.find(device);
  return it == inventory_.paths.end() ? nullptr : &it->second;
}

std::string Daemon::deviceOfDevt(const std::string &devt) const {
  for (const auto &[name, path] : inventory_.paths) {
    if (path.path.devt.str() == devt) {
      return name;
    }
  }
  return {};
}

std::string Daemon::uuidOfMap(const std::string &alias) const {
  for (const auto *known : {&maps_, &staleMaps_}) {
    if (auto it = known->find(alias); it != known->end()) {
      return it->second.uuid;
    }
  }
  return {};
}

std::string Daemon::nameNow(const std::string &uuid, const std::string &posted) const {
  if (!uuid.empty()) {
    for (const auto *known : {&maps_, &staleMaps_}) {
      for (const auto &[alias, map] : *known) {
        if (map.uuid == uuid) {
          return alias;
        }
      }
    }
  }
  return posted;
}

Daemon::MapState *Daemon::plannedMapNow(const std::string &uuid, const std::string &posted) {
  const std::string now = nameNow(uuid, posted);
  auto it = maps_.find(now);
  return it != maps_.end() && isMap(now, uuid) ? &it->second : nullptr;
}

bool Daemon::isMap(const std::string &alias, const std::string &uuid) const {
  for (const auto *known : {&maps_, &staleMaps_}) {
    if (auto it = known->find(alias); it != known->end()) {
      return uuid.empty() || it->second.uuid == uuid;
    }
  }
  return false;
}

void Daemon::sendMessage(DeviceMapper &dm, const std::string &uuid, const std::string &name,
                         const std::string &text) {
  if (uuid.empty()) {
    dm.message(name, text);
  } else {
    dm.messageUuid(uuid, name, text);
  }
}

std::string Daemon::mapOfDevice(const std::string &device) const {
  auto it = mapOfDevice_.find(device);
  return it == mapOfDevice_.end() ? std::string{} : it->second;
}

bool Daemon::adaptiveWanted(bool autoSelector, selector::SelectorKind selector) const {
  return autoSelector || (selector == selector::SelectorKind::ServiceTime &&
                          config_.defaults.relativeThroughput == selector::ThroughputWeights::Auto);
}

void Daemon::requestReconcile(std::string why) {
  if (pendingReconcileWhy_.empty()) {
    pendingReconcileWhy_ = std::move(why);
  }
  if (reconcileTimer_.active()) {
    EventLoop::rearm(reconcileTimer_, Clock::now() + options_.debounce);
  }
}

} // namespace pathkeeper::daemon
