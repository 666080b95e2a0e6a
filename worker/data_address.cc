#include "worker/data_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::worker {
namespace {

struct Interface {
  std::string name, addr;
};

std::vector<Interface> ipv4_interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    out.push_back({i->ifa_name, buf});
  }
  ::freeifaddrs(list);
  return out;
}

std::string interface_of(const std::string& addr) {
  for (const auto& i : ipv4_interfaces())
    if (i.addr == addr) return i.name;
  return "?";
}

// HOST of "HOST:PORT" / "[V6]:PORT", and the port.
void split_host_port(const std::string& hp, std::string& host, std::string& port) {
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos)
    throw InputError(str("--coordinator must be HOST:PORT, got '", hp, "'"));
  host = hp.substr(0, colon);
  port = hp.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
}

}  // namespace

std::string list_interfaces() {
  const std::string s =
      join(ipv4_interfaces(), ", ", [](const auto& i) { return i.name + " " + i.addr; });
  return s.empty() ? "(none)" : s;
}

DataAddress choose_data_address(const std::string& coordinator, const std::string& data_addr,
                                const std::string& iface) {
  if (!data_addr.empty() && !iface.empty())
    throw InputError("give --data-addr or --iface, not both");
  if (!data_addr.empty()) return {data_addr, "--data-addr"};
  if (!iface.empty()) {
    for (const auto& i : ipv4_interfaces())
      if (i.name == iface) return {i.addr, "--iface " + iface};
    throw InputError(
        str("--iface ", iface,
            ": no such interface with an IPv4 address; this host has: ", list_interfaces()));
  }

  std::string host, port;
  split_host_port(coordinator, host, port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0 || !res)
    throw InputError(str("--coordinator ", coordinator, ": cannot resolve '", host, "' (",
                         ::gai_strerror(rc), "); or give --data-addr / --iface"));
  const sockaddr_in target = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  if ((ntohl(target.sin_addr.s_addr) >> 24) == 127)
    return {"127.0.0.1", "the coordinator is on this host"};

  // The kernel's source address for the route to the coordinator (a UDP
  // connect sends nothing).
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(str("socket: ", std::strerror(errno)));
  sockaddr_in local{};
  socklen_t len = sizeof local;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&target), sizeof target) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok)
    throw InputError(str("no route to the coordinator at ", coordinator, " (", std::strerror(err),
                         "); give --data-addr or --iface (this host has: ", list_interfaces(),
                         ")"));
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf);
  return {buf, str("interface ", interface_of(buf),
                   " on the route to the coordinator; --iface or --data-addr to change")};
}

}  // namespace mddp::worker
