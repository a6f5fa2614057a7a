#include "config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

namespace pathkeeper::selector {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Config parseOk(std::string_view text, Config base = {}) {
  auto config = parseConfig(text, "pathkeeper.conf", std::move(base));
  EXPECT_TRUE(config.has_value()) << (config ? "" : config.error());
  return config ? *config : Config{};
}

std::string parseError(std::string_view text, Config base = {}) {
  auto config = parseConfig(text, "pathkeeper.conf", std::move(base));
  EXPECT_FALSE(config.has_value()) << "parsed without error:\n" << text;
  return config ? std::string() : config.error();
}

Path makePath(std::string iqn, std::string address = "10.10.1.20", std::uint16_t port = 3260) {
  Path path;
  path.device = "sdb";
  path.targetIqn = std::move(iqn);
  path.portal.address = std::move(address);
  path.portal.port = port;
  path.vendor = "APPLE   ";
  path.product = "Xserve RAID     ";
  path.serial = "XR0012345";
  return path;
}

// ---------------------------------------------------------------- parsing

TEST(ConfigParse, EmptyDocumentGivesTheDefaults) {
  Config config = parseOk("");
  EXPECT_EQ(config.defaults, Defaults{});
  EXPECT_TRUE(config.controllers.empty());
  EXPECT_TRUE(config.devices.empty());
  EXPECT_TRUE(config.maps.empty());
}

TEST(ConfigParse, ReadsEveryDefaultsKey) {
  Config config = parseOk(R"(
[defaults]
grouping = "failover"
selector = "queue-length"
no_path_retry = "queue"
user_friendly_names = false
bindings_file = "/var/lib/pathkeeper/bindings"
mode = "companion"
hardware_handler = "rdac"
pg_init_retries = 50
pg_init_delay_msecs = 60000
queue_mode = "bio"
retain_attached_hw_handler = true
)");
  const Defaults &d = config.defaults;
  EXPECT_EQ(d.grouping, GroupingPolicy::Failover);
  EXPECT_EQ(d.selector, SelectorKind::QueueLength);
  EXPECT_EQ(d.noPathRetry, (NoPathRetry{NoPathRetry::Kind::Queue, 0}));
  EXPECT_FALSE(d.userFriendlyNames);
  EXPECT_EQ(d.bindingsFile, "/var/lib/pathkeeper/bindings");
  EXPECT_EQ(d.mode, Mode::Companion);
  EXPECT_EQ(d.hwHandler, "rdac");
  EXPECT_EQ(d.pgInitRetries, 50U);
  EXPECT_EQ(d.pgInitDelayMsecs, 60000U);
  EXPECT_EQ(d.queueMode, QueueMode::Bio);
  EXPECT_TRUE(d.retainAttachedHwHandler);
}

TEST(ConfigParse, ReadsEveryHealthKeyWithBothDurationSpellings) {
  Config config = parseOk(R"(
[health]
checker_interval = 10
failed_checker_interval = "500ms"
checker_timeout = "2s"
flap_damping = false
flap_threshold = 7
flap_window = "2m"
flap_recovery = "1h"
flap_recovery_max = "2h"
)");
  const HealthSettings &h = config.defaults.health;
  EXPECT_EQ(h.checkerInterval, milliseconds{10000});
  EXPECT_EQ(h.failedCheckerInterval, milliseconds{500});
  EXPECT_EQ(h.checkerTimeout, milliseconds{2000});
  EXPECT_FALSE(h.flapDamping);
  EXPECT_EQ(h.flapThreshold, 7U);
  EXPECT_EQ(h.flapWindow, milliseconds{120000});
  EXPECT_EQ(h.flapRecovery, milliseconds{3600000});
  EXPECT_EQ(h.flapRecoveryMax, milliseconds{7200000});
}

TEST(ConfigParse, NoPathRetryAcceptsFailQueueAndACount) {
  EXPECT_EQ(parseOk("[defaults]\nno_path_retry = \"fail\"").defaults.noPathRetry,
            (NoPathRetry{NoPathRetry::Kind::Fail, 0}));
  EXPECT_EQ(parseOk("[defaults]\nno_path_retry = \"queue\"").defaults.noPathRetry,
            (NoPathRetry{NoPathRetry::Kind::Queue, 0}));
  EXPECT_EQ(parseOk("[defaults]\nno_path_retry = 30").defaults.noPathRetry,
            (NoPathRetry{NoPathRetry::Kind::Count, 30}));
}

TEST(ConfigParse, HardwareHandlerNoneMeansNoHandler) {
  EXPECT_EQ(parseOk("[defaults]\nhardware_handler = \"none\"").defaults.hwHandler, "");
  EXPECT_EQ(parseOk("[defaults]\nhardware_handler = \"\"").defaults.hwHandler, "");
  EXPECT_EQ(parseOk("").defaults.hwHandler, "auto");
}

TEST(ConfigParse, ReadsControllerRulesInFileOrderWithTheirOrigin) {
  Config config = parseOk(R"(
[[controller]]
target_iqn = "iqn.1987-05.com.cisco:05.*.2000000393aa0001"
target_iqn_regex = 'cisco'
vendor = "APPLE"
product = "Xserve RAID"
serial = "XR*"
portal = "10.10.1.20:3260"
label = "upper"
alias = "xserve-upper"

[[controller]]
portal = "10.10.1.21"
label = "lower"
)");
  ASSERT_EQ(config.controllers.size(), 2U);
  const ControllerRule &upper = config.controllers[0];
  EXPECT_EQ(upper.match.targetIqnGlob, "iqn.1987-05.com.cisco:05.*.2000000393aa0001");
  EXPECT_EQ(upper.match.targetIqnRegex, "cisco");
  EXPECT_EQ(upper.match.vendor, "APPLE");
  EXPECT_EQ(upper.match.product, "Xserve RAID");
  EXPECT_EQ(upper.match.serial, "XR*");
  EXPECT_EQ(upper.match.portal, "10.10.1.20:3260");
  EXPECT_EQ(upper.label, "upper");
  EXPECT_EQ(upper.alias, "xserve-upper");
  EXPECT_EQ(upper.origin, "pathkeeper.conf:2:1");
  EXPECT_EQ(config.controllers[1].label, "lower");
  EXPECT_EQ(config.controllers[1].alias, std::nullopt);
  EXPECT_EQ(config.controllers[1].origin, "pathkeeper.conf:12:1");
}

TEST(ConfigParse, ReadsDeviceEntriesWithEveryPolicyKey) {
  Config config = parseOk(R"(
[[device]]
vendor = "^IET$"
product = "^VIRTUAL-DISK$"
grouping = "group_by_prio"
selector = "round-robin"
no_path_retry = 5
hardware_handler = "alua"
pg_init_retries = 1
pg_init_delay_msecs = 0
queue_mode = "mq"
retain_attached_hw_handler = false
)");
  ASSERT_EQ(config.devices.size(), 1U);
  const DeviceEntry &device = config.devices[0];
  EXPECT_EQ(device.vendor, "^IET$");
  EXPECT_EQ(device.product, "^VIRTUAL-DISK$");
  EXPECT_EQ(device.policy.grouping, GroupingPolicy::GroupByPrio);
  EXPECT_EQ(device.policy.selector, SelectorKind::RoundRobin);
  EXPECT_EQ(device.policy.noPathRetry, (NoPathRetry{NoPathRetry::Kind::Count, 5}));
  EXPECT_EQ(device.policy.hwHandler, "alua");
  EXPECT_EQ(device.policy.pgInitRetries, 1U);
  EXPECT_EQ(device.policy.pgInitDelayMsecs, 0U);
  EXPECT_EQ(device.policy.queueMode, QueueMode::Mq);
  EXPECT_EQ(device.policy.retainAttachedHwHandler, false);
}

TEST(ConfigParse, DeviceProductDefaultsToAnyProduct) {
  Config config = parseOk("[[device]]\nvendor = \"IET\"\n");
  ASSERT_EQ(config.devices.size(), 1U);
  EXPECT_EQ(config.devices[0].product, ".*");
  EXPECT_EQ(config.devices[0].policy, PolicyOverrides{});
}

TEST(ConfigParse, ReadsMapOverrides) {
  Config config = parseOk(R"(
[[map]]
wwid = "36000393000000000000000000000a001"
alias = "backup"
selector = "historical-service-time"
no_path_retry = "fail"

[[map]]
wwid = "36000393000000000000000000000a002"
)");
  ASSERT_EQ(config.maps.size(), 2U);
  EXPECT_EQ(config.maps[0].wwid, "36000393000000000000000000000a001");
  EXPECT_EQ(config.maps[0].alias, "backup");
  EXPECT_EQ(config.maps[0].policy.selector, SelectorKind::HistoricalServiceTime);
  EXPECT_EQ(config.maps[0].policy.noPathRetry, (NoPathRetry{NoPathRetry::Kind::Fail, 0}));
  EXPECT_EQ(config.maps[0].origin, "pathkeeper.conf:2:1");
  EXPECT_EQ(config.maps[1].alias, std::nullopt);
}

TEST(ConfigParse, AcceptsInlineTablesAndDottedKeys) {
  Config config = parseOk(R"(
health.flap_threshold = 9
defaults = { selector = "round-robin" }
controller = [ { portal = "10.10.1.20", label = "upper" } ]
)");
  EXPECT_EQ(config.defaults.health.flapThreshold, 9U);
  EXPECT_EQ(config.defaults.selector, SelectorKind::RoundRobin);
  ASSERT_EQ(config.controllers.size(), 1U);
}

// ----------------------------------------------------------------- errors

TEST(ConfigErrors, UnknownKeyNamesFileLineColumnAndKey) {
  EXPECT_EQ(parseError("[defaults]\nselector = \"round-robin\"\ngroupng = \"multibus\"\n"),
            "pathkeeper.conf:3:1: defaults.groupng: unknown key in [defaults] (see "
            "pathkeeper.conf(5) for the valid keys)");
}

TEST(ConfigErrors, WrongTypeNamesTheExpectedAndTheActualType) {
  EXPECT_EQ(parseError("\n[[controller]]\nportal = \"10.10.1.20\"\nlabel = 1\n"),
            "pathkeeper.conf:4:9: controller[1].label: expected a string, got integer");
}

TEST(ConfigErrors, UnknownTableIsAnError) {
  EXPECT_THAT(parseError("[default]\ngrouping = \"multibus\"\n"),
              StartsWith("pathkeeper.conf:1:2: default: unknown table"));
  EXPECT_THAT(parseError("grouping = \"multibus\"\n"),
              StartsWith("pathkeeper.conf:1:1: grouping: unknown table"));
}

TEST(ConfigErrors, KeyInTheWrongTableIsUnknown) {
  EXPECT_THAT(parseError("[health]\nselector = \"round-robin\"\n"),
              StartsWith("pathkeeper.conf:2:1: health.selector: unknown key in [health]"));
  EXPECT_THAT(parseError("[[map]]\nwwid = \"3600\"\nlabel = \"x\"\n"),
              StartsWith("pathkeeper.conf:3:1: map[1].label: unknown key in [[map]]"));
}

TEST(ConfigErrors, TableShapesAreChecked) {
  EXPECT_EQ(parseError("[[defaults]]\n"),
            "pathkeeper.conf:1:1: defaults: expected a table ([defaults]), got array");
  EXPECT_EQ(parseError("[controller]\nlabel = \"x\"\n"),
            "pathkeeper.conf:1:1: controller: expected an array of tables ([[controller]]), got "
            "table");
  EXPECT_EQ(parseError("controller = [1]\n"),
            "pathkeeper.conf:1:15: controller[1]: expected a table, got integer");
}

TEST(ConfigErrors, TomlSyntaxErrorNamesFileAndLine) {
  EXPECT_THAT(parseError("[defaults]\ngrouping = \n"), StartsWith("pathkeeper.conf:2:"));
  EXPECT_THAT(parseError("[defaults]\ngrouping = \"a\"\ngrouping = \"b\"\n"),
              StartsWith("pathkeeper.conf:3:"));
}

TEST(ConfigErrors, UnknownEnumValuesListTheChoices) {
  EXPECT_EQ(parseError("[defaults]\ngrouping = \"by_magic\""),
            "pathkeeper.conf:2:12: defaults.grouping: unknown grouping policy \"by_magic\"; "
            "expected one of multibus, failover, group_by_controller, group_by_prio");
  EXPECT_EQ(parseError("[defaults]\nselector = \"random\""),
            "pathkeeper.conf:2:12: defaults.selector: unknown path selector \"random\"; expected "
            "one of round-robin, queue-length, service-time, historical-service-time, auto");
  EXPECT_THAT(parseError("[defaults]\nmode = \"boss\""),
              HasSubstr("defaults.mode: unknown mode \"boss\"; expected one of auto, owner, "
                        "companion"));
  EXPECT_THAT(parseError("[defaults]\nqueue_mode = \"fast\""),
              HasSubstr("defaults.queue_mode: unknown queue mode \"fast\""));
  EXPECT_THAT(parseError("[defaults]\nhardware_handler = \"1 alua\""),
              HasSubstr("defaults.hardware_handler: unknown hardware handler \"1 alua\""));
}

TEST(ConfigErrors, NoPathRetryRejectsZeroNegativeAndOtherWords) {
  EXPECT_EQ(parseError("[defaults]\nno_path_retry = 0"),
            "pathkeeper.conf:2:17: defaults.no_path_retry: must be between 1 and 1000000, got 0");
  EXPECT_THAT(parseError("[defaults]\nno_path_retry = -3"), HasSubstr("got -3"));
  EXPECT_THAT(parseError("[defaults]\nno_path_retry = \"12\""),
              HasSubstr("expected \"fail\", \"queue\" or a positive integer, got \"12\""));
  EXPECT_THAT(parseError("[defaults]\nno_path_retry = true"),
              HasSubstr("expected \"fail\", \"queue\" or a positive integer, got boolean"));
}

TEST(ConfigErrors, OutOfRangeIntegersAreRejected) {
  EXPECT_THAT(parseError("[defaults]\npg_init_retries = 0"),
              HasSubstr("defaults.pg_init_retries: must be between 1 and 50, got 0"));
  EXPECT_THAT(parseError("[defaults]\npg_init_retries = 51"), HasSubstr("got 51"));
  EXPECT_THAT(parseError("[defaults]\npg_init_delay_msecs = 60001"),
              HasSubstr("defaults.pg_init_delay_msecs: must be between 0 and 60000, got 60001"));
  EXPECT_THAT(parseError("[health]\nflap_threshold = 0"),
              HasSubstr("health.flap_threshold: must be between 1 and 1000, got 0"));
  EXPECT_THAT(parseError("[health]\nflap_threshold = 9223372036854775807"),
              HasSubstr("got 9223372036854775807"));
  EXPECT_THAT(parseError("[health]\nflap_threshold = 3.0"),
              HasSubstr("expected an integer, got floating-point number"));
}

TEST(ConfigErrors, BadDurationsAreRejectedWithTheSyntax) {
  for (std::string_view bad : {"\"5\"", "\"5 s\"", "\"5sec\"", "\"s\"", "\"-5s\"", "\"1.5s\""}) {
    EXPECT_THAT(parseError("[health]\nchecker_interval = " + std::string(bad)),
                HasSubstr("pathkeeper.conf:2:20: health.checker_interval: expected a duration "
                          "such as \"500ms\", \"5s\", \"2m\" or \"1h\", got "))
        << bad;
  }
  EXPECT_THAT(parseError("[health]\nchecker_interval = 1.5"),
              HasSubstr("expected a duration (integer seconds or a string such as \"5s\"), got "
                        "floating-point number"));
  EXPECT_THAT(parseError("[health]\nchecker_interval = -1"),
              HasSubstr("must be a non-negative number of seconds, got -1"));
  EXPECT_THAT(parseError("[health]\nchecker_interval = 9223372036854775807"),
              HasSubstr("must be a non-negative number of seconds"));
  EXPECT_THAT(parseError("[health]\nchecker_interval = \"99999999999999999999h\""),
              HasSubstr("expected a duration"));
}

TEST(ConfigErrors, DurationsOutOfRangeNameTheLimits) {
  EXPECT_EQ(parseError("[health]\nchecker_interval = \"50ms\""),
            "pathkeeper.conf:2:20: health.checker_interval: must be between 100ms and 1h, got "
            "50ms");
  EXPECT_THAT(parseError("[health]\nflap_window = \"25h\""),
              HasSubstr("health.flap_window: must be between 1s and 24h, got 25h"));
  EXPECT_THAT(parseError("[health]\ncheckerTimeout = 0"), HasSubstr("unknown key"));
}

TEST(ConfigErrors, OtherWrongTypesAreRejected) {
  EXPECT_THAT(parseError("[defaults]\nuser_friendly_names = \"yes\""),
              HasSubstr("defaults.user_friendly_names: expected a boolean (true or false), got "
                        "string"));
  EXPECT_THAT(parseError("[defaults]\nbindings_file = 3"),
              HasSubstr("defaults.bindings_file: expected a string, got integer"));
  EXPECT_THAT(parseError("[defaults]\nbindings_file = \"bindings\""),
              HasSubstr("defaults.bindings_file: must be an absolute path, got \"bindings\""));
  EXPECT_THAT(parseError("[defaults]\nselector = [\"round-robin\"]"),
              HasSubstr("defaults.selector: expected a string, got array"));
  EXPECT_THAT(parseError("[health]\nflap_damping = 1979-05-27"),
              HasSubstr("health.flap_damping: expected a boolean (true or false), got date"));
}

TEST(ConfigErrors, InvalidRegexIsReportedNotThrown) {
  EXPECT_THAT(parseError("[[controller]]\ntarget_iqn_regex = \"iqn.(cisco\"\nlabel = \"x\"\n"),
              StartsWith("pathkeeper.conf:2:20: controller[1].target_iqn_regex: invalid regular "
                         "expression \"iqn.(cisco\": "));
  EXPECT_THAT(parseError("[[device]]\nvendor = \"[\"\n"),
              StartsWith("pathkeeper.conf:2:10: device[1].vendor: invalid regular expression"));
  EXPECT_THAT(parseError("[[device]]\nvendor = \"x\"\nproduct = \"*x\"\n"),
              HasSubstr("device[1].product: invalid regular expression"));
}

TEST(ConfigErrors, RegexThatWouldExplodeIsRefused) {
  EXPECT_THAT(parseError("[[device]]\nvendor = \"((a{100}){100}){100}\"\n"),
              HasSubstr("repeats too much"));
}

TEST(ConfigErrors, EmptyLabelIsAnError) {
  EXPECT_EQ(parseError("[[controller]]\nportal = \"10.10.1.20\"\nlabel = \"\"\n"),
            "pathkeeper.conf:3:9: controller[1].label: must not be empty");
}

TEST(ConfigErrors, MissingLabelPointsAtTheRule) {
  EXPECT_EQ(parseError("[[controller]]\nportal = \"10.10.1.20\"\n"),
            "pathkeeper.conf:1:1: controller[1].label: missing; every rule names a controller");
}

TEST(ConfigErrors, RuleWithoutMatchKeysIsAnError) {
  EXPECT_EQ(parseError("[[controller]]\nlabel = \"upper\"\n"),
            "pathkeeper.conf:1:1: controller[1]: needs at least one of target_iqn, "
            "target_iqn_regex, vendor, product, serial, portal");
}

TEST(ConfigErrors, LabelsAndAliasesMustBeUsableNames) {
  EXPECT_THAT(parseError("[[controller]]\nportal = \"1.2.3.4\"\nlabel = \"up per\"\n"),
              HasSubstr("controller[1].label: \"up per\" contains \" \""));
  EXPECT_THAT(parseError("[[controller]]\nportal = \"1.2.3.4\"\nlabel = \"u\"\nalias = \"a/b\"\n"),
              HasSubstr("controller[1].alias: \"a/b\" contains \"/\""));
  EXPECT_THAT(parseError("[[map]]\nwwid = \"36\"\nalias = \"..\"\n"),
              HasSubstr("map[1].alias: must not be \".\" or \"..\""));
  EXPECT_THAT(parseError("[[map]]\nwwid = \"36\"\nalias = \"" + std::string(128, 'a') + "\"\n"),
              HasSubstr("map[1].alias: is longer than 127 characters"));
}

TEST(ConfigErrors, BadPortalsAreRejected) {
  for (std::string_view bad : {"", ":3260", "10.10.1.20:", "10.10.1.20:0", "10.10.1.20:65536",
                               "10.10.1.20:http", "[fe80::1", "[fe80::1]3260", "10.10.1.20 "}) {
    EXPECT_THAT(
        parseError("[[controller]]\nlabel = \"x\"\nportal = \"" + std::string(bad) + "\"\n"),
        HasSubstr("controller[1].portal: expected \"address\", \"address:port\" or "
                  "\"[ipv6]:port\""))
        << bad;
  }
}

TEST(ConfigErrors, BadGlobsAreRejected) {
  EXPECT_THAT(parseError("[[controller]]\nlabel = \"x\"\ntarget_iqn = \"iqn.[abc\"\n"),
              HasSubstr("controller[1].target_iqn: glob \"iqn.[abc\" has a '[' without its ']'"));
  EXPECT_THAT(parseError("[[controller]]\nlabel = \"x\"\nserial = 'XR\\'\n"),
              HasSubstr("controller[1].serial: glob \"XR\\\\\" ends in a lone backslash"));
  EXPECT_THAT(parseError("[[controller]]\nlabel = \"x\"\nserial = \"\"\n"),
              HasSubstr("controller[1].serial: must not be empty"));
}

TEST(ConfigErrors, DeviceWithoutVendorIsAnError) {
  EXPECT_EQ(parseError("[[device]]\nproduct = \"x\"\n"),
            "pathkeeper.conf:1:1: device[1].vendor: missing; every device entry needs one");
}

TEST(ConfigErrors, MapWithoutWwidIsAnError) {
  EXPECT_EQ(parseError("[[map]]\nalias = \"x\"\n"),
            "pathkeeper.conf:1:1: map[1].wwid: missing; every map entry needs one");
  EXPECT_THAT(parseError("[[map]]\nwwid = \"36 00\"\n"),
              HasSubstr("map[1].wwid: \"36 00\" contains a blank"));
}

TEST(ConfigErrors, DuplicateMapWwidNamesBothPlaces) {
  EXPECT_EQ(parseError("[[map]]\nwwid = \"3600\"\n\n[[map]]\nwwid = \"3600\"\n"),
            "pathkeeper.conf:5:8: map[2].wwid: duplicate wwid \"3600\" (first at "
            "pathkeeper.conf:1:1)");
}

TEST(ConfigErrors, ReportsEveryErrorOnItsOwnLine) {
  std::string error = parseError("[defaults]\ngrouping = 1\nselector = 2\n[health]\nbogus = 3\n");
  EXPECT_EQ(error, "pathkeeper.conf:2:12: defaults.grouping: expected a string, got integer\n"
                   "pathkeeper.conf:3:12: defaults.selector: expected a string, got integer\n"
                   "pathkeeper.conf:5:1: health.bogus: unknown key in [health] (see "
                   "pathkeeper.conf(5) for the valid keys)");
}

TEST(ConfigErrors, CapsTheNumberOfReportedErrors) {
  std::string text = "[defaults]\n";
  for (int i = 0; i < 30; ++i) {
    text += "k" + std::to_string(i) + " = 1\n";
  }
  std::string error = parseError(text);
  EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 20);
  EXPECT_THAT(error, HasSubstr("(10 more errors)"));
}

