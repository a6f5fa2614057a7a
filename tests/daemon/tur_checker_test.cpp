// The TUR checker: the decode table (pure), the worker pool with a fake
// runner, and the real SG_IO runner on nodes that are not SCSI devices (the
// host has none). The real SCSI path, sense data from an actual LU included,
// is exercised in the VM lab by the daemon's tests.
#include "tur_checker.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <poll.h>

#include <cerrno>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace pathkeeper::daemon {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using Bytes = std::vector<std::uint8_t>;

// --- decoding --------------------------------------------------------------

SgIoOutcome checkCondition(Bytes sense) {
  SgIoOutcome outcome;
  outcome.status = 0x02;
  outcome.driverStatus = 0x08; // DRIVER_SENSE, as the kernel sets it with sense data
  outcome.sense = std::move(sense);
  return outcome;
}

// Fixed format (SPC-4 4.5.3): response code, key in byte 2, ASC/ASCQ in 12/13.
Bytes fixedSense(std::uint8_t code, std::uint8_t key, std::uint8_t asc, std::uint8_t ascq) {
  Bytes sense(18, 0);
  sense[0] = code;
  sense[2] = key;
  sense[7] = 10; // additional length
  sense[12] = asc;
  sense[13] = ascq;
  return sense;
}

// Descriptor format (SPC-4 4.5.2): key, ASC and ASCQ in bytes 1 to 3.
Bytes descriptorSense(std::uint8_t code, std::uint8_t key, std::uint8_t asc, std::uint8_t ascq) {
  return Bytes{code, key, asc, ascq, 0, 0, 0, 0};
}

SgIoOutcome hostStatus(std::uint16_t host) {
  SgIoOutcome outcome;
  outcome.hostStatus = host;
  return outcome;
}

SgIoOutcome ioctlError(int error) {
  SgIoOutcome outcome;
  outcome.error = error;
  return outcome;
}

struct DecodeCase {
  std::string name;
  SgIoOutcome outcome;
  TurStatus status;
  std::string reason; // exact, or a substring when exact is false
  bool exact = true;
};

