#include "tur_checker.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <scsi/sg.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <pthread.h>

namespace pathkeeper::daemon {

namespace {

using std::chrono::milliseconds;

// The fd owner both adapters of this file need; closes on destruction.
class UniqueFd {
public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;
  UniqueFd(UniqueFd &&) = delete;
  UniqueFd &operator=(UniqueFd &&) = delete;
  [[nodiscard]] int get() const { return fd_; }

private:
  int fd_;
};

// SAM status codes (SAM-5 table 43), as the kernel reports them in
// sg_io_hdr.status.
constexpr std::uint8_t kStatusGood = 0x00;
constexpr std::uint8_t kStatusCheckCondition = 0x02;
constexpr std::uint8_t kStatusBusy = 0x08;
constexpr std::uint8_t kStatusReservationConflict = 0x18;
constexpr std::uint8_t kStatusTaskSetFull = 0x28;
constexpr std::uint8_t kStatusAcaActive = 0x30;
constexpr std::uint8_t kStatusTaskAborted = 0x40;

// The kernel's host byte (include/scsi/scsi_status.h); the uapi headers do
// not carry these.
enum HostByte : std::uint16_t {
  kDidOk = 0x00,
  kDidNoConnect = 0x01,
  kDidBusBusy = 0x02,
  kDidTimeOut = 0x03,
  kDidBadTarget = 0x04,
  kDidAbort = 0x05,
  kDidParity = 0x06,
  kDidError = 0x07,
  kDidReset = 0x08,
  kDidBadIntr = 0x09,
  kDidPassthrough = 0x0a,
  kDidSoftError = 0x0b,
  kDidImmRetry = 0x0c,
  kDidRequeue = 0x0d,
  kDidTransportDisrupted = 0x0e,
  kDidTransportFailfast = 0x0f,
  kDidTargetFailure = 0x10,
  kDidNexusFailure = 0x11,
  kDidAllocFailure = 0x12,
  kDidMediumError = 0x13,
  kDidTransportMarginal = 0x14,
};

// Older kernels report a timed-out SG_IO in the driver byte instead.
constexpr std::uint16_t kDriverTimeout = 0x06;

std::string hostByteName(std::uint16_t host) {
  static constexpr std::array<std::string_view, 21> kNames = {"DID_OK",
                                                              "DID_NO_CONNECT",
                                                              "DID_BUS_BUSY",
                                                              "DID_TIME_OUT",
                                                              "DID_BAD_TARGET",
                                                              "DID_ABORT",
                                                              "DID_PARITY",
                                                              "DID_ERROR",
                                                              "DID_RESET",
                                                              "DID_BAD_INTR",
                                                              "DID_PASSTHROUGH",
                                                              "DID_SOFT_ERROR",
                                                              "DID_IMM_RETRY",
                                                              "DID_REQUEUE",
                                                              "DID_TRANSPORT_DISRUPTED",
                                                              "DID_TRANSPORT_FAILFAST",
                                                              "DID_TARGET_FAILURE",
                                                              "DID_NEXUS_FAILURE",
                                                              "DID_ALLOC_FAILURE",
                                                              "DID_MEDIUM_ERROR",
                                                              "DID_TRANSPORT_MARGINAL"};
  if (host < kNames.size()) {
    return std::string(kNames[host]);
  }
  return fmt::format("host status 0x{:02x}", host);
}

std::string_view senseKeyName(unsigned key) {
  static constexpr std::array<std::string_view, 16> kNames = {
      "NO SENSE",       "RECOVERED ERROR", "NOT READY",      "MEDIUM ERROR",
      "HARDWARE ERROR", "ILLEGAL REQUEST", "UNIT ATTENTION", "DATA PROTECT",
      "BLANK CHECK",    "VENDOR SPECIFIC", "COPY ABORTED",   "ABORTED COMMAND",
      "RESERVED (0xC)", "VOLUME OVERFLOW", "MISCOMPARE",     "COMPLETED"};
  return kNames[key & 0x0f];
}

// The additional sense codes a TUR on a multipath LU gives in practice
// (SPC-4 annex D); others print as numbers only.
std::string_view ascName(unsigned asc, unsigned ascq) {
  struct Entry {
    unsigned asc;
    unsigned ascq;
    std::string_view name;
  };
  static constexpr std::array<Entry, 19> kTable = {{
      {0x04, 0x00, "logical unit not ready, cause not reportable"},
      {0x04, 0x01, "logical unit is in process of becoming ready"},
      {0x04, 0x02, "initializing command required"},
      {0x04, 0x03, "manual intervention required"},
      {0x04, 0x0a, "asymmetric access state transition"},
      {0x04, 0x0b, "target port in standby state"},
      {0x04, 0x0c, "target port in unavailable state"},
      {0x05, 0x00, "logical unit does not respond to selection"},
      {0x08, 0x00, "logical unit communication failure"},
      {0x25, 0x00, "logical unit not supported"},
      {0x28, 0x00, "not ready to ready change, medium may have changed"},
      {0x29, 0x00, "power on, reset, or bus device reset occurred"},
      {0x2a, 0x06, "asymmetric access state changed"},
      {0x2a, 0x09, "capacity data has changed"},
      {0x3a, 0x00, "medium not present"},
      {0x3f, 0x03, "inquiry data has changed"},
      {0x3f, 0x0e, "reported luns data has changed"},
      {0x44, 0x00, "internal target failure"},
      {0x3e, 0x03, "logical unit failed self-test"},
  }};
  for (const auto &entry : kTable) {
    if (entry.asc == asc && entry.ascq == ascq) {
      return entry.name;
    }
  }
  return {};
}

std::string errnoText(int error) {
  const char *name = ::strerrorname_np(error);
  return fmt::format("{} ({})", std::generic_category().message(error),
                     name ? std::string(name) : fmt::format("errno {}", error));
}

TurVerdict verdict(TurStatus status, std::string reason) {
  return TurVerdict{status, "TUR: " + std::move(reason)};
}

struct Sense {
  unsigned key = 0;
  std::optional<std::pair<unsigned, unsigned>> asc; // ASC, ASCQ
};

// Fixed format keeps the key in byte 2 and ASC/ASCQ in bytes 12/13;
// descriptor format in bytes 1, 2 and 3 (SPC-4 4.5).
std::optional<Sense> parseSense(const std::vector<std::uint8_t> &sense) {
  if (sense.empty()) {
    return std::nullopt;
  }
  const unsigned code = sense[0] & 0x7f;
  if (code == 0x72 || code == 0x73) {
    if (sense.size() < 4) {
      return std::nullopt;
    }
    return Sense{sense[1] & 0x0fU, std::pair<unsigned, unsigned>{sense[2], sense[3]}};
  }
  if (code == 0x70 || code == 0x71) {
    if (sense.size() < 3) {
      return std::nullopt;
    }
    Sense parsed{sense[2] & 0x0fU, std::nullopt};
    if (sense.size() >= 14) {
      parsed.asc = std::pair<unsigned, unsigned>{sense[12], sense[13]};
    }
    return parsed;
  }
  return std::nullopt;
}

TurVerdict decodeCheckCondition(const std::vector<std::uint8_t> &bytes) {
  const auto sense = parseSense(bytes);
  if (!sense) {
    if (bytes.empty()) {
      return verdict(TurStatus::Down, "CHECK CONDITION without sense data");
    }
    return verdict(TurStatus::Down,
                   fmt::format("CHECK CONDITION with unusable sense data (response code "
                               "0x{:02x}, {} bytes)",
                               bytes[0], bytes.size()));
  }
  std::string reason(senseKeyName(sense->key));
  if (sense->asc) {
    const auto [asc, ascq] = *sense->asc;
    reason += fmt::format(", ASC {:02X}/{:02X}", asc, ascq);
    const auto name = ascName(asc, ascq);
    if (!name.empty()) {
      reason += fmt::format(" {}", name);
    }
  }
  switch (sense->key) {
  case 0x1: // the command succeeded after the device recovered
    return verdict(TurStatus::Up, std::move(reason));
  case 0x2:
    if (sense->asc && sense->asc->first == 0x04 &&
        (sense->asc->second == 0x0b || sense->asc->second == 0x0c)) {
      return verdict(TurStatus::Ghost, std::move(reason));
    }
    if (sense->asc && sense->asc->first == 0x04 && sense->asc->second == 0x0a) {
      return verdict(TurStatus::Transitioning, std::move(reason));
    }
    return verdict(TurStatus::Down, std::move(reason));
  case 0x6: // reported once per event: asking again gives the real state
  case 0xb: // the target aborted it, e.g. on a transport problem
    return verdict(TurStatus::Retry, std::move(reason));
  default:
    return verdict(TurStatus::Down, std::move(reason));
  }
}

} // namespace

std::string_view toString(TurStatus status) {
  switch (status) {
  case TurStatus::Up:
    return "up";
  case TurStatus::Down:
    return "down";
  case TurStatus::Ghost:
    return "ghost";
  case TurStatus::Retry:
    return "retry";
  case TurStatus::Timeout:
    return "timeout";
  case TurStatus::Transitioning:
    return "transitioning";
  }
  return "unknown";
}

selector::PathState toPathState(TurStatus status) {
  switch (status) {
  case TurStatus::Up:
    return selector::PathState::Up;
  case TurStatus::Ghost:
    return selector::PathState::Ghost;
  case TurStatus::Retry:
  case TurStatus::Transitioning:
    return selector::PathState::Pending;
  case TurStatus::Down:
  case TurStatus::Timeout:
    return selector::PathState::Down;
  }
  return selector::PathState::Unknown;
}

TurVerdict decodeTurResult(const SgIoOutcome &outcome) {
  if (outcome.error != 0) {
    if (outcome.openFailed) {
      return verdict(TurStatus::Down, "cannot open the device node: " + errnoText(outcome.error));
    }
    switch (outcome.error) {
    case EINTR:
    case EAGAIN:
    case EBUSY:
      return verdict(TurStatus::Retry, "SG_IO did not start: " + errnoText(outcome.error));
    case ENOTTY:
    case EINVAL:
      return verdict(TurStatus::Down, "the device does not accept SG_IO, not a SCSI device: " +
                                          errnoText(outcome.error));
    case ENODEV:
    case ENXIO:
      return verdict(TurStatus::Down, "the device is gone: " + errnoText(outcome.error));
    default:
      return verdict(TurStatus::Down, "SG_IO failed: " + errnoText(outcome.error));
    }
  }

  switch (outcome.hostStatus) {
  case kDidOk:
    break;
  case kDidNoConnect:
    return verdict(TurStatus::Down, "no connection to the target (DID_NO_CONNECT)");
  case kDidBadTarget:
    return verdict(TurStatus::Down, "the target is gone (DID_BAD_TARGET)");
  case kDidAbort:
    return verdict(TurStatus::Down, "the command was aborted (DID_ABORT)");
  case kDidTransportFailfast:
    return verdict(TurStatus::Down,
                   "the session is down past its fast-fail timeout (DID_TRANSPORT_FAILFAST)");
  case kDidTargetFailure:
  case kDidNexusFailure:
  case kDidMediumError:
    return verdict(TurStatus::Down, "permanent failure (" + hostByteName(outcome.hostStatus) + ")");
  case kDidTimeOut:
    return verdict(TurStatus::Timeout, "the command timed out (DID_TIME_OUT)");
  case kDidTransportDisrupted:
    return verdict(TurStatus::Retry, "the session is recovering (DID_TRANSPORT_DISRUPTED)");
  default:
    return verdict(TurStatus::Retry,
                   "transient host error (" + hostByteName(outcome.hostStatus) + ")");
  }

  if ((outcome.driverStatus & 0x0f) == kDriverTimeout) {
    return verdict(TurStatus::Timeout, "the command timed out (DRIVER_TIMEOUT)");
  }

  // multipath-tools masks the reserved bits the same way.
  switch (outcome.status & 0x7e) {
  case kStatusGood:
    if ((outcome.driverStatus & 0x0f) != 0) {
      return verdict(TurStatus::Down,
                     fmt::format("driver error (driver status 0x{:02x})", outcome.driverStatus));
    }
    return verdict(TurStatus::Up, "ready");
  case kStatusCheckCondition:
    return decodeCheckCondition(outcome.sense);
  case kStatusReservationConflict:
    return verdict(TurStatus::Up, "RESERVATION CONFLICT: reachable, reserved by another host");
  case kStatusBusy:
    return verdict(TurStatus::Retry, "BUSY");
  case kStatusTaskSetFull:
    return verdict(TurStatus::Retry, "TASK SET FULL");
  case kStatusTaskAborted:
    return verdict(TurStatus::Retry, "TASK ABORTED");
  case kStatusAcaActive:
    return verdict(TurStatus::Down, "ACA ACTIVE");
  default:
    return verdict(TurStatus::Down, fmt::format("SCSI status 0x{:02x}", outcome.status));
  }
}

SgIoOutcome runTestUnitReady(const std::string &devnode, milliseconds timeout) {
  SgIoOutcome outcome;
  // O_NONBLOCK: opening a removable or reserved device must not wait.
  const UniqueFd fd(::open(devnode.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    outcome.error = errno;
    outcome.openFailed = true;
    return outcome;
  }
  std::array<unsigned char, 6> cdb{}; // TEST UNIT READY is opcode 0
  std::array<unsigned char, 32> sense{};
  sg_io_hdr_t header{};
  header.interface_id = 'S';
  header.dxfer_direction = SG_DXFER_NONE;
  header.cmd_len = cdb.size();
  header.cmdp = cdb.data();
  header.mx_sb_len = sense.size();
  header.sbp = sense.data();
  header.timeout = static_cast<unsigned>(
      std::clamp<milliseconds::rep>(timeout.count(), 1, std::numeric_limits<int>::max()));
  if (::ioctl(fd.get(), SG_IO, &header) < 0) {
    outcome.error = errno;
    return outcome;
  }
  outcome.status = header.status;
  outcome.hostStatus = header.host_status;
  outcome.driverStatus = header.driver_status;
  const auto senseLength = std::min<std::size_t>(header.sb_len_wr, sense.size());
  outcome.sense.assign(sense.begin(), sense.begin() + static_cast<std::ptrdiff_t>(senseLength));
  return outcome;
}

// ---------------------------------------------------------------------------
// The pool.

namespace {

struct Waiter {
  std::uint64_t cookie;
  TurChecker::Clock::time_point submitted;
};

// One device's check, shared by the submits that coalesced into it.
struct Check {
  std::string device;
  std::string devnode;
  std::string group;
  milliseconds timeout{0};
  std::vector<Waiter> waiters;
  bool running = false;
  bool hung = false;
  TurChecker::Clock::time_point deadline{};
  TurChecker::Clock::time_point hungSince{};
};

struct Worker {
  std::thread thread;
  std::shared_ptr<Check> current; // guarded by State::mutex
};

TurVerdict runCheck(const TurRunner &runner, const Check &check) {
  TurVerdict last;
  for (int attempt = 1; attempt <= kTurAttempts; ++attempt) {
    last = decodeTurResult(runner(check.devnode, check.timeout));
    if (last.status != TurStatus::Retry) {
      return last;
    }
  }
  last.status = TurStatus::Down;
  last.reason += fmt::format(" (still after {} attempts)", kTurAttempts);
  return last;
}

std::chrono::microseconds since(TurChecker::Clock::time_point start,
                                TurChecker::Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::microseconds>(now - start);
}

} // namespace

struct TurChecker::State {
  explicit State(Options options)
      : runner(std::move(options.runner)), grace(options.grace), stopWait(options.stopWait),
        targetWorkers(std::max(1U, options.workers)),
        eventFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (eventFd.get() < 0) {
      throw std::system_error(errno, std::generic_category(), "TUR checker: eventfd");
    }
    if (!runner) {
      throw std::invalid_argument("TUR checker: no runner");
    }
  }

  const TurRunner runner;
  const milliseconds grace;
  const milliseconds stopWait;
  const unsigned targetWorkers;
  const UniqueFd eventFd;

  mutable std::mutex mutex;
  std::condition_variable workReady;  // workers wait here
  std::condition_variable watchReady; // the watchdog waits here
  std::condition_variable checkEnded; // destruction waits here for running checks
  bool stopping = false;
  std::deque<std::shared_ptr<Check>> queue;
  std::map<std::string, std::shared_ptr<Check>, std::less<>> active; // queued, running or hung
  std::vector<TurCheckResult> done;
  // Stable addresses. A surplus worker removes itself as it leaves; after
  // `stopping` none does, and destruction joins or detaches the rest.
  std::list<Worker> workers;
  unsigned liveWorkers = 0;
  unsigned hungWorkers = 0;
  std::map<std::string, unsigned, std::less<>> hungGroups; // group -> its hung checks
  std::thread watchdog;

  // Caller holds the mutex. The first queued check that may start: none of
  // its group is hung in the kernel.
  std::deque<std::shared_ptr<Check>>::iterator runnable() {
    return std::find_if(queue.begin(), queue.end(), [&](const std::shared_ptr<Check> &check) {
      return check->group.empty() || !hungGroups.contains(check->group);
    });
  }

  // Caller holds the mutex.
  void signal() {
    const std::uint64_t one = 1;
    // Only fails with EAGAIN when the counter would overflow, and then it
    // is readable anyway.
    [[maybe_unused]] const auto written = ::write(eventFd.get(), &one, sizeof(one));
  }

  // Caller holds the mutex.
  void answer(Check &check, const TurVerdict &verdict, Clock::time_point now) {
    for (const auto &waiter : check.waiters) {
      done.push_back(
          TurCheckResult{check.device, verdict, since(waiter.submitted, now), waiter.cookie});
    }
    check.waiters.clear();
    signal();
  }

  // Caller holds the mutex.
  void startWorker(const std::shared_ptr<State> &self) {
    auto &worker = workers.emplace_back();
    ++liveWorkers;
    try {
      worker.thread = std::thread([self, &worker] {
        ::pthread_setname_np(::pthread_self(), "pk-tur");
        self->work(worker);
      });
    } catch (...) {
      --liveWorkers;
      workers.pop_back();
      throw;
    }
  }

  void work(Worker &self) {
    std::unique_lock lock(mutex);
    for (;;) {
      workReady.wait(lock, [&] {
        return stopping || runnable() != queue.end() || liveWorkers > targetWorkers + hungWorkers;
      });
      if (stopping) {
        break;
      }
      if (liveWorkers > targetWorkers + hungWorkers) {
        // A hung check's replacement, no longer needed. Nobody would join
        // this thread, and glibc keeps an unjoined thread's stack: detach
        // it and drop its entry. Nothing touches `self` after the erase.
        --liveWorkers;
        self.thread.detach();
        workers.remove_if([&](const Worker &worker) { return &worker == &self; });
        return;
      }
      const auto next = runnable();
      auto check = std::move(*next);
      queue.erase(next);
      check->running = true;
      check->deadline = Clock::now() + check->timeout + grace;
      self.current = check;
      watchReady.notify_one();

      lock.unlock();
      const auto verdict = runCheck(runner, *check);
      lock.lock();

      self.current.reset();
      if (stopping) {
        checkEnded.notify_all();
      }
      const auto it = active.find(check->device);
      if (it != active.end() && it->second == check) {
        active.erase(it);
      }
      if (check->hung) {
        // Already answered with Timeout; this outcome is stale. The group's
        // waiting checks may run now.
        --hungWorkers;
        if (auto group = hungGroups.find(check->group);
            group != hungGroups.end() && --group->second == 0) {
          hungGroups.erase(group);
          workReady.notify_all();
        }
      } else {
        answer(*check, verdict, Clock::now());
      }
    }
    --liveWorkers;
  }

  void watch(const std::shared_ptr<State> &self) {
    std::unique_lock lock(mutex);
    while (!stopping) {
      const auto now = Clock::now();
      std::optional<Clock::time_point> next;
      for (auto &[device, check] : active) {
        if (!check->running || check->hung) {
          continue;
        }
        if (check->deadline <= now) {
          check->hung = true;
          check->hungSince = now;
          ++hungWorkers;
          if (!check->group.empty()) {
            ++hungGroups[check->group];
          }
          answer(*check,
                 verdict(TurStatus::Timeout,
                         fmt::format("no answer within {} ms; the kernel still holds "
                                     "the command{}",
                                     (check->timeout + grace).count(),
                                     check->group.empty()
                                         ? std::string{}
                                         : fmt::format(" (the other checks through {} wait "
                                                       "until it lets go)",
                                                       check->group))),
                 now);
          if (hungWorkers <= kMaxHungWorkers) {
            try {
              startWorker(self);
            } catch (const std::system_error &) {
              // Fewer workers: checks wait longer, nothing is lost.
            }
          }
        } else if (!next || check->deadline < *next) {
          next = check->deadline;
        }
      }
      if (next) {
        watchReady.wait_until(lock, *next);
      } else {
        watchReady.wait(lock);
      }
    }
  }
};

TurChecker::TurChecker(Options options) : state_(std::make_shared<State>(std::move(options))) {
  std::lock_guard lock(state_->mutex);
  for (unsigned i = 0; i < state_->targetWorkers; ++i) {
    state_->startWorker(state_);
  }
  state_->watchdog = std::thread([state = state_] {
    ::pthread_setname_np(::pthread_self(), "pk-tur-watch");
    state->watch(state);
  });
}

TurChecker::~TurChecker() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    for (const auto &check : state_->queue) {
      state_->active.erase(check->device);
    }
    state_->queue.clear();
  }
  state_->workReady.notify_all();
  state_->watchReady.notify_all();
  state_->watchdog.join();
  // No thread starts workers any more; the list is stable. A worker with no
  // check leaves at once; one in an ioctl is left to the kernel, after a
  // short wait for the checks that end normally.
  std::unique_lock lock(state_->mutex);
  state_->checkEnded.wait_for(lock, state_->stopWait, [&] {
    return std::none_of(state_->workers.begin(), state_->workers.end(), [](const Worker &worker) {
      return worker.current && !worker.current->hung;
    });
  });
  std::vector<std::thread *> leaving;
  for (auto &worker : state_->workers) {
    if (worker.current) {
      worker.thread.detach(); // holds state_ until the kernel lets go
    } else {
      leaving.push_back(&worker.thread);
    }
  }
  lock.unlock();
  for (auto *thread : leaving) {
    thread->join();
  }
}

