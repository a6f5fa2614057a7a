#include "config_files.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;
using selector::Config;
using selector::SelectorKind;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Each test gets its own temporary /etc/pathkeeper stand-in.
class ConfigDir : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pathkeeper-config-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    mainFile_ = root_ / "pathkeeper.conf";
    dropInDir_ = root_ / "pathkeeper.conf.d";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  static void write(const fs::path &file, std::string_view text) {
    fs::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    out << text;
    ASSERT_TRUE(out.good()) << file;
  }
  void writeDropIn(std::string_view name, std::string_view text) { write(dropInDir_ / name, text); }
  Expected<Config> load() { return loadConfig(mainFile_, dropInDir_); }

  fs::path root_;
  fs::path mainFile_;
  fs::path dropInDir_;
};

class LoadConfig : public ConfigDir {};
class ReadConfigFile : public ConfigDir {};

TEST_F(LoadConfig, MissingFilesGiveTheBuiltinConfig) {
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  EXPECT_EQ(config->defaults, selector::Defaults{});
  EXPECT_EQ(config->devices, selector::builtinDevices());
}

TEST_F(LoadConfig, ReadsTheMainFileAndNamesItInOrigins) {
  write(mainFile_, "[[controller]]\nportal = \"10.10.1.20\"\nlabel = \"upper\"\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  ASSERT_EQ(config->controllers.size(), 1U);
  EXPECT_EQ(config->controllers[0].origin, mainFile_.string() + ":1:1");
}

TEST_F(LoadConfig, AppliesDropInsInLexicalOrderAfterTheMainFile) {
  write(mainFile_, "[defaults]\nselector = \"round-robin\"\ngrouping = \"failover\"\n");
  // Written out of order so that readdir order cannot make the test pass.
  writeDropIn("20-late.conf", "[defaults]\nselector = \"queue-length\"\n");
  writeDropIn("10-early.conf", "[defaults]\nselector = \"historical-service-time\"\n"
                               "mode = \"owner\"\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  EXPECT_EQ(config->defaults.selector, SelectorKind::QueueLength);
  EXPECT_EQ(config->defaults.grouping, selector::GroupingPolicy::Failover);
  EXPECT_EQ(config->defaults.mode, selector::Mode::Owner);
}

TEST_F(LoadConfig, DropInControllerRulesBeatTheMainFile) {
  write(mainFile_, "[[controller]]\nportal = \"10.10.1.20\"\nlabel = \"main\"\n");
  writeDropIn("50-site.conf", "[[controller]]\nportal = \"10.10.1.20\"\nlabel = \"site\"\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  selector::Path path;
  path.portal.address = "10.10.1.20";
  auto rule = selector::controllerFor(*config, path);
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ((*rule)->label, "site");
}

TEST_F(LoadConfig, ReadsOnlyFilesEndingInConf) {
  writeDropIn("README", "not toml at all [");
  writeDropIn("10-x.conf.dpkg-old", "not toml at all [");
  writeDropIn("10-x.conf~", "not toml at all [");
  writeDropIn("10-x.conf", "[health]\nflap_threshold = 4\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  EXPECT_EQ(config->defaults.health.flapThreshold, 4U);
}

TEST_F(LoadConfig, DropInsWorkWithoutAMainFile) {
  writeDropIn("10-x.conf", "[health]\nflap_threshold = 4\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  EXPECT_EQ(config->defaults.health.flapThreshold, 4U);
}

TEST_F(LoadConfig, UnreadableMainFileIsAnErrorNamingIt) {
  // Root reads any mode, so make the main file a directory instead.
  fs::create_directories(mainFile_);
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_EQ(config.error(), mainFile_.string() + ": cannot read: not a regular file");
}

TEST_F(LoadConfig, DanglingSymlinkAsMainFileIsAnError) {
  fs::create_symlink(root_ / "nowhere.conf", mainFile_);
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_THAT(config.error(), StartsWith(mainFile_.string() + ": cannot read: "));
}

TEST_F(LoadConfig, UnreadableDropInIsAnErrorNamingIt) {
  writeDropIn("10-fine.conf", "[health]\nflap_threshold = 4\n");
  fs::create_directories(dropInDir_ / "50-broken.conf");
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_EQ(config.error(),
            (dropInDir_ / "50-broken.conf").string() + ": cannot read: not a regular file");
}

TEST_F(LoadConfig, ParseErrorNamesTheDropInFileLineAndKey) {
  write(mainFile_, "[defaults]\nselector = \"round-robin\"\n");
  writeDropIn("30-typo.conf", "\n[health]\nflap_treshold = 4\n");
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_THAT(config.error(), StartsWith((dropInDir_ / "30-typo.conf").string() +
                                         ":3:1: health.flap_treshold: unknown key"));
}

TEST_F(LoadConfig, DropInDirectoryThatIsAFileIsAnError) {
  write(dropInDir_, "");
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_EQ(config.error(), dropInDir_.string() + ": cannot read: not a directory");
}

TEST_F(LoadConfig, ValidatesTheMergedResultNotEachFile) {
  // Alone, the main file's flap_recovery exceeds the maximum; the drop-in
  // raises the maximum, so the layered config is fine.
  write(mainFile_, "[health]\nflap_recovery = \"20m\"\n");
  EXPECT_FALSE(load().has_value());
  writeDropIn("10-raise.conf", "[health]\nflap_recovery_max = \"1h\"\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
}

TEST_F(LoadConfig, ValidationErrorNamesTheFileThatSetTheValue) {
  writeDropIn("10-x.conf", "[health]\nflap_recovery = \"20m\"\n");
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_THAT(config.error(), StartsWith((dropInDir_ / "10-x.conf").string() +
                                         ":2:17: health.flap_recovery: 20m exceeds"));
}

TEST_F(LoadConfig, DuplicateWwidAcrossFilesUpdatesTheEntry) {
  write(mainFile_, "[[map]]\nwwid = \"3600a\"\nalias = \"old\"\n");
  writeDropIn("10-x.conf", "[[map]]\nwwid = \"3600a\"\nalias = \"new\"\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  ASSERT_EQ(config->maps.size(), 1U);
  EXPECT_EQ(config->maps[0].alias, "new");
}

TEST_F(LoadConfig, UserDevicesComeBeforeBuiltins) {
  write(mainFile_, "[[device]]\nvendor = \"APPLE\"\ngrouping = \"failover\"\n");
  auto config = load();
  ASSERT_TRUE(config.has_value()) << config.error();
  auto device = selector::deviceFor(*config, "APPLE", "Xserve RAID");
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ((*device)->origin, mainFile_.string() + ":1:1");
}

TEST_F(LoadConfig, RefusesAnAbsurdlyLargeFile) {
  write(mainFile_, std::string(2 * 1024 * 1024, '#'));
  auto config = load();
  ASSERT_FALSE(config.has_value());
  EXPECT_THAT(config.error(), HasSubstr(mainFile_.string() + ": cannot read: larger than"));
}

TEST_F(ReadConfigFile, ReturnsTheWholeFileEvenWithNulBytes) {
  write(mainFile_, std::string("x\0y", 3));
  auto text = readConfigFile(mainFile_);
  ASSERT_TRUE(text.has_value()) << text.error();
  EXPECT_EQ(*text, std::string("x\0y", 3));
}

TEST_F(ReadConfigFile, MissingFileIsAnErrorNamingIt) {
  auto text = readConfigFile(mainFile_);
  ASSERT_FALSE(text.has_value());
  EXPECT_THAT(text.error(), StartsWith(mainFile_.string() + ": cannot read: "));
}

} // namespace
} // namespace pathkeeper::daemon
