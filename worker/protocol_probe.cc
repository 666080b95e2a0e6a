#include "worker/protocol_probe.h"

#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <cstring>

#include "core/comm/transport/tcp/socket.h"
#include "core/common/check.h"
#include "core/common/timer.h"

namespace mddp::worker {
namespace {

// HTTP/2's connection preface (RFC 9113 §3.4), then an empty SETTINGS frame:
// 3 bytes length 0, type 0x4, flags 0, stream 0.
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
constexpr std::size_t kPrefaceSize = sizeof kPreface - 1;
constexpr std::size_t kFrameHeader = 9;

// Waits up to the deadline for `events` on fd; false when it did not come.
bool wait_for(int fd, short events, int64_t deadline_ns) {
  pollfd p{fd, events, 0};
  const int64_t left_ms = (deadline_ns - now_ns()) / 1'000'000;
  return left_ms > 0 && ::poll(&p, 1, static_cast<int>(left_ms)) == 1;
}

// The first line of what the server sent, printable, at most 60 characters.
std::string first_line(const std::string& bytes) {
  std::string out;
  for (char c : bytes) {
    if (c == '\r' || c == '\n' || out.size() >= 60) break;
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '.';
  }
  return out;
}

}  // namespace

std::string probe_other_protocol(const std::string& host_port, std::chrono::milliseconds timeout) {
  const int64_t deadline = now_ns() + static_cast<int64_t>(timeout.count()) * 1'000'000;
  comm::tcp::Fd fd;
  try {
    const auto [host, port] = comm::tcp::split_host_port(host_port);
    fd = comm::tcp::start_connect(host, port);
  } catch (const Error&) {
    return "";  // a name that does not resolve, no route: the normal path says so
  }
  if (!wait_for(fd.get(), POLLOUT, deadline) || comm::tcp::connect_error(fd.get()) != 0) return "";
  if (::send(fd.get(), kPreface, kPrefaceSize, MSG_NOSIGNAL) != static_cast<ssize_t>(kPrefaceSize))
    return "";
  std::string got;
  while (got.size() < kFrameHeader && wait_for(fd.get(), POLLIN, deadline)) {
    char buf[256];
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      // A coordinator with TLS closes a plaintext connection silently; gRPC's
      // own attempt then says so (the TLS hint), so that is no verdict here.
      if (got.empty()) return "";
      break;
    }
    got.append(buf, static_cast<std::size_t>(n));
  }
  if (got.empty()) return "";  // silent: perhaps slow; let the normal connect decide
  // An HTTP/2 server's first frame is its SETTINGS (type 0x4 at byte 3).
  if (got.size() >= kFrameHeader && got[3] == 0x04) return "";
  if (got.starts_with("HTTP/"))
    return str("an HTTP/1 server (it answered \"", first_line(got), "\")");
  if (got.starts_with("SSH-")) return str("an SSH server (\"", first_line(got), "\")");
  if (static_cast<unsigned char>(got[0]) == 0x15 || static_cast<unsigned char>(got[0]) == 0x16)
    return "a TLS server";
  return str("a server that answered \"", first_line(got), "\"");
}

}  // namespace mddp::worker