std::vector<DecodeCase> decodeCases() {
  SgIoOutcome good;
  SgIoOutcome reservationConflict;
  reservationConflict.status = 0x18;
  SgIoOutcome busy;
  busy.status = 0x08;
  SgIoOutcome taskSetFull;
  taskSetFull.status = 0x28;
  SgIoOutcome driverTimeout;
  driverTimeout.driverStatus = 0x06;
  SgIoOutcome openFailed;
  openFailed.error = ENOENT;
  openFailed.openFailed = true;
  // The host byte wins over sense data: the command never reached the LU.
  auto noConnectWithSense = checkCondition(fixedSense(0x70, 0x06, 0x29, 0x00));
  noConnectWithSense.hostStatus = 0x01;
  // Fixed format cut before the ASC: the key is all there is.
  Bytes shortFixed{0x70, 0x00, 0x02, 0, 0, 0, 0, 0};

  return {
      {"good", good, TurStatus::Up, "TUR: ready"},
      {"fixed standby", checkCondition(fixedSense(0x70, 0x02, 0x04, 0x0b)), TurStatus::Ghost,
       "TUR: NOT READY, ASC 04/0B target port in standby state"},
      {"descriptor standby", checkCondition(descriptorSense(0x72, 0x02, 0x04, 0x0b)),
       TurStatus::Ghost, "TUR: NOT READY, ASC 04/0B target port in standby state"},
      {"fixed unavailable", checkCondition(fixedSense(0x70, 0x02, 0x04, 0x0c)), TurStatus::Ghost,
       "TUR: NOT READY, ASC 04/0C target port in unavailable state"},
      {"descriptor unavailable", checkCondition(descriptorSense(0x72, 0x02, 0x04, 0x0c)),
       TurStatus::Ghost, "TUR: NOT READY, ASC 04/0C target port in unavailable state"},
      {"deferred fixed standby", checkCondition(fixedSense(0x71, 0x02, 0x04, 0x0b)),
       TurStatus::Ghost, "TUR: NOT READY, ASC 04/0B target port in standby state"},
      {"fixed with valid bit", checkCondition(fixedSense(0xf0, 0x02, 0x04, 0x0b)), TurStatus::Ghost,
       "TUR: NOT READY, ASC 04/0B target port in standby state"},
      {"becoming ready", checkCondition(fixedSense(0x70, 0x02, 0x04, 0x01)), TurStatus::Down,
       "TUR: NOT READY, ASC 04/01 logical unit is in process of becoming ready"},
      {"alua transition", checkCondition(descriptorSense(0x72, 0x02, 0x04, 0x0a)),
       TurStatus::Transitioning, "TUR: NOT READY, ASC 04/0A asymmetric access state transition"},
      {"fixed alua transition", checkCondition(fixedSense(0x70, 0x02, 0x04, 0x0a)),
       TurStatus::Transitioning, "TUR: NOT READY, ASC 04/0A asymmetric access state transition"},
      {"medium not present", checkCondition(fixedSense(0x70, 0x02, 0x3a, 0x00)), TurStatus::Down,
       "TUR: NOT READY, ASC 3A/00 medium not present"},
      {"unnamed asc", checkCondition(fixedSense(0x70, 0x02, 0x55, 0x07)), TurStatus::Down,
       "TUR: NOT READY, ASC 55/07"},
      {"fixed unit attention", checkCondition(fixedSense(0x70, 0x06, 0x29, 0x00)), TurStatus::Retry,
       "TUR: UNIT ATTENTION, ASC 29/00 power on, reset, or bus device reset "
       "occurred"},
      {"descriptor unit attention", checkCondition(descriptorSense(0x72, 0x06, 0x2a, 0x06)),
       TurStatus::Retry, "TUR: UNIT ATTENTION, ASC 2A/06 asymmetric access state changed"},
      {"deferred descriptor", checkCondition(descriptorSense(0x73, 0x06, 0x3f, 0x0e)),
       TurStatus::Retry, "TUR: UNIT ATTENTION, ASC 3F/0E reported luns data has changed"},
      {"aborted command", checkCondition(fixedSense(0x70, 0x0b, 0x47, 0x00)), TurStatus::Retry,
       "TUR: ABORTED COMMAND, ASC 47/00"},
      {"recovered error", checkCondition(fixedSense(0x70, 0x01, 0x5d, 0x00)), TurStatus::Up,
       "TUR: RECOVERED ERROR, ASC 5D/00"},
      {"hardware error", checkCondition(descriptorSense(0x72, 0x04, 0x44, 0x00)), TurStatus::Down,
       "TUR: HARDWARE ERROR, ASC 44/00 internal target failure"},
      {"lun not supported", checkCondition(fixedSense(0x70, 0x05, 0x25, 0x00)), TurStatus::Down,
       "TUR: ILLEGAL REQUEST, ASC 25/00 logical unit not supported"},
      {"short fixed sense", checkCondition(shortFixed), TurStatus::Down, "TUR: NOT READY"},
      {"no sense data", checkCondition({}), TurStatus::Down,
       "TUR: CHECK CONDITION without sense data"},
      {"unknown sense format", checkCondition(Bytes{0x7f, 0, 0, 0}), TurStatus::Down,
       "TUR: CHECK CONDITION with unusable sense data (response code 0x7f, 4 bytes)"},
      {"short descriptor", checkCondition(Bytes{0x72, 0x02, 0x04}), TurStatus::Down,
       "unusable sense data", false},
      {"reservation conflict", reservationConflict, TurStatus::Up, "RESERVATION CONFLICT", false},
      {"busy", busy, TurStatus::Retry, "TUR: BUSY"},
      {"task set full", taskSetFull, TurStatus::Retry, "TUR: TASK SET FULL"},
      {"no connect", hostStatus(0x01), TurStatus::Down,
       "TUR: no connection to the target (DID_NO_CONNECT)"},
      {"no connect beats sense", noConnectWithSense, TurStatus::Down, "DID_NO_CONNECT", false},
      {"transport disrupted", hostStatus(0x0e), TurStatus::Retry,
       "TUR: the session is recovering (DID_TRANSPORT_DISRUPTED)"},
      {"transport failfast", hostStatus(0x0f), TurStatus::Down, "DID_TRANSPORT_FAILFAST", false},
      {"bad target", hostStatus(0x04), TurStatus::Down, "DID_BAD_TARGET", false},
      {"host timeout", hostStatus(0x03), TurStatus::Timeout,
       "TUR: the command timed out (DID_TIME_OUT)"},
      {"host reset", hostStatus(0x08), TurStatus::Retry, "TUR: transient host error (DID_RESET)"},
      {"unknown host byte", hostStatus(0x42), TurStatus::Retry, "host status 0x42", false},
      {"driver timeout", driverTimeout, TurStatus::Timeout,
       "TUR: the command timed out (DRIVER_TIMEOUT)"},
      {"not sg", ioctlError(ENOTTY), TurStatus::Down,
       "TUR: the device does not accept SG_IO, not a SCSI device: Inappropriate ioctl for "
       "device (ENOTTY)"},
      {"interrupted", ioctlError(EINTR), TurStatus::Retry, "EINTR", false},
      {"gone", ioctlError(ENXIO), TurStatus::Down, "the device is gone", false},
      {"open failed", openFailed, TurStatus::Down,
       "TUR: cannot open the device node: No such file or directory (ENOENT)"},
  };
}

