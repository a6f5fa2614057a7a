#include "dm_adapter.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace pathkeeper::daemon {
namespace {

namespace fs = std::filesystem;
using selector::DevT;

class ClearedMapsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pk-cleared-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    file_ = dir_ / "cleared-maps";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  [[nodiscard]] std::string contents() const {
    std::ifstream in(file_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
  fs::path file_;
};

TEST_F(ClearedMapsTest, AMarkIsByNumberAndUuidAndALoadForgetsIt) {
  ClearedMaps marks;
  EXPECT_TRUE(marks.empty());
  marks.mark({253, 2}, "mpath-36001");
  EXPECT_TRUE(marks.contains({253, 2}, "mpath-36001"));
  // The number again, another device (made after a removal): not marked.
  EXPECT_FALSE(marks.contains({253, 2}, "mpath-36002"));
  EXPECT_FALSE(marks.contains({253, 3}, "mpath-36001"));
  marks.forget({253, 2});
  EXPECT_FALSE(marks.contains({253, 2}, "mpath-36001"));
  EXPECT_TRUE(marks.empty());
}

TEST_F(ClearedMapsTest, ARestartKnowsTheClearsOfTheRunBefore) {
  {
    ClearedMaps marks(file_);
    marks.mark({253, 2}, "mpath-36001");
    marks.mark({253, 5}, "mpath-36005");
    marks.forget({253, 5});
  }
  EXPECT_EQ(contents(), "253:2 mpath-36001\n");
  ClearedMaps again(file_);
  EXPECT_TRUE(again.contains({253, 2}, "mpath-36001"));
  EXPECT_FALSE(again.contains({253, 5}, "mpath-36005"));
  // The last mark forgotten: no file left behind.
  again.forget({253, 2});
  EXPECT_FALSE(fs::exists(file_));
}

TEST_F(ClearedMapsTest, UnreadableLinesAreSkipped) {
  std::ofstream(file_) << "253:2 mpath-36001\n"
                          "garbage\n"
                          "0:0 mpath-zero\n"
                          "253:x mpath-bad\n"
                          "253:7 \n"
                          "253:8 mpath-36008";
  ClearedMaps marks(file_);
  EXPECT_TRUE(marks.contains({253, 2}, "mpath-36001"));
  EXPECT_TRUE(marks.contains({253, 8}, "mpath-36008"));
  EXPECT_FALSE(marks.contains({0, 0}, "mpath-zero"));
  marks.forget({253, 2});
  marks.forget({253, 8});
  EXPECT_TRUE(marks.empty());
}

TEST_F(ClearedMapsTest, NoFileWithoutAPathAndAMissingFileIsNoMark) {
  ClearedMaps fresh(dir_ / "absent");
  EXPECT_TRUE(fresh.empty());
  ClearedMaps memoryOnly;
  memoryOnly.mark({253, 1}, "mpath-1");
  EXPECT_FALSE(fs::exists(dir_ / "absent"));
}

} // namespace
} // namespace pathkeeper::daemon
