#include "dm_adapter.hpp"

#include "c_handle.hpp"

#include <fmt/format.h>
#include <libdevmapper.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>

namespace pathkeeper::daemon {

std::string DmTargetLine::str() const {
  std::string out = fmt::format("{} {} {}", start, length, targetType);
  if (!params.empty()) {
    out += ' ';
    out += params;
  }
  return out;
}

// --- the generic sequences, built on the virtual primitives ----------------

std::chrono::microseconds DeviceMapper::reload(const std::string &name, std::uint64_t sizeSectors,
                                               const std::string &params) {
  load(name, sizeSectors, params);
  const auto started = std::chrono::steady_clock::now();
  try {
    // One ioctl: with a table waiting in the inactive slot, the kernel
    // suspends the map (noflush), swaps the tables and resumes it before
    // returning (dm-ioctl's do_resume), as multipathd reloads too. No
    // moment exists at which a kill -9 of this process leaves the map
    // suspended; a signal during the suspend's drain makes the kernel
    // abandon the swap and keep the old table running.
    resume(name);
  } catch (...) {
    // The swap failed: the kernel dropped the new table, but can leave the
    // map suspended on the old one. Clear the inactive slot first (had the
    // ioctl failed before taking the table, a retry would swap it in
    // unasked), then resume, twice if need be.
    try {
      clearInactive(name);
    } catch (...) {
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      try {
        resume(name);
        break;
      } catch (...) {
      }
    }
    throw;
  }
  return std::chrono::duration_cast<std::chrono::microseconds>(resumeReturned() - started);
}

SuspendGuard::SuspendGuard(DeviceMapper &dm, std::string name,
                           std::function<void(const std::exception &)> onResumeError)
    : dm_(&dm), name_(std::move(name)), onResumeError_(std::move(onResumeError)) {
  try {
    dm_->suspend(name_);
  } catch (...) {
    // A failed suspend may still have suspended the map.
    try {
      dm_->resume(name_);
    } catch (...) {
    }
    throw;
  }
}

SuspendGuard::~SuspendGuard() {
  if (!active_) {
    return;
  }
  try {
    dm_->resume(name_);
  } catch (const std::exception &e) {
    if (onResumeError_) {
      onResumeError_(e);
    }
  }
}

void SuspendGuard::resume() {
  active_ = false;
  dm_->resume(name_);
}

std::vector<ResumedMap> resumeSuspendedMaps(DeviceMapper &dm, std::string_view uuidPrefix) {
  std::vector<ResumedMap> out;
  for (const auto &map : dm.list()) {
    if (!map.suspended || !map.uuid.starts_with(uuidPrefix)) {
      continue;
    }
    ResumedMap resumed;
    resumed.name = map.name;
    try {
      if (map.inactiveTable) {
        dm.clearInactive(map.name);
        resumed.clearedInactive = true;
      }
      dm.resume(map.name);
    } catch (const std::exception &e) {
      resumed.error = e.what();
    }
    out.push_back(std::move(resumed));
  }
  return out;
}

std::vector<RemovedMap> removeUnfinishedMaps(DeviceMapper &dm, std::string_view uuidPrefix) {
  std::vector<RemovedMap> out;
  for (const auto &map : dm.listUnfinished()) {
    if (map.liveTable || map.openCount > 0 || !map.uuid.starts_with(uuidPrefix)) {
      continue;
    }
    RemovedMap removed{map.name, map.uuid, {}};
    try {
      dm.remove(map.name, false);
    } catch (const std::exception &e) {
      removed.error = e.what();
    }
    out.push_back(std::move(removed));
  }
  return out;
}

// --- the cleared maps -------------------------------------------------------

ClearedMaps::ClearedMaps(std::filesystem::path file) : file_(std::move(file)) {
  if (file_.empty()) {
    return;
  }
  std::ifstream in(file_);
  std::string line;
  while (std::getline(in, line)) {
    // "<major>:<minor> <DM UUID>"
    const auto space = line.find(' ');
    if (space == std::string::npos) {
      continue;
    }
    auto devt = selector::parseDevT(std::string_view(line).substr(0, space));
    std::string uuid = line.substr(space + 1);
    if (devt && *devt != selector::DevT{} && !uuid.empty() &&
        uuid.find_first_of(" \t") == std::string::npos) {
      marks_.emplace(*devt, std::move(uuid));
    }
  }
}

void ClearedMaps::mark(selector::DevT devt, const std::string &uuid) {
  const std::scoped_lock lock(mutex_);
  if (marks_.emplace(devt, uuid).second) {
    save();
  }
}

void ClearedMaps::forget(selector::DevT devt) {
  const std::scoped_lock lock(mutex_);
  if (std::erase_if(marks_, [&](const auto &entry) { return entry.first == devt; }) > 0) {
    save();
  }
}

bool ClearedMaps::contains(selector::DevT devt, const std::string &uuid) const {
  const std::scoped_lock lock(mutex_);
  return marks_.contains({devt, uuid});
}

bool ClearedMaps::empty() const {
  const std::scoped_lock lock(mutex_);
  return marks_.empty();
}

void ClearedMaps::save() const {
  if (file_.empty()) {
    return;
  }
  std::error_code ec;
  if (marks_.empty()) {
    std::filesystem::remove(file_, ec);
    return;
  }
  // Written aside and renamed, so that a crash leaves the old file or the new one.
  auto temporary = file_;
  temporary += ".new";
  {
    std::ofstream out(temporary, std::ios::trunc);
    for (const auto &[devt, uuid] : marks_) {
      out << devt.str() << ' ' << uuid << '\n';
    }
    if (!out.flush()) {
      std::filesystem::remove(temporary, ec);
      return;
    }
  }
  std::filesystem::rename(temporary, file_, ec);
}

// --- libdevmapper ----------------------------------------------------------

namespace {

using DmTaskPtr = CHandle<dm_task, dm_task_destroy>;

// libdevmapper reports through one process-wide log function; the adapter
// collects what it says during one call and puts it into that call's error.
std::string &dmLog() {
  thread_local std::string log;
  return log;
}
bool gDmVerbose = false;

// libdevmapper's levels (libdm/misc/dm-logging.h): the low 3 bits; the
// higher bits are flags such as "to stderr" or "once".
constexpr int kLogLevelMask = 7;
constexpr int kLogWarn = 4;

extern "C" void captureDmLog(int level, const char * /*file*/, int /*line*/, int /*dmErrno*/,
                             const char *format, ...) __attribute__((format(printf, 5, 6)));

extern "C" void captureDmLog(int level, const char * /*file*/, int /*line*/, int /*dmErrno*/,
                             const char *format, ...) {
  if ((level & kLogLevelMask) > kLogWarn && !gDmVerbose) {
    return;
  }
  char buffer[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  if (n <= 0) {
    return;
  }
  if (!dmLog().empty()) {
    dmLog() += "; ";
  }
  dmLog().append(buffer, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buffer - 1));
}

[[noreturn]] void throwDm(int errnum, std::string_view op, std::string_view name) {
  const std::error_code code(errnum != 0 ? errnum : EIO, std::generic_category());
  std::string log = dmLog();
  // libdevmapper ends its ioctl errors with strerror, which system_error
  // appends again.
  const std::string suffix = ": " + code.message();
  if (log.ends_with(suffix)) {
    log.resize(log.size() - suffix.size());
  }
  std::string what = fmt::format("device-mapper {} {}", op, name);
  if (!log.empty()) {
    what += ": " + log;
  }
  throw std::system_error(code, what);
}

DmTaskPtr newTask(int type, std::string_view op, const std::string &name) {
  DmTaskPtr task(dm_task_create(type));
  if (!task) {
    throwDm(ENOMEM, op, name);
  }
  if (!name.empty() && dm_task_set_name(task.get(), name.c_str()) == 0) {
    throwDm(EINVAL, op, name);
  }
  return task;
}

/// Runs a task. With udev sync and @p wantsCookie the task carries a udev
/// cookie: its own, waited for here until udev has processed the event, or
/// with @p sharedCookie the caller's batch cookie (created on first use),
/// which the caller waits for once (LibDevmapper::endUdevBatch). A failed
/// ioctl releases its share of the cookie's semaphore inside libdevmapper;
/// dm_udev_wait then only destroys the semaphore. Returns the ioctl's errno,
/// 0 on success.
int runTask(dm_task *task, bool udevSync, std::uint16_t udevFlags, bool wantsCookie,
            std::string_view op, const std::string &name,
            std::chrono::steady_clock::time_point *ioctlReturned = nullptr,
            std::uint32_t *sharedCookie = nullptr) {
  std::uint32_t ownCookie = 0;
  std::uint32_t *cookie = sharedCookie != nullptr ? sharedCookie : &ownCookie;
  const bool withCookie = wantsCookie && udevSync;
  if (withCookie && dm_task_set_cookie(task, cookie, udevFlags) == 0) {
    throwDm(EINVAL, op, name);
  }
  const int ok = dm_task_run(task);
  const int err = ok != 0 ? 0 : dm_task_get_errno(task);
  if (ioctlReturned != nullptr) {
    *ioctlReturned = std::chrono::steady_clock::now();
  }
  if (withCookie) {
    if (sharedCookie == nullptr) {
      static_cast<void>(dm_udev_wait(ownCookie));
    }
  } else if (wantsCookie) {
    // No udev: libdevmapper makes the /dev/mapper nodes itself.
    dm_task_update_nodes();
  }
  return ok != 0 ? 0 : (err != 0 ? err : EIO);
}

void addMultipathTarget(dm_task *task, std::uint64_t sizeSectors, const std::string &params,
                        std::string_view op, const std::string &name) {
  if (dm_task_add_target(task, 0, sizeSectors, "multipath", params.c_str()) == 0) {
    throwDm(EINVAL, op, name);
  }
}

DmMapInfo infoOf(dm_task *task, const std::string &fallbackName) {
  dm_info raw{};
  if (dm_task_get_info(task, &raw) == 0 || raw.exists == 0) {
    return DmMapInfo{};
  }
  DmMapInfo info;
  const char *name = dm_task_get_name(task);
  info.name = name != nullptr && *name != '\0' ? name : fallbackName;
  const char *uuid = dm_task_get_uuid(task);
  info.uuid = uuid != nullptr ? uuid : "";
  info.devt = {raw.major, raw.minor};
  info.openCount = raw.open_count;
  info.suspended = raw.suspended != 0;
  info.liveTable = raw.live_table != 0;
  info.inactiveTable = raw.inactive_table != 0;
  info.eventNr = raw.event_nr;
  return info;
}

std::vector<DmTargetLine> targetsOf(dm_task *task) {
  std::vector<DmTargetLine> lines;
  void *next = nullptr;
  do {
    std::uint64_t start = 0;
    std::uint64_t length = 0;
    char *type = nullptr;
    char *params = nullptr;
    next = dm_get_next_target(task, next, &start, &length, &type, &params);
    if (type == nullptr) {
      break; // no table
    }
    std::string text = params != nullptr ? params : "";
    while (!text.empty() && text.back() == ' ') {
      text.pop_back(); // the multipath target ends its lines with a space
    }
    lines.push_back({start, length, type, std::move(text)});
  } while (next != nullptr);
  return lines;
}

} // namespace

LibDevmapper::LibDevmapper(LibDevmapperOptions options)
    : cleared_(std::move(options.clearedMapsFile)) {
  gDmVerbose = options.verbose;
  dm_log_with_errno_init(captureDmLog);
  dm_udev_set_sync_support(options.udevSync ? 1 : 0);
  // libdevmapper answers 0 when udev is not running, whatever was asked.
  udevSync_ = options.udevSync && dm_udev_get_sync_support() != 0;
}

LibDevmapper::~LibDevmapper() {
  endUdevBatch();
  dm_lib_release();
  dm_log_with_errno_init(nullptr);
}

void LibDevmapper::beginUdevBatch() {
  batching_ = true;
}

void LibDevmapper::endUdevBatch() {
  batching_ = false;
  if (batchCookie_ != 0) {
    static_cast<void>(dm_udev_wait(batchCookie_));
    batchCookie_ = 0;
  }
}

std::vector<DmMapInfo> LibDevmapper::list() {
  auto maps = listAll();
  std::erase_if(maps, [](const DmMapInfo &map) { return map.targetType != "multipath"; });
  return maps;
}

std::vector<DmMapInfo> LibDevmapper::listUnfinished() {
  auto maps = listAll();
  std::erase_if(maps, [](const DmMapInfo &map) { return map.liveTable; });
  return maps;
}

std::vector<DmMapInfo> LibDevmapper::listAll() {
  dmLog().clear();
  auto task = newTask(DM_DEVICE_LIST, "list", "");
  if (int err = runTask(task.get(), udevSync_, 0, false, "list", ""); err != 0) {
    throwDm(err, "list", "");
  }
  std::vector<std::string> names;
  dm_names *entry = dm_task_get_names(task.get());
  if (entry != nullptr && entry->dev != 0) {
    for (;;) {
      names.emplace_back(entry->name);
      if (entry->next == 0) {
        break;
      }
      entry = reinterpret_cast<dm_names *>(reinterpret_cast<char *>(entry) + entry->next);
    }
  }
  std::vector<DmMapInfo> maps;
  for (const auto &name : names) {
    if (auto found = info(name)) {
      maps.push_back(std::move(*found));
    }
  }
  std::ranges::sort(maps, {}, &DmMapInfo::name);
  return maps;
}

std::optional<DmMapInfo> LibDevmapper::info(const std::string &name) {
  dmLog().clear();
  // DM_DEVICE_TABLE gives the info and the target type in one ioctl.
  auto task = newTask(DM_DEVICE_TABLE, "info", name);
  if (int err = runTask(task.get(), udevSync_, 0, false, "info", name); err != 0) {
    if (err == ENXIO) {
      return std::nullopt;
    }
    throwDm(err, "info", name);
  }
  auto found = infoOf(task.get(), name);
  if (found.name.empty()) {
    return std::nullopt;
  }
  auto targets = targetsOf(task.get());
  if (!targets.empty()) {
    found.targetType = targets.front().targetType;
  }
  return found;
}

std::optional<std::vector<DmTargetLine>> LibDevmapper::table(const std::string &name) {
  dmLog().clear();
  auto task = newTask(DM_DEVICE_TABLE, "table", name);
  if (int err = runTask(task.get(), udevSync_, 0, false, "table", name); err != 0) {
    if (err == ENXIO) {
      return std::nullopt;
    }
    throwDm(err, "table", name);
  }
  if (infoOf(task.get(), name).name.empty()) {
    return std::nullopt;
  }
  return targetsOf(task.get());
}

std::optional<std::vector<DmTargetLine>> LibDevmapper::status(const std::string &name) {
  dmLog().clear();
  auto task = newTask(DM_DEVICE_STATUS, "status", name);
  if (int err = runTask(task.get(), udevSync_, 0, false, "status", name); err != 0) {
    if (err == ENXIO) {
      return std::nullopt;
    }
    throwDm(err, "status", name);
  }
  if (infoOf(task.get(), name).name.empty()) {
    return std::nullopt;
  }
  return targetsOf(task.get());
}

CreateReport LibDevmapper::create(const std::string &name, const std::string &uuid,
                                  std::uint64_t sizeSectors, const std::string &params) {
  return finishCreate(name, uuid, sizeSectors, params,
                      prepareCreate(name, uuid, sizeSectors, params));
}

CreateReport LibDevmapper::prepareCreate(const std::string &name, const std::string &uuid,
                                         std::uint64_t sizeSectors, const std::string &params) {
  // The steps of libdevmapper's own create (_create_and_load_v4): the
  // device, which sends no uevent; the table load, in which the kernel
  // registers the disk ("add"); then finishCreate()'s first resume.
  dmLog().clear();
  selector::DevT devt;
  CreateReport report;
  {
    auto task = newTask(DM_DEVICE_CREATE, "create", name);
    if (!uuid.empty() && dm_task_set_uuid(task.get(), uuid.c_str()) == 0) {
      throwDm(EINVAL, "create", name);
    }
    if (int err = runTask(task.get(), udevSync_, 0, false, "create", name); err == 0) {
      devt = infoOf(task.get(), name).devt;
    } else {
      // A device of this name and DM UUID without a live table is what a
      // create stopped between its steps leaves behind (the daemon killed
      // in the middle of it): finish that one. Anything else is refused.
      // Another tool's create under way would look the same for those
      // milliseconds, so a takeover that fails leaves the device as found.
      const std::string refusal = dmLog();
      std::optional<DmMapInfo> existing;
      if (err == EBUSY && !uuid.empty()) {
        try {
          existing = info(name);
        } catch (const std::exception &) {
          // The create's own error says enough.
        }
      }
      if (!existing || existing->uuid != uuid || existing->liveTable) {
        dmLog() = refusal;
        throwDm(err, "create", name);
      }
      devt = existing->devt;
      report.tookOver = true;
    }
  }
  try {
    static_cast<void>(loadTable("create", name, sizeSectors, params));
  } catch (const std::system_error &e) {
    if (report.tookOver) {
      throw;
    }
    removeHalfMade(name, e);
  }
  cleared_.forget(devt);
  return report;
}

CreateReport LibDevmapper::finishCreate(const std::string &name, const std::string & /*uuid*/,
                                        std::uint64_t /*sizeSectors*/,
                                        const std::string & /*params*/,
                                        const CreateReport &prepared) {
  try {
    dmLog().clear();
    auto task = newTask(DM_DEVICE_RESUME, "create", name);
    // With udev, the nodes are udev's job alone (as multipath-tools does):
    // a library fallback would race the rules and leave nodes udev does not
    // know about.
    if (int err = runTask(task.get(), udevSync_, DM_UDEV_DISABLE_LIBRARY_FALLBACK, true, "create",
                          name, nullptr, batchCookie());
        err != 0) {
      throwDm(err, "create", name);
    }
  } catch (const std::system_error &e) {
    if (prepared.tookOver) {
      throw;
    }
    removeHalfMade(name, e);
  }
  return prepared;
}

void LibDevmapper::removeHalfMade(const std::string &name, const std::system_error &failure) {
  // As libdevmapper's create does: no device of ours is left without its
  // table. Called from failure's handler, so that `throw;` keeps its type.
  try {
    remove(name, false);
  } catch (const std::exception &removal) {
    throw std::system_error(failure.code(),
                            fmt::format("{}; and the half-made device could not be removed: {}",
                                        failure.what(), removal.what()));
  }
  throw;
}

selector::DevT LibDevmapper::loadTable(std::string_view op, const std::string &name,
                                       std::uint64_t sizeSectors, const std::string &params) {
  dmLog().clear();
  auto task = newTask(DM_DEVICE_RELOAD, op, name);
  addMultipathTarget(task.get(), sizeSectors, params, op, name);
  if (int err = runTask(task.get(), udevSync_, 0, false, op, name); err != 0) {
    throwDm(err, op, name);
  }
  return infoOf(task.get(), name).devt;
}

void LibDevmapper::load(const std::string &name, std::uint64_t sizeSectors,
                        const std::string &params) {
  cleared_.forget(loadTable("load", name, sizeSectors, params));
}

void LibDevmapper::clearInactive(const std::string &name) {
  // Only a clear that drops a table leaves dm-ima's records shared.
  std::optional<DmMapInfo> before;
  try {
    before = info(name);
  } catch (const std::exception &) {
    // The clear says what is wrong.
  }
  dmLog().clear();
  auto task = newTask(DM_DEVICE_CLEAR, "clear", name);
  if (int err = runTask(task.get(), udevSync_, 0, false, "clear", name); err != 0) {
    throwDm(err, "clear", name);
  }
  if (!before || before->inactiveTable) {
    const auto map = before ? *before : infoOf(task.get(), name);
    if (map.devt != selector::DevT{}) {
      cleared_.mark(map.devt, map.uuid);
    }
  }
}

void LibDevmapper::suspend(const std::string &name) {
  dmLog().clear();
  auto task = newTask(DM_DEVICE_SUSPEND, "suspend", name);
  dm_task_no_flush(task.get());
  if (int err = runTask(task.get(), udevSync_, 0, false, "suspend", name); err != 0) {
    throwDm(err, "suspend", name);
  }
}

void LibDevmapper::resume(const std::string &name) {
  dmLog().clear();
  auto task = newTask(DM_DEVICE_RESUME, "resume", name);
  // A resume with a new table suspends first; never wait for queued I/O
  // (a map queueing without paths would hang).
  dm_task_no_flush(task.get());
  // Every map we resume existed before: DM_SUBSYSTEM_UDEV_FLAG0 is
  // multipath-tools' "reload" flag, which tells 11-dm-mpath.rules that
  // this is not a new device and the previous udev state still holds.
  const std::uint16_t flags = DM_UDEV_DISABLE_LIBRARY_FALLBACK | DM_SUBSYSTEM_UDEV_FLAG0;
  auto returned = std::chrono::steady_clock::now();
  if (int err =
          runTask(task.get(), udevSync_, flags, true, "resume", name, &returned, batchCookie());
      err != 0) {
    throwDm(err, "resume", name);
  }
  resumeReturned_ = returned;
}

void LibDevmapper::remove(const std::string &name, bool deferred) {
  // A cleared mark goes with its device.
  std::optional<DmMapInfo> gone;
  if (!cleared_.empty()) {
    try {
      gone = info(name);
    } catch (const std::exception &) {
      // The removal says what is wrong.
    }
  }
  dmLog().clear();
  auto task = newTask(DM_DEVICE_REMOVE, "remove", name);
  if (deferred) {
    dm_task_deferred_remove(task.get());
  } else {
    // udev's own rules briefly open a map after a change: retry through that.
    dm_task_retry_remove(task.get());
  }
  if (int err = runTask(task.get(), udevSync_, DM_UDEV_DISABLE_LIBRARY_FALLBACK, true, "remove",
                        name, nullptr, batchCookie());
      err != 0) {
    throwDm(err, "remove", name);
  }
  if (gone && !deferred) {
    cleared_.forget(gone->devt);
  }
}

void LibDevmapper::message(const std::string &name, const std::string &text) {
  messageUuid({}, name, text);
}

void LibDevmapper::messageUuid(const std::string &uuid, const std::string &name,
                               const std::string &text) {
  dmLog().clear();
  const std::string op = "message '" + text + "' to";
  // The kernel finds a device by its UUID when the ioctl names none.
  auto task = newTask(DM_DEVICE_TARGET_MSG, op, uuid.empty() ? name : std::string());
  if (!uuid.empty() && dm_task_set_uuid(task.get(), uuid.c_str()) == 0) {
    throwDm(EINVAL, op, name);
  }
  if (dm_task_set_sector(task.get(), 0) == 0 ||
      dm_task_set_message(task.get(), text.c_str()) == 0) {
    throwDm(EINVAL, op, name);
  }
  if (int err = runTask(task.get(), udevSync_, 0, false, op, name); err != 0) {
    throwDm(err, op, name);
  }
}

namespace {

/// The partition maps on @p parent (kpartx's, on the map's holders in sysfs):
/// their names, where they start with the parent's name.
std::vector<std::string> partitionMapsOf(const DmMapInfo &parent) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  const fs::path holders = fmt::format("/sys/dev/block/{}/holders", parent.devt.str());
  for (const auto &holder : fs::directory_iterator(holders, ec)) {
    const auto read = [&](const char *what) {
      std::ifstream in(holder.path() / "dm" / what);
      std::string text;
      std::getline(in, text);
      return text;
    };
    const std::string uuid = read("uuid");
    const std::string holderName = read("name");
    if (uuid.starts_with("part") && uuid.ends_with("-" + parent.uuid) &&
        holderName.size() > parent.name.size() && holderName.starts_with(parent.name)) {
      names.push_back(holderName);
    }
  }
  std::ranges::sort(names);
  return names;
}

} // namespace

