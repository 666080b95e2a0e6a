// `microddp run --replay RUN_DIR`: a job run again with the membership
// changes of an earlier run (its membership.jsonl: coordinator/
// membership_log.h) at the same steps, so that its final model is that
// run's, bit for bit (docs/recovery.md, "Replaying the membership changes").
//
// Which ranks computed a step decides its bytes only through the world size
// (each rank's share of the batch follows its rank, the sum of the
// gradients follows the world size and the algorithm), and a checkpoint
// resumes bit for bit. So the replay runs the job in legs, one per stretch
// of steps on one world size: each leg a `microddp run` of the same flags
// with that leg's --nproc, ending with --stop-after-step where the next
// stretch starts, and resuming from the leg before. The last leg writes
// --run-dir; the others write RUN_DIR/replay/leg-K.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/replay_legs.h"
#include "core/train/config.h"

namespace mddp::cli {

// Refuses (InputError, naming the differences) a replay whose training
// config differs from the replayed run's (its job.json, beside the log)
// in anything that changes the model's bytes; the run directory, resume,
// checkpoint and logging flags and the failure policy may differ.
void check_same_job(const std::filesystem::path& replayed, const train::TrainConfig& here);

// Runs the legs as children: `args` is this command's line (argv[0],
// `run` and its flags, without --replay), `run_dir` its --run-dir. Throws
// Error naming the leg that failed.
void replay(const std::vector<ReplayLeg>& legs, const std::vector<std::string>& args,
            const std::string& run_dir);

}  // namespace mddp::cli