TEST(ConfigErrors, MalformedTableHeadersAreErrorsNotAborts) {
  // Each of these trips an internal assertion of toml++ 3.3 unless config.cpp
  // compiles it out; they must come back as ordinary parse errors.
  for (std::string_view bad : {"[[\n", "[[[1]]]", "[[[a]]]", "[[[]]", "[[=", "[=", "[\n"}) {
    EXPECT_THAT(parseError(bad), StartsWith("pathkeeper.conf:1:")) << bad;
  }
}

TEST(ConfigErrors, CharactersTomlppCannotClassifyAreRejectedOutsideComments) {
  // toml++ 3.3 reaches __builtin_unreachable() when it asks whether U+00A1..
  // U+0499 (and two other ranges) are whitespace, which it does even inside
  // values; config.cpp must stop them first.
  EXPECT_EQ(parseError("[defaults]\nselector\xcf\x9f = \"x\"\n"),
            "pathkeeper.conf:2:9: character U+03DF is only supported in comments (a limitation "
            "of the TOML parser)");
  EXPECT_THAT(parseError("[health]\nflap_threshold = 3\xc3\xa9\n"),
              StartsWith("pathkeeper.conf:2:19: character U+00E9"));
  // Found by the fuzzer: toml++ scans a value's characters past the quote.
  using namespace std::string_view_literals;
  EXPECT_THAT(parseError("controller = [ [[4\0\0tQ'\x07\xc9\x9b\n"sv), HasSubstr("U+025B"));
  EXPECT_THAT(parseError("[[map]]\nwwid = \"\"\"36\\\n  \xe3\x80\x81\"\"\"\n"),
              HasSubstr("pathkeeper.conf:3:3: character U+3001"));
  EXPECT_THAT(parseError("[[map]]\nwwid = '\xef\xbb\xbe'\n"), HasSubstr("U+FEFE"));
}