TEST(TurDecode, GivesTheVerdictAndReasonForEachOutcome) {
  for (const auto &test : decodeCases()) {
    SCOPED_TRACE(test.name);
    const auto verdict = decodeTurResult(test.outcome);
    EXPECT_EQ(verdict.status, test.status) << toString(verdict.status) << ": " << verdict.reason;
    if (test.exact) {
      EXPECT_EQ(verdict.reason, test.reason);
    } else {
      EXPECT_THAT(verdict.reason, HasSubstr(test.reason));
    }
  }
}

TEST(TurDecode, MapsVerdictsToPathStates) {
  EXPECT_EQ(toPathState(TurStatus::Up), selector::PathState::Up);
  EXPECT_EQ(toPathState(TurStatus::Ghost), selector::PathState::Ghost);
  EXPECT_EQ(toPathState(TurStatus::Down), selector::PathState::Down);
  EXPECT_EQ(toPathState(TurStatus::Timeout), selector::PathState::Down);
  EXPECT_EQ(toPathState(TurStatus::Retry), selector::PathState::Pending);
  EXPECT_EQ(toPathState(TurStatus::Transitioning), selector::PathState::Pending);
  EXPECT_EQ(toString(TurStatus::Transitioning), "transitioning");
}

// --- the real runner on nodes that are not SCSI devices ---------------------

TEST(TurRealRunner, RejectsDevNullWithAClearReason) {
  const auto outcome = runTestUnitReady("/dev/null", milliseconds(1000));
  EXPECT_FALSE(outcome.openFailed);
  EXPECT_TRUE(outcome.error == ENOTTY || outcome.error == EINVAL) << outcome.error;
  const auto verdict = decodeTurResult(outcome);
  EXPECT_EQ(verdict.status, TurStatus::Down);
  EXPECT_THAT(verdict.reason, HasSubstr("not a SCSI device"));
}

TEST(TurRealRunner, RejectsARegularFile) {
  const auto file =
      std::filesystem::temp_directory_path() / ("pk-tur-regular-" + std::to_string(::getpid()));
  std::ofstream(file) << "not a disk\n";
  const auto outcome = runTestUnitReady(file.string(), milliseconds(1000));
  std::filesystem::remove(file);
  EXPECT_FALSE(outcome.openFailed);
  EXPECT_TRUE(outcome.error == ENOTTY || outcome.error == EINVAL) << outcome.error;
  EXPECT_EQ(decodeTurResult(outcome).status, TurStatus::Down);
}

TEST(TurRealRunner, ReportsAMissingNodeAsOpenFailure) {
  const auto outcome = runTestUnitReady("/dev/pathkeeper-no-such-disk", milliseconds(1000));
  EXPECT_TRUE(outcome.openFailed);
  EXPECT_EQ(outcome.error, ENOENT);
  EXPECT_THAT(decodeTurResult(outcome).reason, HasSubstr("cannot open the device node"));
}

// --- the pool ---------------------------------------------------------------

