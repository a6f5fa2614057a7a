#include "net_netlink.hpp"

#include "c_handle.hpp"

#include <arpa/inet.h>
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <netlink/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

namespace pathkeeper::daemon {

namespace {

using NlSocketPtr = CHandle<nl_sock, nl_socket_free>;
using NlCachePtr = CHandle<nl_cache, nl_cache_free>;
using NlMsgPtr = CHandle<nl_msg, nlmsg_free>;
using RtnlRoutePtr = CHandle<rtnl_route, rtnl_route_put>;

[[noreturn]] void throwNl(int nlError, const std::string &what) {
  // libnl's own codes are not errnos; keep its text and say EIO.
  throw std::system_error(EIO, std::generic_category(),
                          fmt::format("{}: {}", what, nl_geterror(nlError)));
}

NlSocketPtr openRoute() {
  NlSocketPtr sock(nl_socket_alloc());
  if (!sock) {
    throw std::system_error(ENOMEM, std::generic_category(), "nl_socket_alloc");
  }
  if (int rc = nl_connect(sock.get(), NETLINK_ROUTE); rc < 0) {
    throwNl(rc, "connecting to rtnetlink");
  }
  return sock;
}

std::string addressText(nl_addr *addr) {
  if (addr == nullptr || nl_addr_get_len(addr) == 0) {
    return {};
  }
  std::array<char, INET6_ADDRSTRLEN> text{};
  const int family = nl_addr_get_family(addr);
  if ((family != AF_INET && family != AF_INET6) ||
      inet_ntop(family, nl_addr_get_binary_addr(addr), text.data(), text.size()) == nullptr) {
    return {};
  }
  return text.data();
}

std::optional<std::string> readFirstLine(const std::filesystem::path &file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return std::nullopt;
  }
  return line;
}

std::optional<long> readNumber(const std::filesystem::path &file) {
  auto line = readFirstLine(file);
  if (!line) {
    return std::nullopt;
  }
  long value = 0;
  const char *begin = line->data();
  const char *end = begin + line->size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc{} || ptr == begin) {
    return std::nullopt;
  }
  return value;
}

std::optional<int> readSysctl(const std::filesystem::path &procRoot, const std::string &nic,
                              const char *key) {
  auto value = readNumber(procRoot / "sys/net/ipv4/conf" / nic / key);
  if (!value) {
    return std::nullopt;
  }
  return static_cast<int>(*value);
}

NicSysctls readSysctls(const std::filesystem::path &procRoot, const std::string &nic) {
  return {readSysctl(procRoot, nic, "arp_ignore"), readSysctl(procRoot, nic, "arp_announce"),
          readSysctl(procRoot, nic, "rp_filter")};
}

std::vector<std::string> words(const std::string &line) {
  std::istringstream in(line);
  std::vector<std::string> result;
  for (std::string word; in >> word;) {
    result.push_back(word);
  }
  return result;
}