TEST(ConfigErrors, OtherNonAsciiIsLeftToTheTomlParser) {
  Config config = parseOk("# Überwachung der Pfade, é\n[[controller]]\n"
                          "target_iqn = \"iqn.2004-04.jp.\xe6\x9d\xb1*\" # Zürich\n"
                          "label = \"upper\"\n");
  ASSERT_EQ(config.controllers.size(), 1U);
  EXPECT_EQ(config.controllers[0].match.targetIqnGlob, "iqn.2004-04.jp.\xe6\x9d\xb1*");
  EXPECT_THAT(parseError("\xe6\x9d\xb1 = 1\n"), StartsWith("pathkeeper.conf:1:1: "));
}

TEST(ConfigErrors, SurvivesBinaryGarbage) {
  std::string garbage("\0\xff\xfe[[\x01", 6);
  auto config = parseConfig(garbage, "junk.conf");
  ASSERT_FALSE(config.has_value());
  EXPECT_THAT(config.error(), StartsWith("junk.conf:"));
}

// --------------------------------------------------------------- layering

TEST(ConfigLayering, LaterDocumentReplacesOnlyTheValuesItSets) {
  Config base = parseOk("[defaults]\ngrouping = \"multibus\"\nselector = \"round-robin\"\n");
  Config config = parseOk("[defaults]\nselector = \"queue-length\"\n", base);
  EXPECT_EQ(config.defaults.grouping, GroupingPolicy::Multibus);
  EXPECT_EQ(config.defaults.selector, SelectorKind::QueueLength);
}

TEST(ConfigLayering, LaterControllerRulesAreSearchedFirst) {
  Config base = parseOk("[[controller]]\nportal = \"10.10.1.20\"\nlabel = \"main\"\n");
  auto config = parseConfig("[[controller]]\nportal = \"10.10.1.20\"\nlabel = \"dropin\"\n",
                            "10-site.conf", base);
  ASSERT_TRUE(config.has_value()) << config.error();
  ASSERT_EQ(config->controllers.size(), 2U);
  auto rule = controllerFor(*config, makePath("iqn.x"));
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ((*rule)->label, "dropin");
  EXPECT_EQ((*rule)->origin, "10-site.conf:1:1");
}

TEST(ConfigLayering, MapOverrideForAKnownWwidUpdatesItsFields) {
  Config base = parseOk("[[map]]\nwwid = \"3600a\"\nalias = \"old\"\nselector = \"round-robin\"\n");
  Config config = parseOk("[[map]]\nwwid = \"3600a\"\nalias = \"new\"\n", base);
  ASSERT_EQ(config.maps.size(), 1U);
  EXPECT_EQ(config.maps[0].alias, "new");
  EXPECT_EQ(config.maps[0].policy.selector, SelectorKind::RoundRobin);
}

TEST(ConfigLayering, UserDevicesComeBeforeTheBuiltins) {
  Config config =
      parseOk("[[device]]\nvendor = \"APPLE\"\ngrouping = \"failover\"\n", builtinConfig());
  ASSERT_EQ(config.devices.size(), builtinDevices().size() + 1);
  EXPECT_EQ(config.devices[0].origin, "pathkeeper.conf:1:1");
  EXPECT_EQ(config.devices.back().origin, "built-in");
  auto device = deviceFor(config, "APPLE", "Xserve RAID");
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ((*device)->policy.grouping, GroupingPolicy::Failover);
}

TEST(ConfigLayering, FailedDocumentReportsInsteadOfHalfMerging) {
  auto config = parseConfig("[defaults]\nselector = \"round-robin\"\nbogus = 1\n",
                            "pathkeeper.conf", builtinConfig());
  EXPECT_FALSE(config.has_value());
}

