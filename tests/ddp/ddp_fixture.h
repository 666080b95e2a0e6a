// Shared pieces of the DDP tests: small configs, a tiny image dataset written
// as IDX files, and runners for N ranks (threads over real transports) and
// for the single-process reference.
#pragma once

#include <string>
#include <vector>

#include "core/comm/types.h"
#include "core/train/config.h"
#include "core/train/trainer.h"

namespace mddp::test {

using Params = std::vector<std::vector<float>>;  // one vector per parameter, registration order

// Writes a 64-image 8x8 10-class IDX dataset (train and test) once per test
// binary; returns its "idx:DIR" spec.
std::string tiny_image_dataset();

train::TrainConfig
mlp_config();  // synthetic classification, FullMLP width 12 depth 3, SGD + momentum
train::TrainConfig cnn_config();  // tiny IDX images, CNN channels {3, 4}, hidden 10
// synthetic tokens (vocabulary 11, blocks of 8), a GPT of 2 layers, 2 heads, 8 features
train::TrainConfig gpt_config();
// mlp_config(), cnn_config() or gpt_config() (model "mlp", "cnn" or "gpt") synchronised by `mode`
// (naive | hooked | bucketed | sharded), every bucket, the first too, capped at bucket_mb.
train::TrainConfig ddp_config(const std::string& model, const std::string& mode, double bucket_mb);

Params snapshot(nn::Module& model);

// Trains `steps` steps on `world` ranks (threads, MemoryStore rendezvous,
// the given transport; over gloo when cfg.dist.backend is "gloo") and
// returns every rank's final parameters.
std::vector<Params> train_ranks(const train::TrainConfig& cfg, int world, comm::TransportKind kind,
                                int steps);
// The reference: one process, whole global batch (cfg.batch * cfg.accumulate).
Params train_single(const train::TrainConfig& cfg, int steps);

// max |a - b| / max |b| over one parameter (norm-wise relative error).
double rel_error(const std::vector<float>& a, const std::vector<float>& b);

// Every rank holds bitwise the same parameters.
void expect_identical_across_ranks(const std::vector<Params>& ranks);
// Each parameter of `got` within `tol` relative error of `want`'s.
void expect_close(const Params& got, const Params& want, double tol, const std::string& what);

}  // namespace mddp::test
