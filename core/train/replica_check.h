// The replica check (Note [Replica check] in replica_check.cc): do all
// ranks still hold the same model? Every rank hashes its tensors, the ranks
// all-gather the hashes, and every rank reaches the same verdict from the
// same table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/comm/process_group.h"
#include "core/nn/module.h"
#include "core/nn/optimizer.h"
#include "core/tensor/device.h"

namespace mddp::train {

struct ReplicaDigest {
  std::vector<std::string> names;  // what each hash covers: "0.weight", "0.weight.exp_avg", ...
  std::vector<uint64_t> hashes;    // the first 8 bytes of each tensor's SHA-256
};

// Each parameter's hash, then, when `optimizer` is given, each tensor of its
// state (null where ranks hold different state by design: ZeRO-1's shards,
// local SGD's moments).
ReplicaDigest replica_digest(nn::Module& model, nn::Optimizer* optimizer);

// Given every rank's hashes of `names` (rank after rank in `all`), which
// ranks differ from the job's replicas (the largest group of equal digests,
// rank 0's on a tie) and in what: "rank 2 differs from ranks 0, 1, 3 in
// 0.weight"; "" when every rank agrees.
std::string replica_divergence(const std::vector<std::string>& names,
                               const std::vector<uint64_t>& all, int world_size);

// Compares `mine` with every rank's over `comm` (one all-gather; its buffers
// on `device`). Throws Error naming the diverged ranks and the step.
void check_replicas(comm::ProcessGroup& comm, const ReplicaDigest& mine, int64_t step,
                    const tensor::Device& device);

}  // namespace mddp::train
