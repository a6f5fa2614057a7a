#pragma once

// pathkeeperd's composition: the inventory, the health engine, the
// reconciler and the adapters, driven by one sd-event loop.
//
// Everything happens on the loop thread. Events (udev, dm path events, TUR
// completions, timers, signals) update the inventory and the health engine;
// their decisions become dm messages at once, while changes that need a new
// table are batched behind a short debounce and handed to the reconciler.
// The published state (the state file, sd_notify STATUS) follows the same
// debounce.

#include "adaptive_controller.hpp"
#include "admin_holds.hpp"
#include "config.hpp"
#include "dm_adapter.hpp"
#include "dm_echo.hpp"
#include "dm_worker.hpp"
#include "event_loop.hpp"
#include "failback.hpp"
#include "forward_waiter.hpp"
#include "health.hpp"
#include "iscsi_discovery.hpp"
#include "log.hpp"
#include "multipathd_client.hpp"
#include "network_watch.hpp"
#include "no_path_retry.hpp"
#include "pending_forwards.hpp"
#include "per_map_state.hpp"
#include "plan.hpp"
#include "reconciler.hpp"
#include "state_model.hpp"
#include "sysfs_inventory.hpp"
#include "tur_checker.hpp"
#include "udev_monitor.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pathkeeper::daemon {

/// @brief What main decides: file locations and overrides.
struct DaemonOptions {
  std::filesystem::path configFile;
  std::filesystem::path configDir;
  std::filesystem::path sysfsRoot{"/sys"};
  std::filesystem::path devRoot{"/dev"};
  /// The published state (schema 1, documented in pathkeeperd(8)); empty disables it.
  std::filesystem::path stateFile{"/run/pathkeeper/state.json"};
  /// Owner mode: WWIDs of the maps pathkeeperd owns, one a line, for
  /// udev-rules/62-pathkeeper.rules; kept across restarts and never pruned
  /// automatically (like multipathd's wwids file), removed in companion
  /// mode. Empty disables it.
  std::filesystem::path ownedWwidsFile{"/var/lib/pathkeeper/owned-wwids"};
  /// The admin's holds (FailPath, DisableQueueing), kept across restarts
  /// (admin_holds.hpp); under /run, so a reboot ends them. Empty disables it.
  std::filesystem::path adminHoldsFile{"/run/pathkeeper/admin-holds"};
  /// The SCSI vendor and product of each map's paths, by WWID, so that a
  /// [[device]] policy still applies after a restart to a map whose devices
  /// are gone; under /run, as the maps are. Empty disables it.
  std::filesystem::path mapModelsFile{"/run/pathkeeper/map-models"};
  /// udevd's runtime directory: udevd runs when a process listens on its
  /// control socket there.
  std::filesystem::path udevRunDir{"/run/udev"};
  /// What main found of udevd when it set the device-mapper adapter's udev
  /// sync up, so that the event source agrees with it (udevd may start or
  /// exit in between); empty means start() looks for itself.
  std::optional<UdevdStatus> udevdAtStart;
  /// Where multipathd's process and socket are looked for (tests pass a
  /// tree without the host's processes).
  std::filesystem::path procRoot{"/proc"};
  std::optional<selector::Mode> mode; ///< overrides the config's mode
  /// multipathd's abstract socket name (without the leading NUL): how auto
  /// mode detects it, and where companion mode forwards (tests pass their own).
  std::string multipathdSocket{kMultipathdSocket};
  /// Auto mode: how often multipathd's socket is looked for, so that the
  /// mode follows a multipathd started or stopped after pathkeeperd.
  std::chrono::milliseconds multipathdWatch{5000};
  /// Auto mode: how long multipathd must have been gone (no socket, no
  /// process) before pathkeeperd takes its maps over; a restart of
  /// multipathd takes less.
  std::chrono::milliseconds multipathdGoneGrace{15000};
  /// Companion mode: how long a forward made for an admin's command may wait
  /// behind earlier ones. Its caller waits for multipathd's answer, up to
  /// this plus the 4.1 s answer timeout: about 19 s, inside busctl's default
  /// 25 s method timeout, so the caller hears the outcome rather than a
  /// timeout while the command may still be carried out.
  std::chrono::milliseconds adminQueueLimit{15000};
  /// How often session and device states are re-read from sysfs: the kernel
  /// sends no uevent when an iSCSI session logs in again.
  std::chrono::milliseconds sessionPoll{500};
  /// How often, while a session is out of LOGGED_IN (or a disk is not
  /// running), just those are re-read: their return is what reinstatement
  /// waits for, and there are few of them, so this costs little at scale.
  std::chrono::milliseconds recoveringPoll{100};
  std::chrono::milliseconds debounce{150};
  /// What only the checks' verdict texts and latencies changed is published
  /// this long after it (the slow lane); state changes go out at the
  /// debounce and take such changes along.
  std::chrono::milliseconds quietPublish{2000};
  /// Once a check latency has moved in what is published, further moves
  /// wait this long: at 1000 paths some TUR is a third slower or faster
  /// than the last every few milliseconds under load.
  std::chrono::milliseconds latencyHold{10000};
  /// What sends TEST UNIT READY; the unit tests pass a fake, since the real
  /// one needs SCSI devices.
  TurRunner turRunner = runTestUnitReady;
  /// Where device events come from; empty means a UdevMonitor on the given
  /// source. The unit tests feed their own.
  std::function<std::unique_ptr<DeviceEventSource>(UdevSource)> deviceEvents;
};

