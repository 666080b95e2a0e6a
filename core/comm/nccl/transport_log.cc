#include "core/comm/nccl/transport_log.h"

#include <unistd.h>

#include <cstdlib>
#include <map>

#include "core/common/check.h"
#include "core/common/strings.h"

namespace mddp::comm::nccl {

namespace {
constexpr const char* kCapturedMarker = "MDDP_NCCL_LOG";
}  // namespace

void capture_nccl_log() {
  if (std::getenv("NCCL_DEBUG") && !std::getenv(kCapturedMarker))
    return;                                  // the user's own log stands
  if (std::getenv(kCapturedMarker)) return;  // inherited from a microddp parent: already in place
  const char* tmp = std::getenv("TMPDIR");
  ::setenv("NCCL_DEBUG", "INFO", 1);
  ::setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
  ::setenv("NCCL_DEBUG_FILE", str(tmp && *tmp ? tmp : "/tmp", "/microddp-nccl-%p.log").c_str(), 1);
  ::setenv(kCapturedMarker, "1", 1);
}

std::string nccl_log_path() {
  const char* file = std::getenv("NCCL_DEBUG_FILE");
  if (!std::getenv(kCapturedMarker) || !file) return "";
  std::string path(file);
  if (const std::size_t at = path.find("%p"); at != std::string::npos)
    path.replace(at, 2, std::to_string(::getpid()));
  return path;
}

std::string summarize_nccl_transports(std::istream& log) {
  std::map<std::string, int> via;  // transport -> channel connections
  std::string network, line;
  while (std::getline(log, line)) {
    if (const std::size_t at = line.find(" via ");
        at != std::string::npos && line.find("Channel") != std::string::npos) {
      const std::size_t begin = at + 5;
      const std::size_t end = line.find_first_of(" \t\r", begin);
      const std::string name =
          line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      if (!name.empty()) ++via[name];
    } else if (const std::size_t net = line.find("Using network "); net != std::string::npos) {
      network = line.substr(net + 14);
      while (!network.empty() && (network.back() == '\r' || network.back() == ' '))
        network.pop_back();
    }
  }
  if (via.empty()) return "";
  std::string out =
      join(via, ", ", [](const auto& entry) { return str(entry.first, " (", entry.second, ")"); });
  if (!network.empty()) out += "; network " + network;
  return out;
}

}  // namespace mddp::comm::nccl
