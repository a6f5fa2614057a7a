#pragma once

// Device-mapper behind a small interface. LibDevmapper drives the kernel
// through libdevmapper; the reconciler and its tests see only DeviceMapper.
//
// Error rule: every operation that the kernel or libdevmapper refuses throws
// std::system_error, whose what() names the operation and the map and
// carries libdevmapper's own log lines ("reload xserve-upper: ...").
// "The map does not exist" is not an error for the readers: info(), table()
// and status() return std::nullopt for it.

#include "model.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace pathkeeper::daemon {

/// @brief The DM UUID prefix of multipath maps (ours and multipathd's).
inline constexpr std::string_view kMultipathUuidPrefix = "mpath-";

/// @brief One device-mapper device, as DM_DEVICE_INFO reports it.
struct DmMapInfo {
  std::string name;
  std::string uuid;
  selector::DevT devt;
  int openCount = 0;
  bool suspended = false;
  bool liveTable = false;
  bool inactiveTable = false;
  std::uint32_t eventNr = 0; ///< bumped by the kernel on every table event
  std::string targetType;    ///< the first target's type; "multipath" for ours
  bool operator==(const DmMapInfo &) const = default;
};

/// @brief What DeviceMapper::rename() did besides renaming.
struct RenameReport {
  /// Set when the map's table was reloaded (the same table) before the
  /// rename, to keep the kernel safe (LibDevmapper::rename): how long new
  /// I/O waited in that reload.
  std::optional<std::chrono::microseconds> reloadedFirst;
};

/// @brief A rename that failed after the map's table had been reloaded for
/// it (RenameReport): the reload, and the I/O it held, happened all the same,
/// and the caller's log should say so.
class RenameError : public std::system_error {
public:
  /// @p what is the failure's whole message, kept as it is.
  RenameError(std::error_code code, std::string what, std::chrono::microseconds reloadHeld)
      : std::system_error(code), what_(std::move(what)), reloadHeld_(reloadHeld) {}
  [[nodiscard]] const char *what() const noexcept override { return what_.c_str(); }
  [[nodiscard]] std::chrono::microseconds reloadHeld() const { return reloadHeld_; }

private:
  std::string what_;
  std::chrono::microseconds reloadHeld_;
};

/// @brief One target line of a table or status: "<start> <length> <type> <params>".
struct DmTargetLine {
  std::uint64_t start = 0;
  std::uint64_t length = 0;
  std::string targetType;
  std::string params;
  bool operator==(const DmTargetLine &) const = default;

  /// @brief The whole line, as dmsetup prints it (without a trailing space).
  [[nodiscard]] std::string str() const;
};

/// @brief What DeviceMapper::create() did besides making the map.
struct CreateReport {
  /// The name was already a device with this DM UUID and no live table, as
  /// a create stopped between its steps leaves it: it was finished (table
  /// loaded, resumed) rather than made anew. LibDevmapper only.
  bool tookOver = false;
};

/// @brief The device-mapper operations pathkeeper uses. Implementations throw
/// std::system_error on failure (see the file comment).
class DeviceMapper {
public:
  DeviceMapper() = default;
  DeviceMapper(const DeviceMapper &) = delete;
  DeviceMapper &operator=(const DeviceMapper &) = delete;
  virtual ~DeviceMapper() = default;

  /// @brief Every multipath map (target type "multipath"), sorted by name.
  virtual std::vector<DmMapInfo> list() = 0;
  /// @brief Every device without a live table (list() cannot tell their
  /// kind), sorted by name: a create under way, or one that was stopped
  /// half way. Default: none, for implementations that never leave one.
  virtual std::vector<DmMapInfo> listUnfinished() { return {}; }
  /// @brief One device of any target type; nullopt when it does not exist.
  virtual std::optional<DmMapInfo> info(const std::string &name) = 0;
  /// @brief The live table; nullopt when the map does not exist.
  virtual std::optional<std::vector<DmTargetLine>> table(const std::string &name) = 0;
  /// @brief The status lines; nullopt when the map does not exist.
  virtual std::optional<std::vector<DmTargetLine>> status(const std::string &name) = 0;

