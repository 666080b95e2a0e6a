// The TCP data plane's frame decoder (core/comm/transport/frame.h in
// TcpTransport) fed by a hostile peer: a real TcpTransport of rank 0 whose
// connection to rank 1 is one end of a socket pair; the other end carries
// the input and then closes. Rank 0 receives 1 to 4 messages of sizes the
// input names. Each recv either completes with exactly that many bytes or
// throws the PeerError the spec promises (wrong magic, sequence or length,
// the peer gone); never more bytes, never a hang (the deadline is only a
// backstop: EOF ends every read).
//
// Input: [count-1 (low 2 bits)] [one byte per message: size / 16] [stream bytes]
#include <sys/socket.h>

#include <vector>

#include "core/comm/transport/frame.h"
#include "core/comm/transport/tcp/tcp_transport.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::size_t count = 1 + (data[0] & 3);
  if (size < 1 + count) return 0;
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < count; ++i) sizes.push_back(std::size_t{data[1 + i]} * 16);
  const uint8_t* stream = data + 1 + count;
  const std::size_t stream_bytes = size - 1 - count;

  int sv[2];
  MDDP_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
  const int buffer = 1 << 20;  // the whole input fits: the writer never blocks
  ::setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  for (std::size_t done = 0; done < stream_bytes;) {
    const ssize_t n = ::send(sv[1], stream + done, stream_bytes - done, MSG_NOSIGNAL);
    MDDP_CHECK(n > 0, "the socket pair refused the input");
    done += static_cast<std::size_t>(n);
  }
  ::close(sv[1]);
  std::vector<comm::tcp::Fd> fds(2);
  fds[1] = comm::tcp::Fd(sv[0]);
  comm::TcpTransport transport(0, 2, std::move(fds));
  for (std::size_t bytes : sizes) {
    std::vector<uint8_t> out(bytes + 1, 0xab);  // one guard byte past the message
    try {
      transport.recv(1, out.data(), bytes, comm::Clock::now() + std::chrono::seconds(5));
    } catch (const comm::TimeoutError&) {
      __builtin_trap();  // EOF must end every read: a timeout is a hang
    } catch (const Error&) {
    }
    MDDP_FUZZ_ASSERT(out[bytes] == 0xab);
  }
  // The header codec on its own: decode and encode are inverses.
  if (stream_bytes >= comm::frame::kHeaderBytes) {
    uint8_t again[comm::frame::kHeaderBytes];
    comm::frame::encode(again, comm::frame::decode(stream));
    MDDP_FUZZ_ASSERT(std::equal(again, again + sizeof again, stream));
  }
  return 0;
}
