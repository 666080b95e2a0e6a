// What a Lab's check found, as `microddp lab check` prints it: one line per
// stage that passed, the first failure (what is wrong, where, expected vs
// got, and what probably caused it), and informational lines (the speed
// table). A check stops at its first failure.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mddp::labs {

class Report {
 public:
  // Lines are also written to `live` as they come (nullptr: only kept).
  explicit Report(std::FILE* live = nullptr) : live_(live) {}

  // A stage passed: "  ok    <stage> (<cases> cases)".
  void passed(const std::string& stage, int64_t cases);
  // The check failed: `message` is the first line, `details` follow indented.
  // Only the first failure is kept (a check stops there).
  void fail(const std::string& message, const std::vector<std::string>& details = {});
  // An informational line (printed as is, indented).
  void note(const std::string& line);

  bool ok() const { return failure_.empty(); }
  const std::string& failure() const { return failure_; }  // message and details, "" when ok
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  void add(const std::string& line);
  std::FILE* live_;
  std::vector<std::string> lines_;
  std::string failure_;
};

}  // namespace mddp::labs
