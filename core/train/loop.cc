#include "core/train/loop.h"

#include <filesystem>

#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/train/progress.h"
#include "core/train/train_log.h"

namespace mddp::train {

TrainSummary run_training(Trainer& trainer, const LoopHooks& hooks) {
  const TrainConfig& cfg = trainer.config();
  const auto mean = [&](double v) { return hooks.global_mean ? hooks.global_mean(v) : v; };
  TrainLog log(cfg.run_dir);
  Progress progress(trainer.total_steps());

  TrainSummary s;
  const int64_t total = trainer.total_steps();
  const int64_t t_start = now_ns();
  int64_t t_window = t_start, samples_window = 0, steps_window = 0;
  double loss = 0, loss_window = 0;
  for (int64_t i = 0; i < total; ++i) {
    const StepResult r = trainer.step(hooks.step);
    if (hooks.on_step) hooks.on_step(r);
    samples_window += cfg.batch * cfg.accumulate;
    loss_window += r.loss;
    ++steps_window;
    const bool epoch_end = r.step % trainer.steps_per_epoch() == 0 || r.step == total;
    const int64_t every = cfg.log_every > 0 ? cfg.log_every : std::max<int64_t>(1, total / 20);
    const bool report = r.step == 1 || r.step == total || r.step % every == 0;
    if (report || epoch_end) {
      loss = mean(loss_window / steps_window);  // mean over the steps since the last line
      loss_window = 0;
      steps_window = 0;
      const int64_t now = now_ns();
      const double sps = samples_window / std::max(1e-9, (now - t_window) * 1e-9);
      t_window = now;
      samples_window = 0;
      if (hooks.print) progress.update(r.step, r.epoch, loss, sps);
      log.step(r.step, r.epoch, loss, sps);
    }
    if (epoch_end && cfg.eval) {
      if (hooks.step.on_phase) hooks.step.on_phase(r.step, "eval");
      s.eval = trainer.evaluate();
      if (hooks.on_eval) hooks.on_eval(r.step, s.eval);
      if (hooks.print) {
        std::string line = str("epoch ", r.epoch + 1, ": test loss ", s.eval.loss);
        if (s.eval.accuracy >= 0) line += str(", test accuracy ", s.eval.accuracy * 100, "%");
        progress.message(line);
      }
      log.eval(r.step, r.epoch, s.eval);
    }
  }
  s.steps = total;
  s.seconds = (now_ns() - t_start) * 1e-9;
  s.samples_per_s = total * cfg.batch * cfg.accumulate / std::max(1e-9, s.seconds);
  s.final_loss = loss;
  s.lost_records = log.lost();
  if (!cfg.run_dir.empty() && hooks.print) {
    if (hooks.step.on_phase) hooks.step.on_phase(total, "checkpoint");
    trainer.save_checkpoint((std::filesystem::path(cfg.run_dir) / "checkpoint.safetensors").string());
  }
  return s;
}

}  // namespace mddp::train
