// Lab 1's reference solution: core's own in-process averaging, the code
// `microddp demo manual` runs (core/ddp/manual_average.cc).
#include "core/ddp/manual_average.h"
#include "labs/01_manual/lab.h"

namespace mddp::labs::impl {

void average_gradients(const std::vector<nn::Module*>& replicas) {
  ddp::average_replica_gradients(replicas);
}

}  // namespace mddp::labs::impl
