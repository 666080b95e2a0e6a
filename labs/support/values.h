// The inputs of the collective Labs' checks, chosen so that any partial sum
// says whose contributions it holds and which element it is:
//
//   rank r's element i  =  128 (i mod 1000) + 2^r
//
// A sum over a set S of ranks is 128 |S| (i mod 1000) + mask(S), where bit r
// of mask(S) is set for r in S: exact in fp32 for up to 7 ranks, and
// decodable back into (i mod 1000, S). So a message caught in flight
// (exchanges.h) tells which block it was and how far round the ring it got.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/comm/types.h"

namespace mddp::labs {

inline constexpr int kMaxCheckedRanks = 7;

float contribution(int rank, int64_t i);
// The correct result at element i of reducing every rank's contribution
// over n ranks with `op` (sum, avg, max, min).
float reduced(int n, int64_t i, comm::ReduceOp op);

struct Partial {
  int64_t element_mod = 0;  // i mod 1000
  uint32_t ranks = 0;       // bit r set: rank r's contribution is in it
};
// The partial sum `v` is, or nullopt when it is no sum of contributions.
std::optional<Partial> decode(double v);

// "{0, 1, 3}"
std::string rank_set(uint32_t mask);
// The set of ranks {first, first+1, ..., first+count-1} mod n as a mask.
uint32_t ring_span(int first, int count, int n);

// Whether `got` matches `want` (relative tolerance 1e-6: different but
// correct orders of summation may differ in the last bit).
bool close(double got, double want);
// "23" or "nan (never written)"
std::string show(double v);

}  // namespace mddp::labs