RenameReport LibDevmapper::rename(const std::string &name, const std::string &newName) {
  std::vector<std::pair<std::string, std::string>> moves; // partitions first
  auto parent = info(name);
  if (parent && !parent->uuid.empty()) {
    for (const auto &part : partitionMapsOf(*parent)) {
      moves.emplace_back(part, newName + part.substr(name.size()));
    }
  }
  moves.emplace_back(name, newName);
  // Every new name is looked up before any rename, so that a taken one
  // fails here, before a partition has moved.
  for (const auto &[from, to] : moves) {
    if (auto taken = info(to)) {
      throw std::system_error(
          EBUSY, std::generic_category(),
          fmt::format("device-mapper rename of {} to {}: the name is taken by another device "
                      "(DM UUID '{}')",
                      from, to, taken->uuid));
    }
  }
  RenameReport report;
  if (parent && cleared_.contains(parent->devt, parent->uuid)) {
    // dm-ima's shared record (see the header): a table load ends it, and
    // the resume swaps that table in, so nothing is left inactive.
    // The live table loads again even with a path whose device is gone
    // since: the map holds its devices open, and the kernel reuses them.
    const auto live = table(name);
    if (!live || live->size() != 1 || live->front().targetType != "multipath") {
      throw std::system_error(
          EINVAL, std::generic_category(),
          fmt::format("device-mapper rename of {}: its inactive table was cleared, and Linux's "
                      "dm-ima corrupts memory when such a map is renamed before a table load; "
                      "its live table is not one multipath target to load again",
                      name));
    }
    try {
      report.reloadedFirst = reload(name, live->front().length, live->front().params);
    } catch (const std::exception &e) {
      throw std::system_error(
          EIO, std::generic_category(),
          fmt::format("device-mapper rename of {}: its inactive table was cleared, and Linux's "
                      "dm-ima corrupts memory when such a map is renamed before a table load; "
                      "loading its table again failed: {}",
                      name, e.what()));
    }
  }
  std::vector<std::pair<std::string, std::string>> done; // renamed so far: new, old
  try {
    for (const auto &[from, to] : moves) {
      renameOne(from, to);
      done.emplace_back(to, from);
    }
  } catch (const std::exception &) {
    for (const auto &[now, before] : done) {
      try {
        renameOne(now, before);
      } catch (const std::exception &) {
        // The first error is the one to report.
      }
    }
    if (report.reloadedFirst) {
      try {
        throw;
      } catch (const std::system_error &e) {
        throw RenameError(e.code(), e.what(), *report.reloadedFirst);
      } catch (const std::exception &e) {
        throw RenameError(std::make_error_code(std::errc::io_error), e.what(),
                          *report.reloadedFirst);
      }
    }
    throw;
  }
  return report;
}

void LibDevmapper::renameOne(const std::string &name, const std::string &newName) {
  dmLog().clear();
  const std::string op = "rename to '" + newName + "' of";
  auto task = newTask(DM_DEVICE_RENAME, op, name);
  if (dm_task_set_newname(task.get(), newName.c_str()) == 0) {
    throwDm(EINVAL, op, name);
  }
  // udev moves the /dev/mapper node and its by-id links (a rename is a
  // "change" uevent with DM_COOKIE); the library must not race it. Each
  // rename waits for udev, outside any batch (as multipath-tools does): the
  // next one (a partition, the other map of a swap) may take the name whose
  // links udev is still moving.
  if (int err = runTask(task.get(), udevSync_, DM_UDEV_DISABLE_LIBRARY_FALLBACK, true, op, name);
      err != 0) {
    throwDm(err, op, name);
  }
}

} // namespace pathkeeper::daemon
