#include "names.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pathkeeper::selector {
namespace {

TEST(FriendlyName, CountsInBijectiveBase26) {
  EXPECT_EQ(friendlyName(0), "mpatha");
  EXPECT_EQ(friendlyName(1), "mpathb");
  EXPECT_EQ(friendlyName(25), "mpathz");
  EXPECT_EQ(friendlyName(26), "mpathaa");
  EXPECT_EQ(friendlyName(27), "mpathab");
  EXPECT_EQ(friendlyName(51), "mpathaz");
  EXPECT_EQ(friendlyName(52), "mpathba");
  EXPECT_EQ(friendlyName(701), "mpathzz");
  EXPECT_EQ(friendlyName(702), "mpathaaa");
  EXPECT_EQ(friendlyName(18277), "mpathzzz");
  EXPECT_EQ(friendlyName(18278), "mpathaaaa");
}

TEST(FriendlyName, UsesTheConfiguredPrefix) {
  EXPECT_EQ(friendlyName(2, "xserve"), "xservec");
  EXPECT_EQ(friendlyName(26, ""), "aa");
}

TEST(FriendlyName, ReachesMultipathdsLastNameWithSevenLetters) {
  // multipathd's id INT_MAX; one more would need an eighth letter.
  EXPECT_EQ(friendlyName(kMaxFriendlyIndex), "mpathfxshrxw");
  EXPECT_EQ(friendlyName(kMaxFriendlyIndex + 1), "mpathfxshrxx");
}

TEST(ParseFriendlyName, ReversesFriendlyName) {
  for (std::uint32_t index = 0; index < 30000; ++index) {
    auto parsed = parseFriendlyName(friendlyName(index));
    ASSERT_TRUE(parsed) << parsed.error();
    ASSERT_EQ(*parsed, index);
  }
  for (const std::uint32_t index : {475253U, 475254U, 12356629U, 321272405U, kMaxFriendlyIndex}) {
    auto parsed = parseFriendlyName(friendlyName(index, "disk"), "disk");
    ASSERT_TRUE(parsed) << parsed.error();
    EXPECT_EQ(*parsed, index);
  }
}

TEST(ParseFriendlyName, RejectsIndicesMultipathdCannotHold) {
  auto parsed = parseFriendlyName(friendlyName(kMaxFriendlyIndex + 1));
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "alias 'mpathfxshrxx' is beyond the last name multipathd can number");
  EXPECT_FALSE(parseFriendlyName("mpathaaaaaaaa"));
}

TEST(ParseFriendlyName, RejectsMalformedAliases) {
  auto parsed = parseFriendlyName("xserve-upper");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "alias 'xserve-upper' does not start with 'mpath'");

  parsed = parseFriendlyName("mpath");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "alias 'mpath' has no letters after 'mpath'");

  parsed = parseFriendlyName("mpathA");
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "alias 'mpathA' has 'A' after 'mpath', where only a-z may follow");

  EXPECT_FALSE(parseFriendlyName("mpath1"));
  EXPECT_FALSE(parseFriendlyName("mpatha "));
  EXPECT_FALSE(parseFriendlyName("mpathb-part1"));
  EXPECT_FALSE(parseFriendlyName("mpatha", "xserve"));
}

TEST(ValidateMapName, AcceptsLabelsAndFriendlyNames) {
  EXPECT_TRUE(validateMapName("xserve-upper"));
  EXPECT_TRUE(validateMapName("mpathaa"));
  EXPECT_TRUE(validateMapName("..."));
  EXPECT_TRUE(validateMapName(std::string(kMaxMapNameLength, 'n')));
}

TEST(ValidateMapName, RejectsWhatDeviceMapperRefuses) {
  auto valid = validateMapName("");
  ASSERT_FALSE(valid);
  EXPECT_EQ(valid.error(), "map name is empty");

  valid = validateMapName(std::string(128, 'n'));
  ASSERT_FALSE(valid);
  EXPECT_EQ(valid.error(), "map name '" + std::string(128, 'n') +
                               "' is 128 bytes, over device-mapper's limit of 127");

  valid = validateMapName("upper/lun0");
  ASSERT_FALSE(valid);
  EXPECT_EQ(valid.error(), "map name 'upper/lun0' contains '/'");

  EXPECT_FALSE(validateMapName("."));
  EXPECT_FALSE(validateMapName(".."));
}

const std::string kMultipathdFile = std::string(kBindingsHeader) +
                                    "mpatha 36001405a1b2c3d4e5f60718293a4b5c6\n"
                                    "mpathb 36001405ffeeddccbbaa99887766554433\n";

TEST(Bindings, ReadsAFileWrittenByMultipathd) {
  auto bindings = Bindings::parse(kMultipathdFile, "/etc/multipath/bindings");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->entries(),
            (std::vector<Binding>{{"mpatha", "36001405a1b2c3d4e5f60718293a4b5c6"},
                                  {"mpathb", "36001405ffeeddccbbaa99887766554433"}}));
  EXPECT_TRUE(bindings->warnings().empty());
}