  /// @brief Creates, loads and resumes a one-target multipath map.
  virtual CreateReport create(const std::string &name, const std::string &uuid,
                              std::uint64_t sizeSectors, const std::string &params) = 0;
  /// @brief create() in two halves, for many new maps at once
  /// (applyActions): prepareCreate() makes the device and loads its table,
  /// nearly all of a create's kernel work (the map's request queue);
  /// finishCreate() resumes it, and the map goes live with the "change"
  /// uevent that starts udev's real work on it (nodes, blkid's read). The
  /// first half's only uevent is the "add" of the disk, which Linux since
  /// 5.15 sends at the first table load: it carries no udev cookie, so
  /// 10-dm.rules marks the device not ready and the disk, multipath and LVM
  /// rules skip it. Between the two the device has no live table and
  /// list() does not show it; a create stopped there (the daemon killed)
  /// is finished by the next create() of the same name, as one stopped
  /// inside create() is, and removed at the next start under any other
  /// (removeUnfinishedMaps). A failure of either half removes the device
  /// it made, as create() does. The default makes the whole map in
  /// finishCreate(), for implementations without the halves.
  virtual CreateReport prepareCreate(const std::string & /*name*/, const std::string & /*uuid*/,
                                     std::uint64_t /*sizeSectors*/,
                                     const std::string & /*params*/) {
    return {};
  }
  /// @brief The second half; @p prepared is what prepareCreate() returned.
  virtual CreateReport finishCreate(const std::string &name, const std::string &uuid,
                                    std::uint64_t sizeSectors, const std::string &params,
                                    const CreateReport & /*prepared*/) {
    return create(name, uuid, sizeSectors, params);
  }
  /// @brief Loads a multipath table into the inactive slot; the live one keeps running.
  virtual void load(const std::string &name, std::uint64_t sizeSectors,
                    const std::string &params) = 0;
  /// @brief Drops the inactive table, if any.
  virtual void clearInactive(const std::string &name) = 0;
  /// @brief Suspends without flushing queued I/O (a map queueing with no
  /// path would otherwise never finish suspending).
  virtual void suspend(const std::string &name) = 0;
  /// @brief Resumes; swaps in the inactive table when there is one.
  virtual void resume(const std::string &name) = 0;
  /// @brief Removes the map; @p deferred removes it at its last close
  /// instead of failing while it is open.
  virtual void remove(const std::string &name, bool deferred) = 0;
  /// @brief Sends a target message (sector 0), e.g. "fail_path 8:16".
  virtual void message(const std::string &name, const std::string &text) = 0;
  /// @brief message() to the map whose DM UUID is @p uuid, whatever its
  /// name is by then: a message decided under one name and sent after a
  /// rename (a swap gives that name to another map) cannot reach the wrong
  /// map. @p name only names the map in errors.
  virtual void messageUuid(const std::string &uuid, const std::string &name,
                           const std::string &text) = 0;
  /// @brief Renames a map and its partition maps (kpartx's: DM UUID
  /// "part<N>-<the map's UUID>", named the map's name and a suffix, which
  /// they keep), the partitions first, as multipath-tools does. The kernel
  /// keeps each device (its number, UUID, table and open count), so I/O and
  /// holders are not disturbed; udev moves the /dev/mapper nodes. Fails
  /// with EBUSY when a new name is taken; partitions already renamed are
  /// then renamed back. A failure after a reload the report would have
  /// named is a RenameError.
  virtual RenameReport rename(const std::string &name, const std::string &newName) = 0;

  /// @brief Replaces the live table: load, then one resume, in which the
  /// kernel suspends the map (noflush), swaps the tables and resumes it, so
  /// that killing the process can never leave the map suspended.
  /// Failure semantics, in every case the map is left resumed (when the
  /// kernel lets us) and the exception of the first failure is rethrown:
  /// - load fails: nothing changed, the old table stays live;
  /// - the resume (the swap) fails: the kernel keeps the old table, and can
  ///   leave the map suspended; the inactive slot is cleared and the map
  ///   resumed, with one retry.
  /// Returns how long new I/O waited: from the resume call to the return of
  /// its ioctl (resumeReturned()), the suspend's drain of the I/O in flight
  /// included, udev's processing of the resume not.
  std::chrono::microseconds reload(const std::string &name, std::uint64_t sizeSectors,
                                   const std::string &params);

  /// @brief Starts a udev batch: create(), resume() and remove() no longer
  /// wait for udev one by one; endUdevBatch() waits once for all of them.
  /// Maps created in a batch exist (and take messages) at once; their
  /// /dev/mapper nodes and udev properties are there after endUdevBatch().
  /// N new maps thus cost one udev round, not N in a row. Default: no-op.
  virtual void beginUdevBatch() {}
  /// @brief Ends the batch and waits for udev; never throws.
  virtual void endUdevBatch() {}

