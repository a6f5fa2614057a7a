#include "dm_status.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::selector {
namespace {

TEST(ParseDmStatus, ReadsTheKernelsQueueLengthExample) {
  auto status = parseDmStatus("0 10 multipath 2 0 0 0 1 1 E 0 2 1 8:0 A 0 0 8:16 A 0 0");
  ASSERT_TRUE(status) << status.error();
  EXPECT_FALSE(status->queueIo);
  EXPECT_EQ(status->pgInitCount, 0U);
  EXPECT_TRUE(status->hwHandlerFields.empty());
  EXPECT_EQ(status->nextGroup, 1U);
  ASSERT_EQ(status->groups.size(), 1U);
  const auto &group = status->groups[0];
  EXPECT_EQ(group.state, DmGroupState::Enabled);
  EXPECT_EQ(group.fieldsPerPath, 1U);
  ASSERT_EQ(group.paths.size(), 2U);
  EXPECT_EQ(group.paths[0], (DmStatusPath{"8:0", true, 0, {0}}));
  EXPECT_EQ(inFlightCount(SelectorKind::QueueLength, group.paths[1]), 0U);
  EXPECT_EQ(status->activePaths(), 2U);
}

TEST(ParseDmStatus, ReadsTheKernelsServiceTimeExample) {
  auto status = parseDmStatus("0 10 multipath 2 0 0 0 1 1 E 0 2 2 8:0 A 0 0 1 8:16 A 0 0 4");
  ASSERT_TRUE(status) << status.error();
  const auto &paths = status->groups.at(0).paths;
  EXPECT_EQ(inFlightSize(SelectorKind::ServiceTime, paths.at(0)), 0U);
  EXPECT_EQ(relativeThroughput(SelectorKind::ServiceTime, paths.at(0)), 1U);
  EXPECT_EQ(relativeThroughput(SelectorKind::ServiceTime, paths.at(1)), 4U);
  // The accessors only answer for the selector that defines the field.
  EXPECT_FALSE(inFlightCount(SelectorKind::ServiceTime, paths.at(0)));
  EXPECT_FALSE(relativeThroughput(SelectorKind::QueueLength, paths.at(0)));
}

TEST(ParseDmStatus, ReadsFailedPathsGroupStatesAndQueueing) {
  auto status = parseDmStatus("0 2097152 multipath 2 1 3 0 2 2 "
                              "D 0 1 0 8:16 F 5 "
                              "A 0 1 0 8:48 A 1 \n");
  ASSERT_TRUE(status) << status.error();
  EXPECT_TRUE(status->queueIo);
  EXPECT_EQ(status->pgInitCount, 3U);
  EXPECT_EQ(status->nextGroup, 2U);
  EXPECT_EQ(status->groups[0].state, DmGroupState::Disabled);
  EXPECT_EQ(status->groups[1].state, DmGroupState::Active);
  auto found = status->findPath("8:16");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->first, 0U);
  EXPECT_FALSE(found->second->active);
  EXPECT_EQ(found->second->failCount, 5U);
  EXPECT_EQ(status->activePaths(), 1U);
  EXPECT_FALSE(status->findPath("8:0"));
}

TEST(DmStatusGroupInUse, IsTheActiveGroupElseTheNextOne) {
  // Group 2 active.
  EXPECT_EQ(
      parseDmStatus("0 8 multipath 2 0 0 0 2 2 E 0 1 0 8:16 A 0 A 0 1 0 8:48 A 0")->groupInUse(),
      2U);
  // After switch_group 2 and before any I/O: no group active, 2 is next.
  EXPECT_EQ(
      parseDmStatus("0 8 multipath 2 0 0 0 2 2 E 0 1 0 8:16 A 0 E 0 1 0 8:48 A 0")->groupInUse(),
      2U);
  // A fresh idle map: the kernel reports group 1 as next.
  EXPECT_EQ(
      parseDmStatus("0 8 multipath 2 0 0 0 2 1 E 0 1 0 8:16 A 0 E 0 1 0 8:48 A 0")->groupInUse(),
      1U);
  EXPECT_EQ(parseDmStatus("0 10 multipath 2 1 0 0 0 0")->groupInUse(), 0U);
}

TEST(ParseDmStatus, ReadsAMapWithoutGroups) {
  auto status = parseDmStatus("0 10 multipath 2 1 0 0 0 0");
  ASSERT_TRUE(status) << status.error();
  EXPECT_TRUE(status->groups.empty());
  EXPECT_TRUE(status->queueIo);
}

struct BadStatus {
  const char *line;
  const char *reason;
};

class ParseDmStatusRejects : public ::testing::TestWithParam<BadStatus> {};

TEST_P(ParseDmStatusRejects, WithAClearReason) {
  auto status = parseDmStatus(GetParam().line);
  ASSERT_FALSE(status) << GetParam().line;
  EXPECT_NE(status.error().find(GetParam().reason), std::string::npos) << status.error();
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ParseDmStatusRejects,
    ::testing::Values(BadStatus{"", "status ends early"},
                      BadStatus{"0 10 linear", "not a multipath status"},
                      BadStatus{"0 10 multipath 2 2 0 0 0 0", "queue_io"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 2 E 0 1 0 8:0 A 0", "out of range"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 0 E 0 1 0 8:0 A 0", "out of range"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 1 X 0 1 0 8:0 A 0", "A, E or D"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 1 E 0 1 0 8:0 Q 0", "A or F"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 1 E 0 1 0 8:0 A x", "fail count"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 1 E 0 0 0", "no paths"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 1 E 0 1 1 8:0 A 0", "ends early"},
                      BadStatus{"0 10 multipath 2 0 0 0 1 1 E 0 1 0 8:0 A 0 9", "trailing"}));

} // namespace
} // namespace pathkeeper::selector
