// Lab 9 — the sync primitives around training: broadcast the initial model,
// gather the results, barrier (docs/sync_primitives.md). What you write
// (my_work/sync_primitives.cc), with comm::Communicator's broadcast, gather
// and barrier (core/comm/communicator.h).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/comm/communicator.h"
#include "core/nn/module.h"

namespace mddp::labs {

// One rank's evaluation on its shard of the test set.
struct EvalCounts {
  int64_t correct = 0, samples = 0;
};
struct GatheredEval {
  std::vector<EvalCounts> per_rank;  // index = rank (only on the root)
  double accuracy = 0;               // over the whole test set (only on the root)
};

}  // namespace mddp::labs

namespace mddp::labs::impl {

// Every rank's parameters become root's. The reference is ddp::broadcast_parameters
// (core/ddp/ddp.cc).
void broadcast_model(nn::Module& model, comm::Communicator& comm, int root);
// The root learns every rank's counts (in rank order) and the accuracy over
// all of them; the shards need not be equal. Other ranks return {}.
GatheredEval gather_eval(const EvalCounts& mine, comm::Communicator& comm, int root);
// Root runs save() (e.g. writes a checkpoint); no rank returns before
// root's save() has finished, so every rank may read what it wrote.
void save_on_root(comm::Communicator& comm, int root, const std::function<void()>& save);

}  // namespace mddp::labs::impl
