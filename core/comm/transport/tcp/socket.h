// Thin wrappers over POSIX sockets for the TCP transport: an owning fd,
// address parsing/formatting, a listener on an ephemeral port and
// non-blocking connects. Every failing system call becomes a CommError that
// names the call, the address and strerror(errno).
#pragma once

#include <string>
#include <utility>

struct addrinfo;

namespace mddp::comm::tcp {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// getaddrinfo's list for host:port; frees it on destruction.
struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo() = default;
  AddrInfo(AddrInfo&& o) noexcept : list(std::exchange(o.list, nullptr)) {}
  AddrInfo& operator=(AddrInfo&&) = delete;
  ~AddrInfo();
};
// The addresses of host:port (passive: to bind; an empty host is every local
// address). Throws CommError naming the host when it does not resolve.
AddrInfo resolve(const std::string& host, int port, bool passive);

// "host:port" / "[v6addr]:port" <-> parts. Throws InputError on a malformed address.
std::pair<std::string, int> split_host_port(const std::string& addr);
std::string join_host_port(const std::string& host, int port);

// Binds a non-blocking listener to host:0 (an ephemeral port) and returns it
// with the port the kernel chose.
std::pair<Fd, int> listen_ephemeral(const std::string& host);
// Starts a non-blocking connect to host:port. The connect completes when the
// fd polls writable; check it with connect_error().
Fd start_connect(const std::string& host, int port);
// 0 when the connect finished well, else the errno it failed with.
int connect_error(int fd);
// TCP_NODELAY, large send/receive buffers, non-blocking, close-on-exec.
void tune_data_socket(int fd);
// "ip:port" of the remote end, for logs ("?" when unknown).
std::string peer_address(int fd);
std::string errno_string(int err);

}  // namespace mddp::comm::tcp
