#include "log.hpp"

#include <cstdio>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pathkeeper::daemon::log {
namespace {

TEST(Log, StderrLineCarriesTheLevelMessageAndNonEmptyFields) {
  EXPECT_EQ(formatLine(Level::Warning, "path sdb failed",
                       {{"PATH", "sdb"}, {"MAP", "xserve-upper"}, {"PORTAL", ""}}),
            "warning: path sdb failed (PATH=sdb MAP=xserve-upper)");
}

TEST(Log, StderrLineWithoutFieldsHasNoParentheses) {
  EXPECT_EQ(formatLine(Level::Info, "ready", {}), "info: ready");
}

TEST(Log, JournalStreamIsRecognisedOnlyForTheSameFile) {
  char name[] = "/tmp/pk-log-XXXXXX";
  int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  std::string stream = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  EXPECT_TRUE(isJournalStream(stream, fd));
  EXPECT_FALSE(
      isJournalStream(std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1), fd));
  EXPECT_FALSE(isJournalStream("", fd));
  close(fd);
  unlink(name);
}

TEST(Log, MessageIdsAreDistinct128BitHex) {
  const std::string_view ids[] = {id::kPathFailed,       id::kPathReinstated, id::kPathShaky,
                                  id::kMapCreated,       id::kMapReloaded,    id::kConfigRejected,
                                  id::kAdaptiveDecision, id::kNetworkFinding};
  for (std::size_t i = 0; i < std::size(ids); ++i) {
    EXPECT_EQ(ids[i].size(), 32U);
    EXPECT_EQ(ids[i].find_first_not_of("0123456789abcdef"), std::string_view::npos);
    for (std::size_t j = i + 1; j < std::size(ids); ++j) {
      EXPECT_NE(ids[i], ids[j]);
    }
  }
}

} // namespace
} // namespace pathkeeper::daemon::log
