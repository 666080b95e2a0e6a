// `microddp verify`: DDP against one process, as a command. Trains the
// same job with each synchronisation mode on N local ranks and once in a
// single process on the whole batch, then compares: every rank must hold
// bitwise the same parameters, and they must match the single process within
// a relative error of 1e-5 with SGD (fp32: only the order of the sums
// differs) or 1e-4 with Adam or AdamW, which divide by sqrt(v) and so amplify
// rounding in near-zero gradients. With 16-bit gradients on the wire
// (--compress fp16/bf16, or --precision bf16/fp16, whose single process runs
// at the same precision) each all-reduce rounds the gradients, and the bound
// is 5e-3 (tests/ddp/ddp_precision_test.cc measures ~1e-3). Top-k and
// PowerSGD are refused: they send less than the gradient by design, so no
// tolerance would mean anything; so is Adam with 16-bit gradients (see
// sixteen_bit_wire). Exits non-zero if anything differs. The GPT keeps
// verify's SGD: with Adam its attention's key bias, whose true gradient is
// zero (a softmax ignores a shift of all its scores), steps by the sign of
// rounding noise, about lr/100 a step, past any fixed relative bound.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "cli/train_flags.h"
#include "core/data/sampler.h"
#include "core/ddp/compression.h"
#include "core/tensor/device.h"
#include "core/train/distributed.h"
#include "core/train/mixed_precision.h"
#include "core/train/safetensors.h"

