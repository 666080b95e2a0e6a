// Training output in the style of llm.c: one line per logged step with
// fixed-width fields; on a terminal, a progress bar redrawn in place.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace mddp::train {

class Progress {
 public:
  explicit Progress(int64_t total_steps, std::FILE* out = stdout);
  // Redraws the bar (terminal) or prints one line (log file, pipe); a
  // language model's line adds its tokens/s (0: not one).
  void update(int64_t step, int64_t epoch, double loss, double samples_per_s,
              double tokens_per_s = 0);
  // Ends the bar line, then prints `text` on its own line.
  void message(const std::string& text);

 private:
  int64_t total_;
  std::FILE* out_;
  bool tty_;
  bool bar_open_ = false;
};

}  // namespace mddp::train
