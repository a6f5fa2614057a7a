#pragma once

// `pathkeeperctl doctor`: the network check, standalone. It gathers the
// bindings (the kernel's sessions and open-iscsi's records, or --nic x
// --portal), takes a snapshot of the kernel's network state, runs the pure
// analysis and prints the findings as text, JSON or a fix script. main.cpp
// only dispatches to runDoctor().

#include "net_iscsi_records.hpp"
#include "netcheck.hpp"
#include "sysfs_inventory.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace pathkeeper::ctl {

/// @brief Exit status when a finding of severity warning or worse was found.
/// 0 means none, 1 a failed read, 2 bad usage.
inline constexpr int kDoctorFindingsStatus = 3;

/// @brief The command line of `doctor`.
struct DoctorOptions {
  std::vector<std::string> nics;
  std::vector<selector::Portal> portals;
  bool json = false;
  bool fixScript = false;
  std::filesystem::path sysfsRoot{"/sys"};
  std::filesystem::path procRoot{"/proc"};
  std::filesystem::path iscsiDir{"/etc/iscsi"};
};

/// @brief Parses doctor's options (args[i..]); an error is a usage message.
Expected<DoctorOptions> parseDoctorOptions(const std::vector<std::string> &args, std::size_t i);

/// @brief Which bindings to check. --nic and --portal together: every pair.
/// Only --nic: those NICs to every known portal. Only --portal: every known
/// bound NIC to those portals. Neither: @p known (sessions and records).
/// @param warnings receives why a requested check has nothing to pair with.
std::vector<daemon::Binding> chooseBindings(const DoctorOptions &options,
                                            const std::vector<daemon::Binding> &known,
                                            std::vector<std::string> &warnings);

/// @brief Everything doctor reports.
struct DoctorReport {
  std::vector<daemon::Binding> bindings; ///< as resolved against the snapshot
  daemon::NetworkSnapshot snapshot;
  std::vector<daemon::Finding> findings;
  std::vector<std::string> warnings;

  /// @brief 0, or kDoctorFindingsStatus when a finding is a warning or worse.
  [[nodiscard]] int exitStatus() const;
};

/// @brief Human-readable report: bindings, NICs, route lookups, findings
/// with explanation and fix.
std::string doctorToText(const DoctorReport &report);

/// @brief JSON (schema 1, documented in the README).
std::string doctorToJson(const DoctorReport &report);

/// @brief Runs doctor for parsed options and prints to stdout/stderr.
/// @return the exit status.
int runDoctor(const DoctorOptions &options);

} // namespace pathkeeper::ctl
