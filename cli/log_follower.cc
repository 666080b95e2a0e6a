#include "cli/log_follower.h"

#include <fstream>

namespace mddp::cli {

void LogFollower::poll(const std::function<void(const std::string&)>& on_line) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size < offset_) offset_ = 0;  // truncated: read it again from the start
  if (size == offset_) return;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(size - offset_, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  offset_ = size;
  partial_ += chunk;
  std::size_t begin = 0;
  for (std::size_t nl; (nl = partial_.find('\n', begin)) != std::string::npos; begin = nl + 1)
    on_line(partial_.substr(begin, nl - begin));
  partial_.erase(0, begin);
}

bool is_warning_or_error(const std::string& line) {
  // The level follows the second "] ": after the time and the role.
  const std::size_t role = line.find("] [");
  const std::size_t level =
      role == std::string::npos ? std::string::npos : line.find("] ", role + 3);
  if (line.empty() || line[0] != '[' || level == std::string::npos) return false;
  const std::string rest = line.substr(level + 2);
  for (const char* l : {"warning: ", "error: ", "critical: "})
    if (rest.starts_with(l)) return true;
  return false;
}

}  // namespace mddp::cli
