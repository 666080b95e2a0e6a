// Shared pieces of the transport tests: connecting a rank, deterministic
// message contents, and checks on error messages.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/store.h"
#include "core/comm/transport.h"
#include "core/comm/transport/connect.h"
#include "support/text.h"

namespace mddp::comm::test {

using namespace std::chrono_literals;

inline std::unique_ptr<Transport> connect_rank(Store& store, int rank, int size, TransportKind kind,
                                               std::chrono::milliseconds timeout = 30s) {
  JobIdentity job{"test-job", 0, "s3cret-key"};
  auto t = connect_transport(store, rank, size, job, kind, timeout);
  EXPECT_EQ(t->rank(), rank);
  EXPECT_EQ(t->size(), size);
  return t;
}

inline Deadline in(std::chrono::milliseconds d) {
  return Clock::now() + d;
}

// Bytes that differ by sender, receiver, length and salt, so a message
// delivered to the wrong place or out of order cannot pass for the right one.
inline std::vector<uint8_t> pattern(int src, int dst, std::size_t bytes, int salt = 0) {
  std::vector<uint8_t> v(bytes);
  uint64_t x = (static_cast<uint64_t>(src) * 1000003u + static_cast<uint64_t>(dst) * 7919u +
                bytes * 31u + static_cast<uint64_t>(salt) * 131u) |
               1u;
  for (std::size_t i = 0; i < bytes; i += 8) {  // xorshift64, eight bytes at a time
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, bytes - i));
  }
  return v;
}

// First mismatch, for a readable failure instead of a 64 MiB dump.
inline ::testing::AssertionResult same_bytes(const std::vector<uint8_t>& got,
                                             const std::vector<uint8_t>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "first mismatch at byte " << i << " of " << got.size()
                                           << ": " << int(got[i]) << " != " << int(want[i]);
  return ::testing::AssertionSuccess();
}

using mddp::test::contains;

inline const char* kind_name(const ::testing::TestParamInfo<TransportKind>& info) {
  return to_string(info.param);
}

}  // namespace mddp::comm::test
