#include "sysfs_inventory.hpp"

#include "iscsi_names.hpp"
#include "vpd.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <future>
#include <set>
#include <span>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;

// Sysfs text attributes fit in a page and VPD pages in 64 KiB; anything far
// larger means the root is not a sysfs tree, and is not worth holding.
constexpr std::size_t kMaxAttributeBytes = std::size_t{1} << 20;

// A scan reads its disks on up to this many threads, one per this many
// disks: a few dozen are read in milliseconds, not worth a thread.
constexpr std::size_t kMaxScanThreads = 4;
constexpr std::size_t kDisksPerScanThread = 64;

/// Closes a descriptor on scope exit; reads here never outlive one call.
class FdGuard {
public:
  explicit FdGuard(int fd) : fd_(fd) {}
  FdGuard(const FdGuard &) = delete;
  FdGuard &operator=(const FdGuard &) = delete;
  ~FdGuard() { static_cast<void>(::close(fd_)); }

private:
  int fd_;
};

// open/read rather than iostreams: the errno is the answer callers need
// (ENOENT means "not offered", EIO or ENOTCONN means "offered but failing"),
// and sysfs files report a dummy st_size, so read to EOF.
Expected<std::vector<std::uint8_t>, std::error_code> readBytes(const fs::path &file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return tl::unexpected(std::error_code(errno, std::system_category()));
  }
  FdGuard guard(fd);
  std::vector<std::uint8_t> out;
  std::array<std::uint8_t, 4096> buffer{};
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return tl::unexpected(std::error_code(errno, std::system_category()));
    }
    if (n == 0) {
      return out;
    }
    out.insert(out.end(), buffer.begin(), buffer.begin() + n);
    if (out.size() > kMaxAttributeBytes) {
      return tl::unexpected(std::make_error_code(std::errc::file_too_large));
    }
  }
}

enum class Need { Required, Optional };

/// Reads attributes of one sysfs directory, collecting what went wrong.
class AttributeReader {
public:
  AttributeReader(fs::path dir, std::vector<std::string> &problems)
      : dir_(std::move(dir)), problems_(problems) {}

  /// A missing optional attribute is normal (the kernel hides attributes a
  /// device does not support); any other failure is a problem.
  std::optional<std::vector<std::uint8_t>> bytes(std::string_view name, Need need) {
    auto data = readBytes(dir_ / name);
    if (data) {
      return std::move(*data);
    }
    if (data.error() == std::errc::no_such_file_or_directory) {
      if (need == Need::Required) {
        problems_.push_back(std::string(name) + ": missing");
      }
    } else {
      problems_.push_back(std::string(name) + ": unreadable (" + data.error().message() + ")");
    }
    return std::nullopt;
  }

  /// The text without its trailing newline.
  std::optional<std::string> text(std::string_view name, Need need) {
    auto data = bytes(name, need);
    if (!data) {
      return std::nullopt;
    }
    std::string out(data->begin(), data->end());
    while (!out.empty() && (out.back() == '\n' || out.back() == '\0')) {
      out.pop_back();
    }
    return out;
  }

  std::string textOr(std::string_view name, Need need) {
    return text(name, need).value_or(std::string());
  }

  template <typename T> std::optional<T> number(std::string_view name, Need need) {
    auto value = text(name, need);
    if (!value) {
      return std::nullopt;
    }
    T out{};
    const char *end = value->data() + value->size();
    auto [ptr, ec] = std::from_chars(value->data(), end, out);
    if (ec != std::errc() || ptr != end) {
      problems_.push_back(std::string(name) + ": not a number: \"" + *value + "\"");
      return std::nullopt;
    }
    return out;
  }

private:
  fs::path dir_;
  std::vector<std::string> &problems_;
};

// The kernel prints an unset string parameter as "(null)" (or "<NULL>" in
// some drivers); to everything above sysfs that is no value at all.
std::string unsetToEmpty(std::string value) {
  if (value == "(null)" || value == "<NULL>" || value == "<empty>") {
    return {};
  }
  return value;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    text.remove_suffix(1);
  }
  return text;
}

/// N from "<prefix>N"; nullopt unless the rest is all digits.
std::optional<int> numberAfter(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() == prefix.size()) {
    return std::nullopt;
  }
  name.remove_prefix(prefix.size());
  int out = 0;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), out);
  if (ec != std::errc() || ptr != name.data() + name.size()) {
    return std::nullopt;
  }
  return out;
}

