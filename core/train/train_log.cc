#include "core/train/train_log.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/common/files.h"

namespace mddp::train {

TrainLog::TrainLog(const std::string& run_dir) {
  if (run_dir.empty()) return;
  make_dirs(run_dir, "--run-dir");
  try {
    file_ = std::make_unique<RecordFile>(std::filesystem::path(run_dir) / "train.jsonl");
  } catch (const Error& e) {
    throw InputError(str(e.what(), " (check --run-dir)"));
  }
}

void TrainLog::write(const std::string& line, int64_t step, bool eval) {
  if (!file_ || file_->append(line + "\n") == 1) return;
  lost_.add(-1, step, eval);
  if (why_.empty()) why_ = file_->error();
}

void TrainLog::step(int64_t step, int64_t epoch, double loss, double samples_per_s,
                    double tokens_per_s) {
  nlohmann::json j = {
      {"step", step}, {"epoch", epoch}, {"loss", loss}, {"samples_per_s", samples_per_s}};
  if (tokens_per_s > 0) j["tokens_per_s"] = tokens_per_s;
  write(j.dump(), step, false);
}

void TrainLog::eval(int64_t step, int64_t epoch, const EvalResult& e) {
  nlohmann::json j = {{"epoch", epoch}, {"test_loss", e.loss}, {"test_accuracy", e.accuracy}};
  if (!e.sample.empty()) j["sample"] = e.sample;
  write(j.dump(), step, true);
}

std::string TrainLog::lost() const {
  if (lost_.count() == 0) return "";
  return str(lost_.count(), " records are not in ", file_->path().string(), " (", why_,
             "): ", lost_.describe());
}

}  // namespace mddp::train
