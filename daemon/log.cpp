#include "log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

namespace pathkeeper::daemon::log {
namespace {

std::atomic<Target> gTarget{Target::Auto};
std::atomic<Level> gMaxLevel{Level::Info};
std::mutex gStderrMutex;

std::string_view levelName(Level level) {
  switch (level) {
  case Level::Error:
    return "error";
  case Level::Warning:
    return "warning";
  case Level::Notice:
    return "notice";
  case Level::Info:
    return "info";
  case Level::Debug:
    return "debug";
  }
  return "info";
}

Target resolve(Target target) {
  if (target != Target::Auto) {
    return target;
  }
  const char *stream = std::getenv("JOURNAL_STREAM");
  return stream != nullptr && isJournalStream(stream, STDERR_FILENO) ? Target::Journal
                                                                     : Target::Stderr;
}

} // namespace

void configure(Target target, Level maxLevel) {
  gTarget = resolve(target);
  gMaxLevel = maxLevel;
}

Target effectiveTarget() {
  Target target = gTarget.load();
  if (target == Target::Auto) {
    target = resolve(target);
    gTarget = target;
  }
  return target;
}

bool isJournalStream(std::string_view journalStream, int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return false;
  }
  return journalStream == fmt::format("{}:{}", st.st_dev, st.st_ino);
}

std::string formatLine(Level level, std::string_view message, std::initializer_list<Field> fields) {
  std::string line = fmt::format("{}: {}", levelName(level), message);
  bool first = true;
  for (const Field &field : fields) {
    if (field.value.empty()) {
      continue;
    }
    line += first ? " (" : " ";
    line += fmt::format("{}={}", field.name, field.value);
    first = false;
  }
  if (!first) {
    line += ')';
  }
  return line;
}

void write(Level level, std::string_view message, std::initializer_list<Field> fields,
           std::string_view messageId) {
  if (static_cast<int>(level) > static_cast<int>(gMaxLevel.load())) {
    return;
  }
  if (effectiveTarget() == Target::Journal) {
    std::vector<std::string> items;
    items.reserve(fields.size() + 4);
    items.push_back(fmt::format("MESSAGE={}", message));
    items.push_back(fmt::format("PRIORITY={}", static_cast<int>(level)));
    items.emplace_back("SYSLOG_IDENTIFIER=pathkeeperd");
    if (!messageId.empty()) {
      items.push_back(fmt::format("MESSAGE_ID={}", messageId));
    }
    for (const Field &field : fields) {
      if (!field.value.empty()) {
        items.push_back(fmt::format("{}={}", field.name, field.value));
      }
    }
    std::vector<iovec> iov;
    iov.reserve(items.size());
    for (std::string &item : items) {
      iov.push_back(iovec{item.data(), item.size()});
    }
    if (sd_journal_sendv(iov.data(), static_cast<int>(iov.size())) >= 0) {
      return;
    }
    // The journal went away: fall through to stderr rather than lose it.
  }
  // Timestamps on stderr, as the journal would add them (wall clock, ms).
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm local{};
  localtime_r(&now.tv_sec, &local);
  std::string line =
      fmt::format("{:02}:{:02}:{:02}.{:03} {}\n", local.tm_hour, local.tm_min, local.tm_sec,
                  now.tv_nsec / 1000000, formatLine(level, message, fields));
  std::lock_guard lock(gStderrMutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

} // namespace pathkeeper::daemon::log