bool isHctl(std::string_view name) {
  int fields = 0;
  while (!name.empty()) {
    unsigned long long value = 0;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), value);
    if (ec != std::errc()) {
      return false;
    }
    ++fields;
    name.remove_prefix(static_cast<std::size_t>(ptr - name.data()));
    if (!name.empty()) {
      if (name.front() != ':') {
        return false;
      }
      name.remove_prefix(1);
      if (name.empty()) {
        return false;
      }
    }
  }
  return fields == 4;
}

/// The innermost component of @p path that reads "<prefix>N".
std::optional<std::string> innermost(const fs::path &path, std::string_view prefix) {
  std::optional<std::string> found;
  for (const auto &part : path) {
    if (numberAfter(part.native(), prefix)) {
      found = part.native();
    }
  }
  return found;
}

int hostNumberIn(const fs::path &path) {
  auto host = innermost(path, "host");
  return host ? *numberAfter(*host, "host") : -1;
}

/// Where a sysfs symlink points, resolved lexically against its own directory,
/// as in /sys. Works for dangling links (a device removed mid-scan) and in
/// captured trees; sysfs links never pass through other symlinks, so lexical
/// resolution is exact. nullopt when @p link is not a symlink.
std::optional<fs::path> linkTarget(const fs::path &link) {
  std::error_code ec;
  auto target = fs::read_symlink(link, ec);
  if (ec) {
    return std::nullopt;
  }
  if (target.is_absolute()) {
    return target.lexically_normal();
  }
  return (link.parent_path() / target).lexically_normal();
}

/// The object a class link names: the link's target, or the entry itself when
/// a tree has a real directory there; nullopt when there is nothing at all.
std::optional<fs::path> classObject(const fs::path &entry) {
  if (auto target = linkTarget(entry)) {
    return target;
  }
  std::error_code ec;
  if (fs::is_directory(entry, ec)) {
    return entry;
  }
  return std::nullopt;
}