TEST(Bindings, RendersExactlyWhatItRead) {
  auto bindings = Bindings::parse(kMultipathdFile);
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->render(), kMultipathdFile);
}

TEST(Bindings, RendersAnEmptyFileAsTheHeader) {
  EXPECT_EQ(Bindings().render(), kBindingsHeader);
  auto bindings = Bindings::parse("");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_TRUE(bindings->entries().empty());
}

TEST(Bindings, ToleratesCommentsBlankLinesTabsAndCrlf) {
  auto bindings = Bindings::parse("# hand edited\n"
                                  "\n"
                                  "   \t\n"
                                  "\tmpathc \t 3600a0b800011223344556677889900aa   # the Xserve\n"
                                  "mpatha 35000c50012345678\r\n"
                                  "xserve-upper\t1ACME_DISK"); // no final newline
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->wwidFor("mpathc"), "3600a0b800011223344556677889900aa");
  EXPECT_EQ(bindings->wwidFor("mpatha"), "35000c50012345678");
  EXPECT_EQ(bindings->wwidFor("xserve-upper"), "1ACME_DISK");
}

TEST(Bindings, KeepsMultipathToolsAliasOrder) {
  auto bindings =
      Bindings::parse("mpathaa 3b\nxserve-upper 3x\nmpathb 3a\nmpathz 3c\nmpathab 3d\n");
  ASSERT_TRUE(bindings) << bindings.error();
  std::vector<std::string> aliases;
  for (const auto &binding : bindings->entries()) {
    aliases.push_back(binding.alias);
  }
  EXPECT_EQ(aliases,
            (std::vector<std::string>{"mpathb", "mpathz", "mpathaa", "mpathab", "xserve-upper"}));
}

TEST(Bindings, LooksUpBothWays) {
  auto bindings = Bindings::parse(kMultipathdFile);
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->aliasFor("36001405ffeeddccbbaa99887766554433"), "mpathb");
  EXPECT_EQ(bindings->wwidFor("mpatha"), "36001405a1b2c3d4e5f60718293a4b5c6");
  EXPECT_FALSE(bindings->aliasFor("3600000000000000000000000000000000"));
  EXPECT_FALSE(bindings->wwidFor("mpathc"));
}

TEST(Bindings, NamesFileAndLineOfAnAliasWithoutWwid) {
  auto bindings =
      Bindings::parse("mpatha 3a\n\nmpathb   # lost its WWID\n", "/etc/multipath/bindings");
  ASSERT_FALSE(bindings);
  EXPECT_EQ(bindings.error(), "/etc/multipath/bindings:3: alias 'mpathb' has no WWID");
}

TEST(Bindings, RejectsAThirdField) {
  auto bindings = Bindings::parse("mpatha 3a extra\n");
  ASSERT_FALSE(bindings);
  EXPECT_EQ(bindings.error(), "bindings:1: unexpected field 'extra' after the WWID");
}

TEST(Bindings, RejectsAliasesDeviceMapperRefuses) {
  auto bindings = Bindings::parse("mpatha 3a\nbad/name 3b\n");
  ASSERT_FALSE(bindings);
  EXPECT_EQ(bindings.error(), "bindings:2: map name 'bad/name' contains '/'");
  EXPECT_FALSE(Bindings::parse(".. 3b\n"));
}

TEST(Bindings, RejectsWwidsLongerThanMultipathdKeeps) {
  EXPECT_TRUE(Bindings::parse("mpatha " + std::string(127, 'w') + "\n"));
  auto bindings = Bindings::parse("mpatha " + std::string(128, 'w') + "\n");
  ASSERT_FALSE(bindings);
  EXPECT_EQ(bindings.error(), "bindings:1: WWID is 128 characters, over multipathd's limit of 127");
}

TEST(Bindings, RefusesOneAliasForTwoWwids) {
  auto bindings = Bindings::parse("mpatha 3a\nmpathb 3b\nmpatha 3c\n", "bindings.test");
  ASSERT_FALSE(bindings);
  EXPECT_EQ(bindings.error(),
            "bindings.test:3: alias 'mpatha' is bound to WWID 3c but already to 3a on line 1");
}

