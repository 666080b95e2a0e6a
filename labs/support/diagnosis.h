// The diagnosis Labs (12 hang, 13 straggler, 14 poisoned_shard, 15
// mismatched_rank, 16 uneven_work, 17 slow_link): a real job
// with a fault planted at random, found by the student from what microddp
// shows. `microddp lab run NAME` plants the fault (plant_fault), seals it
// into the run directory (seal_fault: not readable at a glance, so the
// answer is not one `cat` away) and starts the job with MDDP_LAB_FAULT
// (core/train/lab_fault.h) in its environment; `microddp lab check NAME`
// reads the student's answers (my_work/NAME.toml), unseals the fault and
// grades each answer (open_case, then the Lab's check.cc).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/perf/analysis.h"
#include "labs/support/options.h"
#include "labs/support/report.h"

namespace mddp::labs {

struct PlantedFault {
  std::string lab;  // hang | straggler | poisoned_shard | mismatched_rank | uneven_work | slow_link
  int rank = -1;    // slow_link: one end of the link
  int64_t step = 0;     // hang, poisoned_shard: the step it strikes; uneven_work: its last
  std::string phase;    // hang, straggler: data | forward | backward
  int ms = 0;           // straggler: the sleep in every step
  std::string setting;  // mismatched_rank: width | depth
  int peer = -1;        // slow_link: the other end (the next rank of the ring)
  int mbps = 0;         // slow_link: its MB/s each way
  // MDDP_LAB_FAULT's value for it.
  std::string environment() const;
};

// The diagnosis Labs' names, and whether `name` is one.
const std::vector<std::string>& diagnosis_labs();
bool is_diagnosis_lab(const std::string& name);

// A fault for `lab`, drawn from `seed` (each try a different one).
PlantedFault plant_fault(const std::string& lab, uint64_t seed);
// `microddp run`'s arguments for the Lab's job, writing to run_dir and
// keeping the dashboard up `linger_s` after the job ends.
std::vector<std::string> job_arguments(const std::string& lab, const std::string& run_dir,
                                       double linger_s);

// The sealed fault in run_dir (lab-fault.sealed). unseal_fault: nullopt when
// there is none; InputError when the file is damaged.
void seal_fault(const PlantedFault& fault, const std::filesystem::path& run_dir);
std::optional<PlantedFault> unseal_fault(const std::filesystem::path& run_dir);
std::filesystem::path sealed_fault_path(const std::filesystem::path& run_dir);

// What a diagnosis check works from: the answers, the run they name and the
// fault planted there. nullopt when one is missing, after reporting why.
struct DiagnosisCase {
  nlohmann::json answers;  // the TOML file's top-level numbers and strings
  std::filesystem::path run;
  PlantedFault fault;

  // An answer, or nullopt when left as the template has it ("" or < 0).
  std::optional<int64_t> whole(const char* key) const;
  std::optional<double> number(const char* key) const;
  std::optional<std::string> text(const char* key) const;
};
std::optional<DiagnosisCase> open_case(const std::string& lab, const CheckOptions& o,
                                       Report& report);

// The rank the job's verdict in run/coordinator.log names as failed (the
// first to report or time out, often a victim); -1 when the job has none.
int verdict_rank(const std::filesystem::path& run);

// `microddp analyze`'s reading of the case's run; nullopt after reporting
// why it cannot be read.
std::optional<perf::Analysis> analyze_case(const DiagnosisCase& c, Report& report);

// What a checker says after the answers were graded: the first wrong one
// (with its misreading named) fails the check; when all are right, the
// explanation of the fault and of the signal that showed it.
struct Grading {
  std::string wrong;                 // "" when every answer is right
  std::vector<std::string> details;  // the misreading, and where to look
};
// "'rank' is not answered yet".
Grading not_answered(const char* key);
void report_diagnosis(const Grading& v, const std::vector<std::string>& explanation, int questions,
                      Report& report);

}  // namespace mddp::labs
