// Shared pieces of the collective tests: N ranks as threads with a
// Communicator each, typed buffers, integer-valued inputs whose reductions
// are exact, and readable comparisons.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/communicator.h"
#include "core/comm/memory_store.h"
#include "core/common/half.h"
#include "tests/support/files.h"
#include "tests/support/ranks.h"
#include "tests/support/text.h"

namespace mddp::comm::test {

using namespace std::chrono_literals;

inline const JobIdentity kJob{"collectives-test", 0, "token"};

// Runs fn(comm) on n thread-ranks, each with its own Communicator over
// `kind`, connected through one MemoryStore.
inline void with_comms(TransportKind kind, int n, const std::function<void(Communicator&)>& fn,
                       CommOptions options = {Algorithm::kAuto, 20s}) {
  MemoryStore store;
  mddp::test::run_threads(
      n,
      [&](int rank) {
        auto comm = connect(store, rank, n, kJob, kind, options);
        fn(*comm);
      },
      120s);
}

// A buffer of `count` elements of one wire type, read and written as floats
// (16-bit types through half.h, itself checked against independent
// references in kernels_test.cc).
class Buffer {
 public:
  Buffer(DataType t, int64_t count)
      : t_(t), bytes_(static_cast<std::size_t>(count) * element_size(t)) {}
  DataType dtype() const { return t_; }
  int64_t count() const { return static_cast<int64_t>(bytes_.size() / element_size(t_)); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  std::vector<uint8_t>& bytes() { return bytes_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  float get(int64_t i) const {
    const auto* p = bytes_.data() + static_cast<std::size_t>(i) * element_size(t_);
    if (t_ == DataType::kFloat32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return t_ == DataType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h);
  }
  void set(int64_t i, float v) {
    auto* p = bytes_.data() + static_cast<std::size_t>(i) * element_size(t_);
    if (t_ == DataType::kFloat32) {
      std::memcpy(p, &v, 4);
      return;
    }
    const uint16_t h = t_ == DataType::kFloat16 ? float_to_fp16(v) : float_to_bf16(v);
    std::memcpy(p, &h, 2);
  }

 private:
  DataType t_;
  std::vector<uint8_t> bytes_;
};

// v rounded to the nearest value of type t.
inline float round_to(DataType t, float v) {
  if (t == DataType::kFloat16) return fp16_to_float(float_to_fp16(v));
  if (t == DataType::kBFloat16) return bf16_to_float(float_to_bf16(v));
  return v;
}

// Rank r's input element i: an integer in [-8, 8], different per rank and
// position. Any partial sum over <= 8 ranks is an integer of magnitude <= 64,
// exact in fp32, fp16 and bf16, so every algorithm must match the reference
// bit for bit whatever order it adds in.
// The pattern repeats every kPeriod elements, which lets the reference below
// be a table.
inline constexpr int64_t kPeriod = 17;
inline float input_value(int rank, int64_t i) {
  return static_cast<float>(((rank * 7 + i * 13 + 3) % kPeriod) - 8);
}

inline Buffer make_input(DataType t, int64_t count, int rank) {
  Buffer b(t, count);
  const std::size_t es = element_size(t);
  for (int64_t i = 0; i < std::min(count, kPeriod); ++i) b.set(i, input_value(rank, i));
  for (int64_t i = kPeriod; i < count; ++i)
    std::memcpy(b.bytes().data() + i * es, b.bytes().data() + (i % kPeriod) * es, es);
  return b;
}

// The reference reduction of element i over n ranks, computed directly,
// rounded to the wire type as the result must be (avg: sum / n, once).
inline float expected_value(DataType t, ReduceOp op, int n, int64_t i) {
  float acc = input_value(0, i);
  for (int r = 1; r < n; ++r) {
    const float v = input_value(r, i);
    if (op == ReduceOp::kMax)
      acc = v > acc ? v : acc;
    else if (op == ReduceOp::kMin)
      acc = v < acc ? v : acc;
    else
      acc += v;
  }
  if (op == ReduceOp::kAvg) acc /= static_cast<float>(n);
  return round_to(t, acc);
}

// expected_value as a table over one period: the same numbers, fast enough
// for million-element checks on 8 ranks under a sanitizer.
class Expected {
 public:
  Expected(DataType t, ReduceOp op, int n) {
    for (int64_t k = 0; k < kPeriod; ++k) values_[k] = expected_value(t, op, n, k);
  }
  float operator()(int64_t i) const { return values_[i % kPeriod]; }

 private:
  float values_[kPeriod];
};

// Compares got[i] with want(i) for i < count, reporting the number of wrong
// elements and the first few.
template <typename Want>
::testing::AssertionResult matches(const Buffer& got, int64_t offset, int64_t count, Want&& want) {
  int64_t wrong = 0;
  std::string first;
  for (int64_t i = 0; i < count; ++i) {
    const float g = got.get(offset + i), w = want(i);
    if (!(g == w)) {
      if (++wrong <= 3) first += str(" [", i, "] got ", g, " want ", w);
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << wrong << " of " << count << " elements wrong:" << first;
}

// Bytes that identify (rank, salt, position), for collectives that only move data.
inline std::vector<uint8_t> pattern(int rank, std::size_t bytes, int salt) {
  std::vector<uint8_t> v(bytes);
  uint32_t x = static_cast<uint32_t>(rank * 1000003 + salt * 7919 + 17) | 1u;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

inline ::testing::AssertionResult same_bytes(const uint8_t* got, const uint8_t* want,
                                             std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "first mismatch at byte " << i << " of " << n;
  return ::testing::AssertionSuccess();
}

// The counts every sweep covers: 0, 1, 7, n-1, and a large one not divisible by n.
inline std::vector<int64_t> sweep_counts(int n) {
  std::vector<int64_t> counts{0, 1, 7};
  if (n - 1 > 1 && n - 1 != 7) counts.push_back(n - 1);
  counts.push_back(100003);
  return counts;
}

// For collectives whose count is per block (reduce_scatter, all_gather,
// scatter, gather): the same, with the large one about 100003 in all.
inline std::vector<int64_t> block_counts(int n) {
  auto counts = sweep_counts(n);
  counts.back() = (100003 / n) | 1;
  return counts;
}

struct WorldParam {
  TransportKind kind;
  int world;
};

inline std::vector<WorldParam> all_worlds() {
  std::vector<WorldParam> v;
  for (auto kind : {TransportKind::kTcp, TransportKind::kShm})
    for (int n : {1, 2, 3, 4, 5, 8}) v.push_back({kind, n});
  return v;
}

inline std::string world_name(const ::testing::TestParamInfo<WorldParam>& info) {
  return str(to_string(info.param.kind), "_", info.param.world);
}

// ---- failure tests (failure_test.cc, gloo_test.cc) ---------------------------
using mddp::test::contains;

// Waits (bounded) until `flag` is set: how a rank that must not take part
// stays connected until the others have seen their error.
inline void wait_for(const std::atomic<bool>& flag) {
  for (int i = 0; i < 3000 && !flag.load(); ++i) std::this_thread::sleep_for(10ms);
}

// Runs `wait` and returns the error of type Error it throws (fails the test
// if none, or another).
template <typename Error>
std::string expect_error(const WorkPtr& work) {
  try {
    work->wait();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace mddp::comm::test
