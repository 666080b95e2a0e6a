// <run dir>/train.jsonl: one JSON record per logged step and per evaluation,
// written whole or not at all (RecordFile). Records that do not fit (a full
// disk) are counted by step, and writing goes on when space comes back.
#pragma once

#include <memory>
#include <string>

#include "core/common/record_file.h"
#include "core/train/trainer.h"

namespace mddp::train {

class TrainLog {
 public:
  // "" keeps no file; otherwise the directory is made and the file opened for appending.
  explicit TrainLog(const std::string& run_dir);

  // tokens_per_s: a language model's (0: not one, and not written).
  void step(int64_t step, int64_t epoch, double loss, double samples_per_s,
            double tokens_per_s = 0);
  void eval(int64_t step, int64_t epoch, const EvalResult& e);
  // Which records are not in the file and why; "" when every one is.
  std::string lost() const;

 private:
  void write(const std::string& line, int64_t step, bool eval);

  std::unique_ptr<RecordFile> file_;
  LostRecords lost_;
  std::string why_;  // the first failed write's error
};

}  // namespace mddp::train
