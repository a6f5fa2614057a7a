#include "admin_holds.hpp"

#include <sstream>

#include <fmt/format.h>

namespace pathkeeper::daemon {

std::string renderAdminHolds(const AdminHolds &holds) {
  std::string out = "# pathkeeperd: the admin's holds, kept across restarts (see pathkeeperd(8))\n";
  for (const auto &[device, identity] : holds.failedPaths) {
    out += fmt::format("fail-path {} {}\n", device, identity);
  }
  for (const auto &map : holds.queueingDisabled) {
    if (auto uuid = holds.mapUuids.find(map); uuid != holds.mapUuids.end()) {
      out += fmt::format("disable-queueing-uuid {} {}\n", uuid->second, map);
    } else {
      out += fmt::format("disable-queueing {}\n", map);
    }
  }
  return out;
}

AdminHolds parseAdminHolds(std::string_view text, std::vector<std::string> &problems) {
  AdminHolds holds;
  std::istringstream in{std::string(text)};
  unsigned number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind) || kind.starts_with('#')) {
      continue;
    }
    constexpr std::string_view kDisable = "disable-queueing ";
    if (line.starts_with(kDisable) && line.size() > kDisable.size()) {
      // The rest of the line: an alias may hold blanks.
      holds.queueingDisabled.insert(line.substr(kDisable.size()));
      continue;
    }
    constexpr std::string_view kDisableUuid = "disable-queueing-uuid ";
    if (line.starts_with(kDisableUuid)) {
      // A DM UUID has no blanks; the alias is the rest of the line.
      const std::string rest = line.substr(kDisableUuid.size());
      const auto blank = rest.find(' ');
      if (blank != 0 && blank != std::string::npos && blank + 1 < rest.size()) {
        std::string alias = rest.substr(blank + 1);
        holds.mapUuids[alias] = rest.substr(0, blank);
        holds.queueingDisabled.insert(std::move(alias));
        continue;
      }
    }
    std::vector<std::string> args;
    for (std::string word; words >> word;) {
      args.push_back(word);
    }
    if (kind == "fail-path" && (args.size() == 2 || args.size() == 3)) {
      // A path without a WWID has the identity "DEVT " (identityOf()).
      holds.failedPaths[args[0]] = args[1] + " " + (args.size() == 3 ? args[2] : "");
    } else {
      problems.push_back(fmt::format("line {}: cannot read '{}'", number, line));
    }
  }
  return holds;
}

} // namespace pathkeeper::daemon
