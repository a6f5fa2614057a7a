#pragma once

// Reading pathkeeper.conf and its drop-ins from disk. The parsing itself is
// pure (selector/config.hpp); this is the only place that touches the files,
// so tests point it at a temporary directory.

#include "config.hpp"
#include "expected.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace pathkeeper::daemon {

/// @brief Where the daemon reads its configuration unless told otherwise.
inline constexpr std::string_view kDefaultConfigFile = "/etc/pathkeeper/pathkeeper.conf";
/// @brief Drop-ins: every *.conf in here, in lexical order, after the main file.
inline constexpr std::string_view kDefaultDropInDir = "/etc/pathkeeper/pathkeeper.conf.d";

/// @brief Reads one whole config file; the error names the file and the reason.
Expected<std::string> readConfigFile(const std::filesystem::path &file);

/// @brief Built-ins, then @p mainFile, then the *.conf files in @p dropInDir in
/// lexical order, each merged over the previous layers, then validated.
/// A missing main file or drop-in directory means "nothing to add"; anything
/// that exists but cannot be read is an error naming the file.
Expected<selector::Config> loadConfig(const std::filesystem::path &mainFile,
                                      const std::filesystem::path &dropInDir);

} // namespace pathkeeper::daemon
