#include "features.hpp"

#include <gtest/gtest.h>

namespace pathkeeper::selector {
namespace {

TEST(Features, RendersNothingAsZero) {
  EXPECT_EQ(renderFeatures({}), "0");
}

TEST(Features, RendersInTheOrderTheKernelPrintsThem) {
  Features features;
  features.queueMode = QueueMode::Bio;
  features.retainAttachedHwHandler = true;
  features.pgInitDelayMsecs = 0;
  features.pgInitRetries = 50;
  features.queueIfNoPath = true;
  EXPECT_EQ(renderFeatures(features), "8 queue_if_no_path pg_init_retries 50 pg_init_delay_msecs 0 "
                                      "retain_attached_hw_handler queue_mode bio");
}

// Both seen in the VM lab: a bio-based map echoes retain_attached_hw_handler
// even when the table did not ask for it, and "queue_mode mq" (or "rq") is
// the request-based default the kernel never prints.
TEST(Features, RendersWhatTheKernelWillEchoForBioAndRequestBasedModes) {
  Features bio;
  bio.queueIfNoPath = true;
  bio.queueMode = QueueMode::Bio;
  EXPECT_EQ(renderFeatures(bio), "4 queue_if_no_path retain_attached_hw_handler queue_mode bio");
  EXPECT_TRUE(kernelEffective(bio).retainAttachedHwHandler);

  Features mq;
  mq.queueMode = QueueMode::Mq;
  EXPECT_EQ(renderFeatures(mq), "0");
  mq.queueMode = QueueMode::Rq;
  EXPECT_EQ(renderFeatures(mq), "0");
  EXPECT_EQ(kernelEffective(mq).queueMode, QueueMode::Default);
}

TEST(Features, ParsesCaseInsensitivelyLikeTheKernel) {
  auto parsed = parseFeatures("3 QUEUE_IF_NO_PATH queue_mode MQ");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_TRUE(parsed->queueIfNoPath);
  EXPECT_EQ(parsed->queueMode, QueueMode::Mq);
}

TEST(Features, RejectsOutOfRangeValuesWithTheKernelsLimits) {
  EXPECT_FALSE(parseFeatures("2 pg_init_retries 0"));
  EXPECT_FALSE(parseFeatures("2 pg_init_retries 51"));
  EXPECT_TRUE(parseFeatures("2 pg_init_retries 1"));
  EXPECT_FALSE(parseFeatures("2 pg_init_delay_msecs 60001"));
  EXPECT_TRUE(parseFeatures("2 pg_init_delay_msecs 60000"));
  auto bad = parseFeatures("2 queue_mode fast");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("queue_mode"), std::string::npos);
}

TEST(Features, RejectsUnknownWordsAndMissingValues) {
  EXPECT_FALSE(parseFeatures("1 no_partitions"));
  EXPECT_FALSE(parseFeatures("1 pg_init_retries"));
  EXPECT_FALSE(parseFeatures("1 queue_mode"));
}

TEST(Features, RejectsACountThatDoesNotMatchTheWords) {
  EXPECT_FALSE(parseFeatures("2 queue_if_no_path"));
  EXPECT_FALSE(parseFeatures("0 queue_if_no_path"));
  EXPECT_FALSE(parseFeatures("x"));
  EXPECT_FALSE(parseFeatures(""));
}

TEST(Features, RejectsMoreThanEightArgs) {
  std::vector<std::string> nine(9, "queue_if_no_path");
  auto parsed = parseFeatureArgs(nine);
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().find("0-8"), std::string::npos);
}

TEST(AddFeature, AppendsAndKeepsExistingOnes) {
  EXPECT_EQ(addFeature("0", "queue_if_no_path"), "1 queue_if_no_path");
  EXPECT_EQ(addFeature("1 queue_if_no_path", "queue_if_no_path"), "1 queue_if_no_path");
  EXPECT_EQ(addFeature("1 queue_if_no_path", "pg_init_retries 5"),
            "3 queue_if_no_path pg_init_retries 5");
}

TEST(AddFeature, ReplacesTheValueOfAValuedFeature) {
  EXPECT_EQ(addFeature("2 pg_init_retries 5", "pg_init_retries 7"), "2 pg_init_retries 7");
}

TEST(AddFeature, RejectsBadInputOnEitherSide) {
  EXPECT_FALSE(addFeature("1", "queue_if_no_path"));
  EXPECT_FALSE(addFeature("0", "pg_init_retries 99"));
  EXPECT_FALSE(addFeature("0", "bogus"));
}

TEST(RemoveFeature, RemovesTheFeatureWithItsValue) {
  EXPECT_EQ(removeFeature("3 queue_if_no_path pg_init_retries 5", "pg_init_retries"),
            "1 queue_if_no_path");
  EXPECT_EQ(removeFeature("1 queue_if_no_path", "queue_if_no_path"), "0");
  EXPECT_EQ(removeFeature("0", "queue_if_no_path"), "0");
  EXPECT_EQ(removeFeature("2 queue_mode bio", "queue_mode"), "0");
  EXPECT_FALSE(removeFeature("0", "bogus"));
}

TEST(ReconcileFeatures, NoPathRetryFailDropsQueueIfNoPathAndSaysSo) {
  Features features;
  features.queueIfNoPath = true;
  auto out = reconcileFeatures(features, NoPathRetry{NoPathRetry::Kind::Fail, 0});
  EXPECT_FALSE(out.features.queueIfNoPath);
  ASSERT_EQ(out.notes.size(), 1U);
  EXPECT_NE(out.notes[0].find("no_path_retry"), std::string::npos);
}

TEST(ReconcileFeatures, NoPathRetryQueueOrCountSetsQueueIfNoPath) {
  EXPECT_TRUE(
      reconcileFeatures({}, NoPathRetry{NoPathRetry::Kind::Queue, 0}).features.queueIfNoPath);
  auto counted = reconcileFeatures({}, NoPathRetry{NoPathRetry::Kind::Count, 12});
  EXPECT_TRUE(counted.features.queueIfNoPath);
  EXPECT_TRUE(counted.notes.empty());
}

} // namespace
} // namespace pathkeeper::selector
