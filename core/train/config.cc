#include "core/train/config.h"

#include <stdexcept>

#include "core/common/check.h"
#include "core/ddp/compression.h"
#include "core/tensor/device.h"
#include "core/train/mixed_precision.h"

namespace mddp::train {

StragglerSpec parse_straggler(const std::string& text) {
  StragglerSpec s;
  if (text.empty()) return s;
  const auto bad = [&](const std::string& why) {
    return InputError(
        str("--straggler '", text, "': ", why, " (give RANK:PHASE:MS, e.g. 1:forward:5)"));
  };
  const std::size_t a = text.find(':'), b = text.rfind(':');
  if (a == std::string::npos || a == b) throw bad("three fields needed");
  try {
    std::size_t used = 0;
    s.rank = std::stoi(text.substr(0, a), &used);
    if (used != a || s.rank < 0) throw bad("RANK must be a rank number");
    const std::string ms = text.substr(b + 1);
    s.ms = std::stod(ms, &used);
    if (used != ms.size() || !(s.ms > 0 && s.ms <= 60'000)) throw bad("MS must be in (0, 60000]");
  } catch (const std::logic_error&) {  // stoi/stod: not a number
    throw bad("RANK and MS must be numbers");
  }
  s.phase = text.substr(a + 1, b - a - 1);
  if (s.phase != "data" && s.phase != "forward" && s.phase != "backward")
    throw bad("PHASE must be data, forward or backward");
  return s;
}

void TrainConfig::validate() const {
  if (batch < 1) throw InputError(str("--batch must be at least 1, got ", batch));
  if (steps < 0) throw InputError(str("--steps must be >= 0, got ", steps));
  if (steps == 0 && epochs < 1) throw InputError("give --steps N or --epochs N (at least 1)");
  if (accumulate < 1) throw InputError(str("--accumulate must be at least 1, got ", accumulate));
  if (last_batch != "drop" && last_batch != "keep")
    throw InputError("--last-batch must be drop or keep, got '" + last_batch + "'");
  if (on_failure != "restart" && !survivors_train_on() && on_failure != "fail")
    throw InputError("--on-failure must be restart, shrink, heal or fail, got '" + on_failure +
                     "'");
  if (survivors_train_on() && (dist.ddp == "sharded" || dist.local_sgd > 0))
    throw InputError(str("--on-failure ", on_failure, " keeps the survivors' state, and ",
                         dist.ddp == "sharded"
                             ? "--ddp sharded holds 1/n of it on each rank"
                             : "--local-sgd leaves the replicas different between averages",
                         ": use --on-failure restart (from a checkpoint) with it"));
  if (threads < 1) throw InputError(str("--threads must be at least 1, got ", threads));
  if (loss != "xent" && loss != "mse")
    throw InputError("--loss must be xent or mse, got '" + loss + "'");
  if (loss == "mse" && model.kind == "mlp" && model.classes != 0 &&
      data.spec != "synthetic-regression")
    throw InputError(
        "--loss mse trains against regression targets: use --dataset synthetic-regression "
        "(and --classes 0 for the square benchmark MLP)");
  if (loss == "xent" && data.spec == "synthetic-regression")
    throw InputError("--dataset synthetic-regression needs --loss mse");
  if (model.kind == "gpt" && loss != "xent")
    throw InputError("--model gpt predicts the next token: it trains with --loss xent");
  if (warmup_steps < 0) throw InputError(str("--warmup-steps must be >= 0, got ", warmup_steps));
  if (lr_min > optim.lr)
    throw InputError(str("--lr-min ", lr_min, " is above --lr ", optim.lr,
                         ": the schedule decays from --lr down to --lr-min"));
  if (!(optim.grad_clip >= 0.0f))
    throw InputError(str("--grad-clip must be >= 0 (0: off), got ", optim.grad_clip));
  parse_straggler(dist.straggler);
  if (dist.check_replicas_every < -1)
    throw InputError(
        str("--check-replicas-every must be -1 (never), 0 (at each evaluation and "
            "before each checkpoint) or a number of steps, got ",
            dist.check_replicas_every));
  validate_precision(*this);
  const ddp::Compression compress = ddp::parse_compression(dist.compress);
  if ((compress.kind == ddp::CompressionKind::kTopK ||
       compress.kind == ddp::CompressionKind::kPowerSgd) &&
      device.rfind("cuda", 0) == 0)
    throw InputError(str("--compress ", dist.compress,
                         " runs on the CPU backend only; on --device ", device,
                         " use --compress fp16 or bf16"));
  if (dist.ddp == "sharded") ddp::check_sharded_compression(compress);
  if (compress.kind != ddp::CompressionKind::kNone && dist.local_sgd > 0)
    throw InputError(
        str("--compress ", dist.compress,
            " has nothing to compress with --local-sgd: its gradients are "
            "never synchronised (the parameters are averaged in fp32); drop one of the two"));
  if (dist.backend != "auto" && dist.backend != "cpu" && dist.backend != "gloo" &&
      dist.backend != "nccl")
    throw InputError(str("unknown --backend '", dist.backend, "' (auto, cpu, gloo or nccl)"));
  if ((dist.backend == "gloo" || dist.backend == "nccl") &&
      (dist.algorithm != "auto" || dist.transport != "auto"))
    throw InputError(str("--algo and --transport choose microddp's own collectives; --backend ",
                         dist.backend, " brings its own: leave them out (or use --backend cpu)"));
  if (checkpoint_every < 0)
    throw InputError(str("--checkpoint-every must be >= 0, got ", checkpoint_every));
  if (keep_checkpoints < 0)
    throw InputError(str("--keep-checkpoints must be >= 0, got ", keep_checkpoints));
  if (checkpoint_every > 0 && run_dir.empty())
    throw InputError("--checkpoint-every writes into the run directory: give --run-dir DIR too");
  if (!resume.empty() && !init_from.empty())
    throw InputError(
        "give --resume (weights, optimiser state and step) or --init-from (weights only), not "
        "both");
  if (!resume.empty() && dist.local_sgd > 0)
    throw InputError(
        "--resume cannot continue a --local-sgd job bitwise: between averages every rank's weights "
        "and "
        "optimiser state differ, and a checkpoint holds rank 0's; use --init-from to start from "
        "them");
}

std::string process_group_backend(const TrainConfig& cfg) {
  const bool cpu = tensor::Device::parse(cfg.device).is_cpu();
  const std::string& b = cfg.dist.backend;
  if (b == "auto") return cpu ? "cpu" : "nccl";
  if (b == "nccl" && cpu)
    throw InputError(
        "--backend nccl needs GPU tensors: add --device cuda, or use --backend cpu or gloo");
  if (b != "nccl" && !cpu)
    throw InputError(
        str("--backend ", b, " takes host memory, and --device ", cfg.device,
            " keeps the gradients on a GPU: use --backend nccl (or auto), or --device cpu"));
  return b;
}

}  // namespace mddp::train
