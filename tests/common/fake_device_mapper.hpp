#pragma once

// A fake kernel device-mapper for the daemon's unit tests: it keeps the maps
// and the runtime state dm-mpath keeps (path states, the next group,
// queue_if_no_path), records every call, and fails the calls it is told to,
// the way the kernel would. Not thread-safe: a test that drives it through
// the daemon's workers wraps it (see daemon_loop_test.cpp).

#include "dm_adapter.hpp"
#include "dm_table.hpp"
#include "text.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace pathkeeper::daemon::fakes {

using selector::DevT;

/// One map in the fake kernel, with the runtime state dm-mpath keeps.
struct FakeMap {
  std::string uuid;
  DevT devt;
  std::string targetType = "multipath";
  std::uint64_t length = 0;
  std::string params; ///< the live table as loaded
  std::optional<std::pair<std::uint64_t, std::string>> inactive;
  bool suspended = false;
  std::uint32_t eventNr = 0;
  std::map<std::string, bool> pathActive;
  unsigned nextGroup = 1;
  bool queueIfNoPath = false;
  std::string attachedHandler; ///< what scsi_dh attached, echoed by the kernel
  /// False between prepareCreate() and finishCreate(): the device has its
  /// table in the inactive slot and none live.
  bool live = true;
  int openCount = 0;
};

/// Records every call and fails the ones it is told to, the way the kernel
/// would: a failed table swap on resume drops the new table and leaves the
/// map suspended; a failed suspend may leave it suspended.
class FakeDeviceMapper final : public DeviceMapper {
public:
  std::map<std::string, FakeMap> maps;
  std::vector<std::string> calls;
  std::map<std::string, int> failures; ///< operation -> how many of its next calls fail
  /// Moves a map to its next group with an active path when fail_path
  /// leaves the group in use with none, as the kernel does at the map's
  /// next I/O (an idle map keeps showing the old group).
  bool switchGroupOnFailure = false;
  /// What rename() reports (LibDevmapper's reload before renaming a map it
  /// cleared is its own, not the kernel's: a test says when it happened).
  RenameReport renameReport;
  /// calls.size() at each beginUdevBatch() / endUdevBatch()
  std::vector<std::size_t> batchBegins;
  std::vector<std::size_t> batchEnds;

  void beginUdevBatch() override { batchBegins.push_back(calls.size()); }
  void endUdevBatch() override { batchEnds.push_back(calls.size()); }

  std::vector<std::string> modifyingCalls() const {
    static const std::set<std::string> readers{"list", "list-unfinished", "info", "table",
                                               "status"};
    std::vector<std::string> out;
    for (const auto &call : calls) {
      if (!readers.contains(call.substr(0, call.find(' ')))) {
        out.push_back(call);
      }
    }
    return out;
  }

  /// The kernel gives a new map the lowest minor no live map has (dm's
  /// next_free_minor), so a map made right after a removal gets the freed one.
  [[nodiscard]] std::uint32_t lowestFreeMinor() const {
    std::uint32_t minor = 0;
    while (std::ranges::any_of(
        maps, [&](const auto &entry) { return entry.second.devt.minor == minor; })) {
      ++minor;
    }
    return minor;
  }

  /// Adds a map as if someone had created it earlier.
  /// A map that was there before the test: like create(), a name or a DM
  /// UUID in use is refused, so a test cannot set up what no kernel has.
  void seed(const std::string &name, const std::string &uuid, const std::string &tableLine) {
    if (maps.contains(name) || (!uuid.empty() && std::ranges::any_of(maps, [&](const auto &entry) {
          return entry.second.uuid == uuid;
        }))) {
      throw std::logic_error("seed " + name + " (" + uuid + "): name or DM UUID in use");
    }
    auto words = selector::splitWords(tableLine);
    FakeMap map;
    map.uuid = uuid;
    map.devt = {253, lowestFreeMinor()};
    map.length = std::stoull(words.at(1));
    map.targetType = words.at(2);
    map.params = join(words, 3);
    if (map.targetType == "multipath") {
      adoptTable(map);
    }
    maps[name] = std::move(map);
  }

