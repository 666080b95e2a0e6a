// The metrics log: every rank's per-step record, appended as one JSON line
// to <run dir>/metrics.jsonl (durable: each batch is written at once, so a
// crash loses at most the batch in flight; sync() forces it to disk), and
// kept in a bounded in-memory tail that the dashboard reads. Append-only: an
// existing file is continued, never truncated. Records go in whole or not at
// all (RecordFile): on a full disk the ones that do not fit are counted by
// rank and step (lost()), and writing resumes when space comes back.
// Thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/common/record_file.h"
#include "core/perf/step_metrics.h"

namespace mddp::coordinator {

struct MetricsRecord {
  perf::StepMetrics metrics;  // metrics.rank is the sender's rank
  int64_t time_unix_ns = 0;   // the worker's wall clock at the end of the step
  int64_t received_unix_ns = 0;
  uint64_t seq = 0;  // position in the log, from 1 (set by append)
};

class MetricsLog {
 public:
  // `run_dir` "" keeps records in memory only; otherwise the directory is
  // created and metrics.jsonl opened for appending (throws mddp::Error
  // naming the path when it cannot be).
  explicit MetricsLog(const std::filesystem::path& run_dir, std::size_t tail_capacity = 20000);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends the batch (one line per record). Returns "" or why the file
  // write failed (the records that did not fit are kept in memory and
  // counted in lost()).
  std::string append(std::vector<MetricsRecord> batch);
  // Forces the file to disk (fdatasync).
  void sync();
  // The records that are not in the file: how many, and which ("" when none).
  struct Lost {
    int64_t count = 0;
    std::string which, why;  // "rank 0 steps 38-3000, ...", the first error
  };
  Lost lost() const;

  uint64_t count() const;  // records appended since start
  // Up to `max` records with seq > `after`, oldest first (from the tail only).
  std::vector<MetricsRecord> since(uint64_t after, std::size_t max) const;

  // Readers that want a few steps out of a long tail (the dashboard's
  // timeline, stragglers and trace) choose them from step_ranks(), a small
  // copy, then copy only their records with steps(): appends, which need the
  // same lock, never wait for a copy of the whole tail.
  struct StepRank {
    int64_t step = 0;
    int rank = 0;
    auto operator<=>(const StepRank&) const = default;  // by step, then rank
  };
  // The step and rank of each training record in the tail (evaluations left
  // out), oldest first.
  std::vector<StepRank> step_ranks() const;
  // The training records of steps first..last (both included) in the tail,
  // oldest first.
  std::vector<MetricsRecord> steps(int64_t first, int64_t last) const;
  std::filesystem::path path() const { return path_; }  // "" when in memory only

  // The JSON object of one line of metrics.jsonl.
  static nlohmann::json to_json(const MetricsRecord& r);

 private:
  const std::filesystem::path path_;
  const std::size_t tail_capacity_;
  mutable std::mutex mu_;
  std::unique_ptr<RecordFile> file_;
  bool dirty_ = false;
  LostRecords lost_;
  std::string first_error_;
  uint64_t count_ = 0;
  std::deque<MetricsRecord> tail_;
};

}  // namespace mddp::coordinator
