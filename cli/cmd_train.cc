// `microddp train`: the single-process baseline that DDP runs are compared against.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/train_flags.h"
#include "control/exit_status.h"
#include "core/common/check.h"
#include "core/train/loop.h"

namespace mddp::cli {

void register_train(CLI::App& app) {
  auto cfg = std::make_shared<train::TrainConfig>();
  auto* cmd = app.add_subcommand("train", "Train in one process (the single-process baseline)");
  add_training_flags(*cmd, *cfg);
  add_checkpoint_flags(*cmd, *cfg);
  cmd->callback([cfg] {
    train::Trainer trainer(*cfg);
    print_config(trainer.config(), trainer.model().num_parameters(), trainer.model().describe());
    std::printf("%lld steps (%lld per epoch, %lld samples)\n",
                static_cast<long long>(trainer.total_steps()),
                static_cast<long long>(trainer.steps_per_epoch()),
                static_cast<long long>(trainer.train_set().size()));
    const train::TrainSummary s = train::run_training(trainer);
    std::printf("done: %lld steps in %.1f s (%.0f samples/s", static_cast<long long>(s.steps),
                s.seconds, s.samples_per_s);
    if (s.tokens_per_s > 0) std::printf(", %.0f tokens/s", s.tokens_per_s);
    std::printf("), final train loss %.4f", s.final_loss);
    if (s.eval.accuracy >= 0) std::printf(", test accuracy %.2f%%", s.eval.accuracy * 100);
    std::printf("\n");
    if (!cfg->run_dir.empty())
      std::printf("checkpoint: %s/checkpoint.safetensors\n", cfg->run_dir.c_str());
    if (!s.lost_records.empty())
      throw control::RecordsLostError("training finished, but " + s.lost_records);
  });
}

}  // namespace mddp::cli
