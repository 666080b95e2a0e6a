#include "core/comm/transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/comm/types.h"

namespace mddp::comm::tcp {
namespace {

// 4 MiB buffers let one frame of a large message stream without waiting for
// the reader every 128 KiB. The kernel silently caps SO_SNDBUF/SO_RCVBUF at
// net.core.{w,r}mem_max, and setting them turns off autotuning, which can
// grow further (tcp_rmem max): so we set them only when the kernel would
// grant the full size, and otherwise leave autotuning in charge.
constexpr int kSocketBuffer = 4 << 20;

int sysctl_int(const char* path) {
  std::ifstream in(path);
  long long v = 0;
  return (in >> v) ? static_cast<int>(std::min<long long>(v, 1 << 30)) : 0;
}

void set_flags(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

void set_buffers(int fd) {
  static const bool big_send = sysctl_int("/proc/sys/net/core/wmem_max") >= kSocketBuffer;
  static const bool big_recv = sysctl_int("/proc/sys/net/core/rmem_max") >= kSocketBuffer;
  int size = kSocketBuffer;
  if (big_send) ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  if (big_recv) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
}

}  // namespace

AddrInfo::~AddrInfo() {
  if (list) ::freeaddrinfo(list);
}

AddrInfo resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  AddrInfo ai;
  const std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &ai.list);
  if (rc != 0 || ai.list == nullptr)
    throw CommError(str("cannot resolve host '", host, "': ", ::gai_strerror(rc),
                        " (check --bind-host / the published data-plane address)"));
  return ai;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_string(int err) {
  return std::strerror(err);
}

std::pair<std::string, int> split_host_port(const std::string& addr) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon + 1 == addr.size())
    throw InputError(str("malformed address '", addr, "' (expected host:port)"));
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  try {
    std::size_t used = 0;
    port = std::stoi(addr.substr(colon + 1), &used);
    if (used != addr.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port <= 0 || port > 65535) throw InputError(str("malformed port in address '", addr, "'"));
  return {host, port};
}

std::string join_host_port(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return str("[", host, "]:", port);
  return str(host, ":", port);
}

std::pair<Fd, int> listen_ephemeral(const std::string& host) {
  AddrInfo ai = resolve(host, 0, true);
  const addrinfo* a = ai.list;
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
  if (!fd.valid()) throw CommError(str("socket() failed: ", errno_string(errno)));
  set_buffers(fd.get());  // accepted sockets inherit them
  if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0)
    throw CommError(str("cannot bind the data-plane listener to '", host,
                        "': ", errno_string(errno), " (is it an address of this host?)"));
  if (::listen(fd.get(), SOMAXCONN) != 0)
    throw CommError(str("listen() failed: ", errno_string(errno)));
  set_flags(fd.get());
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  int port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return {std::move(fd), port};
}

Fd start_connect(const std::string& host, int port) {
  AddrInfo ai = resolve(host, port, false);
  const addrinfo* a = ai.list;
  Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
  if (!fd.valid()) throw CommError(str("socket() failed: ", errno_string(errno)));
  set_buffers(fd.get());
  if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS)
    throw CommError(
        str("connect to ", join_host_port(host, port), " failed: ", errno_string(errno)));
  return fd;
}

int connect_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

void tune_data_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_flags(fd);
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return join_host_port(host, port);
}

}  // namespace mddp::comm::tcp