// Scripted outcomes per device node, and a gate that holds calls until the
// test opens it. Shared by pointer so a detached worker can still use it.
class FakeRunner {
public:
  void script(const std::string &devnode, std::vector<SgIoOutcome> outcomes) {
    std::lock_guard lock(mutex_);
    scripts_[devnode] = std::move(outcomes);
  }
  void closeGate(const std::string &devnode) {
    std::lock_guard lock(mutex_);
    gated_[devnode] = true;
  }
  void openGate(const std::string &devnode) {
    {
      std::lock_guard lock(mutex_);
      gated_[devnode] = false;
    }
    changed_.notify_all();
  }
  void delay(const std::string &devnode, milliseconds duration) {
    std::lock_guard lock(mutex_);
    delays_[devnode] = duration;
  }
  int calls(const std::string &devnode) const {
    std::lock_guard lock(mutex_);
    const auto it = calls_.find(devnode);
    return it == calls_.end() ? 0 : it->second;
  }
  int returned() const {
    std::lock_guard lock(mutex_);
    return returned_;
  }
  // Waits until @p devnode has been called @p count times.
  bool waitForCalls(const std::string &devnode, int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(5), [&] {
      const auto it = calls_.find(devnode);
      return it != calls_.end() && it->second >= count;
    });
  }
  bool waitForReturned(int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(5), [&] { return returned_ >= count; });
  }

  SgIoOutcome run(const std::string &devnode) {
    std::unique_lock lock(mutex_);
    ++calls_[devnode];
    changed_.notify_all();
    changed_.wait(lock, [&] { return !gated_[devnode]; });
    const auto pause = delays_[devnode];
    SgIoOutcome outcome; // GOOD unless scripted
    auto &script = scripts_[devnode];
    if (!script.empty()) {
      outcome = script.front();
      script.erase(script.begin());
    }
    lock.unlock();
    std::this_thread::sleep_for(pause);
    lock.lock();
    ++returned_;
    changed_.notify_all();
    return outcome;
  }

private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<SgIoOutcome>> scripts_;
  std::map<std::string, bool> gated_;
  std::map<std::string, milliseconds> delays_;
  std::map<std::string, int> calls_;
  int returned_ = 0;
};

TurChecker::Options fakeOptions(const std::shared_ptr<FakeRunner> &fake, unsigned workers = 2) {
  TurChecker::Options options;
  options.workers = workers;
  options.runner = [fake](const std::string &devnode, milliseconds) { return fake->run(devnode); };
  return options;
}

TurCheckRequest request(const std::string &device, std::uint64_t cookie,
                        milliseconds timeout = milliseconds(10000), std::string group = {}) {
  return TurCheckRequest{device, "/dev/" + device, timeout, cookie, std::move(group)};
}

// Waits on the eventfd the way the loop does, until @p count results came.
std::vector<TurCheckResult> collect(TurChecker &checker, std::size_t count,
                                    milliseconds limit = milliseconds(5000)) {
  std::vector<TurCheckResult> results;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (results.size() < count) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      break;
    }
    pollfd pfd{checker.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) {
      break;
    }
    for (auto &result : checker.drain()) {
      results.push_back(std::move(result));
    }
  }
  return results;
}

bool readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 1;
}

TEST(TurChecker, DeliversResultsThroughTheEventfd) {
  auto fake = std::make_shared<FakeRunner>();
  fake->script("/dev/sdc", {checkCondition(fixedSense(0x70, 0x02, 0x04, 0x0b))});
  TurChecker checker(fakeOptions(fake));
  EXPECT_FALSE(readable(checker.fd()));
  checker.submit(request("sdb", 1));
  checker.submit(request("sdc", 2));

  const auto results = collect(checker, 2);
  ASSERT_EQ(results.size(), 2U);
  std::map<std::string, TurCheckResult> byDevice;
  for (const auto &result : results) {
    byDevice[result.device] = result;
  }
  EXPECT_EQ(byDevice["sdb"].verdict.status, TurStatus::Up);
  EXPECT_EQ(byDevice["sdb"].cookie, 1U);
  EXPECT_EQ(byDevice["sdc"].verdict.status, TurStatus::Ghost);
  EXPECT_EQ(byDevice["sdc"].cookie, 2U);
  EXPECT_THAT(byDevice["sdc"].verdict.reason, HasSubstr("standby"));
  EXPECT_FALSE(readable(checker.fd()));
  EXPECT_TRUE(checker.drain().empty());
  EXPECT_EQ(checker.inFlight(), 0U);
}

