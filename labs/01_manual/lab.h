// Lab 1 — manual gradient averaging with two replicas (docs/naive.md).
// What you write (my_work/manual.cc); the reference is
// ddp::average_replica_gradients (core/ddp/manual_average.h).
#pragma once

#include <vector>

#include "core/nn/module.h"

namespace mddp::labs::impl {

// The replicas are copies of one model, each after backward on its own
// equal share of a batch. Afterwards every replica's gradient of each
// parameter (Parameter::grad) is the mean of all replicas' gradients of it.
void average_gradients(const std::vector<nn::Module*>& replicas);

}  // namespace mddp::labs::impl
