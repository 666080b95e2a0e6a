// The metrics log: every rank's per-step record, appended as one JSON line
// to <run dir>/metrics.jsonl (durable: each batch is written at once, so a
// crash loses at most the batch in flight; sync() forces it to disk), and
// kept in a bounded in-memory tail that the dashboard reads. Append-only: an
// existing file is continued, never truncated. Records go in whole or not at
// all (RecordFile): on a full disk the ones that do not fit are counted by
// rank and step (lost()), and writing resumes when space comes back.
//
// Note [Exactly once by (attempt, rank, step)]: workers deliver at least
// once (a broken stream is sent again), and a restarted job runs the steps
// after its checkpoint again. So every record carries its attempt; a record
// of an (attempt, rank, kind) whose step is not past the last one kept is a
// duplicate and dropped. The first training record of an attempt that
// follows others says where it resumed (its step - 1 = S): a "resume" line
// is written, and the records of earlier attempts for steps > S are
// superseded: kept in the file (append-only) but left out of the tail, and
// left out by every reader of the file (core/perf/run_log.cc applies the
// same rule), so readers see one record per (rank, step). The steps lost
// are those the attempt before reached beyond S. Event lines have a "kind"
// of their own: "attempt" (an attempt formed, with its world size),
// "restart" (an attempt ended and the next forms, with the verdict),
// "resume", and "membership" (the membership log's line of an attempt:
// membership_log.h).
// Thread-safe.
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "control/metrics_record.h"
#include "core/common/record_file.h"
#include "core/perf/step_metrics.h"

namespace mddp::coordinator {

// The coordinator speaks the control plane's types (control/, shared with
// the worker) as its own.
using namespace control;

class MetricsLog {
 public:
  // `run_dir` "" keeps records in memory only; otherwise the directory is
  // created and metrics.jsonl opened for appending (throws mddp::Error
  // naming the path when it cannot be).
  explicit MetricsLog(const std::filesystem::path& run_dir, std::size_t tail_capacity = 20000);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends the batch (one line per record), less duplicates
  // (Note [Exactly once by (attempt, rank, step)]). Returns "" or why the file write failed
  // (the records that did not fit are kept in memory and counted in lost()).
  std::string append(std::vector<MetricsRecord> batch);
  // Appends an event line (a JSON object with its "kind"); "" or why the write failed.
  std::string event(const nlohmann::json& line);

  // Where an attempt resumed (from its first training record).
  struct Resume {
    int attempt = 0;
    int64_t from_step = 0;   // S: the attempt's first step is S + 1
    int64_t steps_lost = 0;  // steps the attempt before reached beyond S
    int64_t superseded = 0;  // records of earlier attempts past S
  };
  std::vector<Resume> resumes() const;
  // The highest attempt in the log, counting a file written before this
  // process opened it (-1: none): a coordinator that resumes a run goes on
  // counting from there.
  int last_attempt() const;
  int64_t duplicates() const;  // records dropped as delivered twice
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
  // Reads an existing file's attempts and their last steps.
  void scan_existing();
  // Drops duplicates from `batch` and their lines from `lines` (parallel to
  // it, or empty); for an attempt's first training record after others,
  // returns the resume line and supersedes the tail. Under mu_.
  std::optional<nlohmann::json> admit_locked(std::vector<MetricsRecord>& batch,
                                             std::vector<std::string>& lines);
  // True when `r` is a duplicate; sets `resume` when it resumes an attempt. Under mu_.
  bool duplicate_locked(const MetricsRecord& r, std::optional<nlohmann::json>& resume);
  std::string write_locked(const std::string& lines, std::size_t count, std::size_t& written);

  const std::filesystem::path path_;
  const std::size_t tail_capacity_;
  mutable std::mutex mu_;
  std::unique_ptr<RecordFile> file_;
  bool dirty_ = false;
  LostRecords lost_;
  std::string first_error_;
  uint64_t count_ = 0;
  std::deque<MetricsRecord> tail_;  // superseded records stay (seqs are consecutive), marked
  std::deque<bool> superseded_;     // parallel to tail_
  std::map<std::tuple<int, int, bool>, int64_t> last_step_;  // (attempt, rank, eval) -> step kept
  std::map<int, int64_t> attempt_max_step_;                  // attempt -> its highest training step
  std::vector<Resume> resumes_;
  int last_attempt_ = -1;
  int64_t duplicates_ = 0;
};

}  // namespace mddp::coordinator
