#pragma once

// multipathd's command socket, for companion mode: pathkeeper reads
// multipathd's maps and path states and asks it to fail, reinstate and
// switch groups instead of touching the tables itself.
//
// The protocol (multipath-tools 0.9.4, libmpathcmd/mpath_cmd.c and
// multipathd/uxlsnr.c): a SOCK_STREAM connection to the abstract unix socket
// "@/org/kernel/linux/storage/multipathd". Each message, either way, is a
// native size_t length and then that many bytes, the text plus its NUL.
// multipathd reads the length with a single recv(), so a request goes out in
// one send(). It accepts commands of at most 512 bytes with the NUL, answers
// "ok\n", "fail\n", "timeout\n" or "permission deny: need to be root\n" to
// actions (only root may do more than "show"/"list"), and serves any number
// of commands on one connection: after a reply it waits for the next
// command, without a timeout.

#include "expected.hpp"
#include "model.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pathkeeper::daemon {

/// @brief multipathd's abstract socket name, without the leading NUL
/// (multipath-tools' DEFAULT_SOCKET).
inline constexpr std::string_view kMultipathdSocket = "/org/kernel/linux/storage/multipathd";
/// @brief The longest command multipathd accepts, NUL included (_MAX_CMD_LEN).
inline constexpr std::size_t kMaxMultipathdCommand = 512;
/// @brief The longest reply accepted, NUL included (MAX_REPLY_LEN).
inline constexpr std::size_t kMaxMultipathdReply = std::size_t{32} * 1024 * 1024;
/// @brief How long a sent command waits for its reply: multipath-tools'
/// default reply timeout (DEFAULT_REPLY_TIMEOUT, 4 s, which multipathd
/// counts from reading the command) plus the margin multipathc adds, so that
/// multipathd's own "timeout" reply comes first.
inline constexpr std::chrono::milliseconds kMultipathdTimeout{4100};

/// @brief What the "auto" mode sees of multipathd.
struct MultipathdSighting {
  bool process = false;   ///< a process named multipathd runs
  bool listening = false; ///< something listens on its socket: multipathd, or systemd
};

/// @brief Looks for multipathd without connecting to its socket: with
/// systemd's multipathd.socket (enabled by Debian's multipath-tools), a
/// connect starts multipathd, which would then take over the maps. Reads
/// @p procRoot's process names and net/unix. Abstract sockets belong to a
/// network namespace: a unit with PrivateNetwork=yes never sees multipathd's.
MultipathdSighting lookForMultipathd(std::string_view socketName = kMultipathdSocket,
                                     const std::string &procRoot = "/proc");

/// @brief Only the socket half of lookForMultipathd(): one read of
/// @p procRoot/net/unix, cheap enough to repeat every few seconds.
bool multipathdListening(std::string_view socketName = kMultipathdSocket,
                         const std::string &procRoot = "/proc");

/// @brief Whether @p table, the text of /proc/net/unix, lists a listening
/// socket bound to the abstract name @p socketName.
bool listensOnAbstract(std::string_view table, std::string_view socketName);

/// @brief Frames @p command for the wire: size_t length, text, NUL. Refuses
/// commands that are empty, contain a NUL or exceed kMaxMultipathdCommand.
Expected<std::string> encodeMultipathdMessage(std::string_view command);

/// @brief Reassembles one framed message from bytes as they arrive.
class MultipathdFrameDecoder {
public:
  /// @brief Takes bytes from @p bytes up to the end of the frame and returns
  /// how many it used. Errors on a length of 0 or over kMaxMultipathdReply.
  Expected<std::size_t> feed(std::string_view bytes);
  /// @brief True once the whole frame arrived.
  [[nodiscard]] bool complete() const;
  /// @brief Bytes received so far and bytes the frame has in all (header
  /// included; 0 while the length is unknown), for error messages.
  [[nodiscard]] std::size_t received() const;
  [[nodiscard]] std::size_t expected() const;
  /// @brief The text, without the trailing NUL; resets the decoder.
  std::string take();

private:
  std::string header_;
  std::string payload_;
  std::size_t length_ = 0; // payload length once the header is in
};