TEST(TurChecker, AsksAgainAfterAUnitAttention) {
  auto fake = std::make_shared<FakeRunner>();
  fake->script("/dev/sdb", {checkCondition(fixedSense(0x70, 0x06, 0x2a, 0x06)), SgIoOutcome{}});
  TurChecker checker(fakeOptions(fake));
  checker.submit(request("sdb", 7));
  const auto results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Up);
  EXPECT_EQ(fake->calls("/dev/sdb"), 2);
}

TEST(TurChecker, GivesUpAfterKTurAttemptsOfUnitAttention) {
  auto fake = std::make_shared<FakeRunner>();
  fake->script("/dev/sdb", std::vector<SgIoOutcome>(
                               10, checkCondition(descriptorSense(0x72, 0x06, 0x29, 0x00))));
  TurChecker checker(fakeOptions(fake));
  checker.submit(request("sdb", 1));
  const auto results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Down);
  EXPECT_THAT(results[0].verdict.reason, HasSubstr("UNIT ATTENTION"));
  EXPECT_THAT(results[0].verdict.reason, HasSubstr("after 5 attempts"));
  EXPECT_EQ(fake->calls("/dev/sdb"), kTurAttempts);
}

TEST(TurChecker, CoalescesASecondSubmitForADeviceInFlight) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb");
  TurChecker checker(fakeOptions(fake));
  checker.submit(request("sdb", 1));
  ASSERT_TRUE(fake->waitForCalls("/dev/sdb", 1));
  checker.submit(request("sdb", 2));
  EXPECT_EQ(checker.inFlight(), 1U);
  EXPECT_FALSE(readable(checker.fd()));
  fake->openGate("/dev/sdb");

  const auto results = collect(checker, 2);
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].device, "sdb");
  EXPECT_EQ(results[1].device, "sdb");
  EXPECT_THAT((std::vector{results[0].cookie, results[1].cookie}), UnorderedElementsAre(1U, 2U));
  EXPECT_EQ(fake->calls("/dev/sdb"), 1);
}

TEST(TurChecker, CoalescesSubmitsForAQueuedDevice) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sda");
  TurChecker checker(fakeOptions(fake, 1));
  checker.submit(request("sda", 1)); // takes the only worker
  ASSERT_TRUE(fake->waitForCalls("/dev/sda", 1));
  checker.submit(request("sdb", 2)); // queued behind it
  checker.submit(request("sdb", 3));
  EXPECT_EQ(checker.inFlight(), 2U);
  fake->openGate("/dev/sda");
  const auto results = collect(checker, 3);
  ASSERT_EQ(results.size(), 3U);
  EXPECT_EQ(fake->calls("/dev/sdb"), 1);
}

TEST(TurChecker, MeasuresLatencyFromSubmit) {
  auto fake = std::make_shared<FakeRunner>();
  fake->delay("/dev/sdb", milliseconds(60));
  TurChecker checker(fakeOptions(fake));
  const auto submitted = std::chrono::steady_clock::now();
  checker.submit(request("sdb", 1));
  const auto results = collect(checker, 1);
  const auto collected = std::chrono::steady_clock::now();
  ASSERT_EQ(results.size(), 1U);
  // At least the device's answer, at most the whole wait for it.
  EXPECT_GE(results[0].latency, milliseconds(60));
  EXPECT_LE(results[0].latency, collected - submitted);
}