TEST(ConfigLayering, RemembersWhereEachDefaultWasSet) {
  Config base = parseOk("[health]\nflap_window = \"2m\"\n");
  auto config = parseConfig("\n[health]\nflap_window = \"3m\"\n", "90-late.conf", base);
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->keyOrigins.at("health.flap_window"), "90-late.conf:3:15");
}

// ------------------------------------------- adaptive selection

TEST(ConfigAdaptive, DefaultsReloadAtMostOncePerMinuteWithTwentyPercentHysteresis) {
  AdaptiveSettings adaptive = parseOk("").adaptive;
  EXPECT_EQ(adaptive.minReloadInterval, std::chrono::seconds{60});
  EXPECT_EQ(adaptive.sampleInterval, std::chrono::seconds{2});
  EXPECT_EQ(adaptive.halfLife, std::chrono::seconds{10});
  EXPECT_EQ(adaptive.hysteresisPercent, 20U);
  EXPECT_EQ(adaptive.equalTolerancePercent, 15U);
  EXPECT_EQ(adaptive.idleIops, 5U);
  EXPECT_EQ(adaptive.minConfidencePercent, 50U);
  EXPECT_EQ(adaptive.reloadHoldTarget, std::chrono::milliseconds{50});
  EXPECT_EQ(adaptive.reloadHoldWait, std::chrono::seconds{30});
}

TEST(ConfigAdaptive, ParsesEveryKeyOfTheTable) {
  AdaptiveSettings adaptive = parseOk("[adaptive]\n"
                                      "sample_interval = \"1s\"\n"
                                      "half_life = \"30s\"\n"
                                      "min_reload_interval = \"5m\"\n"
                                      "hysteresis_percent = 10\n"
                                      "equal_tolerance_percent = 5\n"
                                      "idle_iops = 50\n"
                                      "min_confidence_percent = 80\n"
                                      "reload_hold_target = \"100ms\"\n"
                                      "reload_hold_wait = \"0s\"\n")
                                  .adaptive;
  EXPECT_EQ(adaptive.sampleInterval, std::chrono::seconds{1});
  EXPECT_EQ(adaptive.halfLife, std::chrono::seconds{30});
  EXPECT_EQ(adaptive.minReloadInterval, std::chrono::minutes{5});
  EXPECT_EQ(adaptive.hysteresisPercent, 10U);
  EXPECT_EQ(adaptive.equalTolerancePercent, 5U);
  EXPECT_EQ(adaptive.idleIops, 50U);
  EXPECT_EQ(adaptive.minConfidencePercent, 80U);
  EXPECT_EQ(adaptive.reloadHoldTarget, std::chrono::milliseconds{100});
  EXPECT_EQ(adaptive.reloadHoldWait, std::chrono::milliseconds{0});
}

TEST(ConfigAdaptive, OutOfRangeValuesNameTheKeyAndTheLimits) {
  EXPECT_EQ(parseError("[adaptive]\nhysteresis_percent = 0\n"),
            "pathkeeper.conf:2:22: adaptive.hysteresis_percent: must be between 1 and 100, got 0");
  EXPECT_THAT(parseError("[adaptive]\nsample_interval = \"100ms\"\n"),
              HasSubstr("adaptive.sample_interval: must be between 500ms and 1m, got 100ms"));
  EXPECT_THAT(parseError("[adaptive]\nmin_reload_interval = \"0s\"\n"),
              HasSubstr("adaptive.min_reload_interval: must be between 1s and 24h"));
  EXPECT_THAT(parseError("[adaptive]\nreload_hold_target = \"11s\"\n"),
              HasSubstr("adaptive.reload_hold_target: must be between 0ms and 10s, got 11s"));
  EXPECT_THAT(parseError("[adaptive]\nreload_hold_wait = \"2h\"\n"),
              HasSubstr("adaptive.reload_hold_wait: must be between 0ms and 1h, got 2h"));
  EXPECT_THAT(parseError("[adaptive]\nequal_tolerance_percent = 95\n"),
              HasSubstr("adaptive.equal_tolerance_percent: must be between 0 and 90"));
  EXPECT_THAT(parseError("[adaptive]\nspeed = 3\n"),
              HasSubstr("adaptive.speed: unknown key in [adaptive]"));
}

TEST(ConfigAdaptive, ValidateRejectsSettingsBuiltInCodeOutOfRange) {
  Config config = builtinConfig();
  config.adaptive.idleIops = 0;
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_THAT(valid.error(), HasSubstr("adaptive.idle_iops: must be between 1 and 100000"));
}

TEST(ConfigSelectorAuto, IsAcceptedAndStartsAsQueueLength) {
  Config config = parseOk("[defaults]\nselector = \"auto\"\n");
  EXPECT_TRUE(config.defaults.autoSelector);
  EXPECT_EQ(config.defaults.selector, SelectorKind::QueueLength);
  EXPECT_FALSE(parseOk("[defaults]\nselector = \"round-robin\"\n").defaults.autoSelector);
  EXPECT_FALSE(Defaults{}.autoSelector);
}

TEST(ConfigSelectorAuto, FollowsTheUsualPrecedenceOfDeviceAndMap) {
  Config config = parseOk("[defaults]\nselector = \"auto\"\n"
                          "[[device]]\nvendor = \"^LIO\"\nselector = \"round-robin\"\n"
                          "[[map]]\nwwid = \"3600a\"\nselector = \"auto\"\n");
  EffectivePolicy other = policyFor(config, "3600b", "OTHER", "DISK");
  EXPECT_TRUE(other.autoSelector);
  EXPECT_EQ(other.selector, SelectorKind::QueueLength);
  EffectivePolicy lio = policyFor(config, "3600b", "LIO-ORG", "DISK");
  EXPECT_FALSE(lio.autoSelector);
  EXPECT_EQ(lio.selector, SelectorKind::RoundRobin);
  EffectivePolicy mapped = policyFor(config, "3600a", "LIO-ORG", "DISK");
  EXPECT_TRUE(mapped.autoSelector);
  EXPECT_EQ(mapped.selector, SelectorKind::QueueLength);
}

// ------------------------------------------- relative_throughput

TEST(ConfigRelativeThroughput, IsEqualUnlessSetToAuto) {
  EXPECT_EQ(Defaults{}.relativeThroughput, ThroughputWeights::Equal);
  EXPECT_EQ(parseOk("[defaults]\nrelative_throughput = \"auto\"\n").defaults.relativeThroughput,
            ThroughputWeights::Auto);
  EXPECT_EQ(parseOk("[defaults]\nrelative_throughput = \"equal\"\n").defaults.relativeThroughput,
            ThroughputWeights::Equal);
  EXPECT_EQ(toString(ThroughputWeights::Auto), "auto");
  EXPECT_THAT(parseError("[defaults]\nrelative_throughput = 50\n"),
              HasSubstr("pathkeeper.conf:2:23: defaults.relative_throughput"));
  EXPECT_THAT(parseError("[defaults]\nrelative_throughput = \"fast\"\n"),
              HasSubstr("defaults.relative_throughput"));
}

// ------------------------------------------- failback, proactive failover

TEST(ConfigFailback, AcceptsTheThreeWordsAndAnyWholeNumberOfSeconds) {
  EXPECT_EQ(Defaults{}.failback, Failback{});
  EXPECT_EQ(parseOk("[defaults]\nfailback = \"manual\"\n").defaults.failback.kind,
            Failback::Kind::Manual);
  EXPECT_EQ(parseOk("[defaults]\nfailback = \"followover\"\n").defaults.failback.kind,
            Failback::Kind::Followover);
  EXPECT_EQ(parseOk("[defaults]\nfailback = \"immediate\"\n").defaults.failback, Failback{});
  const std::pair<std::string_view, long long> deferred[] = {
      {"30", 30}, {"\"30s\"", 30}, {"\"2m\"", 120}, {"1", 1}, {"86400", 86400}, {"\"1h\"", 3600}};
  for (const auto &[text, seconds] : deferred) {
    Failback failback =
        parseOk("[defaults]\nfailback = " + std::string(text) + "\n").defaults.failback;
    EXPECT_EQ(failback.kind, Failback::Kind::Deferred) << text;
    EXPECT_EQ(failback.delay.count(), seconds) << text;
  }
  EXPECT_EQ(toString(Failback{Failback::Kind::Deferred, std::chrono::seconds{30}}), "30");
  EXPECT_EQ(toString(Failback{Failback::Kind::Followover, {}}), "followover");
}

TEST(ConfigFailback, RejectsZeroFractionsTooLongAndOtherWords) {
  EXPECT_EQ(parseError("[defaults]\nfailback = 0\n"),
            "pathkeeper.conf:2:12: defaults.failback: a deferred failback must wait at least 1s; "
            "use \"immediate\" to fail back at once");
  EXPECT_THAT(parseError("[defaults]\nfailback = \"0s\"\n"), HasSubstr("at least 1s"));
  EXPECT_THAT(parseError("[defaults]\nfailback = \"1500ms\"\n"),
              HasSubstr("defaults.failback: counts whole seconds, got 1500ms"));
  EXPECT_THAT(parseError("[defaults]\nfailback = 86401\n"),
              HasSubstr("defaults.failback: must be between 1 and 86400 seconds, got 86401"));
  EXPECT_THAT(parseError("[defaults]\nfailback = \"2d\"\n"),
              HasSubstr("defaults.failback: expected \"immediate\", \"manual\", \"followover\", a "
                        "number of seconds or a duration such as \"30s\", got \"2d\""));
  EXPECT_THAT(parseError("[defaults]\nfailback = -5\n"), HasSubstr("got -5"));
  EXPECT_THAT(parseError("[defaults]\nfailback = \"Manual\"\n"), HasSubstr("got \"Manual\""));
  EXPECT_THAT(parseError("[defaults]\nfailback = true\n"), HasSubstr("got boolean"));
}

