#include "dm_table.hpp"

#include "features.hpp"

#include "test_paths.hpp"

#include <gtest/gtest.h>

#include <random>

namespace pathkeeper::selector {
namespace {

using testing::makePath;

// The kernel's documented examples (Documentation/admin-guide/device-mapper).
constexpr const char *kQueueLengthExample =
    "0 10 multipath 0 0 1 1 queue-length 0 2 1 8:0 128 8:16 128";
constexpr const char *kServiceTimeExample =
    "0 10 multipath 0 0 1 1 service-time 0 2 2 8:0 128 1 8:16 128 4";

TEST(ParseDmTable, ReadsTheKernelsQueueLengthExample) {
  auto table = parseDmTable(kQueueLengthExample);
  ASSERT_TRUE(table) << table.error();
  EXPECT_EQ(table->start, 0U);
  EXPECT_EQ(table->length, 10U);
  EXPECT_TRUE(table->featureArgs.empty());
  EXPECT_TRUE(table->hwHandler.empty());
  EXPECT_EQ(table->initialGroup, 1U);
  ASSERT_EQ(table->groups.size(), 1U);
  const auto &group = table->groups[0];
  EXPECT_EQ(group.selector, "queue-length");
  EXPECT_EQ(group.argsPerPath, 1U);
  ASSERT_EQ(group.paths.size(), 2U);
  EXPECT_EQ(group.paths[0], (DmTablePath{"8:0", {"128"}}));
  EXPECT_EQ(group.paths[1], (DmTablePath{"8:16", {"128"}}));
  EXPECT_EQ(renderDmTable(*table), kQueueLengthExample);
}

TEST(ParseDmTable, ReadsTheKernelsServiceTimeExampleWithTwoArgsPerPath) {
  auto table = parseDmTable(kServiceTimeExample);
  ASSERT_TRUE(table) << table.error();
  const auto &group = table->groups.at(0);
  EXPECT_EQ(group.selector, "service-time");
  EXPECT_EQ(group.argsPerPath, 2U);
  EXPECT_EQ(group.paths.at(0), (DmTablePath{"8:0", {"128", "1"}}));
  EXPECT_EQ(group.paths.at(1), (DmTablePath{"8:16", {"128", "4"}}));
  EXPECT_EQ(renderDmTable(*table), kServiceTimeExample);
}

TEST(ParseDmTable, ToleratesTheKernelsTrailingSpaceAndExtraWhitespace) {
  auto table = parseDmTable("0  10 multipath 1 queue_if_no_path 1 alua 2 1 "
                            "round-robin 0 1 1 8:0 1 round-robin 0 1 1 8:16 1 \n");
  ASSERT_TRUE(table) << table.error();
  EXPECT_TRUE(table->features.queueIfNoPath);
  EXPECT_EQ(table->hwHandler, "alua");
  EXPECT_EQ(table->groups.size(), 2U);
}

TEST(ParseDmTable, ReadsHardwareHandlerArgs) {
  auto table = parseDmTable("0 10 multipath 0 2 emc 1 1 1 round-robin 0 1 1 8:0 1");
  ASSERT_TRUE(table) << table.error();
  EXPECT_EQ(table->hwHandler, "emc");
  EXPECT_EQ(table->hwHandlerArgs, std::vector<std::string>{"1"});
}

TEST(ParseDmTable, ParsesParamsWithoutThePrefixWhenAsked) {
  auto table = parseDmTable("0 0 1 1 round-robin 0 1 1 8:0 1", false);
  ASSERT_TRUE(table) << table.error();
  EXPECT_EQ(table->groups.size(), 1U);
}

TEST(ParseDmTable, KeepsUnknownSelectorsVerbatim) {
  auto table = parseDmTable("0 10 multipath 0 0 1 1 io-affinity 0 1 1 8:0 3");
  ASSERT_TRUE(table) << table.error();
  EXPECT_EQ(table->groups[0].selector, "io-affinity");
}

TEST(ParseDmTable, AcceptsAnEmptyMapWithInitialGroupZero) {
  auto table = parseDmTable("0 10 multipath 1 queue_if_no_path 0 0 0");
  ASSERT_TRUE(table) << table.error();
  EXPECT_TRUE(table->groups.empty());
}

struct BadTable {
  const char *line;
  const char *reason; // a fragment the error must contain
};

class ParseDmTableRejects : public ::testing::TestWithParam<BadTable> {};

TEST_P(ParseDmTableRejects, WithAClearReason) {
  auto table = parseDmTable(GetParam().line);
  ASSERT_FALSE(table) << GetParam().line;
  EXPECT_NE(table.error().find(GetParam().reason), std::string::npos) << table.error();
}

INSTANTIATE_TEST_SUITE_P(
    KernelLimits, ParseDmTableRejects,
    ::testing::Values(
        BadTable{"", "table ends early"}, BadTable{"0 10 linear 8:0 0", "not a multipath table"},
        BadTable{"0 10 multipath 9 a b c d e f g h i 0 0 0", "number of feature args"},
        BadTable{"0 10 multipath 1 bogus 0 0 0", "unrecognised multipath feature"},
        BadTable{"0 10 multipath 0 0 0 1", "initial priority group"},
        BadTable{"0 10 multipath 0 0 1 0 round-robin 0 1 1 8:0 1", "initial priority group"},
        BadTable{"0 10 multipath 0 0 1 2 round-robin 0 1 1 8:0 1", "initial priority group"},
        BadTable{"0 10 multipath 0 0 1025 1", "number of priority groups"},
        BadTable{"0 10 multipath 0 0 1 1 round-robin 0 0 1", "number of paths"},
        BadTable{"0 10 multipath 0 0 1 1 round-robin 0 1025 1", "number of paths"},
        BadTable{"0 10 multipath 0 0 1 1 round-robin 0 2 1 8:0 1", "table ends early"},
        BadTable{"0 10 multipath 0 0 1 1 round-robin 0 1 2 8:0 1 1", "at most 1"},
        BadTable{"0 10 multipath 0 0 1 1 service-time 0 1 2 8:0 1 101", "above 100"},
        BadTable{"0 10 multipath 0 0 1 1 service-time 0 1 2 8:0 1 x", "invalid selector arg"},
        BadTable{"0 10 multipath 0 0 1 1 round-robin 0 1 1 8:0 1 junk", "trailing words"},
        BadTable{"0 0 multipath 0 0 0 0", "invalid length"},
        BadTable{"0 10 multipath 0 1", "hardware handler name"},
        BadTable{"x 10 multipath 0 0 0 0", "start sector"}));

MapSpec xserveUpper() {
  MapSpec spec;
  spec.alias = "xserve-upper";
  spec.wwid = "36001405aaaa";
  spec.sizeSectors = 2097152;
  spec.selector = SelectorKind::ServiceTime;
  spec.features.queueIfNoPath = true;
  spec.groups = {PathGroup{{makePath("sdb", 16), makePath("sdd", 48)}, "upper"}};
  spec.initialGroup = 1;
  return spec;
}

TEST(RenderDmTable, WritesTheExactKernelGrammar) {
  auto spec = xserveUpper();
  spec.groups[0].paths[1].relativeThroughput = 4;
  EXPECT_EQ(renderDmTable(spec), "0 2097152 multipath 1 queue_if_no_path 0 1 1 service-time 0 "
                                 "2 2 8:16 1 1 8:48 1 4");
}

TEST(RenderDmTable, WritesOneRepeatCountForRoundRobinAndQueueLength) {
  auto spec = xserveUpper();
  spec.features = {};
  spec.selector = SelectorKind::RoundRobin;
  EXPECT_EQ(renderDmTable(spec), "0 2097152 multipath 0 0 1 1 round-robin 0 2 1 8:16 1 8:48 1");
  spec.selector = SelectorKind::QueueLength;
  EXPECT_EQ(renderDmTable(spec), "0 2097152 multipath 0 0 1 1 queue-length 0 2 1 8:16 1 8:48 1");
}

TEST(RenderDmTable, CountsTheHandlerNameAmongItsArgs) {
  auto spec = xserveUpper();
  spec.features = {};
  spec.hwHandler = "alua";
  EXPECT_EQ(renderDmTable(spec).value().substr(0, 33), "0 2097152 multipath 0 1 alua 1 1 ");
  spec.hwHandlerArgs = {"x"};
  EXPECT_NE(renderDmTable(spec).value().find(" 2 alua x 1 1 "), std::string::npos);
}

TEST(RenderDmTable, RefusesSpecsTheKernelWouldReject) {
  auto spec = xserveUpper();
  spec.initialGroup = 0;
  EXPECT_FALSE(renderDmTable(spec));
  spec.initialGroup = 2;
  EXPECT_FALSE(renderDmTable(spec));

  spec = xserveUpper();
  spec.groups[0].paths.clear();
  EXPECT_FALSE(renderDmTable(spec));

  spec = xserveUpper();
  spec.groups[0].paths[0].relativeThroughput = 101;
  EXPECT_FALSE(renderDmTable(spec));

  spec = xserveUpper();
  spec.groups.assign(1025, spec.groups[0]);
  EXPECT_FALSE(renderDmTable(spec));

  spec = xserveUpper();
  spec.sizeSectors = 0;
  EXPECT_FALSE(renderDmTable(spec));

  spec = xserveUpper();
  spec.groups[0].paths[0].devt = {};
  EXPECT_FALSE(renderDmTable(spec));

  spec = xserveUpper();
  spec.hwHandlerArgs = {"1"};
  EXPECT_FALSE(renderDmTable(spec));
}

TEST(RenderDmTable, AllowsAnEmptyMapOnlyWithInitialGroupZero) {
  auto spec = xserveUpper();
  spec.groups.clear();
  spec.initialGroup = 0;
  EXPECT_EQ(renderDmTable(spec), "0 2097152 multipath 1 queue_if_no_path 0 0 0");
}

// Render -> parse over many generated specs: every field must survive.
TEST(DmTableRoundTrip, PreservesEveryFieldOfGeneratedSpecs) {
  std::mt19937 rng(20261129);
  auto pick = [&](unsigned lo, unsigned hi) {
    return std::uniform_int_distribution<unsigned>(lo, hi)(rng);
  };
  const SelectorKind kinds[] = {SelectorKind::RoundRobin, SelectorKind::QueueLength,
                                SelectorKind::ServiceTime, SelectorKind::HistoricalServiceTime};
  for (int iteration = 0; iteration < 500; ++iteration) {
    MapSpec spec;
    spec.alias = "m" + std::to_string(iteration);
    spec.wwid = "3600" + std::to_string(iteration);
    spec.sizeSectors = 1 + pick(0, 1U << 30);
    spec.selector = kinds[pick(0, 3)];
    spec.features.queueIfNoPath = pick(0, 1) == 1;
    if (pick(0, 1) == 1) {
      spec.features.pgInitRetries = pick(1, 50);
    }
    if (pick(0, 1) == 1) {
      spec.features.pgInitDelayMsecs = pick(0, 60000);
    }
    spec.features.retainAttachedHwHandler = pick(0, 1) == 1;
    spec.features.queueMode = pick(0, 1) == 1 ? QueueMode::Bio : QueueMode::Default;
    if (pick(0, 1) == 1) {
      spec.hwHandler = "alua";
    }
    const unsigned groups = pick(0, 6);
    std::uint32_t minor = 0;
    for (unsigned g = 0; g < groups; ++g) {
      PathGroup group;
      const unsigned paths = pick(1, 5);
      for (unsigned p = 0; p < paths; ++p) {
        auto path = makePath("sd" + std::to_string(minor), minor * 16);
        path.devt.major = pick(0, 1) == 1 ? 8 : 65;
        path.relativeThroughput = pick(0, 100);
        group.paths.push_back(path);
        ++minor;
      }
      spec.groups.push_back(group);
    }
    spec.initialGroup = groups == 0 ? 0 : pick(1, groups);

    auto text = renderDmTable(spec);
    ASSERT_TRUE(text) << text.error();
    auto table = parseDmTable(*text);
    ASSERT_TRUE(table) << table.error() << "\n" << *text;
    EXPECT_EQ(table->length, spec.sizeSectors);
    EXPECT_EQ(table->features, kernelEffective(spec.features));
    EXPECT_EQ(table->hwHandler, spec.hwHandler);
    EXPECT_EQ(table->initialGroup, spec.initialGroup);
    ASSERT_EQ(table->groups.size(), spec.groups.size());
    for (std::size_t g = 0; g < spec.groups.size(); ++g) {
      const auto &parsed = table->groups[g];
      EXPECT_EQ(parsed.selector, toString(spec.selector));
      ASSERT_EQ(parsed.paths.size(), spec.groups[g].paths.size());
      for (std::size_t p = 0; p < parsed.paths.size(); ++p) {
        const auto &path = spec.groups[g].paths[p];
        EXPECT_EQ(parsed.paths[p].device, path.devt.str());
        EXPECT_EQ(parsed.paths[p].args, perPathArgs(spec.selector, path));
      }
    }
    EXPECT_EQ(renderDmTable(*table), *text);
  }
}

} // namespace
} // namespace pathkeeper::selector
