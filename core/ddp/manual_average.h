// Data parallelism by hand, in one process: the replicas' gradients averaged
// with plain tensor ops, no communicator (`microddp demo manual`,
// docs/naive.md; the course's Lab 1 writes its own).
#pragma once

#include <vector>

#include "core/nn/module.h"

namespace mddp::ddp {

// Every replica's gradient of each parameter becomes the mean of all
// replicas' gradients of that parameter. The replicas must be the same
// model (same parameters in the same order and shapes); one replica is left
// as it is. With equal shards of one batch, the mean of the replicas'
// mean-loss gradients is the whole batch's gradient.
void average_replica_gradients(const std::vector<nn::Module*>& replicas);

}  // namespace mddp::ddp