void readLinks(nl_sock *sock, const std::filesystem::path &sysfsRoot, NetworkSnapshot &snapshot,
               std::vector<std::pair<std::string, int>> &masters) {
  nl_cache *raw = nullptr;
  if (int rc = rtnl_link_alloc_cache(sock, AF_UNSPEC, &raw); rc < 0) {
    throwNl(rc, "dumping links");
  }
  NlCachePtr cache(raw);
  for (nl_object *obj = nl_cache_get_first(cache.get()); obj != nullptr;
       obj = nl_cache_get_next(obj)) {
    auto *link = reinterpret_cast<rtnl_link *>(obj);
    Nic nic;
    const char *name = rtnl_link_get_name(link);
    nic.name = name == nullptr ? "" : name;
    nic.ifindex = rtnl_link_get_ifindex(link);
    std::array<char, 32> state{};
    rtnl_link_operstate2str(rtnl_link_get_operstate(link), state.data(), state.size());
    nic.operstate = state.data();
    std::transform(nic.operstate.begin(), nic.operstate.end(), nic.operstate.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    nic.mtu = rtnl_link_get_mtu(link);
    const std::filesystem::path dir = sysfsRoot / "class/net" / nic.name;
    // Drivers without a speed, and links that are down, say -1 or fail the read.
    if (auto speed = readNumber(dir / "speed"); speed && *speed > 0) {
      nic.speedMbps = static_cast<unsigned>(*speed);
    }
    const char *type = rtnl_link_get_type(link);
    auto mode = readFirstLine(dir / "bonding/mode");
    if (mode || (type != nullptr && std::strcmp(type, "bond") == 0)) {
      BondInfo bond;
      if (mode) {
        auto parts = words(*mode);
        bond.mode = parts.empty() ? "" : parts.front();
      }
      if (auto slaves = readFirstLine(dir / "bonding/slaves")) {
        bond.slaves = words(*slaves);
      }
      nic.bond = std::move(bond);
    }
    if (int master = rtnl_link_get_master(link); master > 0) {
      masters.emplace_back(nic.name, master);
    }
    snapshot.nics.push_back(std::move(nic));
  }
}

void readAddresses(nl_sock *sock, NetworkSnapshot &snapshot) {
  nl_cache *raw = nullptr;
  if (int rc = rtnl_addr_alloc_cache(sock, &raw); rc < 0) {
    throwNl(rc, "dumping addresses");
  }
  NlCachePtr cache(raw);
  for (nl_object *obj = nl_cache_get_first(cache.get()); obj != nullptr;
       obj = nl_cache_get_next(obj)) {
    auto *addr = reinterpret_cast<rtnl_addr *>(obj);
    const int family = rtnl_addr_get_family(addr);
    if (family != AF_INET && family != AF_INET6) {
      continue;
    }
    const int ifindex = rtnl_addr_get_ifindex(addr);
    auto nic = std::find_if(snapshot.nics.begin(), snapshot.nics.end(),
                            [&](const Nic &n) { return n.ifindex == ifindex; });
    const std::string text = addressText(rtnl_addr_get_local(addr));
    if (nic == snapshot.nics.end() || text.empty()) {
      continue;
    }
    nic->addresses.push_back({text, rtnl_addr_get_prefixlen(addr), family});
  }
}

void readRules(nl_sock *sock, NetworkSnapshot &snapshot) {
  nl_cache *raw = nullptr;
  if (int rc = rtnl_rule_alloc_cache(sock, AF_UNSPEC, &raw); rc < 0) {
    throwNl(rc, "dumping routing rules");
  }
  NlCachePtr cache(raw);
  for (nl_object *obj = nl_cache_get_first(cache.get()); obj != nullptr;
       obj = nl_cache_get_next(obj)) {
    auto *rule = reinterpret_cast<rtnl_rule *>(obj);
    PolicyRule value;
    value.priority = rtnl_rule_get_prio(rule);
    value.family = rtnl_rule_get_family(rule);
    nl_addr *src = rtnl_rule_get_src(rule);
    value.source = addressText(src);
    value.sourceLength = value.source.empty() ? 0 : static_cast<int>(nl_addr_get_prefixlen(src));
    value.table = rtnl_rule_get_action(rule) == FR_ACT_TO_TBL ? rtnl_rule_get_table(rule) : 0;
    const char *iif = rtnl_rule_get_iif(rule);
    const char *oif = rtnl_rule_get_oif(rule);
    value.iif = iif == nullptr ? "" : iif;
    value.oif = oif == nullptr ? "" : oif;
    snapshot.rules.push_back(std::move(value));
  }
}

struct RouteReply {
  int error = 0; ///< errno from the kernel's NLMSG_ERROR, 0 for none
  RtnlRoutePtr route;
};

int onRoute(nl_msg *msg, void *arg) {
  auto *reply = static_cast<RouteReply *>(arg);
  rtnl_route *route = nullptr;
  if (rtnl_route_parse(nlmsg_hdr(msg), &route) >= 0) {
    reply->route.reset(route);
  }
  return NL_STOP;
}

int onError(sockaddr_nl * /*peer*/, nlmsgerr *err, void *arg) {
  static_cast<RouteReply *>(arg)->error = -err->error;
  return NL_STOP;
}

} // namespace

NetworkChecker::NetworkChecker(std::filesystem::path sysfsRoot, std::filesystem::path procRoot)
    : sysfsRoot_(std::move(sysfsRoot)), procRoot_(std::move(procRoot)) {}

NetworkSnapshot NetworkChecker::snapshot(std::span<const Binding> bindings) const {
  NetworkSnapshot snapshot;
  auto sock = openRoute();
  std::vector<std::pair<std::string, int>> masters;
  readLinks(sock.get(), sysfsRoot_, snapshot, masters);
  for (const auto &[name, masterIndex] : masters) {
    auto master = std::find_if(snapshot.nics.begin(), snapshot.nics.end(),
                               [&](const Nic &n) { return n.ifindex == masterIndex; });
    auto nic = std::find_if(snapshot.nics.begin(), snapshot.nics.end(),
                            [&](const Nic &n) { return n.name == name; });
    if (master == snapshot.nics.end()) {
      continue;
    }
    nic->master = master->name;
    // sysfs may belong to another namespace; netlink's view of the slaves wins.
    if (master->bond && std::find(master->bond->slaves.begin(), master->bond->slaves.end(), name) ==
                            master->bond->slaves.end()) {
      master->bond->slaves.push_back(name);
    }
  }
  readAddresses(sock.get(), snapshot);
  readRules(sock.get(), snapshot);
  snapshot.all = readSysctls(procRoot_, "all");
  for (auto &nic : snapshot.nics) {
    nic.sysctls = readSysctls(procRoot_, nic.name);
  }
  for (const auto &query : sourceQueries(bindings)) {
    snapshot.routes.push_back(lookupRoute(query, snapshot));
  }
  for (const auto &query : routeQueries(snapshot, bindings)) {
    if (snapshot.route(query.destination, query.source, query.oif) == nullptr) {
      snapshot.routes.push_back(lookupRoute(query, snapshot)); // not asked as a source query
    }
  }
  return snapshot;
}

