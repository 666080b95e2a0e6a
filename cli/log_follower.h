// Follows a log file that another process appends to: `microddp run` shows
// its coordinator's warnings and errors on the console while the rest of
// that log stays in coordinator.log.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mddp::cli {

class LogFollower {
 public:
  explicit LogFollower(std::string path) : path_(std::move(path)) {}
  // Calls `on_line` with every complete line appended since the last call
  // (a line still being written waits for its newline). A missing file is no error.
  void poll(const std::function<void(const std::string&)>& on_line);

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

// True for a line that spdlog wrote at level warning, error or critical in
// microddp's pattern ("[12:00:00.000] [coordinator] warning: ...").
bool is_warning_or_error(const std::string& line);

}  // namespace mddp::cli
