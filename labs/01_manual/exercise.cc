// Lab 1 — manual gradient averaging with two replicas.
// Read labs/01_manual/README.md first. Check your work with:
//   cmake --build build && build/cli/microddp lab check manual
#include "core/tensor/ops.h"
#include "labs/01_manual/lab.h"
#include "labs/todo.h"

namespace mddp::labs::impl {

void average_gradients(const std::vector<nn::Module*>& replicas) {
  // EXERCISE: for each parameter index i, the replicas' gradients
  //   replicas[r]->parameters()[i]->grad
  // must all become their mean. tensor::axpy(alpha, x, y) adds alpha * x to
  // y, tensor::scale(x, alpha) multiplies x by alpha, tensor::copy(src, dst)
  // copies (core/tensor/ops.h).
  MDDP_LAB_TODO("average_gradients");
}

}  // namespace mddp::labs::impl
