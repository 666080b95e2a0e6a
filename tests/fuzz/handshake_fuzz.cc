// The data plane's TCP handshake as a listener meets it: the bytes of a
// connecting stranger (core/comm/transport/tcp/handshake.h), read the way
// mesh.cc reads them (grow the read as hello_bytes_needed() says; stop at
// its first refusal), then decoded and checked; and the same bytes as the
// accept a connecting rank reads back. A hello that decodes must encode to
// the same bytes. Kept small on purpose: the handshake changes in wave 2
// (PROTOCOL-WAVE2.md), and this target changes with it.
#include "core/comm/transport/tcp/handshake.h"

#include <algorithm>

#include "tests/fuzz/fuzz_support.h"

using namespace mddp::comm::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string refusal;
  std::size_t have = std::min(size, kHelloFixedBytes);
  std::size_t need = hello_bytes_needed(data, have, refusal);
  while (refusal.empty() && need > have && have < size) {
    have = std::min(size, need);
    need = hello_bytes_needed(data, have, refusal);
  }
  MDDP_FUZZ_ASSERT(refusal.empty() || need == 0);
  if (refusal.empty() && need <= have) {
    MDDP_FUZZ_ASSERT(need <= kHelloFixedBytes + 2 * kMaxIdBytes);  // the bound a listener reads at most
    const Hello h = decode_hello(data, need);
    const std::string again = encode_hello(h);
    MDDP_FUZZ_ASSERT(again == std::string(reinterpret_cast<const char*>(data), need));
    for (int rank : {0, 1, 3}) (void)check_hello(h, "job", "a-token", rank, 4);
  }
  if (size >= kAcceptBytes)
    for (int rank : {0, 2}) (void)check_accept(data, rank, 4);
  return 0;
}