  std::vector<DmMapInfo> list() override {
    calls.emplace_back("list");
    std::vector<DmMapInfo> out;
    for (const auto &[name, map] : maps) {
      if (map.live && map.targetType == "multipath") {
        out.push_back(infoOf(name, map));
      }
    }
    return out;
  }
  std::vector<DmMapInfo> listUnfinished() override {
    calls.emplace_back("list-unfinished");
    std::vector<DmMapInfo> out;
    for (const auto &[name, map] : maps) {
      if (!map.live) {
        out.push_back(infoOf(name, map));
      }
    }
    return out;
  }
  std::optional<DmMapInfo> info(const std::string &name) override {
    calls.push_back("info " + name);
    auto it = maps.find(name);
    if (it == maps.end()) {
      return std::nullopt;
    }
    return infoOf(name, it->second);
  }
  std::optional<std::vector<DmTargetLine>> table(const std::string &name) override {
    calls.push_back("table " + name);
    auto it = maps.find(name);
    if (it == maps.end()) {
      return std::nullopt;
    }
    if (!it->second.live) {
      return std::vector<DmTargetLine>{};
    }
    return std::vector<DmTargetLine>{
        {0, it->second.length, it->second.targetType, echo(it->second)}};
  }
  std::optional<std::vector<DmTargetLine>> status(const std::string &name) override {
    calls.push_back("status " + name);
    auto it = maps.find(name);
    if (it == maps.end()) {
      return std::nullopt;
    }
    if (!it->second.live) {
      return std::vector<DmTargetLine>{};
    }
    return std::vector<DmTargetLine>{
        {0, it->second.length, it->second.targetType, statusLine(it->second)}};
  }
  /// What create() reports (taking over a device a stopped create left is
  /// LibDevmapper's, not the kernel's: a test says when it happened).
  CreateReport createReport;

  CreateReport create(const std::string &name, const std::string &uuid, std::uint64_t sizeSectors,
                      const std::string &params) override {
    return finishCreate(name, uuid, sizeSectors, params,
                        prepareCreate(name, uuid, sizeSectors, params));
  }
  /// Recorded as "create <name>" (and failed by failures["create"]), as
  /// create() is; the map is not live until finishCreate(). A device of
  /// this name and DM UUID without a live table (a create stopped half
  /// way) is taken over, as LibDevmapper does.
  CreateReport prepareCreate(const std::string &name, const std::string &uuid,
                             std::uint64_t sizeSectors, const std::string &params) override {
    step("create", name);
    CreateReport report = createReport;
    if (auto left = maps.find(name);
        left != maps.end() && !left->second.live && !uuid.empty() && left->second.uuid == uuid) {
      left->second.inactive = {sizeSectors, params};
      report.tookOver = true;
      return report;
    }
    refuseTaken(name, uuid);
    FakeMap map;
    map.uuid = uuid;
    map.devt = {253, lowestFreeMinor()};
    map.live = false;
    map.inactive = {sizeSectors, params};
    maps[name] = std::move(map);
    return report;
  }
  /// "resume-new <name>", failed by failures["resume-new"]: the device is
  /// removed, as LibDevmapper removes a device its create made (one taken
  /// over is left as found).
  CreateReport finishCreate(const std::string &name, const std::string & /*uuid*/,
                            std::uint64_t /*sizeSectors*/, const std::string & /*params*/,
                            const CreateReport &prepared) override {
    auto &map = mapOf(name);
    calls.push_back("resume-new " + name);
    if (map.live || !map.inactive) {
      throw std::logic_error("finishCreate " + name + ": not prepared");
    }
    if (consumeFailure("resume-new")) {
      if (!prepared.tookOver) {
        maps.erase(name);
      }
      throw std::system_error(EIO, std::generic_category(), "resume-new " + name);
    }
    map.length = map.inactive->first;
    map.params = map.inactive->second;
    map.inactive.reset();
    map.live = true;
    adoptTable(map);
    return prepared;
  }