/// @brief The daemon. Construct, start(), then run the loop.
class Daemon final : public Commands {
public:
  using Clock = std::chrono::steady_clock;

  /// @brief @p dm is used only in owner mode. All references must outlive
  /// the daemon.
  Daemon(EventLoop &loop, DaemonOptions options, DeviceMapper &dm);
  ~Daemon();
  Daemon(const Daemon &) = delete;
  Daemon &operator=(const Daemon &) = delete;

  /// @brief Loads the config, scans, builds or adopts the maps, and arms
  /// every source. @throws std::runtime_error on a fatal startup problem
  /// (bad config, unreadable sysfs root) with the reason.
  void start();

  [[nodiscard]] selector::Mode mode() const { return mode_; }
  /// @brief Reconcile passes started so far (tests wait for one).
  [[nodiscard]] std::uint64_t passes() const { return passes_; }
  /// @brief Whether a reconcile pass is under way (tests wait for quiet).
  [[nodiscard]] bool reconciling() const { return reconcileRunning_; }
  /// @brief Finished probes not yet released (for tests).
  [[nodiscard]] std::size_t finishedProbesHeld() const { return deadProbes_.size(); }
  /// @brief What is published now.
  [[nodiscard]] StateSnapshot snapshot() const;
  /// @brief Called with every new snapshot (after the debounce), on the loop
  /// thread. A snapshot equal to the last one is not handed out again.
  void onPublish(std::function<void(const SharedSnapshot &)> listener) {
    listeners_.push_back(std::move(listener));
    lastPublished_.reset(); // the new listener has seen nothing yet
  }

  // Commands (D-Bus, pathkeeperctl). Admin actions are kept: a path the
  // admin failed stays failed until the admin reinstates it, and a selector
  // set at run time holds until the next SetSelector or restart.
  Expected<void> reconfigure() override;
  Expected<void> failPath(const std::string &device) override;
  Expected<void> reinstatePath(const std::string &device) override;
  Expected<void> switchGroup(const std::string &map, unsigned group) override;
  Expected<void> disableQueueing(const std::string &map) override;
  /// Companion mode: @p done gets multipathd's answers to the forwards
  /// @p command starts (the first refusal, or success).
  void answerWhenDone(const std::function<Expected<void>()> &command, Done done) override;
  Expected<void> restoreQueueing(const std::string &map) override;
  Expected<void> setSelector(const std::string &map, const std::string &selector) override;
  Expected<void> rescan() override;

private:
  struct MapState; // live and desired facts of one map

