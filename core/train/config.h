// Everything a training job needs to know, filled from the shared training
// flags (cli/train_flags.cc) and, in distributed runs, broadcast by the
// coordinator. Defaults are the README's main job: Fashion-MNIST, the MLP, Adam.
#pragma once

#include <cstdint>
#include <string>

#include "core/data/factory.h"
#include "core/nn/models.h"
#include "core/nn/optimizer.h"

namespace mddp::train {

struct TrainConfig {
  nn::ModelConfig model;
  std::string loss = "xent";              // xent | mse
  data::DatasetConfig data{.spec = "fashion-mnist"};
  int64_t batch = 64;                     // global batch (split over ranks)
  int64_t steps = 0;                      // > 0: stop after this many steps
  int64_t epochs = 3;                     // used when steps == 0
  nn::OptimizerConfig optim{.name = "adam", .lr = 1e-3f};
  int64_t accumulate = 1;                 // micro-batches of `batch` per optimiser step
  uint64_t seed = 42;                     // model init and data order
  std::string device = "cpu";
  std::string run_dir;                    // logs, checkpoints ("" = none)
  int threads = 1;                        // compute threads per process
  int64_t log_every = 0;                  // 0 = about 20 lines per run
  bool eval = true;                       // test accuracy after each epoch

  // Rejects contradictory or impossible settings with an InputError naming the flag.
  void validate() const;
};

}  // namespace mddp::train
