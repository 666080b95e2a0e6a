// The control plane's size limits: what a hostile or broken peer can make
// the coordinator hold or parse, each refused with one clear status (the
// table in docs/security.md). The key/value store's own limits are
// KvStore::Limits (kv_store.h).
#pragma once

#include <cstddef>

namespace mddp::control {

// One gRPC message, either way: a larger one is refused by gRPC itself
// (RESOURCE_EXHAUSTED, "Received message larger than max") before parsing.
inline constexpr std::size_t kMaxMessageBytes = 8 << 20;
// Records in one MetricsBatch (a worker sends at most 256) and bucket spans
// in one record (one per bucket; per parameter in hooked mode):
// INVALID_ARGUMENT and the stream ends, nothing of the batch is logged.
inline constexpr std::size_t kMaxMetricsBatch = 4096;
inline constexpr std::size_t kMaxBucketsPerRecord = 1 << 16;

}  // namespace mddp::control
