#include "discover.hpp"

#include "iscsi_names.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <set>
#include <system_error>

namespace pathkeeper::ctl {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = daemon::IscsiDiscovery::Clock;

// "10.10.1.20:3260" or "[fd00::20]:3260": a portal as probed, without the
// tag that only a SendTargets reply or a session knows.
std::string hostPort(const selector::Portal &portal) {
  const bool v6 = portal.address.find(':') != std::string::npos;
  return (v6 ? "[" + portal.address + "]" : portal.address) + ":" + std::to_string(portal.port);
}

std::string nicLabel(const std::string &nic) {
  return nic.empty() ? "(routing)" : nic;
}

// Targets of one probe, each with the portals it advertises, in the
// result's (sorted) order.
std::vector<std::pair<std::string, std::vector<std::string>>>
targetPortals(const daemon::DiscoveryResult &result) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const auto &target : result.targets) {
    if (out.empty() || out.back().first != target.targetIqn) {
      out.emplace_back(target.targetIqn, std::vector<std::string>{});
    }
    out.back().second.push_back(target.portal.str());
  }
  return out;
}

std::size_t distinctTargets(const DiscoverReport &report) {
  std::set<std::string> names;
  for (const auto &probe : report.probes) {
    if (probe.result) {
      for (const auto &target : probe.result->targets) {
        names.insert(target.targetIqn);
      }
    }
  }
  return names.size();
}

std::string sessionLine(const KernelSession &session) {
  std::string out = session.path.targetIqn + " via " + session.path.portal.str();
  if (!session.path.netdev.empty()) {
    out += " from " + session.path.netdev;
  }
  return out;
}

} // namespace

std::vector<KernelSession> kernelSessions(const daemon::Inventory &inventory,
                                          std::vector<std::string> &warnings) {
  std::vector<KernelSession> out;
  for (const auto &[name, session] : inventory.sessions) {
    // Connection 0 carries the portal; with MC/S (which iscsi_tcp does not
    // do) later connections would go to the same portal group anyway.
    const daemon::IscsiConnection *connection = nullptr;
    for (const auto &[connectionName, candidate] : inventory.connections) {
      if (candidate.sessionId == session.id &&
          (connection == nullptr || candidate.cid < connection->cid)) {
        connection = &candidate;
      }
    }
    if (connection == nullptr || connection->persistentAddress.empty()) {
      warnings.push_back(name + ": no connection with a portal address; not compared");
      continue;
    }
    auto address = selector::canonicalIpAddress(connection->persistentAddress);
    if (!address) {
      warnings.push_back(name + ": portal address: " + address.error() + "; not compared");
      continue;
    }
    KernelSession entry;
    entry.name = name;
    entry.state = session.state;
    entry.path.targetIqn = session.targetName;
    entry.path.portal = {*std::move(address), connection->persistentPort.value_or(3260),
                         session.tpgt.value_or(1)};
    entry.path.sessionId = session.id;
    entry.path.iface = session.ifaceName;
    for (const auto &[hostName, host] : inventory.hosts) {
      if (host.hostNo == session.hostNo && session.hostNo >= 0) {
        entry.path.netdev = host.netdev;
      }
    }
    out.push_back(std::move(entry));
  }
  std::ranges::sort(out, {}, [](const KernelSession &s) { return s.path.sessionId; });
  return out;
}

ProbeSet chooseProbes(std::span<const selector::Portal> portals, std::span<const std::string> nics,
                      std::string_view nicSource, std::span<const KernelSession> sessions) {
  ProbeSet set;
  std::set<std::string> seen;
  auto addPortal = [&](const selector::Portal &portal) {
    if (seen.insert(hostPort(portal)).second) {
      set.portals.push_back({portal.address, portal.port, 1});
    }
  };
  std::ranges::for_each(portals, addPortal);
  for (const auto &session : sessions) {
    addPortal(session.path.portal);
  }
  if (!nics.empty()) {
    set.nics.assign(nics.begin(), nics.end());
    set.nicSource = nicSource;
    return set;
  }
  for (const auto &session : sessions) {
    if (!session.path.netdev.empty() &&
        std::ranges::find(set.nics, session.path.netdev) == set.nics.end()) {
      set.nics.push_back(session.path.netdev);
    }
  }
  if (!set.nics.empty()) {
    std::ranges::sort(set.nics);
    set.nicSource = "sessions";
  } else {
    set.nics.emplace_back();
    set.nicSource = "routing";
  }
  return set;
}

