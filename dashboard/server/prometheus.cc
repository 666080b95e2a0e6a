#include "dashboard/server/prometheus.h"

#include <charconv>
#include <cmath>

namespace mddp::dashboard {
namespace {

// A label value escaped as the format requires: backslash, quote, newline.
std::string escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

// Numbers as Go's strconv writes them (what promtool parses): shortest
// round-trip, and NaN / +Inf / -Inf spelled out.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

class Writer {
 public:
  explicit Writer(const std::string& job) : job_label_("job=\"" + escape(job) + "\"") {}

  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    out_ += "# HELP " + name_ + " " + help + "\n# TYPE " + name_ + " " + type + "\n";
  }
  // One sample of the current family; `labels` is extra "k=\"v\"" text.
  void sample(double value, const std::string& labels = "") {
    out_ += name_ + "{" + job_label_ + (labels.empty() ? "" : "," + labels) + "} " + number(value) +
            "\n";
  }
  std::string str() && { return std::move(out_); }

 private:
  const std::string job_label_;
  std::string name_, out_;
};

std::string rank_label(int rank) {
  return "rank=\"" + std::to_string(rank) + "\"";
}

}  // namespace

std::string prometheus_text(const JobSnapshot& s) {
  Writer w(s.job_id);
  w.family("microddp_job_state", "gauge", "1 for the job's current state, 0 for the others.");
  for (auto st : {control::State::kForming, control::State::kRunning, control::State::kSucceeded,
                  control::State::kFailed})
    w.sample(st == s.status.state ? 1 : 0, std::string("state=\"") + control::to_string(st) + "\"");
  w.family("microddp_world_size", "gauge", "Number of ranks in the job.");
  w.sample(s.world_size);
  w.family("microddp_step", "gauge", "Latest training step any rank reported.");
  w.sample(static_cast<double>(s.step));
  w.family("microddp_total_steps", "gauge", "Steps the job will run (0 until known).");
  w.sample(static_cast<double>(s.total_steps));
  w.family("microddp_loss", "gauge", "Training loss of the latest step, mean over ranks.");
  w.sample(s.loss.value_or(std::nan("")));
  w.family("microddp_samples_per_second", "gauge",
           "Training throughput over the last 2 s of records, all ranks together.");
  w.sample(s.samples_per_s);

  w.family("microddp_phase_seconds", "gauge",
           "Mean time per step in each phase over the rank's last 50 steps.");
  for (const RankSnapshot& r : s.ranks)
    for (std::size_t p = 0; p < kPhases.size(); ++p)
      w.sample(r.phase_mean_ms[p] * 1e-3,
               rank_label(r.rank) + ",phase=\"" + std::string(kPhases[p]) + "\"");
  w.family("microddp_allreduce_bytes_total", "counter",
           "Bytes the rank's gradient all-reduces put on the wire since the job started.");
  for (const RankSnapshot& r : s.ranks)
    w.sample(static_cast<double>(r.allreduce_bytes), rank_label(r.rank));
  w.family("microddp_heartbeat_age_seconds", "gauge", "Time since the rank's last heartbeat.");
  for (const RankSnapshot& r : s.ranks) w.sample(r.heartbeat_age_ms * 1e-3, rank_label(r.rank));
  w.family("microddp_metrics_records_total", "counter",
           "Per-step metrics records the coordinator received.");
  w.sample(static_cast<double>(s.records_total));
  return std::move(w).str();
}

}  // namespace mddp::dashboard