void TurChecker::submit(TurCheckRequest request) {
  const auto now = Clock::now();
  std::lock_guard lock(state_->mutex);
  if (state_->stopping) {
    return;
  }
  const auto it = state_->active.find(request.device);
  if (it != state_->active.end()) {
    auto &check = *it->second;
    if (check.hung) {
      state_->done.push_back(TurCheckResult{
          request.device,
          verdict(TurStatus::Timeout,
                  fmt::format("the previous check is still hung in the kernel after {} ms",
                              std::chrono::duration_cast<milliseconds>(
                                  now - check.hungSince + check.timeout + state_->grace)
                                  .count())),
          std::chrono::microseconds{0}, request.cookie});
      state_->signal();
      return;
    }
    check.waiters.push_back(Waiter{request.cookie, now});
    return;
  }
  auto check = std::make_shared<Check>();
  check->device = request.device;
  check->devnode = std::move(request.devnode);
  check->group = std::move(request.group);
  check->timeout = request.timeout;
  check->waiters.push_back(Waiter{request.cookie, now});
  state_->active.emplace(std::move(request.device), check);
  state_->queue.push_back(std::move(check));
  state_->workReady.notify_one();
}

int TurChecker::fd() const {
  return state_->eventFd.get();
}

std::vector<TurCheckResult> TurChecker::drain() {
  std::vector<TurCheckResult> results;
  std::lock_guard lock(state_->mutex);
  // Under the mutex, as signal() is: the fd is readable exactly while
  // results wait, so the loop never wakes for nothing.
  std::uint64_t count = 0;
  [[maybe_unused]] const auto got = ::read(state_->eventFd.get(), &count, sizeof(count));
  results.swap(state_->done);
  return results;
}

std::set<std::string> TurChecker::queued() const {
  std::lock_guard lock(state_->mutex);
  std::set<std::string> devices;
  for (const auto &check : state_->queue) {
    devices.insert(check->device);
  }
  return devices;
}

std::size_t TurChecker::threads() const {
  std::lock_guard lock(state_->mutex);
  return state_->workers.size();
}

std::size_t TurChecker::inFlight() const {
  std::lock_guard lock(state_->mutex);
  return state_->active.size();
}

} // namespace pathkeeper::daemon