TEST(TurChecker, AnswersAHungCheckWithTimeoutAndKeepsCheckingOthers) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb");
  auto options = fakeOptions(fake, 1);
  options.grace = milliseconds(20);
  TurChecker checker(std::move(options));
  checker.submit(request("sdb", 1, milliseconds(30)));

  auto results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Timeout);
  EXPECT_THAT(results[0].verdict.reason, HasSubstr("no answer within 50 ms"));
  EXPECT_GE(results[0].latency, milliseconds(50));

  // The device is still stuck: a new submit is answered at once.
  checker.submit(request("sdb", 2, milliseconds(30)));
  results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].cookie, 2U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Timeout);
  EXPECT_THAT(results[0].verdict.reason, HasSubstr("still hung"));
  EXPECT_EQ(fake->calls("/dev/sdb"), 1);

  // The only configured worker is stuck, yet another device gets checked.
  checker.submit(request("sdc", 3));
  results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].device, "sdc");
  EXPECT_EQ(results[0].verdict.status, TurStatus::Up);

  // When the kernel lets go, the stale outcome is dropped.
  fake->openGate("/dev/sdb");
  ASSERT_TRUE(fake->waitForReturned(2));
  for (int i = 0; i < 100 && checker.inFlight() != 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(checker.inFlight(), 0U);
  EXPECT_TRUE(collect(checker, 1, milliseconds(100)).empty());

  // And the device is checked afresh.
  checker.submit(request("sdb", 4));
  results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Up);
  EXPECT_EQ(fake->calls("/dev/sdb"), 2);
}

// Every hung check gets a replacement worker; once the kernel lets the
// check go, the extra thread leaves and is not kept (an unjoined thread
// keeps its stack: a flaky portal would leak one per episode).
TEST(TurChecker, AHungChecksReplacementLeavesOnceTheKernelLetsGo) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb");
  auto options = fakeOptions(fake, 1);
  options.grace = milliseconds(20);
  TurChecker checker(std::move(options));
  EXPECT_EQ(checker.threads(), 1U);
  for (std::uint64_t episode = 1; episode <= 3; ++episode) {
    checker.submit(request("sdb", episode, milliseconds(30)));
    auto results = collect(checker, 1);
    ASSERT_EQ(results.size(), 1U);
    ASSERT_EQ(results[0].verdict.status, TurStatus::Timeout);
    EXPECT_EQ(checker.threads(), 2U) << "the hung worker and its replacement";
    fake->openGate("/dev/sdb");
    ASSERT_TRUE(fake->waitForReturned(static_cast<int>(episode)));
    for (int i = 0; i < 500 && checker.threads() != 1; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(checker.threads(), 1U) << "episode " << episode;
    fake->closeGate("/dev/sdb");
  }
  fake->openGate("/dev/sdb");
  checker.submit(request("sdc", 9));
  auto results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Up);
}

TEST(TurChecker, AHungCheckHoldsBackTheOtherChecksOfItsGroupOnly) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb"); // session1's portal went silent
  auto options = fakeOptions(fake, 1);
  options.grace = milliseconds(20);
  TurChecker checker(std::move(options));
  checker.submit(request("sdb", 1, milliseconds(30), "session1"));
  auto results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Timeout);
  EXPECT_THAT(results[0].verdict.reason, HasSubstr("the other checks through session1 wait"));

  // Another LU behind session1 waits; session2's is checked meanwhile.
  checker.submit(request("sdc", 2, milliseconds(30), "session1"));
  checker.submit(request("sdd", 3, milliseconds(30), "session2"));
  results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].device, "sdd");
  EXPECT_EQ(results[0].verdict.status, TurStatus::Up);
  EXPECT_EQ(fake->calls("/dev/sdc"), 0) << "it would have hung a second worker";
  EXPECT_EQ(checker.queued(), std::set<std::string>{"sdc"});

  // When the kernel lets sdb go, sdc runs.
  fake->openGate("/dev/sdb");
  results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].device, "sdc");
  EXPECT_EQ(results[0].verdict.status, TurStatus::Up);
  EXPECT_TRUE(checker.queued().empty());
}

TEST(TurChecker, ManyHungGroupsDoNotStarveAHealthyDevice) {
  // A portal behind two dozen sessions goes silent: more hung checks than
  // the pool used to replace (16), each in its own group.
  auto fake = std::make_shared<FakeRunner>();
  auto options = fakeOptions(fake, 2);
  options.grace = milliseconds(10);
  TurChecker checker(std::move(options));
  constexpr int kDead = 24;
  for (int i = 0; i < kDead; ++i) {
    const std::string device = "dead" + std::to_string(i);
    fake->closeGate("/dev/" + device);
    checker.submit(request(device, static_cast<std::uint64_t>(i), milliseconds(10),
                           "session" + std::to_string(i)));
  }
  checker.submit(request("sdz", 100, milliseconds(10), "session-healthy"));
  const auto results = collect(checker, kDead + 1, milliseconds(20000));
  ASSERT_EQ(results.size(), static_cast<std::size_t>(kDead + 1));
  for (const auto &result : results) {
    EXPECT_EQ(result.verdict.status, result.device == "sdz" ? TurStatus::Up : TurStatus::Timeout)
        << result.device;
  }
  for (int i = 0; i < kDead; ++i) {
    fake->openGate("/dev/dead" + std::to_string(i));
  }
  EXPECT_TRUE(fake->waitForReturned(kDead + 1));
}

