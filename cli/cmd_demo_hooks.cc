// `microddp demo hooks`: watch backward fire the grad-ready hooks (last
// layer first) and the bucketed reducer launch each bucket's all-reduce the
// moment its last gradient arrives, while earlier layers are still in
// backward, with real asynchronous all-reduces. docs/hooks.md,
// docs/bucketing.md; with --model gpt, the tied embedding's two
// contributions, docs/transformer.md.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "core/common/timer.h"
#include "core/ddp/bucket_assignment.h"
#include "core/tensor/device.h"
#include "core/train/distributed.h"

namespace mddp::cli {
namespace {

struct Event {
  int64_t t;
  std::string text;
};

void run_rank(const train::TrainConfig& cfg, int nproc, int rank, comm::Store& store) {
  train::DistributedTrainer dt(
      cfg, train::connect_process_group(store, rank, nproc, {"demo-hooks", 0, ""}, cfg));
  nn::Module& model = dt.trainer().model();
  const auto params = model.parameters();

  // The same pure function the reducer uses (Note [Bucket order]).
  std::vector<std::size_t> bytes;
  for (auto* p : params) bytes.push_back(p->grad.bytes());
  const auto buckets = ddp::assign_buckets(
      bytes, ddp::bucket_cap_bytes(cfg.dist.first_bucket_mb, "--first-bucket-mb"),
      ddp::bucket_cap_bytes(cfg.dist.bucket_mb, "--bucket-mb"));
  std::vector<int> bucket_of(params.size());
  for (std::size_t b = 0; b < buckets.size(); ++b)
    for (std::size_t i : buckets[b]) bucket_of[i] = static_cast<int>(b);

  std::vector<Event> events;
  std::vector<int> fired(params.size(), 0);  // a parameter used twice fires twice
  int64_t t0 = 0;
  model.set_grad_ready_hook([&](nn::Parameter& p) {
    const auto idx = std::find(params.begin(), params.end(), &p) - params.begin();
    const std::string use =
        p.uses > 1 ? str(", contribution ", ++fired[idx], " of ", p.uses) : std::string();
    events.push_back(
        {now_ns(), str("grad ready   #", idx, " ", p.name, " ", tensor::shape_str(p.value.shape()),
                       "  (bucket ", bucket_of[idx], use, ")")});
    dt.ddp().grad_sync().on_grad_ready(p);
  });
  train::StepHooks hooks;
  hooks.before_backward = [&](bool) { t0 = now_ns(); };
  hooks.after_backward = [&] {
    events.push_back({now_ns(), "backward done: waiting for the all-reduces"});
    dt.ddp().grad_sync().finish();
    events.push_back({now_ns(), "all buckets averaged: optimiser step"});
  };
  dt.trainer().step(hooks);
  if (rank != 0) return;

  for (const auto& s : dt.ddp().grad_sync().stats().spans) {
    events.push_back({s.launch_ns, str("  bucket ", s.index, " launched (", s.bytes, " bytes)")});
    events.push_back(
        {s.start_ns, str("    bucket ", s.index, " all-reduce starts on the progress thread")});
    events.push_back({s.end_ns, str("    bucket ", s.index, " all-reduce done")});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.t < b.t; });
  std::printf(
      "%zu parameters in %zu bucket(s) (first bucket %.3g MiB, then %.3g MiB), %d rank(s)\n",
      params.size(), buckets.size(), cfg.dist.first_bucket_mb, cfg.dist.bucket_mb, nproc);
  std::printf("rank 0, one step; times from the start of backward:\n");
  for (const auto& e : events) std::printf("%+10.3f ms  %s\n", ns_to_ms(e.t - t0), e.text.c_str());
}

}  // namespace

void register_demo_hooks(CLI::App& demo) {
  auto cfg = std::make_shared<train::TrainConfig>();
  cfg->data.spec = "synthetic";
  cfg->model = {.kind = "mlp", .width = 128, .depth = 16, .classes = 2};
  cfg->batch = 32;
  cfg->dist.bucket_mb = 0.1;
  cfg->dist.first_bucket_mb = 0.05;
  cfg->eval = false;
  auto nproc = std::make_shared<int>(2);
  auto* cmd = demo.add_subcommand("hooks",
                                  "The order gradients become ready and when each bucket launches");
  cmd->add_option("--nproc", *nproc, "ranks on this host")
      ->check(local_ranks())
      ->capture_default_str();
  cmd->add_option("--bucket-mb", cfg->dist.bucket_mb, "bucket cap (MiB)")
      ->check(finite_above(0))
      ->capture_default_str();
  cmd->add_option("--first-bucket-mb", cfg->dist.first_bucket_mb, "first bucket's cap (MiB)")
      ->check(finite_above(0))
      ->capture_default_str();
  cmd->add_option("--model", cfg->model.kind,
                  "mlp (FullMLP), or gpt: its tied embedding fires twice (docs/transformer.md)")
      ->check(CLI::IsMember({"mlp", "gpt"}))
      ->capture_default_str();
  cmd->add_option("--width", cfg->model.width, "FullMLP width")->capture_default_str();
  cmd->add_option("--depth", cfg->model.depth, "FullMLP depth")->capture_default_str();
  cmd->add_option("--layers", cfg->model.layers, "GPT blocks")->capture_default_str();
  cmd->add_option("--heads", cfg->model.heads, "GPT attention heads")->capture_default_str();
  cmd->add_option("--embd", cfg->model.embd, "GPT width")->capture_default_str();
  cmd->add_option("--block", cfg->model.block, "GPT tokens per sequence")->capture_default_str();
  auto* dataset = cmd->add_option("--dataset", cfg->data.spec,
                                  "the data (--model gpt: synthetic-tokens, or text:PATH)");
  cmd->add_option("--device", cfg->device,
                  "cpu, or cuda (local rank r on cuda:r, NCCL between the ranks)")
      ->capture_default_str();
  cmd->callback([cfg, nproc, dataset] {
    if (cfg->model.kind == "gpt") {  // token data: 64 synthetic tokens unless --dataset says
      if (dataset->count() == 0) cfg->data.spec = "synthetic-tokens";
      cfg->model.classes = 64;
    }
    tensor::require_gpu_per_local_rank(cfg->device, *nproc);
    const int rc = run_local_ranks(
        *nproc, [&](int rank, comm::Store& store) { run_rank(*cfg, *nproc, rank, store); });
    if (rc != 0) throw Error("demo hooks failed");
  });
}

}  // namespace mddp::cli
