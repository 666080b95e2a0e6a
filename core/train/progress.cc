#include "core/train/progress.h"

#include <unistd.h>

#include <algorithm>

namespace mddp::train {

Progress::Progress(int64_t total_steps, std::FILE* out)
    : total_(total_steps), out_(out), tty_(isatty(fileno(out)) != 0) {}

void Progress::update(int64_t step, int64_t epoch, double loss, double samples_per_s,
                      double tokens_per_s) {
  char tokens[40] = "";
  if (tokens_per_s > 0)
    std::snprintf(tokens, sizeof tokens, "%s%9.0f tokens/s", tty_ ? "  " : " | ", tokens_per_s);
  if (tty_) {
    const int width = 30;
    const int filled = static_cast<int>(width * step / std::max<int64_t>(total_, 1));
    std::fprintf(out_, "\r[%-*.*s] step %6lld/%lld  epoch %lld  loss %.4f  %8.0f samples/s%s",
                 width, filled, "##############################", static_cast<long long>(step),
                 static_cast<long long>(total_), static_cast<long long>(epoch + 1), loss,
                 samples_per_s, tokens);
    std::fflush(out_);
    bar_open_ = true;
    return;
  }
  std::fprintf(out_, "step %6lld/%lld | epoch %lld | loss %.6f | %8.0f samples/s%s\n",
               static_cast<long long>(step), static_cast<long long>(total_),
               static_cast<long long>(epoch + 1), loss, samples_per_s, tokens);
  std::fflush(out_);
}

void Progress::message(const std::string& text) {
  if (bar_open_) std::fputc('\n', out_);
  bar_open_ = false;
  std::fprintf(out_, "%s\n", text.c_str());
  std::fflush(out_);
}

}  // namespace mddp::train
