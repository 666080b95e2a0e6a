// The data plane's TCP handshake as either end meets it: the bytes of a
// connecting stranger (core/comm/transport/tcp/handshake.h), read the way
// mesh.cc reads them (grow the read as hello_bytes_needed() says; stop at
// its first refusal), then decoded and checked; and the same bytes as the
// challenge a connecting rank reads back and the confirm an acceptor reads.
// A hello that decodes must encode to the same bytes, and a challenge or
// confirm that decodes must too.
#include <algorithm>

#include "core/comm/transport/tcp/handshake.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mddp::comm;
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
    MDDP_FUZZ_ASSERT(need <= kMaxHandshakeBytes);  // the bound a listener reads at most
    const Hello h = decode_hello(data, need);
    const std::string again = encode_hello(h);
    MDDP_FUZZ_ASSERT(again == std::string(reinterpret_cast<const char*>(data), need));
    const JobIdentity job{"job", 0, std::string(32, 'k')};
    for (int rank : {0, 1, 3}) (void)check_hello(h, job, rank, 4);
  }
  if (size >= kChallengeBytes)
    for (int rank : {0, 2}) {
      Challenge c;
      if (decode_challenge(data, rank, 4, c).empty())
        MDDP_FUZZ_ASSERT(encode_challenge(c) ==
                         std::string(reinterpret_cast<const char*>(data), kChallengeBytes));
    }
  if (size >= kConfirmBytes) {
    std::string mac;
    if (decode_confirm(data, mac).empty())
      MDDP_FUZZ_ASSERT(encode_confirm(mac) ==
                       std::string(reinterpret_cast<const char*>(data), kConfirmBytes));
  }
  return 0;
}
