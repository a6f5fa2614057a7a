#include "method_checks.hpp"

#include "bus_names.hpp"
#include "sample_state.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::dbus {
namespace {

TEST(DbusMethodChecks, UnknownPathIsNotFound) {
  const auto s = sample::sampleSnapshot();
  EXPECT_FALSE(checkPathExists(s, "sdb"));
  auto error = checkPathExists(s, "sdx");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->name, kErrorNotFound);
  EXPECT_NE(error->message.find("'sdx'"), std::string::npos) << error->message;
}

TEST(DbusMethodChecks, GroupMustExistInTheMap) {
  const auto s = sample::sampleSnapshot();
  EXPECT_FALSE(checkGroup(s, "xserve-lower", 2));
  EXPECT_EQ(checkGroup(s, "nomap", 1)->name, kErrorNotFound);
  auto zero = checkGroup(s, "xserve-lower", 0);
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->name, kErrorInvalidArgument);
  auto three = checkGroup(s, "xserve-lower", 3);
  ASSERT_TRUE(three);
  EXPECT_EQ(three->message, "map 'xserve-lower' has no group 3 (groups are numbered 1 to 2)");
}

TEST(DbusMethodChecks, SelectorMustBeOneTheKernelHas) {
  const auto s = sample::sampleSnapshot();
  EXPECT_FALSE(checkSelector(s, "xserve-upper", "queue-length"));
  EXPECT_FALSE(checkSelector(s, "xserve-upper", "historical-service-time"));
  EXPECT_EQ(checkSelector(s, "xserve-upper", "fastest")->name, kErrorInvalidArgument);
  EXPECT_EQ(checkSelector(s, "gone", "round-robin")->name, kErrorNotFound);
}

TEST(DbusMethodChecks, RefusedCommandIsFailedWithTheDaemonsReason) {
  const auto error = commandFailed("FailPath", "dm message failed: Invalid argument");
  EXPECT_EQ(error.name, kErrorFailed);
  EXPECT_EQ(error.message, "FailPath failed: dm message failed: Invalid argument");
}

} // namespace
} // namespace pathkeeper::dbus