TEST(TurChecker, ShutdownWaitsForARunningCheckThatEndsAndDropsQueuedOnes) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb");
  auto options = fakeOptions(fake, 1);
  options.stopWait = std::chrono::hours(1);
  auto checker = std::make_unique<TurChecker>(std::move(options));
  checker->submit(request("sdb", 1));
  ASSERT_TRUE(fake->waitForCalls("/dev/sdb", 1));
  checker->submit(request("sdc", 2)); // queued: the only worker is busy

  auto destroyed = std::async(std::launch::async, [&checker] { checker.reset(); });
  EXPECT_EQ(destroyed.wait_for(milliseconds(100)), std::future_status::timeout);
  fake->openGate("/dev/sdb");
  EXPECT_EQ(destroyed.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(fake->returned(), 1); // joined: the check ended before destruction did
  EXPECT_EQ(fake->calls("/dev/sdc"), 0);
}

// Destruction returns while the "kernel" still holds the ioctl, which only
// the test lets go after it; the bound only keeps a failing test from
// hanging.
void expectDestroyedWhileTheGateIsClosed(std::unique_ptr<TurChecker> &checker,
                                         const std::shared_ptr<FakeRunner> &fake) {
  auto destroyed = std::async(std::launch::async, [&checker] { checker.reset(); });
  const auto status = destroyed.wait_for(std::chrono::seconds(30));
  EXPECT_EQ(status, std::future_status::ready) << "destruction waited for the ioctl";
  EXPECT_EQ(fake->returned(), 0);
  // The detached worker finishes once the "kernel" lets go.
  fake->openGate("/dev/sdb");
  EXPECT_TRUE(fake->waitForReturned(1));
  destroyed.wait();
}

TEST(TurChecker, ShutdownDoesNotWaitForAHungIoctl) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb");
  auto options = fakeOptions(fake, 1);
  options.grace = milliseconds(10);
  options.stopWait = std::chrono::hours(1); // a hung check is not waited for at all
  auto checker = std::make_unique<TurChecker>(std::move(options));
  checker->submit(request("sdb", 1, milliseconds(10)));
  const auto results = collect(*checker, 1);
  ASSERT_EQ(results.size(), 1U);
  ASSERT_EQ(results[0].verdict.status, TurStatus::Timeout);
  expectDestroyedWhileTheGateIsClosed(checker, fake);
}

// A TUR to a session the kernel has blocked waits for recovery_tmo (120 s
// by default), far past a stop's patience, before its own timeout makes it
// hung.
TEST(TurChecker, ShutdownLeavesACheckStillInTheKernelAfterStopWait) {
  auto fake = std::make_shared<FakeRunner>();
  fake->closeGate("/dev/sdb");
  auto options = fakeOptions(fake, 1);
  options.stopWait = milliseconds(20);
  auto checker = std::make_unique<TurChecker>(std::move(options));
  checker->submit(request("sdb", 1, std::chrono::hours(1))); // never hung by its timeout
  ASSERT_TRUE(fake->waitForCalls("/dev/sdb", 1));
  expectDestroyedWhileTheGateIsClosed(checker, fake);
}

TEST(TurChecker, RealRunnerReportsANonScsiNodeAsDown) {
  TurChecker checker; // the default options: real SG_IO
  checker.submit(TurCheckRequest{"null", "/dev/null", milliseconds(1000), 9, {}});
  const auto results = collect(checker, 1);
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0].cookie, 9U);
  EXPECT_EQ(results[0].verdict.status, TurStatus::Down);
  EXPECT_THAT(results[0].verdict.reason, HasSubstr("not a SCSI device"));
}

} // namespace
} // namespace pathkeeper::daemon
