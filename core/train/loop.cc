#include "core/train/loop.h"

#include <algorithm>
#include <filesystem>

#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/train/checkpoint.h"
#include "core/train/progress.h"
#include "core/train/text_generation.h"
#include "core/train/train_log.h"

namespace mddp::train {

TrainSummary run_training(Trainer& trainer, const LoopHooks& hooks) {
  const TrainConfig& cfg = trainer.config();
  const auto mean = [&](double v) { return hooks.global_mean ? hooks.global_mean(v) : v; };
  // Rank 0 writes the run directory: the log and the checkpoints.
  const bool writes = !cfg.run_dir.empty() && hooks.print;
  TrainLog log(writes ? cfg.run_dir : "");
  if (writes) {
    // What a crash in the middle of a checkpoint write left behind.
    for (const auto& dir :
         {cfg.run_dir, (std::filesystem::path(cfg.run_dir) / "checkpoints").string()})
      remove_stale_temps(dir);
  }
  Progress progress(trainer.total_steps());
  const auto checkpoint = [&](int64_t step, const std::string& path) {
    if (hooks.step.on_phase) hooks.step.on_phase(step, "checkpoint");
    try {
      trainer.save_checkpoint(path);
    } catch (const Error& e) {  // nothing under a real name changed (Note [Pair order])
      throw Error(str("cannot write the checkpoint of step ", step, " (", path, "): ", e.what(),
                      "; the checkpoints written before are intact"));
    }
  };

  TrainSummary s;
  const int64_t tokens_per_sample = trainer.tokens_per_sample();  // 0: not a language model
  // The last step of this run: the job's, or --stop-after-step's (a leg of it).
  const int64_t total = cfg.stop_after_step > 0
                            ? std::min(trainer.total_steps(), cfg.stop_after_step)
                            : trainer.total_steps();
  const int64_t first = trainer.steps_done();  // > 0 after --resume
  if (cfg.stop_after_step > 0 && first >= total)
    throw InputError(str("--stop-after-step ", cfg.stop_after_step, ": this run resumed at step ",
                         first, ", which is not before it"));
  if (first > 0 && hooks.print) progress.message(str("resuming at step ", first, " of ", total));
  const int64_t t_start = now_ns();
  int64_t t_window = t_start, samples_window = 0, steps_window = 0, samples = 0;
  double loss = 0, loss_window = 0;
  for (int64_t i = first; i < total; ++i) {
    const StepResult r = trainer.step(hooks.step);
    if (hooks.on_step) hooks.on_step(r);
    samples_window += r.batch;
    samples += r.batch;
    loss_window += r.loss;
    ++steps_window;
    const bool epoch_end = trainer.ends_epoch(r.step);
    const int64_t every = cfg.log_every > 0 ? cfg.log_every : std::max<int64_t>(1, total / 20);
    const bool report = r.step == 1 || r.step == total || r.step % every == 0;
    if (report || epoch_end) {
      loss = mean(loss_window / steps_window);  // mean over the steps since the last line
      loss_window = 0;
      steps_window = 0;
      const int64_t now = now_ns();
      const double sps = samples_window / std::max(1e-9, (now - t_window) * 1e-9);
      const double tps = sps * static_cast<double>(tokens_per_sample);
      t_window = now;
      samples_window = 0;
      if (hooks.print) progress.update(r.step, r.epoch, loss, sps, tps);
      log.step(r.step, r.epoch, loss, sps, tps);
    }
    if (epoch_end && cfg.eval) {
      if (hooks.step.on_phase) hooks.step.on_phase(r.step, "eval");
      s.eval = trainer.evaluate();
      // Rank 0 alone: the others wait for it at the next step's collectives.
      if (hooks.print)
        s.eval.sample = evaluation_sample(trainer.model(), trainer.train_set(), cfg.seed);
      if (hooks.on_eval) hooks.on_eval(r.step, s.eval);
      if (hooks.print) {
        std::string line = str("epoch ", r.epoch + 1, ": test loss ", s.eval.loss);
        if (s.eval.accuracy >= 0) line += str(", test accuracy ", s.eval.accuracy * 100, "%");
        progress.message(line);
        if (!s.eval.sample.empty()) progress.message("sample:\n" + s.eval.sample);
      }
      log.eval(r.step, r.epoch, s.eval);
    }
    if (hooks.before_checkpoint) hooks.before_checkpoint(r.step, false);
    if (writes && cfg.checkpoint_every > 0 && r.step % cfg.checkpoint_every == 0) {
      checkpoint(r.step, periodic_checkpoint_path(cfg.run_dir, r.step));
      prune_checkpoints(cfg.run_dir, cfg.keep_checkpoints);
    }
  }
  s.steps = total - first;
  s.seconds = (now_ns() - t_start) * 1e-9;
  s.samples_per_s = static_cast<double>(samples) / std::max(1e-9, s.seconds);
  s.tokens_per_s = s.samples_per_s * static_cast<double>(tokens_per_sample);
  s.final_loss = loss;
  s.lost_records = log.lost();
  if (hooks.before_checkpoint) hooks.before_checkpoint(total, true);
  if (writes) checkpoint(total, final_checkpoint_path(cfg.run_dir));
  return s;
}

}  // namespace mddp::train