std::vector<ProbeOutcome> runProbes(std::span<const daemon::DiscoveryRequest> requests) {
  const auto start = Clock::now();
  std::vector<daemon::IscsiDiscovery> probes;
  probes.reserve(requests.size());
  for (const auto &request : requests) {
    probes.emplace_back(request, Clock::now());
  }
  std::vector<std::optional<milliseconds>> finished(probes.size());
  auto record = [&] {
    for (std::size_t i = 0; i < probes.size(); ++i) {
      if (!finished[i] && probes[i].done()) {
        finished[i] = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      }
    }
  };
  record();
  std::vector<pollfd> fds(probes.size());
  while (std::ranges::any_of(probes, [](const auto &probe) { return !probe.done(); })) {
    auto next = Clock::time_point::max();
    for (std::size_t i = 0; i < probes.size(); ++i) {
      // poll() skips negative fds; a probe waiting only for its tick is
      // left out, so that a hung-up socket cannot spin the loop.
      const bool watch = !probes[i].done() && probes[i].fd() >= 0 && probes[i].events() != 0;
      fds[i] = {watch ? probes[i].fd() : -1, watch ? probes[i].events() : short{0}, 0};
      if (!probes[i].done()) {
        next = std::min(next, probes[i].nextTick());
      }
    }
    const auto wait = std::chrono::ceil<milliseconds>(next - Clock::now()).count();
    const int timeoutMs = static_cast<int>(std::clamp<milliseconds::rep>(wait, 0, 1000));
    const int ready = poll(fds.data(), fds.size(), timeoutMs);
    if (ready < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    for (std::size_t i = 0; i < probes.size(); ++i) {
      if (ready > 0 && fds[i].fd >= 0 && fds[i].revents != 0) {
        probes[i].service(fds[i].revents);
      }
      probes[i].tick(Clock::now());
    }
    record();
  }
  std::vector<ProbeOutcome> out;
  out.reserve(probes.size());
  for (std::size_t i = 0; i < probes.size(); ++i) {
    out.push_back({probes[i].request(), probes[i].result(), finished[i].value_or(milliseconds{0})});
  }
  return out;
}

std::string_view errorKind(std::string_view error) {
  // The words are iscsi_discovery.cpp's and libiscsi's (strerror) messages.
  if (error.find(" did not answer within ") != std::string_view::npos) {
    return "timeout";
  }
  if (error.find("Connection refused") != std::string_view::npos) {
    return "refused";
  }
  if (error.find("discovery login failed") != std::string_view::npos) {
    return "login";
  }
  if (error.find("unreachable") != std::string_view::npos ||
      error.find("No route to host") != std::string_view::npos) {
    return "unreachable";
  }
  if (error.find("network interface") != std::string_view::npos &&
      error.find("does not exist") != std::string_view::npos) {
    return "no-nic";
  }
  return "error";
}

std::size_t DiscoverReport::failedProbes() const {
  return static_cast<std::size_t>(
      std::ranges::count_if(probes, [](const ProbeOutcome &probe) { return !probe.result; }));
}

int DiscoverReport::exitStatus() const {
  return failedProbes() == 0 && missing.empty() && notLoggedIn.empty() ? 0 : 2;
}

void compareWithKernel(DiscoverReport &report, std::span<const KernelSession> sessions) {
  std::vector<selector::DiscoveredTarget> discovered;
  for (const auto &probe : report.probes) {
    if (probe.result) {
      discovered.insert(discovered.end(), probe.result->targets.begin(),
                        probe.result->targets.end());
    }
  }
  // A session in any state covers its path: one in recovery is a down path
  // (reported below and by plan), not one that a login would add.
  std::vector<selector::Path> kernel;
  for (const auto &session : sessions) {
    kernel.push_back(session.path);
    if (session.state != "LOGGED_IN") {
      report.notLoggedIn.push_back(session);
    }
  }
  report.missing = selector::findMissingPaths(discovered, kernel);
}

std::string discoverToText(const DiscoverReport &report) {
  std::string out;
  const auto &set = report.probeSet;
  const bool unbound = set.nics.size() == 1 && set.nics.front().empty();
  out += fmt::format("Probing {} portal{} from {} as {}, timeout {} ms\n", set.portals.size(),
                     set.portals.size() == 1 ? "" : "s",
                     unbound ? std::string("the routed NIC")
                             : fmt::format("{} NIC{} ({})", set.nics.size(),
                                           set.nics.size() == 1 ? "" : "s", set.nicSource),
                     report.initiatorName, report.timeout.count());
  for (const auto &probe : report.probes) {
    const std::string head =
        nicLabel(probe.request.netdev) + " -> " + hostPort(probe.request.portal);
    if (!probe.result) {
      out += fmt::format("{}: FAILED ({}) after {} ms: {}\n", head, errorKind(probe.result.error()),
                         probe.elapsed.count(), probe.result.error());
      continue;
    }
    const auto targets = targetPortals(*probe.result);
    out += fmt::format("{}: OK, {} target{} ({} ms)\n", head, targets.size(),
                       targets.size() == 1 ? "" : "s", probe.elapsed.count());
    for (const auto &[name, portals] : targets) {
      out += fmt::format("    {} -> {}\n", name, fmt::join(portals, ", "));
    }
    for (const auto &rejected : probe.result->rejected) {
      out += "    rejected: " + rejected + "\n";
    }
    for (const auto &warning : probe.result->warnings) {
      out += "    warning: " + warning + "\n";
    }
  }
  out += "\n";
  out += report.missing.empty() ? "Expected but missing paths: none\n"
                                : "Expected but missing paths:\n";
  for (const auto &path : report.missing) {
    out += "    " + path.str() + "\n";
  }
  out += report.notLoggedIn.empty() ? "Kernel sessions not logged in: none\n"
                                    : "Kernel sessions not logged in:\n";
  for (const auto &session : report.notLoggedIn) {
    out += fmt::format("    {} ({}): {}\n", session.name, session.state, sessionLine(session));
  }
  out +=
      fmt::format("Summary: {} probe{}, {} failed; {} target{} found; {} missing path{}; {} "
                  "session{} not logged in\n",
                  report.probes.size(), report.probes.size() == 1 ? "" : "s", report.failedProbes(),
                  distinctTargets(report), distinctTargets(report) == 1 ? "" : "s",
                  report.missing.size(), report.missing.size() == 1 ? "" : "s",
                  report.notLoggedIn.size(), report.notLoggedIn.size() == 1 ? "" : "s");
  return out;
}

std::string discoverToJson(const DiscoverReport &report) {
  auto nicJson = [](const std::string &nic) { return nic.empty() ? json(nullptr) : json(nic); };
  json probes = json::array();
  for (const auto &probe : report.probes) {
    json entry{{"nic", nicJson(probe.request.netdev)},
               {"portal", hostPort(probe.request.portal)},
               {"ok", probe.result.has_value()},
               {"elapsed_ms", probe.elapsed.count()}};
    json targets = json::array();
    if (probe.result) {
      for (const auto &[name, portals] : targetPortals(*probe.result)) {
        targets.push_back(json{{"target", name}, {"portals", portals}});
      }
      entry["error"] = nullptr;
      entry["error_kind"] = nullptr;
      entry["rejected"] = probe.result->rejected;
      entry["warnings"] = probe.result->warnings;
    } else {
      entry["error"] = probe.result.error();
      entry["error_kind"] = errorKind(probe.result.error());
      entry["rejected"] = json::array();
      entry["warnings"] = json::array();
    }
    entry["targets"] = std::move(targets);
    probes.push_back(std::move(entry));
  }
  json missing = json::array();
  for (const auto &path : report.missing) {
    missing.push_back(json{
        {"target", path.targetIqn}, {"portal", path.portal.str()}, {"nic", nicJson(path.netdev)}});
  }
  json notLoggedIn = json::array();
  for (const auto &session : report.notLoggedIn) {
    notLoggedIn.push_back(json{{"session", session.name},
                               {"state", session.state},
                               {"target", session.path.targetIqn},
                               {"portal", session.path.portal.str()},
                               {"nic", nicJson(session.path.netdev)}});
  }
  json portals = json::array();
  for (const auto &portal : report.probeSet.portals) {
    portals.push_back(hostPort(portal));
  }
  json nics = json::array();
  for (const auto &nic : report.probeSet.nics) {
    nics.push_back(nicJson(nic));
  }
  json document{
      {"schema", 1},
      {"initiator_name", report.initiatorName},
      {"timeout_ms", report.timeout.count()},
      {"portals", std::move(portals)},
      {"nics", std::move(nics)},
      {"nic_source", report.probeSet.nicSource},
      {"probes", std::move(probes)},
      {"missing_paths", std::move(missing)},
      {"sessions_not_logged_in", std::move(notLoggedIn)},
      {"warnings", report.warnings},
      {"summary", json{{"probes", report.probes.size()},
                       {"failed", report.failedProbes()},
                       {"targets", distinctTargets(report)},
                       {"missing", report.missing.size()},
                       {"not_logged_in", report.notLoggedIn.size()}}},
      {"exit_status", report.exitStatus()},
  };
  return document.dump(2) + "\n";
}

} // namespace pathkeeper::ctl