  // Event handlers.
  void onDeviceEvents();
  /// Owner mode: whether a dm device event is someone else's change to the
  /// multipath maps (a removal, a rename), which a pass must take in.
  [[nodiscard]] bool isForeignMapEvent(const DeviceEvent &ev) const;
  void onCheckerResults();
  void onHealthTimer();
  void pollSessions();
  /// @brief The adaptive-selection timer: samples /sys/block/<dev>/stat of
  /// every path of a service-time or auto map, asks for decisions, and
  /// reconciles when one says reload.
  void sampleAdaptive();
  Expected<void> reloadConfig();

  // Work.
  void syncHealth(const std::vector<std::string> &changed, Clock::time_point now);
  void addToHealth(const InventoryPath &path, Clock::time_point now);
  void apply(const HealthTracker::Decisions &decisions);
  void startDueChecks(Clock::time_point now);
  /// Submits @p device's TUR, in its session's group.
  void startCheck(const std::string &device, Clock::time_point now);
  void rearmHealthTimer();
  void requestReconcile(std::string why);
  /// @brief Starts a reconcile pass, or asks for one more when one runs. A
  /// pass is asynchronous: the worker reads the live maps, the loop plans
  /// (reconcileWith), the worker applies and reads again, and the loop
  /// refreshes its view (finishReconcile).
  void reconcile();
  void reconcileWith(std::vector<LiveMap> liveMaps, const std::string &why);
  /// @brief Owner mode, a pass's first step when planned maps are live under
  /// other names: renames them (the worker), moves their state, reads the
  /// maps again and goes on with reconcileWith. Once per pass.
  void renameThenReconcile(std::vector<Action> renames, std::string why);
  void finishReconcile();
  void logOutcomes(const std::vector<ActionOutcome> &outcomes);
  /// @brief (device, failed) for a fail_path/reinstate_path message action.
  [[nodiscard]] std::optional<std::pair<std::string, bool>> echoOf(const Action &action) const;
  /// @brief READY=1, once the first reconcile is done.
  void finishStartup();
  /// @brief Rebuilds maps_ from the kernel's maps: the desired ones in
  /// owner mode (every mpath- map at startup and in companion mode). In
  /// owner mode the other mpath- maps go to staleMaps_. Each keeps a
  /// summary of its plan (MapPlan); @p desired, the pass's plan, ends here.
  void refreshMaps(const std::vector<LiveMap> &live, std::vector<selector::PlannedMap> desired,
                   bool everyMultipathMap);
  /// The map-level reactions to path states: no_path_retry, then failback.
  void runMapPolicies(Clock::time_point now);
  /// @brief Whether the health timer must run the map policies: a failback
  /// or no_path_retry deadline has come, or checker_interval has passed
  /// since they last ran. Everything else that can change their outcome (a
  /// path's verdict, a switch, a reconcile) runs them itself; at 1000
  /// paths running them at every timer fire, dozens a second, was a quarter
  /// of the daemon's CPU.
  [[nodiscard]] bool mapPoliciesDue(Clock::time_point now) const;
  void runNoPathRetry(Clock::time_point now);
  /// Sends queue_if_no_path (@p queue) or fail_if_no_path to map @p alias;
  /// @p reason is for the log. A message from the no_path_retry count
  /// (@p fromCount) that fails is retried by the count, any other by a
  /// reconcile pass.
  void sendQueueing(const std::string &alias, bool queue, const std::string &reason,
                    bool fromCount);
  /// The checks DisableQueueing and RestoreQueueing (@p queue) share, and
  /// companion mode's forward to multipathd. @return true when forwarded:
  /// nothing is left to do here.
  Expected<bool> forwardQueueing(const std::string &map, bool queue);
  /// A known map that @p live has under another name, by its DM UUID and
  /// device number, was renamed (dmsetup rename), unless one of our passes
  /// just made that name or its remove uevent came: its per-map state moves
  /// to the new name.
  void followRenames(const std::vector<LiveMap> &live);
  /// Moves every per-map state (maps_, staleMaps_, the admin's selector and
  /// disable-queueing, no_path_retry, failback, adaptive, announced_) from
  /// each old name of @p renames to its new one.
  void moveMapState(const MapRenames &renames);
  /// Companion mode: the kernel's PATH_FAILED (@p failed) or
  /// PATH_REINSTATED for @p device, the @p echo of our own command or not,
  /// may settle a forward (PendingForwards).
  void noteKernelReport(const std::string &device, bool failed, bool echo);
  /// A known map's remove uevent: it is gone, not renamed (removedMaps_).
  void noteRemoved(const DeviceEvent &ev);
  /// Ends the per-map state (no_path_retry's count, the admin's
  /// disable-queueing and SetSelector, failback, adaptive) of every map
  /// @p live (the kernel's maps as just read) does not have.
  void endWithGoneMaps(const std::vector<LiveMap> &live);
  /// After a pass has read the maps: a maintained stale map whose queueing
  /// was disabled, or whose count ran out, and that still queues gets
  /// fail_if_no_path again (the reconciler plans nothing for it).
  void stopStaleQueueing();
  /// A stale map (staleMaps_) whose queueing pathkeeperd looks after: one
  /// it planned before in this run, whose WWID it owns (owned-wwids), or
  /// that holds the admin's disable-queueing.
  /// Others (e.g. a map multipathd left for a LUN pathkeeper blacklists)
  /// are only published.
  [[nodiscard]] bool maintainsStale(const std::string &alias, const MapState &map) const;
  /// Whether @p device, a path of stale map @p map, can carry I/O. Its
  /// device is not checked (mostly gone), so dm's word decides, but only
  /// for a device that still exists: dm keeps a path on a deleted device
  /// active until I/O fails on it, and that I/O would queue meanwhile.
  [[nodiscard]] bool staleCarriesIo(const MapState &map, const std::string &device) const;
  /// The no_path_retry policy of a planned map, or of a stale one: the
  /// configuration's for its WWID and its paths' vendor and product as last
  /// known (after a restart, from the map-models file; with none known: the
  /// defaults and its [[map]] entry), so that a configuration reload applies
  /// to it.
  [[nodiscard]] selector::NoPathRetry policyOf(const MapState &map) const;
  /// Fills @p map's vendor and product from its paths in the inventory
  /// (and keeps them in knownModels_), else from what maps_ or staleMaps_
  /// knew of the map named @p alias, else from knownModels_.
  void rememberModel(const std::string &alias, MapState &map);
  /// Why a command on map @p map, which maps_ does not hold, cannot run.
  [[nodiscard]] std::string noSuchMap(const std::string &map) const;
  /// What map @p alias does with I/O while no path is usable (MapView::noPathRetry).
  [[nodiscard]] std::string noPathRetryOf(const std::string &alias, const MapState &map) const;
  /// Companion mode: sends @p command to multipathd and logs its answer;
  /// with @p reread, a successful one reads the maps again (a queueing
  /// change raises no dm event). @p waiter as for sendPathMessage().
  void forwardToMultipathd(const std::string &command, const log::Field &field, bool reread = false,
                           std::function<void(bool ok)> done = {},
                           const std::shared_ptr<ForwardWaiter> &waiter = {});
  /// How long a forward may wait behind earlier ones: the admin's limit
  /// for an admin's command (its caller waits for the answer), else the
  /// client's own.
  [[nodiscard]] std::optional<std::chrono::milliseconds>
  queueLimitFor(const std::shared_ptr<ForwardWaiter> &waiter) const {
    return waiter ? std::optional(options_.adminQueueLimit) : std::nullopt;
  }
  /// Companion mode, after a pass: sends the disable-queueing holds not yet
  /// taken by multipathd (queueingHandover_) under the maps' names now.
  void handOverQueueing(Clock::time_point now);
  /// Drops the per-map counts and waits of the mode left behind.
  void forgetPerMapState();
  void runFailback(Clock::time_point now);
  /// Why the admin's switch of map @p alias to @p group (in range) is
  /// refused: the group has no usable path, or the failback policy would
  /// undo it. nullopt when it may go ahead.
  [[nodiscard]] std::optional<std::string> refuseSwitch(const std::string &alias,
                                                        const MapState &map, unsigned group) const;
  /// The daemon's verdict on a path for the map-level policies: usable (up
  /// or ghost, or shaky in use as its map's last resort; not held failed by
  /// the admin), not checked yet, or unusable.
  enum class Verdict { Usable, Unchecked, Unusable };
  /// True when @p device carries I/O: stableAndUsable(), or shaky in use as
  /// its map's last resort and not held failed by the admin.
  [[nodiscard]] bool usableForIo(const std::string &device) const;
  /// Up or ghost and not held failed by the admin: a stable path.
  [[nodiscard]] bool stableAndUsable(const std::string &device) const;
  /// Tells the health engine which shaky paths are their map's last resort
  /// (no stable path left in the map) and applies what that changes.
  void refreshLastResort(Clock::time_point now);
  [[nodiscard]] Verdict verdictOf(const std::string &device) const;
  /// The map's groups as failback sees them: priority and usable paths.
  [[nodiscard]] std::vector<FailbackGroup> failbackGroups(const MapState &map) const;
  void syncMultipathd();
  /// @brief Retires a source whose callback may be running: it is dropped
  /// on the next loop iteration, never inside its own dispatch.
  void retire(EventSource source);
  // SendTargets probes per (NIC, portal): portal reachability, missing
  // paths and, with proactive_failover, early path failures.
  void startProbes();
  /// @brief Starts one probe of (@p nic, @p portal) unless one runs.
  void startProbe(const std::string &nic, const selector::Portal &portal, Clock::time_point now);
  void syncProbe(const std::string &key);
  void finishProbe(const std::string &key);
  /// Fails or reinstates @p device in dm (owner mode) or through multipathd
  /// (companion mode). @p waiter: the admin's command this is for, which
  /// hears multipathd's answer; none for what pathkeeperd does by itself.
  void sendPathMessage(const std::string &device, bool fail, const std::string &reason,
                       const std::shared_ptr<ForwardWaiter> &waiter = {});
  /// Companion mode: sends a path command to multipathd and follows its
  /// answer; one that fails is sent again (PendingForwards).
  void forwardPathCommand(const PendingForwards::Forward &forward,
                          const std::shared_ptr<ForwardWaiter> &waiter = {});
  /// Companion mode: sends again the path commands whose retry is due,
  /// unless dm already shows what they ask.
  void resendForwards(Clock::time_point now);
  // The network check (issue #8): re-run on netlink changes by NetworkWatch.
  void startNetworkWatch();
  void onNetworkFindings(const std::vector<Finding> &findings);
  /// @brief Publishes after @p delay (the debounce by default), or sooner
  /// when an earlier request is pending.
  void requestPublish(std::optional<std::chrono::milliseconds> delay = std::nullopt);
  void publish();
  void writeStateFile(const StateSnapshot &snap) const;
  /// Owner mode, at startup: what the owned-wwids file lists.
  void loadOwnedWwids();
  void syncOwnedWwids();
  /// Startup: what the map-models file of the run before knew.
  void loadMapModels();
  /// Writes the models of the maps the kernel has now when they changed.
  void syncMapModels();
  /// Startup: takes over the holds of the previous run that still apply.
  void loadAdminHolds();
  /// Writes the holds when they changed since the last write.
  void saveAdminHolds();
  /// @brief Owner mode with udevd: a change uevent to each path of an owned
  /// WWID that udev's database shows unmarked, once per path. Runs at every
  /// publication (syncOwnedWwids), and every udev event of a path asks for
  /// one (syncHealth), so a path udev finishes later is seen then.
  void handBackUnmarkedPaths();

