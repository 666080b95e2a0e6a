#include "cli/train_flags.h"

#include <cstdio>

#include "cli/flag_checks.h"
#include "core/common/check.h"

namespace mddp::cli {
namespace {

// --model gpt's own defaults (nanoGPT's), for the flags not given: AdamW
// with weight decay 0.1, the gradient norm clipped at 1.0, a cosine decay to
// --lr / 10, and synthetic tokens of a 64-token vocabulary as the data.
// AdamW replaces the training default (Adam) only, not a command's own
// choice: verify's SGD is the tight check of DDP whatever the model.
void apply_gpt_defaults(CLI::App& cmd, train::TrainConfig& cfg) {
  const auto unset = [&](const char* flag) { return cmd.get_option(flag)->count() == 0; };
  if (unset("--optimizer") && cfg.optim.name == train::TrainConfig{}.optim.name)
    cfg.optim.name = "adamw";
  if (unset("--weight-decay") && cfg.optim.name == "adamw") cfg.optim.weight_decay = 0.1f;
  if (unset("--grad-clip")) cfg.optim.grad_clip = 1.0f;
  if (unset("--lr-min")) cfg.lr_min = cfg.optim.lr / 10;
  if (unset("--dataset")) cfg.data.spec = "synthetic-tokens";
  if (unset("--loss")) cfg.loss = "xent";  // bench train's own default is mse
  if (unset("--classes")) cfg.model.classes = 64;
}

// The groups of add_training_flags, in the order --help shows them.
void add_model_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  const char* g = "Model";
  cmd.add_option("--model", cfg.model.kind,
                 "mlp (FullMLP), cnn, or gpt (a GPT-2-style language model on token data)")
      ->check(CLI::IsMember({"mlp", "cnn", "gpt"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--width", cfg.model.width, "MLP hidden width")->group(g)->capture_default_str();
  cmd.add_option("--depth", cfg.model.depth, "MLP hidden layers (Linear+ReLU)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--classes", cfg.model.classes,
                 "output classes (0: no head, output = width, for --loss mse); synthetic-tokens' "
                 "vocabulary (64 with --model gpt)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--channels", cfg.model.channels, "CNN conv channels, one block each")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--hidden", cfg.model.hidden, "CNN fully connected width")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--layers", cfg.model.layers, "GPT transformer blocks")
      ->check(at_least(1))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--heads", cfg.model.heads, "GPT attention heads (they split --embd)")
      ->check(at_least(1))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--embd", cfg.model.embd, "GPT embedding width")
      ->check(at_least(1))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--block", cfg.model.block, "GPT context length: tokens per sample")
      ->check(at_least(1))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--dropout", cfg.model.dropout,
                 "GPT dropout probability (masks differ per rank, reproducible from --seed)")
      ->check(finite_in(0, 0.999))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--loss", cfg.loss, "xent (classification) or mse (regression)")
      ->check(CLI::IsMember({"xent", "mse"}))
      ->group(g)
      ->capture_default_str();
}

void add_data_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  const char* g = "Data";
  cmd.add_option("--dataset", cfg.data.spec,
                 "fashion-mnist, synthetic, synthetic-regression, synthetic-tokens (the default "
                 "with --model gpt), idx:DIR or text:PATH (a text file or folder of them)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--synthetic-size", cfg.data.synthetic_size,
                 "training samples of a synthetic dataset")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--batch", cfg.batch, "global batch size (split evenly over ranks)")
      ->group(g)
      ->capture_default_str();
}

void add_optimization_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  const char* g = "Training";
  cmd.add_option("--steps", cfg.steps, "stop after N steps (0: use --epochs)")
      ->transform(whole_number_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--stop-after-step", cfg.stop_after_step,
                 "end this run after step N with its final checkpoint there, as if stopped: the "
                 "schedule still spans --steps, and --resume goes on from it bit for bit (0: run "
                 "to the end)")
      ->transform(whole_number_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--epochs", cfg.epochs, "passes over the training set")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--optimizer", cfg.optim.name, "sgd, adam or adamw (the default with --model gpt)")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--lr", cfg.optim.lr, "learning rate")
      ->check(finite_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--momentum", cfg.optim.momentum, "SGD momentum")
      ->check(finite_in(0, 1))
      ->group(g)
      ->capture_default_str();
  cmd.add_option(
         "--weight-decay", cfg.optim.weight_decay,
         "sgd, adam: L2 weight decay; adamw: decoupled, on weight matrices only (not biases, "
         "LayerNorm or embeddings); 0.1 with --model gpt")
      ->check(finite_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--grad-clip", cfg.optim.grad_clip,
                 "clip the global gradient norm to this (0: off; 1.0 with --model gpt)")
      ->check(finite_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--warmup-steps", cfg.warmup_steps,
                 "linear learning-rate warm-up over the first N steps")
      ->check(at_least(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--lr-min", cfg.lr_min,
                 "decay the learning rate to this by the last step, on a cosine (< 0: no decay; "
                 "--lr / 10 with --model gpt)")
      ->check(finite_in(-1, 1e6))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--seed", cfg.seed, "seed of the initial weights and the data order")
      ->transform(whole_number_in(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option(
         "--init-from", cfg.init_from,
         "start from the weights in this safetensors file: a microddp checkpoint, or a state_dict "
         "saved from PyTorch for the same layers (docs/pytorch.md)")
      ->group(g);
  cmd.add_option("--accumulate", cfg.accumulate,
                 "micro-batches of --batch per step (DDP syncs only the last: no_sync)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--last-batch", cfg.last_batch,
                 "an epoch's last dataset-size mod --batch samples: drop them, or keep them as "
                 "one shorter step (every sample once per epoch)")
      ->check(CLI::IsMember({"drop", "keep"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_flag("!--no-eval", cfg.eval, "skip the test-set evaluation at each epoch end")->group(g);
  cmd.add_option("--precision", cfg.precision,
                 "GEMM precision: fp32, bf16 (oneDNN bf16 matmul on AVX-512 BF16 CPUs) or fp16 "
                 "(with dynamic loss "
                 "scaling); weights and optimiser state stay fp32, DDP sends 16-bit gradients "
                 "(docs/ddp.md)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--loss-scale", cfg.loss_scale.init, "fp16: the initial loss scale")
      ->check(finite_above(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--loss-scale-window", cfg.loss_scale.window,
                 "fp16: overflow-free steps before the loss scale doubles")
      ->check(at_least(1))
      ->group(g)
      ->capture_default_str();
  cmd.add_flag("--allow-nonfinite-loss", cfg.allow_nonfinite_loss,
               "train on when the loss becomes NaN or inf (by default training stops there, naming "
               "the step)")
      ->group(g);
}

void add_runtime_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  cmd.add_option("--device", cfg.device, "cpu, cuda or cuda:K")
      ->group("Runtime")
      ->capture_default_str();
  cmd.add_option("--threads", cfg.threads, "compute threads per process")
      ->check(CLI::Range(1, kMaxThreads))
      ->group("Runtime")
      ->capture_default_str();
  cmd.add_option("--run-dir", cfg.run_dir, "directory for the log and the checkpoint")
      ->group("Runtime");
  cmd.add_option("--log-every", cfg.log_every, "print every N steps (0: about 20 lines)")
      ->group("Runtime")
      ->capture_default_str();
  cmd.parse_complete_callback([&cmd, &cfg] {
    if (cfg.model.kind == "gpt") apply_gpt_defaults(cmd, cfg);
    cfg.data.block = cfg.model.block;
  });
}

}  // namespace

void add_training_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  add_model_flags(cmd, cfg);
  add_data_flags(cmd, cfg);
  add_optimization_flags(cmd, cfg);
  add_runtime_flags(cmd, cfg);
}

void add_checkpoint_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  const char* g = "Checkpoints";
  cmd.add_option("--checkpoint-every", cfg.checkpoint_every,
                 "write a checkpoint every N steps to RUN-DIR/checkpoints/ (0: only the final one)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--keep-checkpoints", cfg.keep_checkpoints, "keep the newest K of them (0: all)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option(
         "--resume", cfg.resume,
         "continue from a checkpoint: a run directory (its newest complete checkpoint) or a "
         "checkpoint file; with the same flags, the result is bitwise that of an uninterrupted run")
      ->group(g);
}

void add_ddp_flags(CLI::App& cmd, train::TrainConfig& cfg) {
  const char* g = "Data parallelism";
  cmd.add_option("--ddp", cfg.dist.ddp,
                 "naive, hooked, bucketed or sharded (bucketed + ZeRO-1: reduce-scatter, 1/n of "
                 "the optimiser step and state per rank, all-gather)")
      ->check(CLI::IsMember({"naive", "hooked", "bucketed", "sharded"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--bucket-mb", cfg.dist.bucket_mb, "bucket cap in MiB (bucketed, sharded)")
      ->check(finite_above(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--first-bucket-mb", cfg.dist.first_bucket_mb, "cap of the first bucket in MiB")
      ->check(finite_above(0))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--compress", cfg.dist.compress,
                 "what DDP sends of the gradients: none (fp32), fp16 or bf16 (rounded to 16 bits), "
                 "topk:RATIO "
                 "(the largest RATIO of each bucket's entries, e.g. topk:0.01) or powersgd:RANK "
                 "(low-rank factors); "
                 "the last two keep error-feedback residuals (docs/ddp.md)")
      ->check(compression_spec())
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--local-sgd", cfg.dist.local_sgd,
                 "average parameters every K steps instead of gradients (0: off)")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--check-replicas-every", cfg.dist.check_replicas_every,
                 "compare a hash of every rank's parameters and optimiser state every K steps, "
                 "besides at each evaluation and before each checkpoint (0: only there; -1: "
                 "never, for replicas that differ on purpose); a rank that differs stops the "
                 "job, named")
      ->check(at_least(-1))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--algo", cfg.dist.algorithm,
                 "all-reduce algorithm: auto (hierarchical on several hosts with several ranks "
                 "each, else ring, tree or doubling by size), ring, naive, tree, doubling "
                 "(recursive doubling) or hierarchical")
      ->check(CLI::IsMember({"auto", "ring", "naive", "tree", "doubling", "hierarchical"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--backend", cfg.dist.backend,
                 "who runs the collectives: auto (cpu on --device cpu, nccl on cuda), cpu "
                 "(microddp's own), gloo (Debian's libgloo) or nccl")
      ->check(CLI::IsMember({"auto", "cpu", "gloo", "nccl"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--transport", cfg.dist.transport,
                 "data plane: auto (shm on one host), tcp or shm")
      ->check(CLI::IsMember({"auto", "tcp", "shm"}))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--comm-timeout-ms", cfg.dist.timeout_ms,
                 "fail a collective that waits longer than this")
      ->check(CLI::Range(int64_t{1}, kMaxTimeoutMs))
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--straggler", cfg.dist.straggler,
                 "lab: RANK:PHASE:MS makes that rank sleep MS ms in PHASE (data, forward, "
                 "backward) of every step")
      ->group(g);
}

void print_config(const train::TrainConfig& cfg, int64_t num_parameters, const std::string& model) {
  std::printf("+----------------------+------------------------------------------------+\n");
  auto row = [](const char* k, const std::string& v) {
    std::printf("| %-20s | %-46s |\n", k, v.c_str());
  };
  row("model", model.size() > 46 ? model.substr(0, 43) + "..." : model);
  row("parameters", std::to_string(num_parameters) + " (" +
                        std::to_string(num_parameters * 4 / 1000) + " kB fp32)");
  row("dataset", cfg.data.spec);
  row("loss", cfg.loss);
  row("global batch", std::to_string(cfg.batch));
  row("optimizer", cfg.optim.name + " lr " + str(cfg.optim.lr) +
                       (cfg.optim.name == "sgd" ? " momentum " + str(cfg.optim.momentum) : "") +
                       (cfg.optim.weight_decay > 0 ? " wd " + str(cfg.optim.weight_decay) : "") +
                       (cfg.optim.grad_clip > 0 ? " clip " + str(cfg.optim.grad_clip) : ""));
  if (cfg.warmup_steps > 0 || cfg.lr_min >= 0)
    row("lr schedule", str("warm-up ", cfg.warmup_steps, " steps, cosine to ",
                           cfg.lr_min >= 0 ? str(cfg.lr_min) : std::string("(no decay)")));
  row("seed", std::to_string(cfg.seed));
  if (cfg.precision != "fp32") row("precision", cfg.precision);
  row("device / threads", cfg.device + " / " + std::to_string(cfg.threads));
  std::printf("+----------------------+------------------------------------------------+\n");
  std::fflush(stdout);
}

}  // namespace mddp::cli