  void load(const std::string &name, std::uint64_t sizeSectors,
            const std::string &params) override {
    step("load", name);
    mapOf(name).inactive = {sizeSectors, params};
  }
  void clearInactive(const std::string &name) override {
    step("clear", name);
    mapOf(name).inactive.reset();
  }
  void suspend(const std::string &name) override {
    auto &map = mapOf(name);
    calls.push_back("suspend " + name);
    if (consumeFailure("suspend")) {
      map.suspended = true; // interrupted half-way: the worst case
      throw std::system_error(EINTR, std::generic_category(), "suspend " + name);
    }
    map.suspended = true;
  }
  void resume(const std::string &name) override {
    auto &map = mapOf(name);
    calls.push_back("resume " + name);
    if (consumeFailure("resume")) {
      if (map.inactive) {
        // dm-ioctl's do_resume: suspend, the swap fails, the new table is
        // destroyed and the map stays suspended on the old one.
        map.inactive.reset();
        map.suspended = true;
      }
      throw std::system_error(EINVAL, std::generic_category(), "resume " + name);
    }
    if (map.inactive) {
      map.length = map.inactive->first;
      map.params = map.inactive->second;
      map.inactive.reset();
      map.live = true;
      adoptTable(map);
      ++map.eventNr;
    }
    map.suspended = false;
  }
  void remove(const std::string &name, bool deferred) override {
    step(deferred ? "remove-deferred" : "remove", name);
    maps.erase(name);
  }
  /// dm_hash_rename: the device, its number and UUID stay; a taken name is
  /// EBUSY. Partition maps (DM UUID "part<N>-<the map's>") go with it, as
  /// LibDevmapper::rename renames them.
  RenameReport rename(const std::string &name, const std::string &newName) override {
    calls.push_back("rename " + name + " " + newName);
    const std::string uuid = mapOf(name).uuid;
    std::map<std::string, std::string> moves{{name, newName}};
    for (const auto &[part, map] : maps) {
      if (!uuid.empty() && map.uuid.starts_with("part") && map.uuid.ends_with("-" + uuid) &&
          part.size() > name.size() && part.starts_with(name)) {
        moves.emplace(part, newName + part.substr(name.size()));
      }
    }
    // LibDevmapper looks every new name up before anything else.
    for (const auto &[from, to] : moves) {
      if (maps.contains(to)) {
        throw std::system_error(EBUSY, std::generic_category(), "rename " + from + " " + to);
      }
    }
    // Its reload of a map it cleared comes next: a failure after that
    // carries the reload.
    if (consumeFailure("rename")) {
      const std::system_error failure(EIO, std::generic_category(),
                                      "rename " + name + " " + newName);
      if (renameReport.reloadedFirst) {
        throw RenameError(failure.code(), failure.what(), *renameReport.reloadedFirst);
      }
      throw failure;
    }
    for (const auto &[from, to] : moves) {
      auto node = maps.extract(from);
      node.key() = to;
      maps.insert(std::move(node));
    }
    return renameReport;
  }
  /// The kernel finds the map by its UUID; the call is recorded under the
  /// name it has now, which is the one the message reaches.
  void messageUuid(const std::string &uuid, const std::string &name,
                   const std::string &text) override {
    auto found = std::ranges::find_if(maps, [&](const auto &m) { return m.second.uuid == uuid; });
    if (found == maps.end()) {
      step("message", name + " " + text);
      throw std::system_error(ENXIO, std::generic_category(),
                              "message " + name + " (" + uuid + ") " + text);
    }
    message(found->first, text);
  }
  void message(const std::string &name, const std::string &text) override {
    step("message", name + " " + text);
    auto &map = mapOf(name);
    if (!map.live) {
      // dm-ioctl's target_message finds no live table and returns 2, which
      // libdevmapper takes for success: the message is lost, silently.
      return;
    }
    if (map.suspended) {
      // multipath_message: a suspended map takes no message.
      throw std::system_error(EBUSY, std::generic_category(), "message " + name + " " + text);
    }
    auto words = selector::splitWords(text);
    if (words.size() == 2 && (words[0] == "fail_path" || words[0] == "reinstate_path")) {
      auto path = map.pathActive.find(words[1]);
      if (path == map.pathActive.end()) {
        throw std::system_error(EINVAL, std::generic_category(), "no path " + words[1]);
      }
      const bool active = words[0] == "reinstate_path";
      if (path->second == active) {
        return; // the kernel's fail_path/reinstate_path change nothing, and say nothing
      }
      path->second = active;
      ++map.eventNr;
      if (switchGroupOnFailure && words[0] == "fail_path") {
        moveOffDeadGroup(map);
      }
    } else if (words.size() == 2 && words[0] == "switch_group") {
      map.nextGroup = static_cast<unsigned>(std::stoul(words[1]));
    } else if (text == "queue_if_no_path" || text == "fail_if_no_path") {
      map.queueIfNoPath = text == "queue_if_no_path";
    } else {
      throw std::system_error(EINVAL, std::generic_category(), "unknown message " + text);
    }
  }

private:
  void refuseTaken(const std::string &name, const std::string &uuid) const {
    // dm_hash_insert: "Unable to add ... name already in use".
    if (maps.contains(name)) {
      throw std::system_error(EBUSY, std::generic_category(), "create " + name);
    }
    // The kernel refuses a second device with a DM UUID in use (dm-ioctl's
    // dm_hash_insert: "Unable to add ... uuid already in use").
    if (!uuid.empty() &&
        std::ranges::any_of(maps, [&](const auto &entry) { return entry.second.uuid == uuid; })) {
      throw std::system_error(EBUSY, std::generic_category(), "create " + name);
    }
  }