RouteLookup NetworkChecker::lookupRoute(const RouteQuery &query,
                                        const NetworkSnapshot &links) const {
  RouteLookup lookup{query.destination, query.source, query.oif, {}, {}, {}, {}, 0};
  std::array<unsigned char, 16> dst{};
  std::array<unsigned char, 16> src{};
  int family = AF_INET;
  if (inet_pton(AF_INET, query.destination.c_str(), dst.data()) != 1) {
    family = AF_INET6;
    if (inet_pton(AF_INET6, query.destination.c_str(), dst.data()) != 1) {
      lookup.error = "not an IP address";
      return lookup;
    }
  }
  const int length = family == AF_INET ? 4 : 16;
  if (!query.source.empty() && inet_pton(family, query.source.c_str(), src.data()) != 1) {
    lookup.error = "source is not an address of the destination's family";
    return lookup;
  }
  int oif = 0;
  if (!query.oif.empty()) {
    const Nic *nic = links.nic(query.oif);
    if (nic == nullptr) {
      lookup.error = "no such device";
      return lookup;
    }
    oif = nic->ifindex;
  }

  NlMsgPtr msg(nlmsg_alloc_simple(RTM_GETROUTE, 0));
  if (!msg) {
    throw std::system_error(ENOMEM, std::generic_category(), "nlmsg_alloc_simple");
  }
  rtmsg header{};
  header.rtm_family = static_cast<unsigned char>(family);
  header.rtm_dst_len = static_cast<unsigned char>(length * 8);
  header.rtm_src_len = query.source.empty() ? 0 : static_cast<unsigned char>(length * 8);
  // Report the table the lookup really used, not just "main".
  header.rtm_flags = RTM_F_LOOKUP_TABLE;
  if (nlmsg_append(msg.get(), &header, sizeof header, NLMSG_ALIGNTO) < 0 ||
      nla_put(msg.get(), RTA_DST, length, dst.data()) < 0 ||
      (!query.source.empty() && nla_put(msg.get(), RTA_SRC, length, src.data()) < 0) ||
      (oif != 0 && nla_put_u32(msg.get(), RTA_OIF, static_cast<std::uint32_t>(oif)) < 0)) {
    throw std::system_error(ENOMEM, std::generic_category(), "building RTM_GETROUTE");
  }

  auto sock = openRoute();
  nl_socket_disable_auto_ack(sock.get());
  RouteReply reply;
  nl_socket_modify_cb(sock.get(), NL_CB_VALID, NL_CB_CUSTOM, onRoute, &reply);
  nl_socket_modify_err_cb(sock.get(), NL_CB_CUSTOM, onError, &reply);
  if (int rc = nl_send_auto(sock.get(), msg.get()); rc < 0) {
    throwNl(rc, "sending RTM_GETROUTE");
  }
  if (int rc = nl_recvmsgs_default(sock.get()); rc < 0 && reply.error == 0) {
    throwNl(rc, "receiving the route");
  }
  if (reply.error != 0) {
    lookup.error = std::strerror(reply.error);
    return lookup;
  }
  if (!reply.route) {
    lookup.error = "the kernel sent no route";
    return lookup;
  }
  rtnl_route *route = reply.route.get();
  lookup.table = rtnl_route_get_table(route);
  lookup.preferredSource = addressText(rtnl_route_get_pref_src(route));
  if (rtnl_route_get_nnexthops(route) > 0) {
    rtnl_nexthop *nh = rtnl_route_nexthop_n(route, 0);
    const int ifindex = rtnl_route_nh_get_ifindex(nh);
    auto nic = std::find_if(links.nics.begin(), links.nics.end(),
                            [&](const Nic &n) { return n.ifindex == ifindex; });
    lookup.egress = nic == links.nics.end() ? fmt::format("if{}", ifindex) : nic->name;
    lookup.gateway = addressText(rtnl_route_nh_get_gateway(nh));
  }
  return lookup;
}

} // namespace pathkeeper::daemon
