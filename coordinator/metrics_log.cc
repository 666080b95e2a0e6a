#include "coordinator/metrics_log.h"

#include <algorithm>
#include <fstream>

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
  scan_existing();
  try {
    file_ = std::make_unique<RecordFile>(path_);
  } catch (const Error& e) {
    throw Error(str(e.what(), " (check --run-dir)"));
  }
}

MetricsLog::~MetricsLog() = default;

void MetricsLog::scan_existing() {
  std::ifstream in(path_);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) continue;  // a torn last line: RecordFile cuts it off
    const auto a = j.find("attempt");
    const int attempt = a != j.end() && a->is_number_integer() ? a->get<int>() : 0;
    last_attempt_ = std::max(last_attempt_, attempt);
    const auto kind = j.find("kind");
    const auto step = j.find("step");
    if (kind != j.end() && *kind == "step" && step != j.end() && step->is_number_integer())
      attempt_max_step_[attempt] = std::max(attempt_max_step_[attempt], step->get<int64_t>());
  }
}

nlohmann::json MetricsLog::to_json(const MetricsRecord& r) {
  nlohmann::json j = r.metrics.to_json();
  j["attempt"] = r.attempt;
  j["time_unix_ns"] = r.time_unix_ns;
  j["received_unix_ns"] = r.received_unix_ns;
  j["seq"] = r.seq;
  return j;
}

std::optional<nlohmann::json> MetricsLog::admit_locked(std::vector<MetricsRecord>& batch,
                                                       std::vector<std::string>& lines) {
  std::optional<nlohmann::json> resume;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (duplicate_locked(batch[i], resume)) continue;
    if (kept != i) {
      batch[kept] = std::move(batch[i]);
      if (!lines.empty()) lines[kept] = std::move(lines[i]);
    }
    ++kept;
  }
  batch.resize(kept);
  if (!lines.empty()) lines.resize(kept);
  return resume;
}

bool MetricsLog::duplicate_locked(const MetricsRecord& r, std::optional<nlohmann::json>& resume) {
  const perf::StepMetrics& m = r.metrics;
  auto [it, first] = last_step_.try_emplace({r.attempt, m.rank, m.eval}, m.step);
  if (!first && m.step <= it->second) {
    ++duplicates_;
    return true;
  }
  it->second = m.step;
  last_attempt_ = std::max(last_attempt_, r.attempt);
  if (m.eval) return false;
  const bool attempt_new = !attempt_max_step_.count(r.attempt);
  int64_t& top = attempt_max_step_[r.attempt];
  top = std::max(top, m.step);
  // The attempt's first training record, after an earlier attempt's: it resumed here.
  const auto before = attempt_max_step_.find(r.attempt);
  if (!attempt_new || before == attempt_max_step_.begin()) return false;
  const int64_t from = m.step - 1;
  const int64_t reached = std::prev(before)->second;
  Resume res{r.attempt, from, std::max<int64_t>(0, reached - from), 0};
  for (std::size_t i = 0; i < tail_.size(); ++i) {
    const MetricsRecord& t = tail_[i];
    if (!superseded_[i] && t.attempt < r.attempt && t.metrics.step > from) {
      superseded_[i] = true;
      ++res.superseded;
    }
  }
  resumes_.push_back(res);
  resume = nlohmann::json{{"kind", "resume"},
                          {"attempt", res.attempt},
                          {"from_step", res.from_step},
                          {"steps_lost", res.steps_lost},
                          {"superseded", res.superseded}};
  return false;
}

std::string MetricsLog::write_locked(const std::string& lines, std::size_t count,
                                     std::size_t& written) {
  written = file_ && !lines.empty() ? file_->append(lines) : count;
  dirty_ = dirty_ || written > 0;
  if (written == count) return {};
  if (first_error_.empty()) first_error_ = file_->error();
  return str("writing ", path_.string(), " failed: ", file_->error(), " (", count - written, " of ",
             count, " lines not written)");
}