TEST(ConfigFailback, ValidateRejectsADeferredFailbackWithoutADelayBuiltInCode) {
  Config config;
  config.defaults.failback = {Failback::Kind::Deferred, std::chrono::seconds{0}};
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_THAT(valid.error(), HasSubstr("defaults.failback: a deferred failback must wait"));
}

TEST(ConfigHealth, ReadsProactiveFailover) {
  EXPECT_FALSE(HealthSettings{}.proactiveFailover);
  EXPECT_TRUE(parseOk("[health]\nproactive_failover = true\n").defaults.health.proactiveFailover);
  EXPECT_THAT(
      parseError("[health]\nproactive_failover = \"yes\"\n"),
      HasSubstr("health.proactive_failover: expected a boolean (true or false), got string"));
}

TEST(ConfigHealth, ReadsHowManyFailedProbesInARowProactiveFailoverNeeds) {
  EXPECT_EQ(HealthSettings{}.proactiveFailoverProbes, 2U);
  EXPECT_EQ(
      parseOk("[health]\nproactive_failover_probes = 3\n").defaults.health.proactiveFailoverProbes,
      3U);
  EXPECT_THAT(parseError("[health]\nproactive_failover_probes = 0\n"),
              HasSubstr("health.proactive_failover_probes: must be between 1 and 10, got 0"));
  EXPECT_THAT(parseError("[health]\nproactive_failover_probes = 11\n"),
              HasSubstr("must be between 1 and 10, got 11"));
}

// --------------------------------------------------------------- discovery

TEST(ConfigDiscovery, ReadsEveryKeyWithCanonicalPortals) {
  Config config = parseOk(R"(
[discovery]
portals = ["10.10.1.20", "10.10.1.21:3261", "[FE80:0:0::1]:3260", "fd00::20"]
nics = ["eth1", "eth2"]
probe_interval = "1m"
probe_timeout = 3
initiator_name = "iqn.2024-01.org.example:host1:probe"
)");
  const DiscoverySettings &d = config.discovery;
  ASSERT_EQ(d.portals.size(), 4U);
  EXPECT_EQ(d.portals[0], (Portal{"10.10.1.20", 3260, 1}));
  EXPECT_EQ(d.portals[1], (Portal{"10.10.1.21", 3261, 1}));
  EXPECT_EQ(d.portals[2], (Portal{"fe80::1", 3260, 1}));
  EXPECT_EQ(d.portals[3], (Portal{"fd00::20", 3260, 1}));
  EXPECT_EQ(d.nics, (std::vector<std::string>{"eth1", "eth2"}));
  EXPECT_EQ(d.probeInterval, milliseconds{60000});
  EXPECT_EQ(d.probeTimeout, milliseconds{3000});
  EXPECT_EQ(d.initiatorName, "iqn.2024-01.org.example:host1:probe");
  EXPECT_TRUE(validateConfig(config).has_value());
  EXPECT_EQ(config.keyOrigins.at("discovery.nics"), "pathkeeper.conf:4:8");
}

TEST(ConfigDiscovery, DefaultsProbeEveryThirtySecondsWithAFiveSecondTimeout) {
  Config config = parseOk("[discovery]\n");
  EXPECT_EQ(config.discovery, DiscoverySettings{});
  EXPECT_EQ(config.discovery.probeInterval, milliseconds{30000});
  EXPECT_EQ(config.discovery.probeTimeout, milliseconds{5000});
  EXPECT_TRUE(config.discovery.portals.empty());
  EXPECT_TRUE(config.discovery.initiatorName.empty());
}

TEST(ConfigDiscovery, ZeroIntervalDisablesPeriodicProbes) {
  Config config = parseOk("[discovery]\nprobe_interval = \"0s\"\nprobe_timeout = \"5m\"\n");
  EXPECT_EQ(config.discovery.probeInterval, milliseconds{0});
  // No periodic probe, so a timeout longer than the interval is fine.
  EXPECT_TRUE(validateConfig(config).has_value());
}

TEST(ConfigDiscovery, BadPortalsNameTheElementAndTheReason) {
  EXPECT_EQ(parseError("[discovery]\nportals = [\"10.10.1.20\", \"10.10.1.20:\"]\n"),
            "pathkeeper.conf:2:26: discovery.portals[2]: expected \"address\", \"address:port\" "
            "or \"[ipv6]:port\", got \"10.10.1.20:\"");
  EXPECT_THAT(parseError("[discovery]\nportals = [\"san.example.com\"]\n"),
              HasSubstr("discovery.portals[1]: \"san.example.com\" names a host; give the "
                        "portal's IP address"));
  EXPECT_THAT(parseError("[discovery]\nportals = [\"10.10.1.256\"]\n"),
              HasSubstr("discovery.portals[1]: \"10.10.1.256\": "));
  EXPECT_THAT(parseError("[discovery]\nportals = [\"[fe80::1%eth1]:3260\"]\n"),
              HasSubstr("has a zone"));
  EXPECT_THAT(parseError("[discovery]\nportals = [\"[fe80::1]:0\"]\n"),
              HasSubstr("discovery.portals[1]: expected"));
  EXPECT_THAT(parseError("[discovery]\nportals = [\"10.10.1.20\", 3260]\n"),
              HasSubstr("discovery.portals[2]: expected a string, got integer"));
  EXPECT_THAT(parseError("[discovery]\nportals = \"10.10.1.20\"\n"),
              HasSubstr("discovery.portals: expected an array of strings, got string"));
}

TEST(ConfigDiscovery, TwoSpellingsOfOnePortalAreADuplicate) {
  EXPECT_EQ(parseError("[discovery]\nportals = [\"10.10.1.20\", \"10.10.1.21\", "
                       "\"10.10.1.20:3260\"]\n"),
            "pathkeeper.conf:2:40: discovery.portals[3]: duplicate portal \"10.10.1.20:3260\" "
            "(already element 1)");
  EXPECT_THAT(parseError("[discovery]\nportals = [\"[fd00::20]:3260\", \"fd00:0::20\"]\n"),
              HasSubstr("duplicate portal \"[fd00::20]:3260\""));
  // Other ports are other portals.
  EXPECT_EQ(parseOk("[discovery]\nportals = [\"10.10.1.20\", \"10.10.1.20:3261\"]\n")
                .discovery.portals.size(),
            2U);
}

TEST(ConfigDiscovery, NicNamesFollowTheKernelsRules) {
  EXPECT_EQ(parseOk("[discovery]\nnics = [\"enp0s31f6.100\", \"bond0\", \"123456789012345\"]\n")
                .discovery.nics.size(),
            3U);
  const std::pair<std::string_view, std::string_view> bad[] = {
      {"", "must not be empty"},
      {"1234567890123456", "is longer than 15 characters"},
      {"eth/1", "is not a network interface name"},
      {"eth 1", "is not a network interface name"},
      {"eth1:0", "is not a network interface name"},
      {"..", "must not be \".\" or \"..\""},
      {"eth\\t1", "is not a network interface name"},
  };
  for (const auto &[nic, reason] : bad) {
    const std::string error = parseError("[discovery]\nnics = [\"" + std::string(nic) + "\"]\n");
    EXPECT_THAT(error, HasSubstr("discovery.nics[1]: ")) << nic;
    EXPECT_THAT(error, HasSubstr(std::string(reason))) << nic;
  }
  EXPECT_THAT(parseError("[discovery]\nnics = [\"eth1\", \"eth2\", \"eth1\"]\n"),
              HasSubstr("discovery.nics[3]: duplicate NIC \"eth1\" (already element 1)"));
}

TEST(ConfigDiscovery, ProbeDurationsHaveTheirRanges) {
  EXPECT_THAT(parseError("[discovery]\nprobe_timeout = \"0s\"\n"),
              HasSubstr("discovery.probe_timeout: must be between 100ms and 5m, got 0ms"));
  EXPECT_THAT(parseError("[discovery]\nprobe_timeout = \"6m\"\n"),
              HasSubstr("discovery.probe_timeout: must be between 100ms and 5m, got 6m"));
  EXPECT_THAT(parseError("[discovery]\nprobe_interval = \"500ms\"\n"),
              HasSubstr("discovery.probe_interval: must be \"0s\" (no periodic probes) or at "
                        "least 1s, got 500ms"));
  EXPECT_THAT(parseError("[discovery]\nprobe_interval = \"2d\"\n"),
              HasSubstr("discovery.probe_interval: expected a duration"));
  EXPECT_THAT(parseError("[discovery]\nprobe_interval = \"25h\"\n"),
              HasSubstr("discovery.probe_interval: must be between 0ms and 24h, got 25h"));
}

TEST(ConfigDiscovery, TimeoutLongerThanTheIntervalNamesTheFile) {
  Config config = parseOk("[discovery]\nprobe_interval = \"2s\"\nprobe_timeout = \"3s\"\n");
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_EQ(valid.error(), "pathkeeper.conf:3:17: discovery.probe_timeout: 3s exceeds "
                           "discovery.probe_interval (2s)");
}

// A path a failed probe took down comes back on a passing probe only.
TEST(ConfigDiscovery, ProactiveFailoverNeedsPeriodicProbes) {
  Config config =
      parseOk("[health]\nproactive_failover = true\n[discovery]\nprobe_interval = \"0s\"\n");
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_EQ(valid.error(), "pathkeeper.conf:2:22: health.proactive_failover: needs periodic "
                           "probes, but discovery.probe_interval is 0s: the paths a failed probe "
                           "took down would never be probed again");
  config.defaults.health.proactiveFailover = false;
  EXPECT_TRUE(validateConfig(config).has_value());
}

