#pragma once

// The network check inside pathkeeperd (issue #8): re-runs the check when the
// kernel's links, addresses, routes or rules change (rtnetlink multicast
// groups on the daemon's loop), when the iSCSI bindings change, and once a
// minute for what sends no netlink event (sysctls such as arp_ignore and
// rp_filter). Findings go to a callback only when they differ from the last
// run's.
//
// A burst of netlink messages (a link going down drops its addresses and
// routes one message at a time) is coalesced behind a short settle delay, so
// one change costs one check.

#include "event_loop.hpp"
#include "net_netlink.hpp"
#include "netcheck.hpp"
#include "state_model.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace pathkeeper::daemon {

/// @brief Which finding concerns a path, and how to say so in the path's
/// note and the log: "its traffic leaves via eth1 although bound to eth2".
/// Empty when no finding names the path, its NIC or its portal. Pure.
[[nodiscard]] std::string findingNoteFor(const std::vector<Finding> &findings,
                                         const std::string &device, const std::string &netdev,
                                         const std::string &portal);

/// @brief A finding as published: @p index makes the key unique when one
/// check yields two findings of one kind for the same NICs and portals.
[[nodiscard]] FindingView toView(const Finding &finding);

/// @brief The published findings, keyed and sorted (stable keys, so that an
/// unchanged finding keeps its D-Bus object across re-runs).
[[nodiscard]] std::vector<FindingView> toViews(const std::vector<Finding> &findings);

class NetworkWatch {
public:
  using Handler = std::function<void(const std::vector<Finding> &)>;

  struct Options {
    std::chrono::milliseconds settle{700};
    std::chrono::seconds periodic{60};
  };

  /// @brief Subscribes to rtnetlink's link, address, route and rule groups.
  /// @p onFindings runs on the loop thread after each check whose findings
  /// differ from the previous ones. @throws std::system_error when the
  /// netlink socket cannot be opened.
  NetworkWatch(EventLoop &loop, NetworkChecker checker, Handler onFindings, Options options);
  ~NetworkWatch();
  NetworkWatch(const NetworkWatch &) = delete;
  NetworkWatch &operator=(const NetworkWatch &) = delete;

  /// @brief The (NIC, source, portal) bindings to check; a change schedules a check.
  void setBindings(std::vector<Binding> bindings);
  /// @brief The last check's findings.
  [[nodiscard]] const std::vector<Finding> &findings() const { return findings_; }
  /// @brief Checks run so far (for the log and tests).
  [[nodiscard]] unsigned runs() const { return runs_; }

private:
  void onNetlink();
  void schedule(std::chrono::milliseconds delay);
  void check();

  EventLoop &loop_;
  NetworkChecker checker_;
  Handler onFindings_;
  Options options_;
  int fd_ = -1;
  EventSource io_;
  EventSource settleTimer_;
  EventSource periodicTimer_;
  std::vector<Binding> bindings_;
  std::vector<Finding> findings_;
  bool checked_ = false;
  unsigned runs_ = 0;
};

} // namespace pathkeeper::daemon
