#include "doctor.hpp"

#include "config.hpp"
#include "net_netlink.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <set>
#include <system_error>

namespace pathkeeper::ctl {

namespace {

using nlohmann::json;

std::string hostPort(const selector::Portal &portal) {
  const bool v6 = portal.address.find(':') != std::string::npos;
  return (v6 ? "[" + portal.address + "]" : portal.address) + ":" + std::to_string(portal.port);
}

/// The NICs worth showing: the bound ones with their bonds' masters and
/// slaves; with no bindings, every NIC with an address (not lo).
std::vector<const daemon::Nic *> relevantNics(const DoctorReport &report) {
  std::set<std::string> names;
  for (const auto &binding : report.bindings) {
    if (!binding.nic.empty()) {
      names.insert(binding.nic);
    }
  }
  for (const auto &finding : report.findings) {
    names.insert(finding.nics.begin(), finding.nics.end());
  }
  const bool all = names.empty();
  std::vector<const daemon::Nic *> nics;
  for (const auto &nic : report.snapshot.nics) {
    const bool wanted =
        all ? (nic.name != "lo" && !nic.addresses.empty())
            : names.contains(nic.name) || names.contains(nic.master) ||
                  (nic.bond &&
                   std::any_of(nic.bond->slaves.begin(), nic.bond->slaves.end(),
                               [&](const std::string &slave) { return names.contains(slave); }));
    if (wanted) {
      nics.push_back(&nic);
    }
  }
  return nics;
}

std::string sysctlText(std::optional<int> value) {
  return value ? std::to_string(*value) : std::string("?");
}

json optionalJson(std::optional<int> value) {
  return value ? json(*value) : json(nullptr);
}

std::string tableName(std::uint32_t table) {
  switch (table) {
  case 253:
    return "default";
  case 254:
    return "main";
  case 255:
    return "local";
  default:
    return std::to_string(table);
  }
}

std::string lookupQuestion(const daemon::RouteLookup &lookup) {
  std::string text = lookup.destination;
  if (!lookup.source.empty()) {
    text += " from " + lookup.source;
  }
  if (!lookup.oif.empty()) {
    text += " oif " + lookup.oif;
  }
  return text;
}

} // namespace

Expected<DoctorOptions> parseDoctorOptions(const std::vector<std::string> &args, std::size_t i) {
  DoctorOptions options;
  for (; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    if (arg == "--fix-script") {
      options.fixScript = true;
      continue;
    }
    if (arg != "--nic" && arg != "--portal" && arg != "--sysfs-root" && arg != "--iscsi-dir") {
      return fail("unknown option '" + arg + "' for doctor");
    }
    if (i + 1 >= args.size()) {
      return fail(arg + " needs a value");
    }
    const std::string &value = args[++i];
    if (arg == "--nic") {
      if (value.empty() || value.size() > 15 || value.find('/') != std::string::npos) {
        return fail("--nic: '" + value + "' is not an interface name");
      }
      options.nics.push_back(value);
    } else if (arg == "--portal") {
      auto portal = selector::parsePortal(value);
      if (!portal) {
        return fail("--portal: " + portal.error());
      }
      options.portals.push_back(*std::move(portal));
    } else if (arg == "--sysfs-root") {
      options.sysfsRoot = value;
    } else {
      options.iscsiDir = value;
    }
  }
  if (options.json && options.fixScript) {
    return fail("--json and --fix-script are two output formats; give one");
  }
  return options;
}

std::vector<daemon::Binding> chooseBindings(const DoctorOptions &options,
                                            const std::vector<daemon::Binding> &known,
                                            std::vector<std::string> &warnings) {
  if (options.nics.empty() && options.portals.empty()) {
    return daemon::mergeBindings(known);
  }
  std::vector<std::string> nics = options.nics;
  std::vector<selector::Portal> portals = options.portals;
  if (nics.empty()) {
    for (const auto &binding : known) {
      if (!binding.nic.empty() && std::find(nics.begin(), nics.end(), binding.nic) == nics.end()) {
        nics.push_back(binding.nic);
      }
    }
    if (nics.empty()) {
      warnings.push_back("no session or iface record names a NIC; give --nic");
    }
  }
  if (portals.empty()) {
    for (const auto &binding : known) {
      if (std::none_of(portals.begin(), portals.end(), [&](const selector::Portal &p) {
            return p.address == binding.portal.address && p.port == binding.portal.port;
          })) {
        portals.push_back(binding.portal);
      }
    }
    if (portals.empty()) {
      warnings.push_back("no session or node record names a portal; give --portal");
    }
  }
  std::vector<daemon::Binding> bindings;
  for (const auto &nic : nics) {
    for (const auto &portal : portals) {
      daemon::Binding binding;
      binding.nic = nic;
      binding.portal = portal;
      binding.origins.emplace_back(options.nics.empty() ? "--portal" : "--nic");
      // Keep what the kernel knows about this pair: its paths and maps.
      for (const auto &k : known) {
        if (k.nic == nic && k.portal.address == portal.address && k.portal.port == portal.port) {
          binding.source = k.source;
          binding.boundByDevice = k.boundByDevice;
          binding.paths.insert(binding.paths.end(), k.paths.begin(), k.paths.end());
          binding.maps.insert(binding.maps.end(), k.maps.begin(), k.maps.end());
        }
      }
      bindings.push_back(std::move(binding));
    }
  }
  return daemon::mergeBindings(std::move(bindings));
}

int DoctorReport::exitStatus() const {
  auto worst = daemon::worstSeverity(findings);
  return worst && *worst >= daemon::Severity::Warning ? kDoctorFindingsStatus : 0;
}

std::string doctorToText(const DoctorReport &report) {
  std::string out;
  out += "Bindings checked:\n";
  if (report.bindings.empty()) {
    out += "  none (no sessions or records, and no --nic/--portal): subnet checks only\n";
  }
  for (const auto &binding : report.bindings) {
    out += fmt::format(
        "  {} {} -> {} ({}{}){}\n", binding.nic.empty() ? "(any NIC)" : binding.nic,
        binding.source.empty() ? "(no source)" : binding.source, hostPort(binding.portal),
        fmt::join(binding.origins, ", "), binding.boundByDevice ? "" : "; bound by address only",
        binding.paths.empty() ? std::string{}
                              : fmt::format(" paths {}", fmt::join(binding.paths, " ")));
  }
  out += "NICs:\n";
  for (const daemon::Nic *nic : relevantNics(report)) {
    std::vector<std::string> addresses;
    for (const auto &address : nic->addresses) {
      addresses.push_back(fmt::format("{}/{}", address.address, address.prefixLength));
    }
    out +=
        fmt::format("  {} {} {} mtu {} {} arp_ignore {} arp_announce {} rp_filter {}", nic->name,
                    nic->operstate.empty() ? "?" : nic->operstate,
                    nic->speedMbps ? fmt::format("{} Mb/s", *nic->speedMbps) : "speed ?",
                    nic->mtu ? std::to_string(*nic->mtu) : "?",
                    addresses.empty() ? "no address" : fmt::format("{}", fmt::join(addresses, " ")),
                    sysctlText(nic->sysctls.arpIgnore), sysctlText(nic->sysctls.arpAnnounce),
                    sysctlText(nic->sysctls.rpFilter));
    if (nic->bond) {
      out += fmt::format(" bond {} slaves {}", nic->bond->mode.empty() ? "?" : nic->bond->mode,
                         nic->bond->slaves.empty()
                             ? "none"
                             : fmt::format("{}", fmt::join(nic->bond->slaves, ",")));
    }
    if (!nic->master.empty()) {
      out += " master " + nic->master;
    }
    out += "\n";
  }
  out += fmt::format("  (all: arp_ignore {} arp_announce {} rp_filter {})\n",
                     sysctlText(report.snapshot.all.arpIgnore),
                     sysctlText(report.snapshot.all.arpAnnounce),
                     sysctlText(report.snapshot.all.rpFilter));
  if (!report.snapshot.routes.empty()) {
    out += "Routes (as `ip route get`):\n";
  }
  for (const auto &lookup : report.snapshot.routes) {
    if (!lookup.error.empty()) {
      out += fmt::format("  {}: {}\n", lookupQuestion(lookup), lookup.error);
    } else {
      out += fmt::format("  {}: dev {}{}{} table {}\n", lookupQuestion(lookup), lookup.egress,
                         lookup.gateway.empty() ? "" : " via " + lookup.gateway,
                         lookup.preferredSource.empty() ? "" : " src " + lookup.preferredSource,
                         tableName(lookup.table));
    }
  }
  std::size_t counts[3] = {0, 0, 0};
  for (const auto &finding : report.findings) {
    ++counts[static_cast<int>(finding.severity)];
  }
  out += fmt::format("\nFindings: {} ({} error, {} warning, {} info)\n", report.findings.size(),
                     counts[2], counts[1], counts[0]);
  if (report.findings.empty()) {
    out += report.bindings.empty()
               ? "No findings.\n"
               : "No findings: the network is set up for per-NIC iSCSI binding.\n";
  }
  for (const auto &finding : report.findings) {
    out += fmt::format("\n[{}] {}: {}\n", daemon::toString(finding.severity), finding.id,
                       finding.summary);
    out += fmt::format("  NICs: {}", fmt::join(finding.nics, ", "));
    if (!finding.portals.empty()) {
      out += fmt::format("; portals: {}", fmt::join(finding.portals, ", "));
    }
    if (!finding.paths.empty()) {
      out += fmt::format("; paths: {}", fmt::join(finding.paths, ", "));
    }
    out += "\n  " + finding.explanation + "\n";
    if (!finding.fix.empty()) {
      out += "  Fix:\n";
      for (const auto &step : finding.fix) {
        out += "    " + step.command + "\n";
      }
    }
    for (const auto &note : finding.notes) {
      out += "  Note: " + note + "\n";
    }
  }
  if (std::any_of(report.findings.begin(), report.findings.end(),
                  [](const daemon::Finding &f) { return !f.fix.empty(); })) {
    out += "\n`pathkeeperctl doctor --fix-script` prints these fixes as a script.\n";
  }
  return out;
}

std::string doctorToJson(const DoctorReport &report) {
  json bindings = json::array();
  for (const auto &binding : report.bindings) {
    bindings.push_back(
        json{{"nic", binding.nic.empty() ? json(nullptr) : json(binding.nic)},
             {"source", binding.source.empty() ? json(nullptr) : json(binding.source)},
             {"portal", hostPort(binding.portal)},
             {"bound_by_device", binding.boundByDevice},
             {"paths", binding.paths},
             {"maps", binding.maps},
             {"origins", binding.origins}});
  }
  json nics = json::array();
  for (const daemon::Nic *nic : relevantNics(report)) {
    json addresses = json::array();
    for (const auto &address : nic->addresses) {
      addresses.push_back(fmt::format("{}/{}", address.address, address.prefixLength));
    }
    json bond = nullptr;
    if (nic->bond) {
      bond = json{{"mode", nic->bond->mode}, {"slaves", nic->bond->slaves}};
    }
    nics.push_back(json{
        {"name", nic->name},
        {"ifindex", nic->ifindex},
        {"operstate", nic->operstate},
        {"speed_mbps", nic->speedMbps ? json(*nic->speedMbps) : json(nullptr)},
        {"mtu", nic->mtu ? json(*nic->mtu) : json(nullptr)},
        {"addresses", addresses},
        {"master", nic->master.empty() ? json(nullptr) : json(nic->master)},
        {"bond", bond},
        {"sysctls", json{{"arp_ignore", optionalJson(nic->sysctls.arpIgnore)},
                         {"arp_announce", optionalJson(nic->sysctls.arpAnnounce)},
                         {"rp_filter", optionalJson(nic->sysctls.rpFilter)}}},
    });
  }
  json routes = json::array();
  for (const auto &lookup : report.snapshot.routes) {
    auto orNull = [](const std::string &text) { return text.empty() ? json(nullptr) : json(text); };
    routes.push_back(json{{"destination", lookup.destination},
                          {"source", orNull(lookup.source)},
                          {"oif", orNull(lookup.oif)},
                          {"error", orNull(lookup.error)},
                          {"egress", orNull(lookup.egress)},
                          {"preferred_source", orNull(lookup.preferredSource)},
                          {"gateway", orNull(lookup.gateway)},
                          {"table", lookup.error.empty() ? json(lookup.table) : json(nullptr)}});
  }
  json findings = json::array();
  for (const auto &finding : report.findings) {
    json fix = json::array();
    for (const auto &step : finding.fix) {
      fix.push_back(
          json{{"command", step.command},
               {"done_test", step.doneTest.empty() ? json(nullptr) : json(step.doneTest)}});
    }
    findings.push_back(json{{"id", finding.id},
                            {"severity", daemon::toString(finding.severity)},
                            {"summary", finding.summary},
                            {"explanation", finding.explanation},
                            {"nics", finding.nics},
                            {"portals", finding.portals},
                            {"paths", finding.paths},
                            {"fix", fix},
                            {"notes", finding.notes}});
  }
  auto worst = daemon::worstSeverity(report.findings);
  json document{
      {"schema", 1},
      {"bindings", bindings},
      {"nics", nics},
      {"all_sysctls", json{{"arp_ignore", optionalJson(report.snapshot.all.arpIgnore)},
                           {"arp_announce", optionalJson(report.snapshot.all.arpAnnounce)},
                           {"rp_filter", optionalJson(report.snapshot.all.rpFilter)}}},
      {"routes", routes},
      {"findings", findings},
      {"worst", worst ? json(daemon::toString(*worst)) : json(nullptr)},
      {"warnings", report.warnings},
  };
  return document.dump(2) + "\n";
}

int runDoctor(const DoctorOptions &options) {
  DoctorReport report;
  std::vector<daemon::Binding> known;
  auto inventory = daemon::SysfsInventory(options.sysfsRoot).scan();
  if (!inventory) {
    std::cerr << "pathkeeperctl: " << inventory.error() << "\n";
    return 1;
  }
  known = daemon::bindingsFromSessions(*inventory);
  const auto records = daemon::readIscsiRecords(options.iscsiDir);
  report.warnings = records.warnings;
  const auto nicOf = [&options](std::string_view address) {
    return daemon::nicWithHardwareAddress(options.sysfsRoot, address);
  };
  for (auto &binding : daemon::bindingsFromRecords(records, nicOf, &report.warnings)) {
    known.push_back(std::move(binding));
  }
  auto chosen = chooseBindings(options, known, report.warnings);
  try {
    const daemon::NetworkChecker checker(options.sysfsRoot, options.procRoot);
    report.snapshot = checker.snapshot(chosen);
  } catch (const std::system_error &error) {
    std::cerr << "pathkeeperctl: reading the network state: " << error.what() << "\n";
    return 1;
  }
  for (const auto &binding : chosen) {
    report.bindings.push_back(daemon::resolveBinding(report.snapshot, binding));
  }
  report.findings = daemon::analyse(report.snapshot, report.bindings);
  if (options.fixScript) {
    std::cout << daemon::renderFixScript(report.findings);
  } else if (options.json) {
    std::cout << doctorToJson(report);
  } else {
    for (const auto &warning : report.warnings) {
      std::cerr << "pathkeeperctl: warning: " << warning << "\n";
    }
    std::cout << doctorToText(report);
  }
  return report.exitStatus();
}

} // namespace pathkeeper::ctl
