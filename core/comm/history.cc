#include "core/comm/history.h"

#include <cstdio>

namespace mddp::comm::detail {

void History::issued(uint64_t seq, std::string op, std::size_t bytes) {
  std::lock_guard lock(mu_);
  records_.push_back(CollectiveRecord{seq, std::move(op), bytes, 0, 0});
  if (records_.size() > kCapacity) records_.pop_front();
}

// Records are appended in seq order, so the one wanted is near the back.
CollectiveRecord* History::find(uint64_t seq) {
  for (auto it = records_.rbegin(); it != records_.rend(); ++it)
    if (it->seq == seq) return &*it;
  return nullptr;  // already dropped from the window
}

void History::started(uint64_t seq, int64_t ns) {
  std::lock_guard lock(mu_);
  if (auto* r = find(seq)) r->start_ns = ns;
}

void History::finished(uint64_t seq, int64_t ns) {
  std::lock_guard lock(mu_);
  if (auto* r = find(seq)) r->end_ns = ns;
}

std::vector<CollectiveRecord> History::snapshot() const {
  std::lock_guard lock(mu_);
  return {records_.begin(), records_.end()};
}

namespace {
std::string human_bytes(std::size_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  } else if (bytes < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024 * 1024));
  }
  return buf;
}
}  // namespace

std::string History::format(const std::vector<CollectiveRecord>& records, int64_t now_ns,
                            std::size_t max_lines) {
  std::string out;
  const std::size_t first = records.size() > max_lines ? records.size() - max_lines : 0;
  for (std::size_t i = first; i < records.size(); ++i) {
    const auto& r = records[i];
    char line[256];
    if (r.start_ns == 0) {
      std::snprintf(line, sizeof line, "    #%llu %s %s: never started\n",
                    static_cast<unsigned long long>(r.seq), r.op.c_str(),
                    human_bytes(r.bytes).c_str());
    } else if (r.end_ns == 0) {
      std::snprintf(line, sizeof line, "    #%llu %s %s: started %.1f ms ago, never finished\n",
                    static_cast<unsigned long long>(r.seq), r.op.c_str(),
                    human_bytes(r.bytes).c_str(), static_cast<double>(now_ns - r.start_ns) * 1e-6);
    } else {
      std::snprintf(line, sizeof line, "    #%llu %s %s: started %.1f ms ago, took %.3f ms\n",
                    static_cast<unsigned long long>(r.seq), r.op.c_str(),
                    human_bytes(r.bytes).c_str(), static_cast<double>(now_ns - r.start_ns) * 1e-6,
                    static_cast<double>(r.end_ns - r.start_ns) * 1e-6);
    }
    out += line;
  }
  return out;
}

}  // namespace mddp::comm::detail
