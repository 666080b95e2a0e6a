// 64-bit words (hashes, step counts, counters) through the job's float
// collectives, bit for bit: a broadcast or an all-gather only copies bytes,
// so each word travels as two floats, in a tensor on the job's device (NCCL
// reads device memory). Collective: every rank of `comm` calls it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/comm/process_group.h"
#include "core/tensor/device.h"

namespace mddp::train {

// Every rank's `mine` (the same count on each), rank after rank.
std::vector<uint64_t> all_gather_words(comm::ProcessGroup& comm, std::span<const uint64_t> mine,
                                       const tensor::Device& device);
// `words` replaced by root's on every rank.
void broadcast_words(comm::ProcessGroup& comm, std::span<uint64_t> words, int root,
                     const tensor::Device& device);

}  // namespace mddp::train