TEST(ConfigDiscovery, InitiatorNameMustBeAnIscsiName) {
  EXPECT_EQ(
      parseOk("[discovery]\ninitiator_name = \"eui.02004567A425678D\"\n").discovery.initiatorName,
      "eui.02004567A425678D");
  EXPECT_THAT(parseError("[discovery]\ninitiator_name = \"host1\"\n"),
              HasSubstr("pathkeeper.conf:2:18: discovery.initiator_name: "));
  EXPECT_THAT(parseError("[discovery]\ninitiator_name = \"\"\n"),
              HasSubstr("discovery.initiator_name: must not be empty; leave the key out"));
}

TEST(ConfigDiscovery, UnknownKeysAndShapesAreErrors) {
  EXPECT_EQ(parseError("[discovery]\nportal = [\"10.10.1.20\"]\n"),
            "pathkeeper.conf:2:1: discovery.portal: unknown key in [discovery] (see "
            "pathkeeper.conf(5) for the valid keys)");
  EXPECT_THAT(parseError("[[discovery]]\nnics = [\"eth1\"]\n"),
              HasSubstr("discovery: expected a table ([discovery]), got array"));
}

TEST(ConfigDiscovery, LaterLayerReplacesTheListsItSets) {
  Config base = parseOk("[discovery]\nportals = [\"10.10.1.20\"]\nnics = [\"eth1\"]\n");
  Config config = parseOk("[discovery]\nportals = [\"10.10.1.21\", \"10.10.1.22\"]\n", base);
  ASSERT_EQ(config.discovery.portals.size(), 2U);
  EXPECT_EQ(config.discovery.portals[0].address, "10.10.1.21");
  EXPECT_EQ(config.discovery.nics, std::vector<std::string>{"eth1"});
}

TEST(ConfigDiscovery, ValidateChecksSettingsBuiltInCode) {
  Config config;
  config.discovery.portals = {{"10.10.1.20", 3260, 1}, {"10.10.1.20", 3260, 1}, {"nas", 3260, 1}};
  config.discovery.nics = {"eth1", "eth1", "has space"};
  config.discovery.probeTimeout = milliseconds{0};
  config.discovery.initiatorName = "not-a-name";
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_THAT(valid.error(), HasSubstr("discovery.portals: duplicate portal \"10.10.1.20:3260\""));
  EXPECT_THAT(valid.error(),
              HasSubstr("discovery.portals: \"nas:3260\" is not a canonical IP address and port"));
  EXPECT_THAT(valid.error(), HasSubstr("discovery.nics: duplicate NIC \"eth1\""));
  EXPECT_THAT(valid.error(), HasSubstr("discovery.nics: \"has space\" is not a network"));
  EXPECT_THAT(valid.error(), HasSubstr("discovery.probe_timeout: must be between 100ms and 5m"));
  EXPECT_THAT(valid.error(), HasSubstr("discovery.initiator_name: "));
}

TEST(ParsePortal, IsTheParserTheCliShares) {
  EXPECT_EQ(parsePortal("10.200.1.20"), (Portal{"10.200.1.20", 3260, 1}));
  EXPECT_EQ(parsePortal("[fd00::0:20]:3261"), (Portal{"fd00::20", 3261, 1}));
  ASSERT_FALSE(parsePortal("10.200.1.20:99999").has_value());
  EXPECT_THAT(parsePortal("10.200.1.20:99999").error(), HasSubstr("expected \"address\""));
  EXPECT_FALSE(parsePortal("portal.example").has_value());
}

// ------------------------------------------------------------- validation

TEST(ValidateConfig, AcceptsTheBuiltinConfig) {
  EXPECT_TRUE(validateConfig(builtinConfig()).has_value());
}

TEST(ValidateConfig, FlapRecoveryAboveItsMaximumNamesTheFile) {
  Config config = parseOk("[health]\nflap_recovery = \"20m\"\n");
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_EQ(valid.error(), "pathkeeper.conf:2:17: health.flap_recovery: 20m exceeds "
                           "health.flap_recovery_max (10m)");
}

TEST(ValidateConfig, MaxCheckerIntervalIsFourTimesTheIntervalUnlessSet) {
  EXPECT_EQ(parseOk("[health]\nchecker_interval = \"10s\"\n")
                .defaults.health.effectiveMaxCheckerInterval(),
            std::chrono::seconds(40));
  Config config = parseOk("[health]\nmax_checker_interval = \"1m\"\n");
  EXPECT_EQ(config.defaults.health.maxCheckerInterval, std::chrono::minutes(1));
  EXPECT_EQ(config.defaults.health.effectiveMaxCheckerInterval(), std::chrono::minutes(1));
  EXPECT_TRUE(validateConfig(config).has_value());
  // Equal means a fixed interval, and is valid.
  EXPECT_TRUE(validateConfig(parseOk("[health]\nmax_checker_interval = \"5s\"\n")).has_value());
}

TEST(ValidateConfig, MaxCheckerIntervalBelowTheIntervalNamesTheFile) {
  Config config = parseOk("[health]\nchecker_interval = \"10s\"\nmax_checker_interval = \"5s\"\n");
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_EQ(valid.error(), "pathkeeper.conf:3:24: health.max_checker_interval: 5s is below "
                           "health.checker_interval (10s)");
}

TEST(ValidateConfig, LaterLayerCanFixAnEarlierCrossFieldProblem) {
  Config config = parseOk("[health]\nflap_recovery = \"20m\"\n");
  config = parseOk("[health]\nflap_recovery_max = \"1h\"\n", config);
  EXPECT_TRUE(validateConfig(config).has_value());
}

TEST(ValidateConfig, RejectsDuplicateWwidsBuiltInCode) {
  Config config;
  config.maps.push_back({"3600a", std::nullopt, {}, "a.conf:1:1"});
  config.maps.push_back({"3600a", std::nullopt, {}, "b.conf:4:1"});
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_EQ(valid.error(), "b.conf:4:1: map.wwid: duplicate wwid \"3600a\" (first at a.conf:1:1)");
}

TEST(ValidateConfig, RejectsOneAliasForTwoControllers) {
  Config config = parseOk(R"(
[[controller]]
portal = "10.10.1.20"
label = "upper"
alias = "xserve"
[[controller]]
portal = "10.10.1.21"
label = "lower"
alias = "xserve"
)");
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_EQ(valid.error(), "pathkeeper.conf:6:1: controller.alias: alias \"xserve\" already names "
                           "controller \"upper\" (at pathkeeper.conf:2:1)");
}

TEST(ValidateConfig, AllowsOneAliasForSeveralRulesOfOneController) {
  Config config = parseOk(R"(
[[controller]]
portal = "10.10.1.20"
label = "upper"
alias = "xserve-upper"
[[controller]]
portal = "10.10.1.21"
label = "upper"
alias = "xserve-upper"
)");
  EXPECT_TRUE(validateConfig(config).has_value());
}

TEST(ValidateConfig, RejectsTwoMapsWithOneAlias) {
  Config config = parseOk(R"(
[[map]]
wwid = "3600a"
alias = "data"
[[map]]
wwid = "3600b"
alias = "data"
)");
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_THAT(valid.error(), HasSubstr("pathkeeper.conf:5:1: map.alias: alias \"data\" is already "
                                       "used by wwid \"3600a\""));
}

TEST(ValidateConfig, ChecksValuesOfConfigsBuiltInCode) {
  Config config;
  config.defaults.health.checkerInterval = milliseconds{0};
  config.defaults.hwHandler = "magic";
  config.controllers.push_back({{}, "", std::nullopt, "x.conf:1:1"});
  DeviceEntry device;
  device.vendor = "(";
  device.product = ".*";
  device.origin = "x.conf:9:1";
  config.devices.push_back(device);
  auto valid = validateConfig(config);
  ASSERT_FALSE(valid.has_value());
  EXPECT_THAT(valid.error(), HasSubstr("health.checker_interval: must be between 100ms and 1h"));
  EXPECT_THAT(valid.error(), HasSubstr("defaults.hardware_handler: unknown hardware handler"));
  EXPECT_THAT(valid.error(), HasSubstr("x.conf:1:1: controller.label: must not be empty"));
  EXPECT_THAT(valid.error(), HasSubstr("x.conf:1:1: controller: needs at least one of"));
  EXPECT_THAT(valid.error(), HasSubstr("x.conf:9:1: device.vendor: invalid regular expression"));
}

// ----------------------------------------------------------------- schema

TEST(ConfigSchema, NamesOnlyKnownTablesAndNoKeyTwice) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const auto &key : configSchema()) {
    EXPECT_TRUE(std::ranges::any_of(configTables(), [&](const ConfigTable &t) {
      return t.name == key.table;
    })) << key.table;
    EXPECT_TRUE(seen.emplace(key.table, key.key).second) << key.table << "." << key.key;
    EXPECT_FALSE(key.description.empty()) << key.key;
    EXPECT_FALSE(key.type.empty()) << key.key;
    EXPECT_FALSE(key.example.empty()) << key.key;
  }
  EXPECT_GE(seen.size(), 40U);
}

// Builds one valid entry of an array table around @p extra, adding the keys
// that the table requires.
std::string entryWith(std::string_view table, std::string_view key, std::string_view value) {
  std::string text = "[[" + std::string(table) + "]]\n";
  if (table == "controller" && key != "label") {
    text += "label = \"x\"\n";
  }
  if (table == "controller" && (key == "label" || key == "alias")) {
    text += "portal = \"10.10.1.20\"\n";
  }
  if (table == "device" && key != "vendor") {
    text += "vendor = \"x\"\n";
  }
  if (table == "map" && key != "wwid") {
    text += "wwid = \"3600a\"\n";
  }
  return text + std::string(key) + " = " + std::string(value) + "\n";
}

