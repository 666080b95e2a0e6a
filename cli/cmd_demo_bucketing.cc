// `microddp demo bucketing`: naive vs hooked vs bucketed (several caps) on
// the same job, side by side, with warm-up, barriers and real overlap. Many small all-reduces pay
// the latency once each (hooked); one bucket for the whole model overlaps nothing (it is ready only
// at the end of backward); small-but-not-tiny buckets overlap most. docs/bucketing.md.
#include <cstdio>
#include <memory>

#include "cli/bench_train.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/train_flags.h"
#include "core/common/check.h"

namespace mddp::cli {

void register_demo_bucketing(CLI::App& demo) {
  auto cfg = std::make_shared<train::TrainConfig>();
  cfg->model = {.kind = "mlp", .width = 512, .depth = 16, .classes = 0};
  cfg->loss = "mse";
  cfg->data.spec = "synthetic-regression";
  cfg->data.synthetic_size = 2048;
  cfg->batch = 64;
  cfg->optim = {.name = "sgd", .lr = 0.01f};
  cfg->eval = false;
  auto o = std::make_shared<BenchTrainFlags>();
  o->nproc = 2;
  o->iters = 10;
  auto* cmd = demo.add_subcommand("bucketing",
                                  "Naive vs hooked vs bucketed DDP on the same job, side by side");
  cmd->add_option("--nproc", o->nproc, "ranks on this host")
      ->check(local_ranks())
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "timed steps per mode")->capture_default_str();
  add_training_flags(*cmd, *cfg);
  add_ddp_flags(*cmd, *cfg);
  cmd->callback([cfg, o] {
    if (o->nproc < 2)
      throw InputError("demo bucketing compares synchronisation: use --nproc 2 or more");
    std::printf("FullMLP width %lld depth %lld, global batch %lld, %d ranks, %d timed steps each\n",
                static_cast<long long>(cfg->model.width), static_cast<long long>(cfg->model.depth),
                static_cast<long long>(cfg->batch), o->nproc, o->iters);
    std::printf("%-22s %10s %12s %14s %12s %9s\n", "mode", "step ms", "samples/s", "exposed comm",
                "total comm", "overlap");
    struct Row {
      const char* mode;
      double mb;
    };
    for (const Row& r : {Row{"naive", 0}, Row{"hooked", 0}, Row{"bucketed", 25}, Row{"bucketed", 1},
                         Row{"bucketed", 0.25}}) {
      train::TrainConfig c = *cfg;
      c.dist.ddp = r.mode;
      if (r.mb > 0) c.dist.bucket_mb = c.dist.first_bucket_mb = r.mb;
      const auto j = bench_train(c, *o);
      const auto& ph = j["phases_ms"];
      const std::string name = r.mb > 0 ? str(r.mode, " ", r.mb, " MiB") : r.mode;
      std::printf("%-22s %10.2f %12.1f %11.2f ms %9.2f ms %8.0f%%\n", name.c_str(),
                  j["step_ms"].get<double>(), j["samples_per_s"].get<double>(),
                  ph["exposed_comm_ms"].get<double>(), ph["total_comm_ms"].get<double>(),
                  ph["overlap"].get<double>() * 100);
    }
  });
}

}  // namespace mddp::cli