bool isDirectory(const fs::path &path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

/// The names in a directory, sorted; empty when it does not exist (e.g.
/// class/iscsi_session before iscsi_tcp is loaded).
std::vector<std::string> listNames(const fs::path &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// sda < sdb < ... < sdz < sdaa, as the kernel allocates them.
bool deviceOrder(const std::string &a, const std::string &b) {
  return std::pair(a.size(), std::string_view(a)) < std::pair(b.size(), std::string_view(b));
}

std::string lowerHex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::isxdigit(static_cast<unsigned char>(c)) == 0) {
      return {};
    }
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

/// The session's connection with the lowest cid; iSCSI MC/S is rare, and the
/// first connection is the one that carries the session's portal.
const IscsiConnection *connectionOf(const Inventory &inventory, int sessionId) {
  const IscsiConnection *best = nullptr;
  for (const auto &[name, connection] : inventory.connections) {
    if (connection.sessionId == sessionId && (best == nullptr || connection.cid < best->cid)) {
      best = &connection;
    }
  }
  return best;
}

void appendProblems(std::vector<std::string> &out, std::string_view prefix,
                    const std::vector<std::string> &problems) {
  for (const auto &problem : problems) {
    out.push_back(std::string(prefix) + ": " + problem);
  }
}

InventoryPath derivePath(const Inventory &inventory, const ScsiDisk &disk) {
  InventoryPath out;
  auto &path = out.path;
  auto &problems = out.problems;
  path.device = disk.name;
  problems = disk.problems;

  if (auto devt = selector::parseDevT(disk.dev)) {
    path.devt = *devt;
  } else if (!disk.dev.empty()) {
    problems.push_back("dev: not a device number: \"" + disk.dev + "\"");
  }
  path.sizeSectors = disk.size.value_or(0);
  path.vendor = trim(disk.vendor);
  path.product = trim(disk.model);

  std::optional<std::span<const std::uint8_t>> page83;
  std::optional<std::span<const std::uint8_t>> page80;
  if (disk.vpdPg83) {
    page83 = std::span<const std::uint8_t>(*disk.vpdPg83);
  }
  if (disk.vpdPg80) {
    page80 = std::span<const std::uint8_t>(*disk.vpdPg80);
    if (auto serial = selector::parseVpdPage80(*page80)) {
      path.serial = std::move(*serial);
    } else {
      problems.push_back("vpd_pg80: " + serial.error());
    }
  }
  bool page83Broken = false;
  if (page83) {
    if (auto parsed = selector::parseVpdPage83(*page83)) {
      path.targetPortGroup = parsed->targetPortGroup;
    } else {
      // A page that cannot be trusted must not be papered over with the
      // kernel's wwid attribute: the paths of one LUN could end up with two
      // identities and be split into two maps.
      page83Broken = true;
      problems.push_back("vpd_pg83: " + parsed.error());
    }
  }
  if (!page83Broken) {
    auto wwid = selector::wwidFromVpd(page83, page80, path.vendor, path.product);
    if (wwid) {
      path.wwid = std::move(*wwid);
    } else if (auto fromAttribute = wwidFromSysfsAttribute(disk.wwid)) {
      path.wwid = std::move(*fromAttribute);
    } else if (!disk.vanished) {
      problems.push_back("no WWID: " + wwid.error() +
                         (disk.wwid.empty() ? std::string(" and no wwid attribute")
                                            : "; wwid attribute \"" + disk.wwid + "\" not used"));
    }
  }

  if (!disk.accessState.empty()) {
    // "unknown" is what a TPGS device shows before a handler has asked; it
    // carries no ALUA decision yet.
    path.alua = selector::parseAluaState(disk.accessState).value_or(selector::AluaState::None);
  }
  path.aluaPreferred = disk.preferredPath.value_or(false);
  if (disk.dhState != "detached") {
    path.attachedHandler = disk.dhState;
  }
  path.priority = 0; // the planner derives ALUA priorities

  path.sessionId = numberAfter(disk.session, "session").value_or(-1);
  auto session = inventory.sessions.find(disk.session);
  if (session == inventory.sessions.end()) {
    if (!disk.vanished) {
      problems.push_back(disk.session + " is gone");
    }
  } else {
    const auto &s = session->second;
    path.targetIqn = s.targetName;
    path.iface = s.ifaceName;
    if (s.tpgt) {
      path.portal.tpgt = *s.tpgt;
    }
    appendProblems(problems, s.name, s.problems);
    if (const auto *connection = connectionOf(inventory, s.id)) {
      // The persistent address is the portal the session was set up for; the
      // current one differs only after a target redirect.
      path.portal.address = !connection->persistentAddress.empty() ? connection->persistentAddress
                                                                   : connection->address;
      // iscsiadm keeps the address as the node record spells it; the probes,
      // the config and SendTargets compare the canonical form (IPv6).
      if (auto canonical = selector::canonicalIpAddress(path.portal.address)) {
        path.portal.address = *std::move(canonical);
      }
      path.portal.port = connection->persistentPort.value_or(connection->port.value_or(3260));
      if (path.portal.address.empty()) {
        problems.push_back(connection->name + ": no address");
      }
    } else if (!disk.vanished) {
      problems.push_back("no connection for " + s.name);
    }
  }
  if (auto host = inventory.hosts.find("host" + std::to_string(disk.hostNo));
      host != inventory.hosts.end()) {
    path.netdev = host->second.netdev;
  }

  if (disk.vanished) {
    path.state = selector::PathState::Removed;
  } else if (session == inventory.sessions.end()) {
    path.state = selector::PathState::Down;
  } else {
    path.state = pathStateFromSysfs(session->second.state, disk.state);
  }
  return out;
}

std::string relativeDevpath(const fs::path &object, const fs::path &root) {
  auto relative = object.lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") {
    return object.string(); // outside the root; keep it recognisable
  }
  return "/" + relative.generic_string();
}

/// The last component of a DEVPATH, and the one before it.
std::pair<std::string, std::string> lastTwo(std::string_view devpath) {
  fs::path path{std::string(devpath)};
  return {path.filename().string(), path.parent_path().filename().string()};
}

} // namespace

