#include "core/comm/transport/shm/process_id.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace mddp::comm::shm {
namespace {

struct Stat {
  char state = '?';
  uint64_t start_ticks = 0;
};

// Fields 3 (state) and 22 (starttime) of /proc/PID/stat; false when there is
// no such process. The command name (field 2) is in parentheses and may hold
// spaces or parentheses itself, so fields are counted after the last ')'.
bool read_stat(int pid, Stat& out) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto paren = line.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(line.substr(paren + 1));
  std::string skip;
  fields >> out.state;                          // field 3
  for (int f = 4; f < 22; ++f) fields >> skip;  // fields 4..21
  fields >> out.start_ticks;                    // field 22
  return static_cast<bool>(fields);
}

uint64_t own_pid_ns() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

ProcessId self_process_id() {
  ProcessId id;
  id.pid_ns = own_pid_ns();
  id.pid = static_cast<int32_t>(::getpid());
  Stat s;
  if (read_stat(id.pid, s)) id.start_ticks = s.start_ticks;
  return id;
}

Liveness liveness(const ProcessId& p) {
  static const uint64_t ours = own_pid_ns();
  if (p.pid <= 0 || p.pid_ns == 0 || p.pid_ns != ours || p.start_ticks == 0)
    return Liveness::kUnknown;
  Stat s;
  if (!read_stat(p.pid, s))
    return ::access("/proc/self/stat", F_OK) == 0 ? Liveness::kGone : Liveness::kUnknown;
  if (s.state == 'Z' || s.state == 'X' || s.start_ticks != p.start_ticks) return Liveness::kGone;
  return Liveness::kAlive;
}

}  // namespace mddp::comm::shm
