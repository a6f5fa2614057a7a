#include "forward_waiter.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

namespace pathkeeper::daemon {
namespace {

using ::testing::HasSubstr;

struct ForwardWaiterTest : ::testing::Test {
  std::optional<Expected<void>> outcome;
  int calls = 0;
  std::shared_ptr<ForwardWaiter> waiter = std::make_shared<ForwardWaiter>([this](Expected<void> r) {
    outcome = std::move(r);
    ++calls;
  });
};

TEST_F(ForwardWaiterTest, ACommandWithoutForwardsIsAnsweredWhenItReturns) {
  waiter->returned({});
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->has_value());
}

TEST_F(ForwardWaiterTest, AnErrorOfTheCommandIsTheOutcomeAtOnce) {
  waiter->sent();
  waiter->returned(fail("no such map: 'x'"));
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->error(), "no such map: 'x'");
  waiter->answered("disablequeueing map x", {});
  EXPECT_EQ(calls, 1) << "answered twice";
}

TEST_F(ForwardWaiterTest, WaitsForEveryForwardAndReportsTheFirstRefusal) {
  waiter->sent();
  waiter->sent();
  waiter->returned({});
  EXPECT_FALSE(outcome.has_value()) << "answered before multipathd did";
  waiter->answered("fail path sda", fail("multipathd refused the action (\"fail\")"), true);
  EXPECT_FALSE(outcome.has_value());
  waiter->answered("fail path sdb", fail("timeout"));
  ASSERT_TRUE(outcome.has_value());
  ASSERT_FALSE(outcome->has_value());
  EXPECT_THAT(outcome->error(), HasSubstr("multipathd: fail path sda: multipathd refused"));
  EXPECT_THAT(outcome->error(), HasSubstr("pathkeeperd sends it again"));
  EXPECT_EQ(calls, 1);
}

TEST_F(ForwardWaiterTest, AnAnswerBeforeTheCommandReturnedCountsToo) {
  waiter->sent();
  waiter->answered("switchgroup map m group 2", {});
  EXPECT_FALSE(outcome.has_value()) << "the command has not returned yet";
  waiter->returned({});
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->has_value());
}

TEST_F(ForwardWaiterTest, ALostAnswerIsAnErrorNotSilence) {
  waiter->sent();
  waiter->returned({});
  waiter.reset(); // the forward's callback dropped with multipathd's client
  ASSERT_TRUE(outcome.has_value());
  ASSERT_FALSE(outcome->has_value());
  EXPECT_THAT(outcome->error(), HasSubstr("multipathd's answer was lost"));
}

TEST_F(ForwardWaiterTest, AnAbandonedWaiterNeverAnswers) {
  waiter->sent();
  waiter->abandon(); // the command threw; its caller answers
  waiter.reset();
  EXPECT_EQ(calls, 0);
}

} // namespace
} // namespace pathkeeper::daemon
