#include "core/comm/nccl/transport_log.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "core/common/check.h"

namespace mddp::comm::nccl {

std::string capture_nccl_log() {
  static std::once_flag once;
  static std::string path;
  std::call_once(once, [] {
    if (std::getenv("NCCL_DEBUG")) return;
    const char* tmp = std::getenv("TMPDIR");
    path = str(tmp && *tmp ? tmp : "/tmp", "/microddp-nccl-", ::getpid(), ".log");
    ::setenv("NCCL_DEBUG", "INFO", 1);
    ::setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
    ::setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
  });
  return path;
}

std::string summarize_nccl_transports(std::istream& log) {
  std::map<std::string, int> via;  // transport -> channel connections
  std::string network, line;
  while (std::getline(log, line)) {
    if (const std::size_t at = line.find(" via "); at != std::string::npos && line.find("Channel") != std::string::npos) {
      const std::size_t begin = at + 5;
      const std::size_t end = line.find_first_of(" \t\r", begin);
      const std::string name = line.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
      if (!name.empty()) ++via[name];
    } else if (const std::size_t net = line.find("Using network "); net != std::string::npos) {
      network = line.substr(net + 14);
      while (!network.empty() && (network.back() == '\r' || network.back() == ' ')) network.pop_back();
    }
  }
  if (via.empty()) return "";
  std::string out;
  for (const auto& [name, n] : via) out += str(out.empty() ? "" : ", ", name, " (", n, ")");
  if (!network.empty()) out += "; network " + network;
  return out;
}

}  // namespace mddp::comm::nccl
