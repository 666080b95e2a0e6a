#include "coordinator/connection_gate.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <grpc/support/sync.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/version_info.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

// gRPC's socket mutator as its core lays it out (src/core/lib/iomgr/
// socket_mutator.h of gRPC 1.51): the public headers only name the type.
// gRPC calls mutate_fd_2 (the fourth entry) with every socket it makes.
// Declared here, so another gRPC must stop the build rather than be called
// through a layout it may not have: compare its header, then widen the check.
static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51,
              "connection_gate.cc declares gRPC 1.51's socket mutator layout: check it against "
              "this gRPC's src/core/lib/iomgr/socket_mutator.h");
typedef enum {
  GRPC_FD_CLIENT_CONNECTION_USAGE,
  GRPC_FD_SERVER_LISTENER_USAGE,
  GRPC_FD_SERVER_CONNECTION_USAGE,
} grpc_fd_usage;
struct grpc_mutate_socket_info {
  int fd;
  grpc_fd_usage usage;
};
struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
};
struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};

namespace mddp::coordinator {
namespace {

// Descriptors open in this process (the entries of /proc/self/fd, less the
// one that reads them).
int open_descriptor_count() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return 0;
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;
}

// The IP address and port at the other end of a connection; an IPv4 peer
// of a dual-stack listener (::ffff:a.b.c.d) as IPv4, the way gRPC names it.
std::pair<std::string, int> peer_of_socket(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  char text[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return {text, port};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
    else
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
  }
  return {text, port};
}

// gRPC's peer text, "ipv4:127.0.0.1:43210" or "ipv6:[::1]:43210", as an
// address and a port (port 0: not an IP peer).
std::pair<std::string, int> parse_grpc_peer(const std::string& peer) {
  const auto colon = peer.find(':');
  const auto last = peer.rfind(':');
  if (colon == std::string::npos || last == colon) return {"", 0};
  std::string address = peer.substr(colon + 1, last - colon - 1);
  if (address.size() >= 2 && address.front() == '[')
    address = address.substr(1, address.size() - 2);
  return {address, std::atoi(peer.c_str() + last + 1)};
}

// The inode behind a descriptor (0: none): tells a socket the gate knows
// from a later file that reuses its descriptor number.
ino_t inode_of(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// Whether the other end of a connection hung up (checked without waiting).
bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace

void ConnectionGate::add_listener(int fd) {
  std::lock_guard lock(mu_);
  listeners_.emplace_back(fd, inode_of(fd));
}

void ConnectionGate::admit(int fd) {
  std::lock_guard lock(mu_);
  const auto [address, port] = peer_of_socket(fd);
  const int used = open_descriptor_count();
  if (used >= limits_.max_descriptors - limits_.reserve) {
    const int drained = drain_listeners();
    turn_away(fd, address,
              fmt::format("{} of {} descriptors in use (and {} queued connections cut)", used,
                          limits_.max_descriptors, drained));
    return;
  }
  const int from_peer = open_from(address);
  if (from_peer >= limits_.max_per_peer) {
    turn_away(
        fd, address,
        fmt::format("{} connections open from it, at most {}", from_peer, limits_.max_per_peer));
    return;
  }
  if (const auto it = admitted_.find(fd); it != admitted_.end()) forget(it);  // reused: closed
  admitted_[fd] = {inode_of(fd), address, port};
}

void ConnectionGate::bound_backlog() {
  std::lock_guard lock(mu_);
  for (const auto& [fd, inode] : listeners_)
    if (inode_of(fd) == inode) ::listen(fd, limits_.backlog);  // a second listen() sets the queue
}

bool ConnectionGate::closed(const std::string& peer) {
  const auto [address, port] = parse_grpc_peer(peer);
  if (port == 0) return false;
  std::lock_guard lock(mu_);
  for (const auto& [fd, a] : admitted_)
    if (a.port == port && a.address == address) return inode_of(fd) != a.inode || hung_up(fd);
  return closed_.count({address, port}) > 0;
}

std::map<int, ConnectionGate::Admitted>::iterator ConnectionGate::forget(
    std::map<int, Admitted>::iterator it) {
  constexpr std::size_t kRemembered = 4096;
  const Peer peer{it->second.address, it->second.port};
  if (closed_.insert(peer).second) closed_order_.push_back(peer);
  if (closed_order_.size() > kRemembered) {
    closed_.erase(closed_order_.front());
    closed_order_.pop_front();
  }
  return admitted_.erase(it);
}

// Open connections from `address`, forgetting those closed since.
int ConnectionGate::open_from(const std::string& address) {
  int n = 0;
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    if (inode_of(it->first) != it->second.inode) {
      it = forget(it);
      continue;
    }
    n += it->second.address == address;
    ++it;
  }
  return n;
}

// Accepts and closes every connection still queued on the listeners.
int ConnectionGate::drain_listeners() const {
  int n = 0;
  for (const auto& [fd, inode] : listeners_) {
    if (inode_of(fd) != inode) continue;  // closed (gRPC tries more than one socket)
    for (int c; (c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0; ++n) close(c);
  }
  return n;
}

// Cuts a connection the server has just accepted; says so at most every 5 s.
void ConnectionGate::turn_away(int fd, const std::string& address, const std::string& why) {
  shutdown(fd, SHUT_RDWR);
  admitted_.erase(fd);
  ++turned_away_;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_warning_ < std::chrono::seconds(5)) return;
  last_warning_ = now;
  spdlog::warn("control plane: turned away a connection from {}: {} ({} turned away so far)",
               address, why, turned_away_);
}

namespace {

// The mutator gRPC holds (a counted reference): its base comes first.
struct GateMutator {
  grpc_socket_mutator base;
  std::shared_ptr<ConnectionGate> gate;
};

GateMutator& gate_mutator(grpc_socket_mutator* m) {
  return *reinterpret_cast<GateMutator*>(m);
}

bool gate_on_socket(const grpc_mutate_socket_info* info, grpc_socket_mutator* m) {
  ConnectionGate& gate = *gate_mutator(m).gate;
  if (info->usage == GRPC_FD_SERVER_LISTENER_USAGE) gate.add_listener(info->fd);
  if (info->usage == GRPC_FD_SERVER_CONNECTION_USAGE) gate.admit(info->fd);
  return true;  // false would close gRPC's listener: a connection is cut, not refused
}

const grpc_socket_mutator_vtable kGateVtable = {
    [](int, grpc_socket_mutator*) { return true; },  // superseded by mutate_fd_2
    [](grpc_socket_mutator* a, grpc_socket_mutator* b) { return a < b   ? -1
                                                                : a > b ? 1
                                                                        : 0; },
    [](grpc_socket_mutator* m) { delete &gate_mutator(m); },
    gate_on_socket,
};

// Hands the gate to the server's channel arguments, which hold a reference.
class GateOption : public grpc::ServerBuilderOption {
 public:
  explicit GateOption(std::shared_ptr<ConnectionGate> gate) : gate_(std::move(gate)) {}
  void UpdateArguments(grpc::ChannelArguments* args) override {
    auto* m = new GateMutator{{&kGateVtable, {}}, gate_};
    gpr_ref_init(&m->base.refcount, 1);
    args->SetSocketMutator(&m->base);
  }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  std::shared_ptr<ConnectionGate> gate_;
};

}  // namespace

ConnectionLimits raise_connection_limits() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  const rlim_t before = r.rlim_cur;
  // An unlimited hard limit is not a number setrlimit takes for the soft one.
  const rlim_t target = std::min<rlim_t>(r.rlim_max, 1 << 20);
  if (r.rlim_cur < target) {
    r.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) r.rlim_cur = before;
  }
  ConnectionLimits l;
  l.max_descriptors =
      static_cast<int>(std::min<rlim_t>(r.rlim_cur, std::numeric_limits<int>::max()));
  l.max_per_peer = std::max(1, (l.max_descriptors - l.reserve) / 4);
  spdlog::info(
      "control plane: {} descriptors{} ({} kept free), at most {} connections from one address",
      l.max_descriptors, r.rlim_cur > before ? fmt::format(" (raised from {})", before) : "",
      l.reserve, l.max_per_peer);
  return l;
}

std::shared_ptr<ConnectionGate> guard_connections(grpc::ServerBuilder& builder,
                                                  const ConnectionLimits& limits) {
  auto gate = std::make_shared<ConnectionGate>(limits);
  builder.SetOption(std::make_unique<GateOption>(gate));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             static_cast<int>(limits.handshake_timeout.count()));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             static_cast<int>(limits.idle_timeout.count()));
  return gate;
}

}  // namespace mddp::coordinator
