// <run dir>/job.json: what a run's job is, for `microddp analyze`, the
// dashboard and the coordinator that takes the run over (docs/recovery.md):
// its size, its attempts and restarts, its config and every rank with what
// it runs on. Job gathers the content (JobFile); making the JSON is a pure
// function, tested on its own (tests/service/job_file_test.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/metrics_log.h"
#include "coordinator/rendezvous.h"
#include "coordinator/restarts.h"

namespace mddp::coordinator {

struct JobFile {
  std::string job_id{};
  int world_size = 0;      // of the attempt now (the most while it forms)
  int max_world_size = 0;  // --world-size
  int min_nproc = 0;       // --min-nproc; 0: max_world_size
  int attempt = 0;         // the attempt now
  int max_restarts = 0;
  struct Attempt {
    int number = 0;
    int world_size = 0;  // 0 while it forms
  };
  std::vector<Attempt> attempts{};
  std::vector<Restart> restarts{};
  std::vector<MetricsLog::Resume> resumes{};  // where each attempt after a restart resumed
  int64_t started_unix_ns = 0;                // when the first attempt formed
  std::string config_json = "{}";             // the job config handed to the workers
  std::vector<Member> members{};              // the attempt now's, in rank order
};

// The job as job.json says it.
nlohmann::json job_file_json(const JobFile& f);
// Writes <run_dir>/job.json through a rename; "" or why it could not.
std::string write_job_file(const std::filesystem::path& run_dir, const JobFile& f);
// The restarts that a coordinator before this one recorded in
// <run_dir>/job.json (none when there is no readable file).
std::vector<Restart> earlier_restarts(const std::filesystem::path& run_dir);

// A verdict as job.json and the metrics log's restart lines say it.
nlohmann::json verdict_json(const Verdict& v);

}  // namespace mddp::coordinator