std::string nicWithHardwareAddress(const fs::path &sysfsRoot, std::string_view address) {
  const auto lower = [](std::string_view text) {
    std::string out(trim(text));
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
  };
  const std::string wanted = lower(address);
  if (wanted.empty()) {
    return {};
  }
  std::string best;
  long bestIndex = 0;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(sysfsRoot / "class/net", ec)) {
    std::vector<std::string> ignored; // a NIC that cannot be read is not the one
    AttributeReader read(entry.path(), ignored);
    if (read.number<int>("type", Need::Required) != 1 ||
        lower(read.textOr("address", Need::Required)) != wanted) {
      continue; // ARPHRD_ETHER only, as open-iscsi
    }
    const auto index = read.number<long>("ifindex", Need::Required);
    if (index && (best.empty() || *index < bestIndex)) {
      best = entry.path().filename().string();
      bestIndex = *index;
    }
  }
  return best;
}

bool operator==(const InventoryPath &a, const InventoryPath &b) {
  const auto fields = [](const selector::Path &p) {
    return std::tie(p.device, p.devt, p.wwid, p.vendor, p.product, p.serial, p.sizeSectors,
                    p.targetIqn, p.portal, p.iface, p.netdev, p.sessionId, p.state,
                    p.targetPortGroup, p.alua, p.aluaPreferred, p.priority, p.controller,
                    p.marginal, p.relativeThroughput);
  };
  return fields(a.path) == fields(b.path) && a.problems == b.problems;
}

std::vector<selector::Path> Inventory::plannerPaths() const {
  std::vector<std::string> names;
  for (const auto &[name, path] : paths) {
    names.push_back(name);
  }
  std::sort(names.begin(), names.end(), deviceOrder);
  std::vector<selector::Path> out;
  out.reserve(names.size());
  for (const auto &name : names) {
    out.push_back(paths.at(name).path);
  }
  return out;
}

UdevEvent::Action parseUdevAction(std::string_view text) {
  if (text == "add") {
    return UdevEvent::Action::Add;
  }
  if (text == "change") {
    return UdevEvent::Action::Change;
  }
  if (text == "remove") {
    return UdevEvent::Action::Remove;
  }
  return UdevEvent::Action::Other;
}

std::optional<std::string> wwidFromSysfsAttribute(std::string_view attribute) {
  attribute = trim(attribute);
  if (attribute.size() <= 4) {
    return std::nullopt;
  }
  const auto prefix = attribute.substr(0, 4);
  const auto rest = attribute.substr(4);
  if (prefix == "naa." || prefix == "eui.") {
    auto hex = lowerHex(rest);
    if (hex.empty()) {
      return std::nullopt;
    }
    return (prefix == "naa." ? "3" : "2") + hex;
  }
  if (prefix == "t10.") {
    // As multipathd spells T10 vendor IDs: blank runs become one '_', and
    // trailing blanks go.
    std::string out = "1";
    bool blank = false;
    for (char c : trim(rest)) {
      if (c == ' ' || c == '\t') {
        blank = true;
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) {
        return std::nullopt; // would break the bindings file and D-Bus strings
      }
      if (blank) {
        out.push_back('_');
        blank = false;
      }
      out.push_back(c);
    }
    if (out.size() == 1) {
      return std::nullopt;
    }
    out.resize(std::min(out.size(), selector::kMaxWwidLength));
    return out;
  }
  return std::nullopt;
}

selector::PathState pathStateFromSysfs(std::string_view sessionState,
                                       std::string_view deviceState) {
  return sessionState == "LOGGED_IN" && deviceState == "running" ? selector::PathState::Up
                                                                 : selector::PathState::Down;
}

void derivePaths(Inventory &inventory) {
  inventory.paths.clear();
  inventory.ignored.clear();
  for (const auto &[name, disk] : inventory.disks) {
    if (disk.session.empty()) {
      inventory.ignored.emplace(name, "not behind an iSCSI session (" + disk.devpath + ")");
      continue;
    }
    inventory.paths.emplace(name, derivePath(inventory, disk));
  }
}

SysfsInventory::SysfsInventory(std::filesystem::path sysfsRoot)
    : root_(std::move(sysfsRoot).lexically_normal()) {
  if (!root_.has_filename() && root_.has_parent_path() && root_ != root_.root_path()) {
    root_ = root_.parent_path(); // "dir/" -> "dir", so that relative paths come out clean
  }
}