  // Helpers.
  /// @brief Link speed in Mb/s per NIC the paths use, where the NIC knows it.
  [[nodiscard]] std::map<std::string, unsigned, std::less<>> linkSpeeds() const;
  [[nodiscard]] PathFacts factsOf(const InventoryPath &path) const;
  [[nodiscard]] const InventoryPath *pathByDevice(const std::string &device) const;
  [[nodiscard]] std::string deviceOfDevt(const std::string &devt) const;
  [[nodiscard]] std::string mapOfDevice(const std::string &device) const;
  /// The DM UUID of the map known by this name (planned or stale); empty
  /// when unknown.
  [[nodiscard]] std::string uuidOfMap(const std::string &alias) const;
  /// The name the map with DM UUID @p uuid has now: a job posted under
  /// @p posted may finish after a rename. @p posted when it is unknown
  /// (gone: check isMap() before touching the state of that name).
  [[nodiscard]] std::string nameNow(const std::string &uuid, const std::string &posted) const;
  /// Whether a known map (planned or stale) has this name and, when
  /// @p uuid is not empty, this DM UUID.
  [[nodiscard]] bool isMap(const std::string &alias, const std::string &uuid) const;
  /// The planned map with DM UUID @p uuid under its name now (nameNow), if
  /// that name still is its own: the state a job's continuation may update.
  [[nodiscard]] MapState *plannedMapNow(const std::string &uuid, const std::string &posted);
  /// On a dm worker: a message by DM UUID (by @p name when the UUID is not
  /// known), so that a rename meanwhile cannot send it to another map.
  static void sendMessage(DeviceMapper &dm, const std::string &uuid, const std::string &name,
                          const std::string &text);
  /// @brief relative_throughput = "auto" on a service-time map, or selector = "auto".
  [[nodiscard]] bool adaptiveWanted(bool autoSelector, selector::SelectorKind selector) const;
  [[nodiscard]] bool adaptiveWanted(const selector::PlannedMap &map) const {
    return adaptiveWanted(map.autoSelector, map.spec.selector);
  }