  /// @brief When the last successful resume() let I/O flow again. An
  /// implementation that waits for udev after the ioctl reports the ioctl's
  /// return; this default, for those that do not, is "now".
  [[nodiscard]] virtual std::chrono::steady_clock::time_point resumeReturned() const {
    return std::chrono::steady_clock::now();
  }
};

/// @brief Keeps a map suspended for a scope: suspends on construction and
/// resumes on destruction, on every path out, unless release()d after an
/// explicit resume. A resume failure in the destructor is reported to
/// @p onResumeError (never thrown from a destructor).
class SuspendGuard {
public:
  SuspendGuard(DeviceMapper &dm, std::string name,
               std::function<void(const std::exception &)> onResumeError = {});
  SuspendGuard(const SuspendGuard &) = delete;
  SuspendGuard &operator=(const SuspendGuard &) = delete;
  ~SuspendGuard();

  /// @brief Resumes now; throws what resume() throws. The guard is then done.
  void resume();

private:
  DeviceMapper *dm_;
  std::string name_;
  std::function<void(const std::exception &)> onResumeError_;
  bool active_ = true;
};

/// @brief What resumeSuspendedMaps() did to one map.
struct ResumedMap {
  std::string name;
  bool clearedInactive = false; ///< a half-done reload's table was dropped
  std::string error;            ///< empty on success
};

/// @brief What removeUnfinishedMaps() did to one device.
struct RemovedMap {
  std::string name;
  std::string uuid;
  std::string error; ///< empty on success
};

/// @brief Startup repair: removes every device whose DM UUID starts with
/// @p uuidPrefix and that has no live table, as a create stopped half way
/// leaves it (the daemon killed between DeviceMapper::prepareCreate and
/// finishCreate): it holds its paths open and its DM UUID, and a create
/// under another name would be refused for ever. Only for an owner with
/// no multipathd running, whose own create it could be. Open devices are
/// left alone. Never throws for one device's failure.
std::vector<RemovedMap> removeUnfinishedMaps(DeviceMapper &dm,
                                             std::string_view uuidPrefix = kMultipathUuidPrefix);

/// @brief Startup repair: resumes every map whose DM UUID starts with
/// @p uuidPrefix and that is suspended (e.g. the daemon was killed in the
/// middle of a reload). A pending inactive table is cleared first, so the
/// map comes back with the table it was running; the reconciler reloads it
/// afterwards if it is not the wanted one. Never throws for one map's
/// failure: it is reported in the result.
std::vector<ResumedMap> resumeSuspendedMaps(DeviceMapper &dm,
                                            std::string_view uuidPrefix = kMultipathUuidPrefix);

/// @brief The devices whose inactive table a clear dropped since their last
/// table load (see LibDevmapper::rename), by device number and DM UUID (a
/// number is reused by the next device made after a removal). Kept in a
/// file too, when given one, so that a restarted daemon knows the clears of
/// the one before; a reboot ends them with the kernel's state, so the file
/// belongs under /run. The file is best effort: unreadable lines are
/// skipped, and a failed write only loses that knowledge across a restart.
/// Thread-safe.
class ClearedMaps {
public:
  explicit ClearedMaps(std::filesystem::path file = {});

  void mark(selector::DevT devt, const std::string &uuid);
  /// @brief Forgets every mark on @p devt (a table was loaded into it, it
  /// was removed, or it was made anew).
  void forget(selector::DevT devt);
  [[nodiscard]] bool contains(selector::DevT devt, const std::string &uuid) const;
  [[nodiscard]] bool empty() const;

private:
  void save() const; // with mutex_ held

  std::filesystem::path file_;
  mutable std::mutex mutex_;
  std::set<std::pair<selector::DevT, std::string>> marks_;
};

/// @brief Options of the real adapter.
struct LibDevmapperOptions {
  /// Wait for udev (cookies) on create, resume and remove, so /dev/mapper
  /// nodes and udev rules have run when a call returns. With false (no udev
  /// on the machine) libdevmapper creates the nodes itself.
  bool udevSync = true;
  /// Let libdevmapper write its debug messages into the captured log too.
  bool verbose = false;
  /// Where the cleared maps are kept across restarts (ClearedMaps); empty:
  /// in memory only.
  std::filesystem::path clearedMapsFile;
};

