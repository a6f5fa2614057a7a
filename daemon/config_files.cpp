#include "config_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

namespace pathkeeper::daemon {

namespace {

// A config file is a few kilobytes; anything far larger is a mistake (a log
// or an image dropped into pathkeeper.conf.d) and must not eat memory.
constexpr std::uintmax_t maxConfigBytes = std::uintmax_t{1024} * 1024;

std::string reason(const std::error_code &error) {
  return error.message();
}

} // namespace

Expected<std::string> readConfigFile(const std::filesystem::path &file) {
  std::error_code error;
  auto status = std::filesystem::status(file, error);
  if (error) {
    return fail(file.string() + ": cannot read: " + reason(error));
  }
  if (!std::filesystem::is_regular_file(status)) {
    return fail(file.string() + ": cannot read: not a regular file");
  }
  auto size = std::filesystem::file_size(file, error);
  if (!error && size > maxConfigBytes) {
    return fail(file.string() + ": cannot read: larger than " + std::to_string(maxConfigBytes) +
                " bytes");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return fail(file.string() + ": cannot read: " + std::strerror(errno));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return fail(file.string() + ": cannot read: " + std::strerror(errno));
  }
  return text;
}

Expected<selector::Config> loadConfig(const std::filesystem::path &mainFile,
                                      const std::filesystem::path &dropInDir) {
  selector::Config config = selector::builtinConfig();

  auto layer = [&config](const std::filesystem::path &file) -> Expected<void> {
    auto text = readConfigFile(file);
    if (!text) {
      return fail(text.error());
    }
    auto merged = selector::parseConfig(*text, file.string(), std::move(config));
    if (!merged) {
      return fail(merged.error());
    }
    config = std::move(*merged);
    return {};
  };

  std::error_code error;
  // symlink_status, so that a dangling symlink counts as present and then
  // fails to read: it is a broken setup, not "no config here".
  auto mainStatus = std::filesystem::symlink_status(mainFile, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    return fail(mainFile.string() + ": cannot read: " + reason(error));
  }
  if (std::filesystem::exists(mainStatus)) {
    if (auto applied = layer(mainFile); !applied) {
      return fail(applied.error());
    }
  }

  auto dirStatus = std::filesystem::status(dropInDir, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    return fail(dropInDir.string() + ": cannot read: " + reason(error));
  }
  if (std::filesystem::exists(dirStatus)) {
    if (!std::filesystem::is_directory(dirStatus)) {
      return fail(dropInDir.string() + ": cannot read: not a directory");
    }
    std::vector<std::filesystem::path> dropIns;
    // The error_code overloads throughout: a directory that vanishes or
    // turns unreadable mid-scan is an error message, not an exception.
    std::filesystem::directory_iterator entries(dropInDir, error);
    for (; !error && entries != std::filesystem::directory_iterator(); entries.increment(error)) {
      if (entries->path().extension() == ".conf") {
        dropIns.push_back(entries->path());
      }
    }
    if (error) {
      return fail(dropInDir.string() + ": cannot read: " + reason(error));
    }
    // Lexical order of the file names, as systemd and sysctl.d do, so that
    // "10-site.conf" comes before "50-host.conf" whatever readdir says.
    std::ranges::sort(dropIns, {}, [](const auto &path) { return path.filename().string(); });
    for (const auto &file : dropIns) {
      if (auto applied = layer(file); !applied) {
        return fail(applied.error());
      }
    }
  }

  if (auto valid = selector::validateConfig(config); !valid) {
    return fail(valid.error());
  }
  return config;
}

} // namespace pathkeeper::daemon