  /// The mode the command line or the configuration asks for (maybe auto).
  [[nodiscard]] selector::Mode configuredMode() const {
    return options_.mode.value_or(config_.defaults.mode);
  }
  /// Auto mode: follows multipathd. Owner becomes companion as soon as
  /// multipathd (or its socket) is there; companion becomes owner once it
  /// has been gone for multipathdGoneGrace. @p processes: also look for a
  /// multipathd process (reads every /proc/PID/comm), not only its socket.
  /// An explicit owner mode warns once each time multipathd appears.
  void watchMultipathd(bool processes);
  /// A reload changed the configured mode to @p wanted.
  void followConfiguredMode(selector::Mode wanted);
  /// Changes the mode at once, or after the pass under way.
  void switchMode(selector::Mode to, const std::string &why, bool startMultipathd);
  void applyMode(selector::Mode to, const std::string &why, bool startMultipathd);
  /// Companion mode's connection to multipathd; @p start: ask it something
  /// now, which starts it when only systemd's multipathd.socket listens.
  void connectMultipathd(bool start);

  EventLoop &loop_;
  DaemonOptions options_;
  DeviceMapper &dm_;
  selector::Config config_;
  selector::Mode mode_ = selector::Mode::Owner;
  selector::KernelCapabilities kernel_;
  SysfsInventory sysfs_;
  Inventory inventory_;
  std::unique_ptr<NetworkWatch> networkWatch_;
  std::vector<Finding> networkFindings_;
  HealthTracker health_;
  FailbackTracker failback_;
  NoPathRetryTracker noPathRetry_;
  AdaptiveController adaptive_;
  /// Maps whose adaptive reload was decided and has not yet been through a
  /// pass: the pass count at the decision (a pass started later applies the
  /// decided table), and the lull the swap is to wait for. Until then the
  /// map is sampled but not evaluated: its live table still has the old
  /// weights, and the governor would take the reload under way for a new
  /// change.
  struct AdaptiveLoad {
    std::uint64_t pass = 0;
    std::optional<LullGate> gate;
  };
  std::map<std::string, AdaptiveLoad> adaptiveLoading_;
  std::unique_ptr<TurChecker> checker_;
  std::unique_ptr<DeviceEventSource> monitor_;
  std::unique_ptr<MultipathdClient> multipathd_;