Expected<Inventory> SysfsInventory::scan() const {
  if (!isDirectory(root_)) {
    return fail("sysfs root " + root_.string() + " is not a directory");
  }
  Inventory inventory;
  for (const auto &name : listNames(root_ / "class/iscsi_host")) {
    refreshHost(inventory, name);
  }
  for (const auto &name : listNames(root_ / "class/iscsi_session")) {
    refreshSession(inventory, name);
  }
  for (const auto &name : listNames(root_ / "class/iscsi_connection")) {
    refreshConnection(inventory, name);
  }
  std::vector<std::string> disks;
  for (auto &name : listNames(root_ / "block")) {
    if (name.starts_with("sd")) {
      disks.push_back(std::move(name));
    }
  }
  auto read = readDisks(disks);
  for (std::size_t i = 0; i < disks.size(); ++i) {
    if (read[i]) {
      inventory.disks.insert_or_assign(disks[i], std::move(*read[i]));
    }
  }
  derivePaths(inventory);
  return inventory;
}

std::vector<std::optional<ScsiDisk>>
SysfsInventory::readDisks(const std::vector<std::string> &names) const {
  // A disk is a dozen small sysfs reads, each a path walk and a page the
  // kernel zeroes: at 1000 paths in the lab's TCG guest, 1.1 s of CPU and
  // the largest part of a cold start before the first map. The disks are
  // independent, so a few threads share them (at startup the daemon's
  // other threads have nothing to do yet; a Rescan runs here too).
  std::vector<std::optional<ScsiDisk>> out(names.size());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < names.size(); i = next++) {
      out[i] = readDisk(names[i]);
    }
  };
  const std::size_t threads =
      std::min({kMaxScanThreads, std::max<std::size_t>(1, std::thread::hardware_concurrency()),
                names.size() / kDisksPerScanThread});
  std::vector<std::future<void>> helpers;
  for (std::size_t t = 1; t < threads; ++t) {
    try {
      helpers.push_back(std::async(std::launch::async, [&work] {
        ::pthread_setname_np(::pthread_self(), "pk-scan");
        work();
      }));
    } catch (const std::system_error &) {
      break; // no more threads to be had: those started read the rest
    }
  }
  work();
  for (auto &helper : helpers) {
    helper.get(); // rethrows what a helper threw; the other helpers' futures
                  // wait for their threads as the exception unwinds
  }
  return out;
}

std::string SysfsInventory::devpathOf(const std::filesystem::path &classLink) const {
  auto target = linkTarget(root_ / classLink);
  return target ? relativeDevpath(*target, root_) : std::string();
}

std::vector<std::string> SysfsInventory::apply(Inventory &inventory, const UdevEvent &event) const {
  const auto before = inventory.paths;
  const auto [name, parent] = lastTwo(event.devpath);
  const bool remove = event.action == UdevEvent::Action::Remove;
  // On a remove event the object may still be in sysfs for a moment (the
  // kernel sends the event before it deletes the directory), so trust the
  // event rather than the tree.
  const auto eraseOrRefresh = [&](auto &map, const std::string &key, auto refresh) {
    if (remove) {
      map.erase(key);
    } else {
      (this->*refresh)(inventory, key);
    }
  };
  // Disks whose sysfs state the kernel changes without a uevent of their own
  // (a session in recovery blocks its devices), so re-read them with it.
  const auto disksOf = [&](const std::string &session) {
    std::vector<std::string> names;
    for (const auto &[diskName, disk] : inventory.disks) {
      if (disk.session == session) {
        names.push_back(diskName);
      }
    }
    return names;
  };

  if (event.subsystem == "block") {
    // Partitions (block/sdb/sdb1) carry nothing the inventory keeps.
    if (parent == "block" && name.starts_with("sd")) {
      eraseOrRefresh(inventory.disks, name, &SysfsInventory::refreshDisk);
    }
  } else if (event.subsystem == "scsi_device" || event.subsystem == "scsi") {
    // The class device ends in .../H:C:T:L/scsi_device/H:C:T:L, the device
    // itself in .../H:C:T:L; both name the same disk(s).
    if (isHctl(name)) {
      std::set<std::string> names;
      for (const auto &[diskName, disk] : inventory.disks) {
        if (disk.hctl == name) {
          names.insert(diskName);
        }
      }
      if (!remove) {
        auto dir = root_ / fs::path(event.devpath).relative_path();
        if (parent == "scsi_device") {
          dir = dir.parent_path().parent_path();
        }
        for (const auto &child : listNames(dir / "block")) {
          names.insert(child);
        }
      }
      for (const auto &diskName : names) {
        eraseOrRefresh(inventory.disks, diskName, &SysfsInventory::refreshDisk);
      }
    }
  } else if (event.subsystem == "iscsi_session") {
    eraseOrRefresh(inventory.sessions, name, &SysfsInventory::refreshSession);
    for (const auto &diskName : disksOf(name)) {
      refreshDisk(inventory, diskName);
    }
    // iscsi_tcp creates and deletes a host with every session; the host's
    // own event may not be subscribed to.
    if (auto host = innermost(fs::path(event.devpath), "host")) {
      refreshHost(inventory, *host);
    }
  } else if (event.subsystem == "iscsi_connection") {
    eraseOrRefresh(inventory.connections, name, &SysfsInventory::refreshConnection);
  } else if (event.subsystem == "iscsi_host") {
    eraseOrRefresh(inventory.hosts, name, &SysfsInventory::refreshHost);
  }

  derivePaths(inventory);
  std::set<std::string> changed;
  for (const auto &[pathName, path] : before) {
    auto now = inventory.paths.find(pathName);
    if (now == inventory.paths.end() || !(now->second == path)) {
      changed.insert(pathName);
    }
  }
  for (const auto &[pathName, path] : inventory.paths) {
    if (!before.contains(pathName)) {
      changed.insert(pathName);
    }
  }
  std::vector<std::string> out(changed.begin(), changed.end());
  std::sort(out.begin(), out.end(), deviceOrder);
  return out;
}

