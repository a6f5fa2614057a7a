#include "admin_holds.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pathkeeper::daemon {
namespace {

using ::testing::ElementsAre;

TEST(AdminHolds, WhatIsWrittenIsReadBack) {
  AdminHolds holds;
  holds.failedPaths["sdb"] = "8:16 360014050393a1b001000000000000000";
  holds.failedPaths["sdq"] = "65:0 "; // a path without a WWID
  holds.queueingDisabled = {"xserve-upper", "1 m\xC3\xA4p.x"};
  const std::string text = renderAdminHolds(holds);
  EXPECT_EQ(text, "# pathkeeperd: the admin's holds, kept across restarts (see pathkeeperd(8))\n"
                  "fail-path sdb 8:16 360014050393a1b001000000000000000\n"
                  "fail-path sdq 65:0 \n"
                  "disable-queueing 1 m\xC3\xA4p.x\n"
                  "disable-queueing xserve-upper\n");
  std::vector<std::string> problems;
  EXPECT_EQ(parseAdminHolds(text, problems), holds);
  EXPECT_TRUE(problems.empty());
}

TEST(AdminHolds, AHeldMapsDmUuidIsWrittenAndReadBack) {
  AdminHolds holds;
  holds.queueingDisabled = {"xserve-upper", "old map", "no-uuid"};
  holds.mapUuids = {{"xserve-upper", "mpath-360014050393a1b001000000000000000"},
                    {"old map", "mpath-36001405aa"}};
  const std::string text = renderAdminHolds(holds);
  EXPECT_EQ(text, "# pathkeeperd: the admin's holds, kept across restarts (see pathkeeperd(8))\n"
                  "disable-queueing no-uuid\n"
                  "disable-queueing-uuid mpath-36001405aa old map\n"
                  "disable-queueing-uuid mpath-360014050393a1b001000000000000000 xserve-upper\n");
  std::vector<std::string> problems;
  EXPECT_EQ(parseAdminHolds(text, problems), holds);
  EXPECT_TRUE(problems.empty());
}

TEST(AdminHolds, NoHoldsIsJustTheComment) {
  const std::string text = renderAdminHolds({});
  std::vector<std::string> problems;
  EXPECT_EQ(parseAdminHolds(text, problems), AdminHolds{});
  EXPECT_EQ(text.find('\n'), text.size() - 1);
  EXPECT_TRUE(problems.empty());
}

TEST(AdminHolds, AnUnreadableLineIsNamedAndTheOthersStillHold) {
  std::vector<std::string> problems;
  const auto holds = parseAdminHolds("fail-path sdb 8:16 3600a\n"
                                     "fail-path sdc\n"
                                     "\n"
                                     "reinstate sdd\n"
                                     "disable-queueing \n"
                                     "disable-queueing-uuid mpath-3600a\n"
                                     "disable-queueing-uuid  xserve-upper\n"
                                     "disable-queueing xserve-lower\n",
                                     problems);
  EXPECT_EQ(holds.failedPaths.size(), 1U);
  EXPECT_EQ(holds.failedPaths.at("sdb"), "8:16 3600a");
  EXPECT_THAT(holds.queueingDisabled, ElementsAre("xserve-lower"));
  EXPECT_TRUE(holds.mapUuids.empty());
  EXPECT_THAT(problems, ElementsAre("line 2: cannot read 'fail-path sdc'",
                                    "line 4: cannot read 'reinstate sdd'",
                                    "line 5: cannot read 'disable-queueing '",
                                    "line 6: cannot read 'disable-queueing-uuid mpath-3600a'",
                                    "line 7: cannot read 'disable-queueing-uuid  xserve-upper'"));
}

} // namespace
} // namespace pathkeeper::daemon