  struct ActiveProbe {
    std::unique_ptr<IscsiDiscovery> probe;
    EventSource io;
    int fd = -1;
    EventSource timer;
  };
  struct PortalState {
    selector::Portal portal;
    std::map<std::string, std::string> reachability; ///< NIC -> PortalView::reachability
  };
  std::map<std::string, ActiveProbe> probes_;  ///< by "nic|address:port"
  std::map<std::string, PortalState> portals_; ///< by "address:port"
  std::set<std::string> reportedMissing_;      ///< missing paths already logged
  std::string probeInitiator_;
  EventSource probeTimer_;
  std::vector<EventSource> retired_;
  std::vector<std::unique_ptr<IscsiDiscovery>> deadProbes_;
  EventSource reaper_;
  /// The rescan after device events were lost: one for a whole burst, once
  /// it has had a moment to end (a scan on the loop per overflow would keep
  /// the loop scanning while the burst lasts).
  EventSource lostEventsTimer_;
  bool lostEventsRescanDue_ = false;

  std::map<std::string, MapState> maps_; ///< by alias
  std::vector<std::string> planWarnings_;
  std::set<std::string> announced_; ///< maps logged as created or adopted
  /// A rename that failed, by its target name: the error last logged, so
  /// that the retry of every pass logs it once (again when it changes).
  std::map<std::string, std::string> renameFailures_;
  /// The maps the last pass with actions created (or tried to), and the
  /// names it renamed maps to: their uevents are no one else's doing
  /// (isForeignMapEvent).
  std::set<std::string> lastCreates_;
  bool renamesTried_ = false; ///< this pass has had its rename step
  /// Known maps whose remove uevent came: removed, so a map with the same
  /// DM UUID and minor is a new one. Each with the pass that was current
  /// then; it ends once a later pass, whose reads all followed the removal,
  /// has rebuilt maps_ (refreshMaps). A late event cannot outlive that.
  std::map<std::string, std::uint64_t> removedMaps_;
  std::uint64_t passes_ = 0; ///< reconcile passes started
  /// Paths failed by FailPath, held until ReinstatePath: device -> the
  /// identity (devt, WWID) of the device the admin failed. The kernel reuses
  /// sdX names, so a hold ends with its device (syncHealth).
  std::map<std::string, std::string> adminFailed_;
  /// Paths published Shaky (from the decisions applied): the only ones
  /// refreshLastResort() has to look at.
  std::set<std::string> shakyPaths_;
  /// Maps whose queueing the admin disabled (DisableQueueing), by alias:
  /// they do not queue until RestoreQueueing, whatever no_path_retry says.
  /// Dropped with the map.
  std::set<std::string, std::less<>> queueingDisabled_;
  std::string savedHolds_; ///< what saveAdminHolds() last wrote
  /// WWID -> the vendor and product of its paths, from the map-models file
  /// of the run before and from every path seen since: a map left out of a
  /// pass (its table unreadable for a moment) keeps its model.
  std::map<std::string, std::pair<std::string, std::string>> knownModels_;
  std::string modelsText_;       ///< what syncMapModels() last wrote
  std::string modelsWriteError_; ///< why its last write failed, logged once
  /// Owner mode: the kernel's mpath- maps that no desired map names, left
  /// in place (nothing is removed automatically), typically a LUN whose
  /// devices are all gone. Published with State "stale"; no reloads, path
  /// messages or failback, but no_path_retry and the queueing commands
  /// still work on the ones pathkeeperd maintains (maintainsStale).
  std::map<std::string, MapState> staleMaps_;
  /// The first reconcile pass has taken over the kernel's queueing state.
  bool queueingAdopted_ = false;
  DmEchoFilter echoes_;      ///< our messages whose dm events are still due
  PendingForwards forwards_; ///< companion mode: path commands multipathd has not confirmed
  std::map<std::string, selector::SelectorKind> selectorOverrides_; ///< SetSelector, by alias
  std::vector<std::function<void(const SharedSnapshot &)>> listeners_;
  SharedSnapshot lastPublished_;               ///< what publish() last handed out; null before
  std::optional<Clock::time_point> publishAt_; ///< when publishTimer_ fires, if armed
  Clock::time_point nextLatencyMove_{};        ///< publish(): check latencies held until then
  bool ready_ = false;
  std::string lastStatus_;
  std::set<std::string> ownedWwids_;  ///< what the owned-wwids file lists
  std::set<std::string> markChecked_; ///< paths whose udev marks were checked
  std::string pendingReconcileWhy_;
  Clock::time_point nextFullSessionPoll_{}; ///< pollSessions(): when to read every session again
  /// onHealthTimer(): when the map policies run again with nothing due (see
  /// mapPoliciesDue()).
  Clock::time_point nextPolicySweep_{};
  std::map<std::string, std::string> mapOfDevice_; ///< device -> alias, rebuilt with maps_
  std::string diskSweepCursor_;                    ///< pollSessions(): the last disk its sweep read
  std::unique_ptr<DmWorker> tableWorker_;          ///< dm reads, create and reload (after startup)
  std::unique_ptr<DmWorker> messageWorker_;        ///< dm path and group messages
  bool reconcileRunning_ = false;
  bool reconcileAgain_ = false;
  /// A mode switch that waits for the pass under way (switchMode).
  struct ModeSwitch {
    selector::Mode to;
    std::string why;
    bool startMultipathd;
  };
  std::optional<ModeSwitch> pendingMode_;
  /// While an admin command runs in companion mode (answerWhenDone): what
  /// the forwards it makes report their answers to. Only the commands pass
  /// it on (failPath, reinstatePath, switchGroup, the queueing ones): what
  /// health or a mode switch forwards meanwhile is not the admin's answer.
  std::shared_ptr<ForwardWaiter> waiter_;
  /// Companion mode: the admin's disable-queueing holds multipathd has not
  /// taken yet (from owner mode, or from the holds file at a start), by DM
  /// UUID. multipathd may rename the maps, or not know them yet. Sent after
  /// each companion pass and, after a refusal, again with PendingForwards'
  /// backoff. Kept in the holds file until multipathd takes them.
  struct Handover {
    std::string alias;           ///< the map's name when last seen (for the holds file)
    bool inFlight = false;       ///< a send is on its way
    Clock::time_point nextTry{}; ///< after a refusal: when to send it again
    Clock::duration delay{};     ///< the last wait; zero: sent after the next pass
  };
  std::map<std::string, Handover> queueingHandover_;
  static void backOff(Handover &handover, Clock::time_point now);
  /// Auto mode, companion: since when multipathd has not been seen.
  std::optional<Clock::time_point> multipathdGoneSince_;
  /// multipathd (its process or its socket) was seen at the last look:
  /// explicit owner mode warns when it appears.
  bool multipathdSeen_ = false;
  EventSource modeTimer_; ///< watchMultipathd() every multipathdWatch

  EventSource udevSource_;
  EventSource tableSource_;
  EventSource messageSource_;
  EventSource checkerSource_;
  EventSource healthTimer_;
  EventSource sessionTimer_;
  EventSource adaptiveTimer_;
  EventSource reconcileTimer_;
  EventSource publishTimer_;
  EventSource multipathdSource_;
  EventSource multipathdTimer_;
  int multipathdFd_ = -1;
  std::uint64_t multipathdConnection_ = 0;
  std::vector<EventSource> signals_;
};

} // namespace pathkeeper::daemon