void SysfsInventory::refreshSession(Inventory &inventory, const std::string &name) const {
  auto id = numberAfter(name, "session");
  auto dir = classObject(root_ / "class/iscsi_session" / name);
  if (!id || !dir || !isDirectory(*dir)) {
    // Gone, or going: its paths report the session as gone.
    inventory.sessions.erase(name);
    return;
  }
  IscsiSession session;
  session.name = name;
  session.id = *id;
  session.hostNo = hostNumberIn(*dir);
  AttributeReader read(*dir, session.problems);
  session.targetName = read.textOr("targetname", Need::Required);
  session.state = read.textOr("state", Need::Required);
  session.ifaceName = unsetToEmpty(read.textOr("ifacename", Need::Optional));
  session.initiatorName = unsetToEmpty(read.textOr("initiatorname", Need::Optional));
  session.recoveryTmo = read.number<int>("recovery_tmo", Need::Optional);
  session.tpgt = read.number<std::uint32_t>("tpgt", Need::Optional);
  if (!isDirectory(*dir)) {
    inventory.sessions.erase(name);
    return;
  }
  inventory.sessions.insert_or_assign(name, std::move(session));
}

void SysfsInventory::refreshConnection(Inventory &inventory, const std::string &name) const {
  // "connection<session>:<cid>"
  const auto colon = name.find(':');
  auto sessionId =
      colon == std::string::npos ? std::nullopt : numberAfter(name.substr(0, colon), "connection");
  auto cid = colon == std::string::npos ? std::nullopt : numberAfter(name.substr(colon + 1), "");
  auto dir = classObject(root_ / "class/iscsi_connection" / name);
  if (!sessionId || !cid || !dir || !isDirectory(*dir)) {
    inventory.connections.erase(name);
    return;
  }
  IscsiConnection connection;
  connection.name = name;
  connection.sessionId = *sessionId;
  connection.cid = *cid;
  AttributeReader read(*dir, connection.problems);
  connection.persistentAddress = unsetToEmpty(read.textOr("persistent_address", Need::Required));
  connection.persistentPort = read.number<std::uint16_t>("persistent_port", Need::Required);
  // The current address and port read ENOTCONN while the socket is down:
  // normal for a failed session, and the persistent ones name the portal.
  std::vector<std::string> ignoredProblems;
  AttributeReader current(*dir, ignoredProblems);
  connection.address = unsetToEmpty(current.textOr("address", Need::Optional));
  connection.port = current.number<std::uint16_t>("port", Need::Optional);
  connection.state = current.textOr("state", Need::Optional);
  if (!isDirectory(*dir)) {
    inventory.connections.erase(name);
    return;
  }
  inventory.connections.insert_or_assign(name, std::move(connection));
}