TEST(ConfigSchema, EveryKeyIsAcceptedWithItsExample) {
  for (const auto &key : configSchema()) {
    bool array = std::ranges::find(configTables(), key.table, &ConfigTable::name)->array;
    std::string text = array ? entryWith(key.table, key.key, key.example)
                             : "[" + std::string(key.table) + "]\n" + std::string(key.key) + " = " +
                                   std::string(key.example) + "\n";
    auto config = parseConfig(text, "schema.conf");
    EXPECT_TRUE(config.has_value()) << text << (config ? "" : config.error());
    if (config) {
      EXPECT_TRUE(validateConfig(*config).has_value()) << text;
    }
  }
}

TEST(ConfigSchema, EveryExampleChangesTheConfig) {
  // Proves that each key is wired to a field, not merely accepted.
  for (const auto &key : configSchema()) {
    std::string text = "[" + std::string(key.table) + "]\n" + std::string(key.key) + " = " +
                       std::string(key.example) + "\n";
    if (key.table == "defaults" || key.table == "health") {
      EXPECT_NE(parseOk(text).defaults, Defaults{}) << text;
    } else if (key.table == "discovery") {
      EXPECT_NE(parseOk(text).discovery, DiscoverySettings{}) << text;
    } else if (key.table == "adaptive") {
      EXPECT_NE(parseOk(text).adaptive, AdaptiveSettings{}) << text;
    }
  }
}

TEST(ConfigSchema, EveryDefaultValueIsTheBuiltInDefault) {
  for (const auto &key : configSchema()) {
    if (key.defaultValue.empty() || (key.table != "defaults" && key.table != "health" &&
                                     key.table != "discovery" && key.table != "adaptive")) {
      continue;
    }
    std::string text = "[" + std::string(key.table) + "]\n" + std::string(key.key) + " = " +
                       std::string(key.defaultValue) + "\n";
    Config config = parseOk(text);
    EXPECT_EQ(config.defaults, Defaults{}) << text;
    EXPECT_EQ(config.discovery, DiscoverySettings{}) << text;
    EXPECT_EQ(config.adaptive, AdaptiveSettings{}) << text;
  }
}

TEST(ConfigSchema, UnsetDefaultsAreDocumentedAsUnset) {
  Defaults defaults;
  for (const auto &key : configSchema()) {
    if ((key.table == "defaults" || key.table == "discovery") && key.defaultValue.empty()) {
      EXPECT_THAT(key.description, HasSubstr("unset")) << key.key;
    }
  }
  EXPECT_EQ(defaults.pgInitRetries, std::nullopt);
  EXPECT_EQ(defaults.pgInitDelayMsecs, std::nullopt);
  EXPECT_EQ(DiscoverySettings{}.initiatorName, "");
}

// --------------------------------------------------------------- built-ins

TEST(BuiltinDevices, XserveRaidIsMultibusWithTheHandlerLeftToDetection) {
  Config config = builtinConfig();
  auto device = deviceFor(config, "APPLE   ", "Xserve RAID     ");
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ((*device)->policy.grouping, GroupingPolicy::Multibus);
  // Unset, so "auto" applies: none for the real array, alua when something
  // in front of it reports ALUA and the kernel attaches the handler anyway.
  EXPECT_EQ((*device)->policy.hwHandler, std::nullopt);
  EXPECT_EQ(policyFor(config, "3600", "APPLE", "Xserve RAID").hwHandler, kAutoHwHandler);
  EXPECT_EQ((*device)->origin, "built-in");
  EXPECT_EQ(policyFor(config, "3600", "APPLE", "Xserve RAID").grouping, GroupingPolicy::Multibus);
}

TEST(BuiltinDevices, LioUsesGroupByPrioWithTheAluaHandler) {
  Config config = builtinConfig(); // deviceFor points into it
  auto device = deviceFor(config, "LIO-ORG", "disk0");
  ASSERT_TRUE(device.has_value());
  EXPECT_EQ((*device)->policy.grouping, GroupingPolicy::GroupByPrio);
  EXPECT_EQ((*device)->policy.hwHandler, "alua");
}

TEST(BuiltinDevices, UnknownDeviceGetsNoEntry) {
  EXPECT_EQ(deviceFor(builtinConfig(), "IET", "VIRTUAL-DISK"), std::nullopt);
  EXPECT_EQ(deviceFor(builtinConfig(), "APPLEX", "Xserve RAID"), std::nullopt);
}

TEST(BuiltinDevices, AreValid) {
  for (const auto &device : builtinDevices()) {
    Config config;
    config.devices = {device};
    EXPECT_TRUE(validateConfig(config).has_value()) << device.vendor;
  }
}

// ------------------------------------------------------------------ policy

TEST(PolicyFor, MapOverridesDeviceOverridesDefaults) {
  Config config = parseOk(R"(
[defaults]
selector = "round-robin"
no_path_retry = "fail"
pg_init_retries = 5
[[device]]
vendor = "APPLE"
selector = "queue-length"
no_path_retry = "queue"
[[map]]
wwid = "3600a"
alias = "data"
selector = "service-time"
)",
                          builtinConfig());
  EffectivePolicy forMap = policyFor(config, "3600a", "APPLE", "Xserve RAID");
  EXPECT_EQ(forMap.selector, SelectorKind::ServiceTime);
  EXPECT_EQ(forMap.noPathRetry.kind, NoPathRetry::Kind::Queue);
  EXPECT_EQ(forMap.grouping, GroupingPolicy::GroupByController); // user entry beats built-in
  EXPECT_EQ(forMap.pgInitRetries, 5U);
  EXPECT_EQ(forMap.alias, "data");
  EffectivePolicy other = policyFor(config, "3600b", "IET", "VIRTUAL-DISK");
  EXPECT_EQ(other.selector, SelectorKind::RoundRobin);
  EXPECT_EQ(other.noPathRetry.kind, NoPathRetry::Kind::Fail);
  EXPECT_EQ(other.hwHandler, "auto");
  EXPECT_EQ(other.alias, std::nullopt);
}

// -------------------------------------------------------------------- glob

TEST(GlobMatch, StarMatchesAnyRunIncludingDots) {
  EXPECT_TRUE(globMatch("iqn.1987-05.com.cisco:05.*.2000000393aa0001",
                        "iqn.1987-05.com.cisco:05.mds-a.02-01.2000000393aa0001"));
  EXPECT_FALSE(globMatch("iqn.1987-05.com.cisco:05.*.2000000393aa0001",
                         "iqn.1987-05.com.cisco:05.mds-a.02-01.2000000393aa0002"));
  EXPECT_TRUE(globMatch("*", ""));
  EXPECT_TRUE(globMatch("a**b", "ab"));
  EXPECT_TRUE(globMatch("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaab"));
  EXPECT_FALSE(globMatch("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaa"));
}

TEST(GlobMatch, QuestionMarkMatchesExactlyOneCharacter) {
  EXPECT_TRUE(globMatch("XR0?", "XR01"));
  EXPECT_FALSE(globMatch("XR0?", "XR0"));
  EXPECT_FALSE(globMatch("XR0?", "XR012"));
}

TEST(GlobMatch, BracketsMatchSetsRangesAndNegations) {
  EXPECT_TRUE(globMatch("port[12]", "port1"));
  EXPECT_FALSE(globMatch("port[12]", "port3"));
  EXPECT_TRUE(globMatch("[a-f]0", "c0"));
  EXPECT_FALSE(globMatch("[a-f]0", "g0"));
  EXPECT_TRUE(globMatch("[!a-f]0", "g0"));
  EXPECT_TRUE(globMatch("[^a-f]0", "g0"));
  EXPECT_FALSE(globMatch("[!a-f]0", "a0"));
  EXPECT_TRUE(globMatch("[]]", "]"));
  EXPECT_TRUE(globMatch("[a-]", "-"));
}

TEST(GlobMatch, BackslashEscapesAndUnterminatedBracketIsLiteral) {
  EXPECT_TRUE(globMatch("a\\*", "a*"));
  EXPECT_FALSE(globMatch("a\\*", "ab"));
  EXPECT_TRUE(globMatch("a[b", "a[b"));
  EXPECT_FALSE(globMatch("a[b", "ab"));
}

TEST(GlobMatch, IsCaseSensitiveAndAnchored) {
  EXPECT_FALSE(globMatch("IQN.*", "iqn.x"));
  EXPECT_FALSE(globMatch("iqn", "iqn.x"));
  EXPECT_FALSE(globMatch("", "x"));
  EXPECT_TRUE(globMatch("", ""));
}

// ---------------------------------------------------------------- matcher

const char *const mdsRules = R"(
[[controller]]
target_iqn = "iqn.1987-05.com.cisco:05.*.2000000393aa0001"
label = "upper"
alias = "xserve-upper"

[[controller]]
target_iqn = "iqn.1987-05.com.cisco:05.*.2000000393aa0002"
label = "lower"
alias = "xserve-lower"
)";

TEST(ControllerFor, MatchesMdsIqnsOfEveryPortalByThePwwn) {
  Config config = parseOk(mdsRules);
  for (std::string_view portalIqn : {"iqn.1987-05.com.cisco:05.mds-a.02-01.2000000393aa0001",
                                     "iqn.1987-05.com.cisco:05.mds-a.02-02.2000000393aa0001"}) {
    auto rule = controllerFor(config, makePath(std::string(portalIqn)));
    ASSERT_TRUE(rule.has_value()) << portalIqn;
    EXPECT_EQ((*rule)->label, "upper");
    EXPECT_EQ((*rule)->alias, "xserve-upper");
  }
  auto lower =
      controllerFor(config, makePath("iqn.1987-05.com.cisco:05.mds-a.02-01.2000000393aa0002"));
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ((*lower)->label, "lower");
}

