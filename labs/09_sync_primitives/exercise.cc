// Lab 9 — broadcast the initial model, gather the results, barrier.
// Read labs/09_sync_primitives/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check sync_primitives
#include "labs/09_sync_primitives/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

void broadcast_model(nn::Module& model, comm::Communicator& comm, int root) {
  // EXERCISE: comm.broadcast(data, count, comm::DataType::kFloat32, root)
  // each parameter's value, and wait().
  MDDP_LAB_TODO("broadcast_model");
}

GatheredEval gather_eval(const EvalCounts& mine, comm::Communicator& comm, int root) {
  // EXERCISE: every rank sends {correct, samples} (as two floats) to the
  // root with comm.gather(in, out, 2, comm::DataType::kFloat32, root); the
  // root unpacks them per rank and computes the accuracy over the whole
  // test set. Careful: the shards may have different sizes.
  MDDP_LAB_TODO("gather_eval");
}

void save_on_root(comm::Communicator& comm, int root, const std::function<void()>& save) {
  // EXERCISE: the root calls save(); nobody may return before it finished.
  MDDP_LAB_TODO("save_on_root");
}

}  // namespace mddp::labs::impl