void SysfsInventory::refreshHost(Inventory &inventory, const std::string &name) const {
  auto hostNo = numberAfter(name, "host");
  auto dir = classObject(root_ / "class/iscsi_host" / name);
  if (!hostNo || !dir || !isDirectory(*dir)) {
    inventory.hosts.erase(name);
    return;
  }
  IscsiHost host;
  host.name = name;
  host.hostNo = *hostNo;
  // Every host attribute is optional: iscsi_tcp answers ipaddress only while
  // connected, and netdev only when the iface is bound to a NIC.
  AttributeReader read(*dir, host.problems);
  host.netdev = unsetToEmpty(read.textOr("netdev", Need::Optional));
  host.ipAddress = unsetToEmpty(read.textOr("ipaddress", Need::Optional));
  host.hwAddress = unsetToEmpty(read.textOr("hwaddress", Need::Optional));
  if (host.hwAddress == "default") {
    host.hwAddress.clear(); // open-iscsi's "not bound by address"
  }
  if (!host.hwAddress.empty()) {
    // Bound by iface.hwaddress: iscsid bound the socket to the NIC with
    // that address, which wins over iface.net_ifacename (usr/io.c,
    // bind_conn_to_iface), but the kernel only knows the address.
    if (auto nic = nicWithHardwareAddress(root_, host.hwAddress); !nic.empty()) {
      host.netdev = std::move(nic);
    }
  }
  host.initiatorName = unsetToEmpty(read.textOr("initiatorname", Need::Optional));
  if (!isDirectory(*dir)) {
    inventory.hosts.erase(name);
    return;
  }
  inventory.hosts.insert_or_assign(name, std::move(host));
}

void SysfsInventory::refreshDisk(Inventory &inventory, const std::string &name) const {
  if (auto disk = readDisk(name)) {
    inventory.disks.insert_or_assign(name, std::move(*disk));
  } else {
    inventory.disks.erase(name);
  }
}

std::optional<ScsiDisk> SysfsInventory::readDisk(const std::string &name) const {
  const auto link = root_ / "block" / name;
  auto blockDir = classObject(link);
  if (!blockDir) {
    return std::nullopt;
  }
  ScsiDisk disk;
  disk.name = name;
  disk.devpath = relativeDevpath(*blockDir, root_);
  // .../H:C:T:L/block/sdX; the device link says the same while it exists.
  fs::path deviceDir =
      linkTarget(*blockDir / "device").value_or(blockDir->parent_path().parent_path());
  disk.hctl = deviceDir.filename().string();
  disk.session = innermost(deviceDir, "session").value_or(std::string());
  disk.hostNo = hostNumberIn(deviceDir);

  if (!isDirectory(*blockDir)) {
    disk.vanished = true;
    disk.problems.push_back("device vanished: " + disk.devpath + " is gone");
    return disk;
  }
  if (disk.session.empty()) {
    // Not ours (SATA, virtio-scsi, USB...): reading it would only add noise.
    return disk;
  }

  AttributeReader block(*blockDir, disk.problems);
  disk.dev = block.textOr("dev", Need::Required);
  disk.size = block.number<std::uint64_t>("size", Need::Required);

  AttributeReader device(deviceDir, disk.problems);
  disk.vendor = device.textOr("vendor", Need::Required);
  disk.model = device.textOr("model", Need::Required);
  disk.rev = device.textOr("rev", Need::Optional);
  disk.state = device.textOr("state", Need::Required);
  disk.timeout = device.number<unsigned>("timeout", Need::Optional);
  disk.wwid = device.textOr("wwid", Need::Optional);
  disk.vpdPg83 = device.bytes("vpd_pg83", Need::Optional);
  disk.vpdPg80 = device.bytes("vpd_pg80", Need::Optional);
  // Shown only for devices that support ALUA (TPGS).
  disk.accessState = device.textOr("access_state", Need::Optional);
  if (auto preferred = device.number<int>("preferred_path", Need::Optional)) {
    disk.preferredPath = *preferred != 0;
  }
  disk.dhState = device.textOr("dh_state", Need::Optional);

  // A device removed while we read it leaves a trail of "missing" problems;
  // say what really happened instead.
  if (!isDirectory(*blockDir) || !isDirectory(deviceDir)) {
    disk.vanished = true;
    disk.problems.assign({"device vanished while it was read: " + disk.devpath});
  }
  return disk;
}

} // namespace pathkeeper::daemon
