#include "network_watch.hpp"

#include "log.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <map>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace pathkeeper::daemon {
namespace {

bool contains(const std::vector<std::string> &values, const std::string &value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// "10.10.1.20:3260,1" (a session's portal) -> "10.10.1.20:3260" (a finding's).
std::string withoutTpgt(const std::string &portal) {
  return portal.substr(0, portal.rfind(','));
}

bool concerns(const Finding &finding, const std::string &device, const std::string &netdev,
              const std::string &portal) {
  if (contains(finding.paths, device)) {
    return true;
  }
  if (netdev.empty() || !contains(finding.nics, netdev)) {
    return false;
  }
  return finding.portals.empty() || contains(finding.portals, withoutTpgt(portal));
}

} // namespace

std::string findingNoteFor(const std::vector<Finding> &findings, const std::string &device,
                           const std::string &netdev, const std::string &portal) {
  // Findings come worst first: the first one that concerns the path explains it.
  for (const auto &finding : findings) {
    if (finding.severity == Severity::Info || !concerns(finding, device, netdev, portal)) {
      continue;
    }
    // An egress finding lists the bound NIC, then the one traffic leaves by.
    // A session bound by source address only has no netdev of its own.
    if ((finding.id == "wrong-egress" || finding.id == "unbound-egress") &&
        finding.nics.size() == 2) {
      const std::string &bound = netdev.empty() ? finding.nics[0] : netdev;
      const std::string &egress = finding.nics[0] == bound ? finding.nics[1] : finding.nics[0];
      return fmt::format("its traffic leaves via {} although bound to {} (network check: {})",
                         egress, bound, finding.id);
    }
    return fmt::format("network check: {} ({})", finding.summary, finding.id);
  }
  return {};
}

FindingView toView(const Finding &finding) {
  FindingView view;
  view.key = finding.id;
  if (!finding.nics.empty()) {
    view.key += fmt::format(":{}", fmt::join(finding.nics, ","));
  }
  view.id = finding.id;
  view.severity = std::string(toString(finding.severity));
  view.summary = finding.summary;
  view.explanation = finding.explanation;
  view.nics = finding.nics;
  view.portals = finding.portals;
  view.paths = finding.paths;
  for (const auto &step : finding.fix) {
    view.fix.push_back(step.command);
  }
  return view;
}

std::vector<FindingView> toViews(const std::vector<Finding> &findings) {
  std::vector<FindingView> views;
  std::map<std::string, unsigned> seen;
  for (const auto &finding : findings) {
    auto view = toView(finding);
    if (const unsigned n = ++seen[view.key]; n > 1) {
      view.key += fmt::format("#{}", n);
    }
    views.push_back(std::move(view));
  }
  std::sort(views.begin(), views.end(),
            [](const FindingView &a, const FindingView &b) { return a.key < b.key; });
  return views;
}

NetworkWatch::NetworkWatch(EventLoop &loop, NetworkChecker checker, Handler onFindings,
                           Options options)
    : loop_(loop), checker_(std::move(checker)), onFindings_(std::move(onFindings)),
      options_(options) {
  fd_ = ::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "rtnetlink socket");
  }
  sockaddr_nl address{};
  address.nl_family = AF_NETLINK;
  // <linux/rtnetlink.h> has no RTMGRP_ macro for IPv6 rules; the check
  // reads rules of both families, so a change of either must start one.
  address.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE |
                      RTMGRP_IPV6_ROUTE | RTMGRP_IPV4_RULE | (1U << (RTNLGRP_IPV6_RULE - 1));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  if (::bind(fd_, reinterpret_cast<const sockaddr *>(&address), sizeof address) != 0) {
    const int error = errno;
    ::close(fd_);
    throw std::system_error(error, std::generic_category(), "binding the rtnetlink socket");
  }
  io_ = loop_.addIo(fd_, EPOLLIN, [this](unsigned) { onNetlink(); });
  const auto far = EventLoop::Clock::now() + std::chrono::hours(24 * 365);
  settleTimer_ = loop_.addTimer(far, [this] { check(); });
  periodicTimer_ = loop_.addTimer(EventLoop::Clock::now() + options_.periodic, [this] {
    EventLoop::rearm(periodicTimer_, EventLoop::Clock::now() + options_.periodic);
    check();
  });
}

NetworkWatch::~NetworkWatch() {
  io_.reset();
  settleTimer_.reset();
  periodicTimer_.reset();
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

void NetworkWatch::setBindings(std::vector<Binding> bindings) {
  if (checked_ && bindings == bindings_) {
    return;
  }
  bindings_ = std::move(bindings);
  schedule(std::chrono::milliseconds(0));
}

void NetworkWatch::onNetlink() {
  // Only "something changed" matters: drain the socket and check once the
  // burst has settled. ENOBUFS (messages lost) means the same.
  std::array<char, 8192> buffer{};
  bool changed = false;
  for (;;) {
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == ENOBUFS)) {
      changed = true;
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    break;
  }
  if (changed) {
    schedule(options_.settle);
  }
}

void NetworkWatch::schedule(std::chrono::milliseconds delay) {
  EventLoop::rearm(settleTimer_, EventLoop::Clock::now() + delay);
}

void NetworkWatch::check() {
  EventLoop::disable(settleTimer_);
  if (bindings_.empty()) {
    if (checked_ && !findings_.empty()) {
      findings_.clear();
      onFindings_(findings_);
    }
    checked_ = true;
    return;
  }
  std::vector<Finding> findings;
  try {
    const NetworkSnapshot snapshot = checker_.snapshot(bindings_);
    std::vector<Binding> resolved;
    resolved.reserve(bindings_.size());
    for (const auto &binding : bindings_) {
      resolved.push_back(resolveBinding(snapshot, binding));
    }
    findings = analyse(snapshot, resolved);
  } catch (const std::system_error &error) {
    log::warning(fmt::format("network check: cannot read the network state: {}", error.what()));
    return;
  }
  ++runs_;
  log::debug(fmt::format("network check #{}: {} binding(s), {} finding(s)", runs_, bindings_.size(),
                         findings.size()));
  const bool first = !checked_;
  checked_ = true;
  if (!first && toViews(findings) == toViews(findings_)) {
    return;
  }
  findings_ = std::move(findings);
  onFindings_(findings_);
}

} // namespace pathkeeper::daemon
