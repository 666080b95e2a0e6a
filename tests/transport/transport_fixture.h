// Shared pieces of the transport tests: connecting a rank, deterministic
// message contents, and checks on error messages.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/store.h"
#include "core/comm/transport.h"
#include "core/comm/transport/connect.h"

namespace mddp::comm::test {

using namespace std::chrono_literals;

inline std::unique_ptr<Transport> connect_rank(Store& store, int rank, int size, TransportKind kind,
                                               std::chrono::milliseconds timeout = 30s) {
  JobIdentity job{"test-job", "s3cret-token"};
  auto t = connect_transport(store, rank, size, job, kind, timeout);
  EXPECT_EQ(t->rank(), rank);
  EXPECT_EQ(t->size(), size);
  return t;
}

inline Deadline in(std::chrono::milliseconds d) { return Clock::now() + d; }

// Bytes that differ by sender, receiver, length and salt, so a message
// delivered to the wrong place or out of order cannot pass for the right one.
inline std::vector<uint8_t> pattern(int src, int dst, std::size_t bytes, int salt = 0) {
  std::vector<uint8_t> v(bytes);
  uint32_t x = static_cast<uint32_t>(src * 1000003 + dst * 7919 + static_cast<int>(bytes % 65521) + salt * 31) | 1u;
  for (std::size_t i = 0; i < bytes; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

// First mismatch, for a readable failure instead of a 64 MiB dump.
inline ::testing::AssertionResult same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "first mismatch at byte " << i << " of " << got.size() << ": "
                                           << int(got[i]) << " != " << int(want[i]);
  return ::testing::AssertionSuccess();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline const char* kind_name(const ::testing::TestParamInfo<TransportKind>& info) {
  return to_string(info.param);
}

}  // namespace mddp::comm::test