std::string MetricsLog::event(const nlohmann::json& line) {
  std::lock_guard lock(mu_);
  const auto a = line.find("attempt");
  if (a != line.end() && a->is_number_integer())
    last_attempt_ = std::max(last_attempt_, a->get<int>());
  std::size_t written = 0;
  return write_locked(file_ ? line.dump() + "\n" : std::string(), 1, written);
}

// The line of `r` less its closing brace and seq, which only the log's
// order gives (append adds them under the lock).
static std::string line_before_seq(const MetricsRecord& r) {
  nlohmann::json j = MetricsLog::to_json(r);
  j.erase("seq");
  std::string line = j.dump();
  line.pop_back();  // the '}'
  return line;
}

std::string MetricsLog::append(std::vector<MetricsRecord> batch) {
  // JSON is most of an append's cost: the lines are made before the lock,
  // so the streams of many ranks serialise side by side and hold the lock
  // only to order, deduplicate and write.
  std::vector<std::string> made;
  if (file_) {
    made.reserve(batch.size());
    for (const auto& r : batch) made.push_back(line_before_seq(r));
  }
  std::string lines;
  std::lock_guard lock(mu_);
  const std::optional<nlohmann::json> resume = admit_locked(batch, made);
  std::size_t written = 0;
  std::string error;
  if (resume) error = write_locked(file_ ? resume->dump() + "\n" : std::string(), 1, written);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].seq = ++count_;
    if (file_) lines += str(made[i], ",\"seq\":", batch[i].seq, "}\n");
  }
  if (const std::string e = write_locked(lines, batch.size(), written); !e.empty()) error = e;
  for (std::size_t i = written; i < batch.size(); ++i)
    lost_.add(batch[i].metrics.rank, batch[i].metrics.step, batch[i].metrics.eval);
  for (auto& r : batch) {
    tail_.push_back(std::move(r));
    superseded_.push_back(false);
    if (tail_.size() > tail_capacity_) {
      tail_.pop_front();
      superseded_.pop_front();
    }
  }
  return error;
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

std::vector<MetricsLog::Resume> MetricsLog::resumes() const {
  std::lock_guard lock(mu_);
  return resumes_;
}

int MetricsLog::last_attempt() const {
  std::lock_guard lock(mu_);
  return last_attempt_;
}

int64_t MetricsLog::duplicates() const {
  std::lock_guard lock(mu_);
  return duplicates_;
}

std::vector<MetricsRecord> MetricsLog::since(uint64_t after, std::size_t max) const {
  std::lock_guard lock(mu_);
  std::vector<MetricsRecord> out;
  if (tail_.empty()) return out;
  const uint64_t first = tail_.front().seq;  // seqs in the tail are consecutive
  const std::size_t start = after < first ? 0 : static_cast<std::size_t>(after - first + 1);
  for (std::size_t i = start; i < tail_.size() && out.size() < max; ++i)
    if (!superseded_[i]) out.push_back(tail_[i]);
  return out;
}

std::vector<MetricsLog::StepRank> MetricsLog::step_ranks() const {
  std::lock_guard lock(mu_);
  std::vector<StepRank> out;
  out.reserve(tail_.size());
  for (std::size_t i = 0; i < tail_.size(); ++i)
    if (!tail_[i].metrics.eval && !superseded_[i])
      out.push_back({tail_[i].metrics.step, tail_[i].metrics.rank});
  return out;
}

std::vector<MetricsRecord> MetricsLog::steps(int64_t first, int64_t last) const {
  std::lock_guard lock(mu_);
  std::vector<MetricsRecord> out;
  for (std::size_t i = 0; i < tail_.size(); ++i) {
    const MetricsRecord& r = tail_[i];
    if (!r.metrics.eval && !superseded_[i] && r.metrics.step >= first && r.metrics.step <= last)
      out.push_back(r);
  }
  return out;
}

}  // namespace mddp::coordinator