namespace mddp::cli {
namespace {

std::vector<std::vector<float>> load_params(const std::string& path) {
  std::vector<std::vector<float>> out;
  for (const auto& t : train::load_safetensors(path).tensors) out.push_back(t.value.to_vector());
  return out;
}

void save_params(nn::Module& m, const std::string& path) {
  std::vector<train::NamedTensor> ts;
  for (auto* p : m.parameters()) ts.push_back({p->name, p->value});
  train::save_safetensors(path, ts, {});
}

// Whether the gradients travel rounded to 16 bits; throws InputError for
// the lossy compressions, which verify cannot judge.
bool sixteen_bit_wire(const train::TrainConfig& cfg) {
  const ddp::Compression c = ddp::parse_compression(train::effective_compress(cfg));
  if (c.kind == ddp::CompressionKind::kTopK || c.kind == ddp::CompressionKind::kPowerSgd)
    throw InputError(str(
        "verify --compress ", cfg.dist.compress,
        ": top-k and PowerSGD send less than the gradient by design (error feedback makes it up "
        "over later steps), so N ranks cannot match one process within any tolerance; verify "
        "checks none, fp16 and bf16 (ddp_compression_test checks top-k and PowerSGD, "
        "docs/ddp.md)"));
  if (c.is_half() && cfg.optim.name != "sgd")
    throw InputError(
        str("verify --optimizer ", cfg.optim.name, " with gradients sent as ",
            train::effective_compress(cfg),
            ": Adam divides each gradient by its own running size, so the 16-bit rounding of a "
            "gradient whose shards cancel becomes a whole learning-rate step (0.5 relative error "
            "measured on the default model); verify 16-bit gradients with --optimizer sgd"));
  return c.is_half();
}

// "11, 11, 10": how `total` samples are shared over nproc ranks.
std::string shares(int64_t total, int nproc) {
  std::string s;
  for (int r = 0; r < nproc; ++r) s += str(r ? ", " : "", data::even_share(total, nproc, r).size());
  return s;
}

// The ranks share the one process's batch, unevenly when nproc does not
// divide it, and the short last step of --last-batch keep too (Note [Uneven
// shares] in core/train/trainer.cc): said when it happens, since that is
// what the weighting must get right.
void print_uneven_shares(const train::TrainConfig& cfg, int nproc, int64_t dataset_size) {
  const int64_t batch = cfg.batch * cfg.accumulate, left = dataset_size % batch;
  if (batch % nproc != 0)
    std::printf(
        "uneven shares: %s samples of each step's %lld, each gradient weighted by its share\n",
        shares(batch, nproc).c_str(), static_cast<long long>(batch));
  if (cfg.last_batch == "keep" && left > 0)
    std::printf("last step of each epoch: %lld samples, shared %s (--last-batch keep)\n",
                static_cast<long long>(left), shares(left, nproc).c_str());
}

bool run(const train::TrainConfig& cfg, int nproc) {
  if (cfg.steps < 1) throw InputError("verify needs --steps >= 1");
  const double tol = sixteen_bit_wire(cfg) ? 5e-3 : cfg.optim.name != "sgd" ? 1e-4 : 1e-5;
  tensor::require_gpu_per_local_rank(cfg.device, nproc);
  const std::string tmp = make_temp_dir("microddp-verify");
  // The single process runs in a child like the ranks: on a GPU, a process
  // that started CUDA could not fork ranks that use it (Note [CUDA and fork]).
  const int single_rc = run_local_ranks(1, [&](int, comm::Store&) {
    train::Trainer single(cfg);
    std::printf(
        "verify: %s, %lld parameters, %lld steps of %s, global batch %lld on %d ranks vs 1 "
        "process\n",
        single.model().describe().substr(0, 60).c_str(),
        static_cast<long long>(single.model().num_parameters()), static_cast<long long>(cfg.steps),
        cfg.optim.name.c_str(), static_cast<long long>(cfg.batch), nproc);
    print_uneven_shares(cfg, nproc, single.train_set().size());
    for (int64_t s = 0; s < cfg.steps; ++s) single.step();
    save_params(single.model(), tmp + "/single.safetensors");
  });
  if (single_rc != 0) throw Error("verify: the single-process run failed");
  // Parameters are saved sorted by name by the checkpoint format; compare in that order.
  const auto reference = load_params(tmp + "/single.safetensors");

  std::printf(
      "tolerance: relative error <= %g (%s, gradients sent as %s)\n", tol, cfg.optim.name.c_str(),
      train::effective_compress(cfg) == "none" ? "fp32" : train::effective_compress(cfg).c_str());
  std::printf("%-10s %-18s %-26s %-12s %s\n", "mode", "ranks identical", "max |p - p_single|",
              "rel error", "");
  bool all_ok = true;
  for (const char* mode : {"naive", "hooked", "bucketed", "sharded"}) {
    train::TrainConfig c = cfg;
    c.dist.ddp = mode;
    const int rc = run_local_ranks(nproc, [&](int rank, comm::Store& store) {
      train::DistributedTrainer dt(
          c, train::connect_process_group(store, rank, nproc, {"verify", 0, ""}, c));
      for (int64_t s = 0; s < c.steps; ++s) dt.step();
      save_params(dt.trainer().model(),
                  tmp + "/" + mode + "-" + std::to_string(rank) + ".safetensors");
    });
    if (rc != 0) throw Error(str("verify: the ", mode, " run failed"));
    const auto rank0 = load_params(tmp + "/" + mode + "-0.safetensors");
    bool identical = true;
    for (int r = 1; r < nproc; ++r)
      identical &=
          load_params(tmp + "/" + mode + "-" + std::to_string(r) + ".safetensors") == rank0;
    double max_diff = 0, max_rel = 0;
    for (std::size_t p = 0; p < reference.size(); ++p) {
      double d = 0, scale = 0;
      for (std::size_t i = 0; i < reference[p].size(); ++i) {
        d = std::max(d, std::abs(static_cast<double>(rank0[p][i]) - reference[p][i]));
        scale = std::max(scale, std::abs(static_cast<double>(reference[p][i])));
      }
      max_diff = std::max(max_diff, d);
      max_rel = std::max(max_rel, d / std::max(scale, 1e-12));
    }
    const bool ok = identical && max_rel <= tol;
    all_ok &= ok;
    std::printf("%-10s %-18s %-26.3g %-12.3g %s\n", mode, identical ? "yes (bitwise)" : "NO",
                max_diff, max_rel, ok ? "OK" : "FAILED");
  }
  std::filesystem::remove_all(tmp);
  return all_ok;
}

}  // namespace

void register_verify(CLI::App& app) {
  auto cfg = std::make_shared<train::TrainConfig>();
  // A small model: FullMLP(128, 16), 2 classes, batch 32; SGD with momentum.
  cfg->data.spec = "synthetic";
  cfg->optim = {.name = "sgd", .lr = 0.01f, .momentum = 0.9f};
  cfg->model = {.kind = "mlp", .width = 128, .depth = 16, .classes = 2};
  cfg->batch = 32;
  cfg->steps = 10;
  cfg->eval = false;
  auto nproc = std::make_shared<int>(2);
  auto* cmd = app.add_subcommand(
      "verify",
      "Check DDP (naive, hooked, bucketed, sharded) against one process on the whole batch");
  cmd->add_option("--nproc", *nproc, "ranks on this host")
      ->check(CLI::Range(1, kMaxLocalRanks))
      ->capture_default_str();
  add_training_flags(*cmd, *cfg);
  add_ddp_flags(*cmd, *cfg);
  cmd->callback([cfg, nproc] {
    if (!run(*cfg, *nproc)) throw Error("verify: DDP did not reproduce the single-process model");
  });
}

}  // namespace mddp::cli
