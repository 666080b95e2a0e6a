// The training benchmark as a function, shared by `bench train` and
// `demo bucketing`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/train/config.h"

namespace mddp::cli {

struct BenchTrainFlags {
  int nproc = 1;
  int warmup = 3;
  int iters = 10;
  std::string json_path;
};

// Runs warm-up + timed steps on o.nproc local ranks (DDP when > 1) and
// returns {samples_per_s, step_ms, phases_ms{...}, peak_rss_mb[...], ranks[...]}.
nlohmann::json bench_train(const train::TrainConfig& cfg, const BenchTrainFlags& o);

}  // namespace mddp::cli
