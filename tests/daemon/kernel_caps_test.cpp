#include "kernel_caps.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace pathkeeper::daemon {
namespace {

class KernelCaps : public ::testing::Test {
protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("pk-kcaps-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "sys/module");
    std::filesystem::create_directories(root_ / "lib/modules/6.1.0-test");
    roots_ = {root_ / "sys", root_ / "lib/modules", "6.1.0-test"};
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void write(const std::filesystem::path &file, const std::string &text) {
    std::ofstream(root_ / file) << text;
  }

  std::filesystem::path root_;
  KernelProbeRoots roots_;
};

TEST_F(KernelCaps, FindsALoadedModuleInSysfs) {
  std::filesystem::create_directories(root_ / "sys/module/dm_historical_service_time");
  EXPECT_TRUE(probeKernel(roots_).historicalServiceTime);
}

TEST_F(KernelCaps, FindsAnInstalledModuleInModulesDep) {
  write("lib/modules/6.1.0-test/modules.dep",
        "kernel/drivers/md/dm-service-time.ko: kernel/drivers/md/dm-multipath.ko\n"
        "kernel/drivers/md/dm-historical-service-time.ko.xz: kernel/drivers/md/dm-multipath.ko\n");
  EXPECT_TRUE(probeKernel(roots_).historicalServiceTime);
}

TEST_F(KernelCaps, FindsABuiltInModule) {
  write("lib/modules/6.1.0-test/modules.builtin",
        "kernel/drivers/md/dm-historical-service-time.ko\n");
  EXPECT_TRUE(probeKernel(roots_).historicalServiceTime);
}

TEST_F(KernelCaps, ReportsAbsentWhenNowhereToBeFound) {
  write("lib/modules/6.1.0-test/modules.dep",
        "kernel/drivers/md/dm-service-time.ko: kernel/drivers/md/dm-multipath.ko\n");
  EXPECT_FALSE(probeKernel(roots_).historicalServiceTime);
  EXPECT_TRUE(kernelOffersModule(roots_, "dm-service-time"));
  EXPECT_FALSE(kernelOffersModule(roots_, "dm-service"));
}

} // namespace
} // namespace pathkeeper::daemon