/// @brief A non-blocking multipathd client for the event loop.
///
/// The loop watches fd() for events(), calls service() when it is ready,
/// and calls tick() at nextTick(). fd(), events() and nextTick() change
/// after request(), service() and tick(), so the loop reads them again after
/// each. Callbacks run only from service() and tick(), never from request();
/// they may queue further requests but must not destroy the client.
///
/// Requests run one at a time, in order, on one connection, since multipathd
/// answers in order on a connection. The connection is opened when a request
/// starts and closed when the queue runs empty, so no idle socket goes stale
/// when multipathd restarts. A timeout or an error closes it (a late reply
/// would otherwise be taken for the next request's); the next request
/// reconnects.
///
/// A request's timeout runs from when it is sent: a command queued behind
/// one that multipathd takes long over still gets its whole time. One that
/// waits in the queue longer than queueLimit() fails without being sent.
class MultipathdClient {
public:
  using Clock = std::chrono::steady_clock;
  /// @brief Gets the reply text (without its NUL) or why there is none.
  using Callback = std::function<void(Expected<std::string>)>;

  /// @brief The longest a request waits behind others before it fails unsent.
  static constexpr std::chrono::seconds kQueueLimit{30};

  /// @brief A client of the abstract socket @p socketName (tests pass their
  /// own, and may shorten @p queueLimit).
  explicit MultipathdClient(std::string socketName = std::string(kMultipathdSocket),
                            std::chrono::milliseconds queueLimit = kQueueLimit);
  ~MultipathdClient();
  // Not movable: a callback may hold a reference to its client.
  MultipathdClient(MultipathdClient &&) = delete;
  MultipathdClient &operator=(MultipathdClient &&) = delete;
  MultipathdClient(const MultipathdClient &) = delete;
  MultipathdClient &operator=(const MultipathdClient &) = delete;

  /// @brief Queues @p command; @p done gets the reply. A command that cannot
  /// be framed fails at the next tick(), which is then due at once. It waits
  /// in the queue at most @p queueLimit, or the client's queueLimit() when
  /// that is shorter or none is given.
  void request(std::string command, std::chrono::milliseconds timeout, Callback done,
               Clock::time_point now,
               std::optional<std::chrono::milliseconds> queueLimit = std::nullopt);
  /// @brief The connection to watch, or -1 when there is none.
  [[nodiscard]] int fd() const;
  /// @brief Counts the connections made. A reconnect usually gets the
  /// number of the socket it replaces, so a loop that registered fd() must
  /// compare this too: the kernel dropped the closed socket from its epoll
  /// set, and the new one with the same number is not in it.
  [[nodiscard]] std::uint64_t connection() const;
  /// @brief poll(2) events to wait for on fd(); 0 when there is nothing to wait for.
  [[nodiscard]] short events() const;
  /// @brief Handles readiness of fd() (@p revents as poll(2) reports it).
  void service(short revents, Clock::time_point now);
  /// @brief Starts queued requests and fails those past their deadline.
  void tick(Clock::time_point now);
  /// @brief When tick() must run next; in the past while a queued request
  /// waits to start, nullopt when nothing is queued.
  [[nodiscard]] std::optional<Clock::time_point> nextTick() const;
  /// @brief Requests not yet answered, the running one included.
  [[nodiscard]] std::size_t pending() const;

private:
  struct Request {
    std::string command;
    Clock::time_point deadline; ///< in the queue: the queue limit; once sent: the reply's
    std::chrono::milliseconds timeout;
    std::chrono::milliseconds queueLimit;
    Callback done;
  };

  void start(Clock::time_point now);
  void sendSome();
  void receiveSome();
  void finish(Expected<std::string> outcome);
  void closeConnection();
  [[nodiscard]] static std::string queuedTooLong(const Request &request);

  std::string socketName_;
  std::chrono::milliseconds queueLimit_;
  std::deque<Request> queue_; // front() is the running one once connected
  int fd_ = -1;
  std::uint64_t connections_ = 0;
  bool running_ = false; // the front request has been sent or is being sent
  std::string out_;      // bytes of the running request not yet sent
  MultipathdFrameDecoder decoder_;
};

