#include "coordinator/metrics_log.h"

#include "core/common/check.h"

namespace mddp::coordinator {

MetricsLog::MetricsLog(const std::filesystem::path& run_dir, std::size_t tail_capacity)
    : path_(run_dir.empty() ? std::filesystem::path() : run_dir / "metrics.jsonl"),
      tail_capacity_(tail_capacity) {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec)
    throw Error(
        str("cannot create the run directory ", run_dir, ": ", ec.message(), " (check --run-dir)"));
  try {
    file_ = std::make_unique<RecordFile>(path_);
  } catch (const Error& e) {
    throw Error(str(e.what(), " (check --run-dir)"));
  }
}

MetricsLog::~MetricsLog() = default;

nlohmann::json MetricsLog::to_json(const MetricsRecord& r) {
  nlohmann::json j = r.metrics.to_json();
  j["time_unix_ns"] = r.time_unix_ns;
  j["received_unix_ns"] = r.received_unix_ns;
  j["seq"] = r.seq;
  return j;
}

std::string MetricsLog::append(std::vector<MetricsRecord> batch) {
  std::string lines;
  std::lock_guard lock(mu_);
  for (auto& r : batch) {
    r.seq = ++count_;
    if (file_) lines += to_json(r).dump() + "\n";
  }
  const std::size_t written = file_ && !lines.empty() ? file_->append(lines) : batch.size();
  for (std::size_t i = written; i < batch.size(); ++i) lost_.add(batch[i].metrics.rank, batch[i].metrics.step, batch[i].metrics.eval);
  for (auto& r : batch) {
    tail_.push_back(std::move(r));
    if (tail_.size() > tail_capacity_) tail_.pop_front();
  }
  dirty_ = dirty_ || written > 0;
  if (written == batch.size()) return {};
  if (first_error_.empty()) first_error_ = file_->error();
  return str("writing ", path_.string(), " failed: ", file_->error(), " (", batch.size() - written, " of ",
             batch.size(), " records not written)");
}

void MetricsLog::sync() {
  std::lock_guard lock(mu_);
  if (!file_ || !dirty_) return;
  file_->sync();
  dirty_ = false;
}

MetricsLog::Lost MetricsLog::lost() const {
  std::lock_guard lock(mu_);
  return {lost_.count(), lost_.describe(), first_error_};
}

uint64_t MetricsLog::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

std::vector<MetricsRecord> MetricsLog::since(uint64_t after, std::size_t max) const {
  std::lock_guard lock(mu_);
  std::vector<MetricsRecord> out;
  if (tail_.empty()) return out;
  const uint64_t first = tail_.front().seq;  // seqs in the tail are consecutive
  const std::size_t start = after < first ? 0 : static_cast<std::size_t>(after - first + 1);
  for (std::size_t i = start; i < tail_.size() && out.size() < max; ++i) out.push_back(tail_[i]);
  return out;
}

std::vector<MetricsLog::StepRank> MetricsLog::step_ranks() const {
  std::lock_guard lock(mu_);
  std::vector<StepRank> out;
  out.reserve(tail_.size());
  for (const auto& r : tail_)
    if (!r.metrics.eval) out.push_back({r.metrics.step, r.metrics.rank});
  return out;
}

std::vector<MetricsRecord> MetricsLog::steps(int64_t first, int64_t last) const {
  std::lock_guard lock(mu_);
  std::vector<MetricsRecord> out;
  for (const auto& r : tail_)
    if (!r.metrics.eval && r.metrics.step >= first && r.metrics.step <= last) out.push_back(r);
  return out;
}

}  // namespace mddp::coordinator