/// @brief DeviceMapper through libdevmapper. libdevmapper keeps global state
/// (log function, udev sync switch), so create one per process. Move-only
/// is pointless for a stateless front end; it is neither copied nor moved.
class LibDevmapper final : public DeviceMapper {
public:
  explicit LibDevmapper(LibDevmapperOptions options = {});
  ~LibDevmapper() override;

  std::vector<DmMapInfo> list() override;
  std::vector<DmMapInfo> listUnfinished() override;
  std::optional<DmMapInfo> info(const std::string &name) override;
  std::optional<std::vector<DmTargetLine>> table(const std::string &name) override;
  std::optional<std::vector<DmTargetLine>> status(const std::string &name) override;
  /// @brief Made in steps, as libdevmapper's create-with-table does them
  /// (the device, its table load, its first resume; the device removed
  /// again when the load or the resume fails), so that the kernel's own
  /// errno comes back from each. A device of this name and DM UUID that has
  /// no live table, left by a create that was stopped between those steps
  /// (pathkeeperd killed in the middle of one), is finished rather than
  /// refused: without that, the map could not be made until an admin
  /// removed the device. If finishing it fails, it is left as it was found
  /// (it may be another tool's create under way).
  CreateReport create(const std::string &name, const std::string &uuid, std::uint64_t sizeSectors,
                      const std::string &params) override;
  /// @brief create()'s device and table load (or the takeover of a device
  /// left without a live table), not yet resumed.
  CreateReport prepareCreate(const std::string &name, const std::string &uuid,
                             std::uint64_t sizeSectors, const std::string &params) override;
  /// @brief create()'s first resume, with the udev cookie and the create's
  /// flags.
  CreateReport finishCreate(const std::string &name, const std::string &uuid,
                            std::uint64_t sizeSectors, const std::string &params,
                            const CreateReport &prepared) override;
  void load(const std::string &name, std::uint64_t sizeSectors, const std::string &params) override;
  void clearInactive(const std::string &name) override;
  void suspend(const std::string &name) override;
  void resume(const std::string &name) override;
  void remove(const std::string &name, bool deferred) override;
  void message(const std::string &name, const std::string &text) override;
  void messageUuid(const std::string &uuid, const std::string &name,
                   const std::string &text) override;
  /// @brief Also works around a bug of Linux's dm-ima (added in 5.15; in
  /// Debian 12's 6.1): a DM_TABLE_CLEAR that drops an inactive table leaves
  /// the device's IMA record of its inactive table pointing at the active
  /// one's; a rename frees the active one's and makes a new one, so the
  /// next table load or the removal frees that memory a second time (slab
  /// corruption, "kernel BUG at mm/slub.c"). A table load ends the
  /// sharing. So a map whose inactive table this adapter cleared gets its
  /// live table loaded again and resumed (a reload with the same table, its
  /// current group included) before it is renamed; the report says so.
  RenameReport rename(const std::string &name, const std::string &newName) override;
  [[nodiscard]] std::chrono::steady_clock::time_point resumeReturned() const override {
    return resumeReturned_;
  }
  void beginUdevBatch() override;
  void endUdevBatch() override;

  /// @brief Whether udev synchronisation is in effect (asked for, and udev
  /// is running).
  [[nodiscard]] bool udevSync() const { return udevSync_; }

private:
  [[nodiscard]] std::uint32_t *batchCookie() { return batching_ ? &batchCookie_ : nullptr; }
  /// Every device, as DM_DEVICE_INFO reports it, sorted by name.
  std::vector<DmMapInfo> listAll();
  /// Removes a device a create made when a later step of that create
  /// failed with @p failure, from failure's catch handler; rethrows it,
  /// with the removal's error added when that fails too.
  [[noreturn]] void removeHalfMade(const std::string &name, const std::system_error &failure);
  /// One DM_DEVICE_RENAME.
  void renameOne(const std::string &name, const std::string &newName);
  /// One DM_DEVICE_RELOAD of a multipath table, for load() and create();
  /// errors name @p op. Returns the device's number.
  selector::DevT loadTable(std::string_view op, const std::string &name, std::uint64_t sizeSectors,
                           const std::string &params);

  bool udevSync_;
  std::chrono::steady_clock::time_point resumeReturned_;
  bool batching_ = false;
  std::uint32_t batchCookie_ = 0; ///< 0 until the batch's first cookie task
  ClearedMaps cleared_;           ///< see rename()
};

} // namespace pathkeeper::daemon
