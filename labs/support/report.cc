#include "labs/support/report.h"

namespace mddp::labs {

void Report::add(const std::string& line) {
  lines_.push_back(line);
  if (live_) {
    std::fprintf(live_, "%s\n", line.c_str());
    std::fflush(live_);
  }
}

void Report::passed(const std::string& stage, int64_t cases) {
  add("  ok    " + stage + " (" + std::to_string(cases) + (cases == 1 ? " case)" : " cases)"));
}

void Report::fail(const std::string& message, const std::vector<std::string>& details) {
  if (!failure_.empty()) return;
  failure_ = message;
  add("  FAIL  " + message);
  for (const auto& d : details) {
    failure_ += "\n" + d;
    add("        " + d);
  }
}

void Report::note(const std::string& line) {
  add("        " + line);
}

}  // namespace mddp::labs