TEST(ControllerFor, NoMatchingRuleGivesNothing) {
  EXPECT_EQ(controllerFor(parseOk(mdsRules), makePath("iqn.2003-01.org.linux-iscsi:x")),
            std::nullopt);
  EXPECT_EQ(controllerFor(Config{}, makePath("iqn.x")), std::nullopt);
}

TEST(ControllerFor, FirstMatchingRuleWins) {
  Config config = parseOk(R"(
[[controller]]
vendor = "APPLE"
label = "first"
[[controller]]
vendor = "APPLE"
label = "second"
)");
  EXPECT_EQ((*controllerFor(config, makePath("iqn.x")))->label, "first");
}

TEST(ControllerFor, EverySetFieldMustMatch) {
  Config config = parseOk(R"(
[[controller]]
vendor = "APPLE"
portal = "10.10.1.21"
label = "lower"
)");
  EXPECT_EQ(controllerFor(config, makePath("iqn.x", "10.10.1.20")), std::nullopt);
  EXPECT_TRUE(controllerFor(config, makePath("iqn.x", "10.10.1.21")).has_value());
}

TEST(ControllerFor, VendorAndProductIgnoreCaseAndScsiPadding) {
  Config config = parseOk("[[controller]]\nvendor = \"apple\"\nproduct = \"XSERVE raid\"\n"
                          "label = \"x\"\n");
  EXPECT_TRUE(controllerFor(config, makePath("iqn.x")).has_value());
  Path other = makePath("iqn.x");
  other.product = "Xserve RAID2   ";
  EXPECT_EQ(controllerFor(config, other), std::nullopt);
}

TEST(ControllerFor, SerialIsAGlob) {
  Config config = parseOk("[[controller]]\nserial = \"XR00*\"\nlabel = \"x\"\n");
  EXPECT_TRUE(controllerFor(config, makePath("iqn.x")).has_value());
  Path other = makePath("iqn.x");
  other.serial = "XR1012345";
  EXPECT_EQ(controllerFor(config, other), std::nullopt);
}

TEST(ControllerFor, PortalMatchesWithOrWithoutPort) {
  Config config = parseOk(R"(
[[controller]]
portal = "10.10.1.20:3261"
label = "odd-port"
[[controller]]
portal = "10.10.1.20"
label = "any-port"
[[controller]]
portal = "[FE80::1]:3260"
label = "v6"
[[controller]]
portal = "fe80::2"
label = "bare-v6"
)");
  EXPECT_EQ((*controllerFor(config, makePath("iqn.x", "10.10.1.20", 3261)))->label, "odd-port");
  EXPECT_EQ((*controllerFor(config, makePath("iqn.x", "10.10.1.20", 3260)))->label, "any-port");
  EXPECT_EQ((*controllerFor(config, makePath("iqn.x", "fe80::1", 3260)))->label, "v6");
  EXPECT_EQ(controllerFor(config, makePath("iqn.x", "fe80::1", 3261)), std::nullopt);
  EXPECT_EQ((*controllerFor(config, makePath("iqn.x", "fe80::2", 1)))->label, "bare-v6");
  EXPECT_EQ(controllerFor(config, makePath("iqn.x", "10.10.1.2", 3260)), std::nullopt);
}

TEST(ControllerFor, IqnRegexIsSearchedUnlessAnchored) {
  Config config = parseOk(R"(
[[controller]]
target_iqn_regex = '\.2000000393aa000[1]$'
label = "upper"
)");
  EXPECT_TRUE(controllerFor(config, makePath("iqn.1987-05.com.cisco:05.m.02-01.2000000393aa0001")));
  EXPECT_FALSE(
      controllerFor(config, makePath("iqn.1987-05.com.cisco:05.m.02-01.2000000393aa00011")));
}

TEST(ControllerFor, PathologicalRegexStaysFast) {
  Config config = parseOk("[[controller]]\ntarget_iqn_regex = '(a*)*b'\nlabel = \"x\"\n");
  EXPECT_FALSE(controllerFor(config, makePath(std::string(200, 'a'))).has_value());
}

// ---------------------------------------------------------------- duration

TEST(Duration, ParsesEveryUnit) {
  EXPECT_EQ(parseDuration("500ms"), milliseconds{500});
  EXPECT_EQ(parseDuration("5s"), milliseconds{5000});
  EXPECT_EQ(parseDuration("2m"), milliseconds{120000});
  EXPECT_EQ(parseDuration("1h"), milliseconds{3600000});
  EXPECT_EQ(parseDuration("0s"), milliseconds{0});
}

TEST(Duration, RejectsEverythingElse) {
  for (std::string_view bad : {"", "5", "s", "5 s", " 5s", "5S", "5sec", "1.5s", "-1s", "+1s", "5d",
                               "99999999999999999999ms", "9999999999999999h"}) {
    EXPECT_EQ(parseDuration(bad), std::nullopt) << bad;
  }
}

TEST(Duration, FormatsWithTheLargestExactUnitAndRoundTrips) {
  EXPECT_EQ(formatDuration(milliseconds{0}), "0ms");
  EXPECT_EQ(formatDuration(milliseconds{1500}), "1500ms");
  EXPECT_EQ(formatDuration(milliseconds{90000}), "90s");
  EXPECT_EQ(formatDuration(milliseconds{600000}), "10m");
  EXPECT_EQ(formatDuration(milliseconds{7200000}), "2h");
  for (long long ms : {1LL, 999LL, 1000LL, 61000LL, 3600000LL, 86400000LL}) {
    EXPECT_EQ(parseDuration(formatDuration(milliseconds{ms})), milliseconds{ms}) << ms;
  }
}

TEST(EnumNames, RoundTripThroughTheirSpellings) {
  for (auto policy : {GroupingPolicy::Multibus, GroupingPolicy::Failover,
                      GroupingPolicy::GroupByController, GroupingPolicy::GroupByPrio}) {
    EXPECT_EQ(parseGroupingPolicy(toString(policy)), policy);
  }
  for (auto mode : {Mode::Auto, Mode::Owner, Mode::Companion}) {
    EXPECT_EQ(parseMode(toString(mode)), mode);
  }
  EXPECT_EQ(parseGroupingPolicy("Multibus"), std::nullopt);
  EXPECT_EQ(toString(NoPathRetry{NoPathRetry::Kind::Count, 12}), "12");
  EXPECT_EQ(toString(NoPathRetry{NoPathRetry::Kind::Queue, 0}), "queue");
  EXPECT_EQ(toString(NoPathRetry{}), "fail");
}

// ---------------------------------------------------------- shipped config

#ifdef PATHKEEPER_SOURCE_DIR
std::string shippedConfig() {
  std::ifstream in(std::string(PATHKEEPER_SOURCE_DIR) + "/packaging/pathkeeper.conf");
  EXPECT_TRUE(in.good()) << "packaging/pathkeeper.conf not found";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The shipped file shows settings as "#key = value" and prose as "# text";
// dropping the "#" from the former must give a valid config.
std::string uncommented(const std::string &text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ' && line[1] != '#') {
      line.erase(0, 1);
    }
    out += line + "\n";
  }
  return out;
}

TEST(ShippedConfig, ParsesAsShippedAndGivesTheBuiltInDefaults) {
  auto config = parseConfig(shippedConfig(), "pathkeeper.conf", builtinConfig());
  ASSERT_TRUE(config.has_value()) << config.error();
  EXPECT_TRUE(validateConfig(*config).has_value());
  EXPECT_EQ(config->defaults, Defaults{});
  EXPECT_EQ(config->discovery, DiscoverySettings{});
}

TEST(ShippedConfig, ItsCommentedSettingsAreValidAndShowTheRealDefaults) {
  auto config = parseConfig(uncommented(shippedConfig()), "pathkeeper.conf", builtinConfig());
  ASSERT_TRUE(config.has_value()) << config.error();
  EXPECT_TRUE(validateConfig(*config).has_value());
  EXPECT_EQ(config->defaults, Defaults{});
  EXPECT_EQ(config->discovery, DiscoverySettings{});
}

TEST(ShippedConfig, XserveExampleNamesUpperAndLowerBehindTheMds) {
  auto config = parseConfig(uncommented(shippedConfig()), "pathkeeper.conf", builtinConfig());
  ASSERT_TRUE(config.has_value()) << config.error();
  ASSERT_GE(config->controllers.size(), 2U);
  auto upper =
      controllerFor(*config, makePath("iqn.1987-05.com.cisco:05.mds-a.02-01.2000000393aa0001"));
  auto lower =
      controllerFor(*config, makePath("iqn.1987-05.com.cisco:05.mds-a.02-02.2000000393aa0002"));
  ASSERT_TRUE(upper.has_value());
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ((*upper)->label, "upper");
  EXPECT_EQ((*upper)->alias, "xserve-upper");
  EXPECT_EQ((*lower)->label, "lower");
  EXPECT_EQ((*lower)->alias, "xserve-lower");
}

TEST(ShippedConfig, ShowsEveryKeyOfTheSchema) {
  std::string text = shippedConfig();
  for (const auto &key : configSchema()) {
    std::regex word("(^|[^a-z_])" + std::string(key.key) + "([^a-z_]|$)");
    EXPECT_TRUE(std::regex_search(text, word)) << key.table << "." << key.key;
    if (!key.defaultValue.empty() && (key.table == "defaults" || key.table == "health" ||
                                      key.table == "discovery" || key.table == "adaptive")) {
      std::string line = "#" + std::string(key.key) + " = " + std::string(key.defaultValue) + "\n";
      EXPECT_THAT(text, HasSubstr(line));
    }
  }
}
#endif

} // namespace
} // namespace pathkeeper::selector