  static std::string join(const std::vector<std::string> &words, std::size_t from) {
    std::string out;
    for (std::size_t i = from; i < words.size(); ++i) {
      out += (out.empty() ? "" : " ") + words[i];
    }
    return out;
  }

  FakeMap &mapOf(const std::string &name) {
    auto it = maps.find(name);
    if (it == maps.end()) {
      throw std::system_error(ENXIO, std::generic_category(), "no map " + name);
    }
    return it->second;
  }

  bool consumeFailure(const std::string &op) {
    auto it = failures.find(op);
    if (it == failures.end() || it->second == 0) {
      return false;
    }
    --it->second;
    return true;
  }

  void step(const std::string &op, const std::string &what) {
    calls.push_back(op + " " + what);
    if (consumeFailure(op)) {
      throw std::system_error(EIO, std::generic_category(), op + " " + what);
    }
  }

  static void moveOffDeadGroup(FakeMap &map) {
    auto table = selector::parseDmTable(map.params, false);
    const auto usable = [&](unsigned group) {
      for (const auto &path : table->groups[group - 1].paths) {
        if (map.pathActive.at(path.device)) {
          return true;
        }
      }
      return false;
    };
    const auto groups = static_cast<unsigned>(table->groups.size());
    if (map.nextGroup == 0 || map.nextGroup > groups || usable(map.nextGroup)) {
      return;
    }
    for (unsigned step = 1; step < groups; ++step) {
      const unsigned candidate = (map.nextGroup - 1 + step) % groups + 1;
      if (usable(candidate)) {
        map.nextGroup = candidate;
        return;
      }
    }
  }

  /// A new table: every path active, the initial group, its features.
  static void adoptTable(FakeMap &map) {
    auto table = selector::parseDmTable(map.params, false);
    if (!table) {
      throw std::system_error(EINVAL, std::generic_category(), table.error());
    }
    map.pathActive.clear();
    for (const auto &group : table->groups) {
      for (const auto &path : group.paths) {
        map.pathActive[path.device] = true;
      }
    }
    map.nextGroup = table->initialGroup;
    map.queueIfNoPath = table->features.queueIfNoPath;
  }

  /// The table as the kernel prints it back: queue_if_no_path as it is
  /// now, the attached handler when the table named none.
  static std::string echo(const FakeMap &map) {
    if (map.targetType != "multipath") {
      return map.params;
    }
    auto table = selector::parseDmTable(map.params, false);
    auto &args = table->featureArgs;
    std::erase(args, "queue_if_no_path");
    if (map.queueIfNoPath) {
      args.insert(args.begin(), "queue_if_no_path");
    }
    if (table->hwHandler.empty() && !map.attachedHandler.empty()) {
      table->hwHandler = map.attachedHandler;
    }
    table->initialGroup = map.nextGroup;
    table->length = map.length;
    return join(selector::splitWords(selector::renderDmTable(*table)), 3);
  }

  static std::string statusLine(const FakeMap &map) {
    if (map.targetType != "multipath") {
      return "";
    }
    auto table = selector::parseDmTable(map.params, false);
    std::string out =
        "2 0 0 0 " + std::to_string(table->groups.size()) + " " + std::to_string(map.nextGroup);
    for (std::size_t g = 0; g < table->groups.size(); ++g) {
      out += g + 1 == map.nextGroup ? " A 0 " : " E 0 ";
      out += std::to_string(table->groups[g].paths.size()) + " 0";
      for (const auto &path : table->groups[g].paths) {
        out += " " + path.device + (map.pathActive.at(path.device) ? " A 0" : " F 1");
      }
    }
    return out;
  }

  static DmMapInfo infoOf(const std::string &name, const FakeMap &map) {
    DmMapInfo info;
    info.name = name;
    info.uuid = map.uuid;
    info.devt = map.devt;
    info.suspended = map.suspended;
    info.openCount = map.openCount;
    info.liveTable = map.live;
    info.inactiveTable = map.inactive.has_value();
    info.eventNr = map.eventNr;
    info.targetType = map.live ? map.targetType : ""; // a device's type is its live table's
    return info;
  }
};

} // namespace pathkeeper::daemon::fakes
