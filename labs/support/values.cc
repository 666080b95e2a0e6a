#include "labs/support/values.h"

#include <bit>
#include <cmath>
#include <cstdio>

#include "core/common/check.h"

namespace mddp::labs {

float contribution(int rank, int64_t i) {
  return 128.0f * static_cast<float>(i % 1000) + static_cast<float>(1 << rank);
}

float reduced(int n, int64_t i, comm::ReduceOp op) {
  switch (op) {
    case comm::ReduceOp::kMax:
      return contribution(n - 1, i);
    case comm::ReduceOp::kMin:
      return contribution(0, i);
    case comm::ReduceOp::kSum:
    case comm::ReduceOp::kAvg:
      break;
  }
  const float sum = 128.0f * static_cast<float>(n) * static_cast<float>(i % 1000) +
                    static_cast<float>((1 << n) - 1);
  return op == comm::ReduceOp::kAvg ? sum / static_cast<float>(n) : sum;
}

std::optional<Partial> decode(double v) {
  if (!std::isfinite(v) || v < 1 || v != std::floor(v) || v > 1e7) return std::nullopt;
  const auto x = static_cast<int64_t>(v);
  const auto mask = static_cast<uint32_t>(x % 128);
  const int k = std::popcount(mask);
  if (k == 0 || mask >= (1u << kMaxCheckedRanks) || (x - mask) % (128 * k) != 0)
    return std::nullopt;
  const int64_t element = (x - mask) / (128 * k);
  if (element >= 1000) return std::nullopt;
  return Partial{element, mask};
}

std::string rank_set(uint32_t mask) {
  std::string s = "{";
  for (int r = 0; r < 32; ++r)
    if (mask & (1u << r)) s += (s.size() > 1 ? ", " : "") + std::to_string(r);
  return s + "}";
}

uint32_t ring_span(int first, int count, int n) {
  uint32_t mask = 0;
  for (int k = 0; k < count; ++k) mask |= 1u << (((first + k) % n + n) % n);
  return mask;
}

bool close(double got, double want) {
  return std::abs(got - want) <= 1e-6 * std::max(1.0, std::abs(want));
}

std::string show(double v) {
  if (std::isnan(v)) return "nan (never written)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace mddp::labs