/// @brief Sends one command and waits for the reply with poll(2), for
/// pathkeeperctl and tests.
Expected<std::string> multipathdCommand(std::string_view command,
                                        std::chrono::milliseconds timeout = kMultipathdTimeout,
                                        std::string_view socketName = kMultipathdSocket);

/// @brief Checks the reply to an action (fail, reinstate, switchgroup,
/// disablequeueing, restorequeueing):
/// "ok" passes; "fail", "timeout", the permission message or anything else
/// is an error quoting it.
Expected<void> checkMultipathdActionReply(std::string_view reply);

/// @brief "fail path sdb"; nullopt for a name multipathd could misparse
/// (empty, or with blanks, quotes or braces).
std::optional<std::string> failPathCommand(std::string_view device);
/// @brief "reinstate path sdb"; nullopt as for failPathCommand().
std::optional<std::string> reinstatePathCommand(std::string_view device);
/// @brief "switchgroup map mpatha group 2" (@p group counts from 1, as
/// multipathd's does); nullopt for a bad name or group 0.
std::optional<std::string> switchGroupCommand(std::string_view map, unsigned group);
/// @brief "disablequeueing map mpatha", or "restorequeueing map mpatha"
/// when @p queue; nullopt for a bad name.
std::optional<std::string> queueingCommand(std::string_view map, bool queue);

/// @brief The dm state multipathd shows for a path (%t: active, failed, undef).
enum class MultipathdDmState { Active, Failed, Undef };
/// @brief multipathd's checker state for a path (%T).
enum class MultipathdCheckerState { Ready, Faulty, Shaky, Ghost, Pending, Timeout, Delayed, Undef };

std::string_view toString(MultipathdDmState state);
std::string_view toString(MultipathdCheckerState state);
/// @brief The path state in pathkeeper's vocabulary: i/o timeout is down,
/// delayed (multipathd holds a path back for san_path_err or
/// delay_wait_checks) is pending, undef is unknown.
selector::PathState toPathState(MultipathdCheckerState state);

/// @brief One line of kShowPathsCommand's reply.
struct MultipathdPath {
  std::string device; ///< "sdb"
  std::string devT;   ///< "8:16"
  MultipathdDmState dmState = MultipathdDmState::Undef;
  MultipathdCheckerState checkerState = MultipathdCheckerState::Undef;
  bool offline = false; ///< sysfs state offline (dev_st "offline")
  std::string map;      ///< the map's alias; empty for a path in no map
  std::string wwid;

  bool operator==(const MultipathdPath &) const = default;
};

/// @brief One line of kShowMapsCommand's reply.
struct MultipathdMap {
  std::string name;      ///< the alias, e.g. "mpatha"
  std::string wwid;      ///< multipathd's "uuid" column: the WWID, without "mpath-"
  std::string sysfsName; ///< "dm-3"; empty when multipathd has no dm info
  bool suspended = false;
  unsigned activePaths = 0;

  bool operator==(const MultipathdMap &) const = default;
};

/// @brief Lists every path with fields companion mode needs, tab-separated
/// and without header or padding: dev, dev_t, dm_st, chk_st, dev_st,
/// multipath, uuid. Tabs, because "i/o pending" has a blank.
inline constexpr std::string_view kShowPathsCommand =
    "show paths raw format \"%d\t%D\t%t\t%T\t%o\t%m\t%w\"";
/// @brief Lists every map: name, uuid, sysfs, dm-st, paths.
inline constexpr std::string_view kShowMapsCommand = "show maps raw format \"%n\t%w\t%d\t%t\t%N\"";

/// @brief Parses the reply to kShowPathsCommand. multipathd answers an empty
/// list with "ok". Errors name the line and field.
Expected<std::vector<MultipathdPath>> parseMultipathdPaths(std::string_view reply);
/// @brief Parses the reply to kShowMapsCommand, as parseMultipathdPaths().
Expected<std::vector<MultipathdMap>> parseMultipathdMaps(std::string_view reply);

} // namespace pathkeeper::daemon