TEST(Bindings, CollapsesARepeatedLineWithAWarning) {
  auto bindings = Bindings::parse("mpatha 3a\nmpatha\t3a\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->entries().size(), 1U);
  EXPECT_EQ(bindings->warnings(),
            std::vector<std::string>{"bindings:2: repeats the binding of 'mpatha' from line 1"});
}

TEST(Bindings, AnswersTheFirstAliasInAliasOrderForAWwidBoundTwice) {
  auto bindings = Bindings::parse("mpathaa 3a\nmpathc 3a\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->aliasFor("3a"), "mpathc");
  EXPECT_EQ(bindings->entries().size(), 2U);
  EXPECT_EQ(bindings->warnings(),
            std::vector<std::string>{"bindings:2: WWID 3a is also bound to 'mpathaa' on line 1"});
}

TEST(Bindings, KeepsTheOtherAliasOfAWwidReserved) {
  auto bindings = Bindings::parse("mpatha 3a\nmpathb 3a\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->allocate("3new"), "mpathc");
}

TEST(Bindings, AllocatesMpathaInAnEmptyFile) {
  Bindings bindings;
  EXPECT_EQ(bindings.allocate("36001405a1b2c3d4e5f60718293a4b5c6"), "mpatha");
  EXPECT_EQ(bindings.render(),
            std::string(kBindingsHeader) + "mpatha 36001405a1b2c3d4e5f60718293a4b5c6\n");
}

TEST(Bindings, AllocatesTheSmallestUnusedIndex) {
  auto bindings = Bindings::parse("mpatha 3a\nmpathc 3c\nmpathd 3d\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->allocate("3b"), "mpathb");
  EXPECT_EQ(bindings->allocate("3e"), "mpathe");
}

TEST(Bindings, GivesAnExistingWwidItsAlias) {
  auto bindings = Bindings::parse("mpatha 3a\nmpathb 3b\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->allocate("3b"), "mpathb");
  EXPECT_EQ(bindings->entries().size(), 2U);
}

TEST(Bindings, AllocatesPastMpathzInto2Letters) {
  Bindings bindings;
  for (int i = 0; i < 26; ++i) {
    ASSERT_TRUE(bindings.allocate("3wwid" + std::to_string(i)));
  }
  EXPECT_EQ(bindings.allocate("3wwid26"), "mpathaa");
  EXPECT_EQ(bindings.entries().back().alias, "mpathaa");
  EXPECT_EQ(bindings.entries()[25].alias, "mpathz");
}

TEST(Bindings, IgnoresAliasesOfOtherShapesWhenAllocating) {
  auto bindings = Bindings::parse("xserve-upper 3x\nmpathA 3y\nmpath 3z\nmpathb 3b\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->allocate("3a"), "mpatha");
}

TEST(Bindings, AllocatesUnderItsOwnPrefix) {
  auto bindings = Bindings::parse("mpatha 3a\n");
  ASSERT_TRUE(bindings) << bindings.error();
  EXPECT_EQ(bindings->allocate("3b", "xserve"), "xservea");
  EXPECT_EQ(bindings->allocate("3c", "xserve"), "xserveb");
}

TEST(Bindings, StepsOverNamesOfOtherMaps) {
  Bindings bindings;
  const std::vector<std::string> inUse{"mpatha", "mpathb", "xserve-upper"};
  EXPECT_EQ(bindings.allocate("3a", kDefaultAliasPrefix, inUse), "mpathc");
}

TEST(Bindings, RefusesAnAliasThatAnotherMapHolds) {
  auto bindings = Bindings::parse("mpatha 3a\n");
  ASSERT_TRUE(bindings) << bindings.error();
  const std::vector<std::string> inUse{"mpatha"};
  auto alias = bindings->allocate("3a", kDefaultAliasPrefix, inUse);
  ASSERT_FALSE(alias);
  EXPECT_EQ(alias.error(), "alias 'mpatha' of WWID 3a is the name of another map");
}

TEST(Bindings, RefusesWwidsTheFileCannotHold) {
  Bindings bindings;
  EXPECT_FALSE(bindings.allocate(""));
  EXPECT_FALSE(bindings.allocate("3a b"));
  EXPECT_FALSE(bindings.allocate("3a#b"));
  EXPECT_FALSE(bindings.allocate(std::string(128, 'w')));
  EXPECT_TRUE(bindings.entries().empty());
}

TEST(Bindings, RefusesPrefixesThatMakeBadAliases) {
  Bindings bindings;
  EXPECT_FALSE(bindings.allocate("3a", "my/"));
  EXPECT_FALSE(bindings.allocate("3a", "my map"));
  EXPECT_FALSE(bindings.allocate("3a", std::string(127, 'p')));
  EXPECT_TRUE(bindings.entries().empty());
}

TEST(Bindings, SurvivesARenderParseRoundTrip) {
  auto bindings = Bindings::parse("mpathc 3c\nxserve-upper 1ACME\nmpathaa 3aa\n");
  ASSERT_TRUE(bindings) << bindings.error();
  ASSERT_TRUE(bindings->allocate("3new"));
  auto again = Bindings::parse(bindings->render());
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(again->entries(), bindings->entries());
  EXPECT_EQ(again->render(), bindings->render());
}

} // namespace
} // namespace pathkeeper::selector
