// A worker started by SLURM's srun: what its environment says about the
// job. srun sets, for every task, SLURM_PROCID (this task's rank),
// SLURM_LOCALID (its index on its node: core/tensor/local_gpu.cc maps it to
// cuda:K), SLURM_NTASKS (the world size) and SLURM_JOB_NODELIST (the
// allocation's nodes in SLURM's compressed syntax, e.g. node[01-03,07]).
// deploy/slurm/ starts the coordinator on the first node of that list, so
// a worker finds it there without being told (cli/cmd_worker.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mddp::worker {

struct SlurmTask {
  int rank = 0;                    // SLURM_PROCID
  int local_rank = 0;              // SLURM_LOCALID
  int ntasks = 0;                  // SLURM_NTASKS
  std::vector<std::string> nodes;  // SLURM_JOB_NODELIST, expanded (empty when unset)
};

// "node[01-03,07],login1" -> node01 node02 node03 node07 login1: comma
// separated names, each with any number of bracketed lists of numbers and
// ranges (a range keeps its lower bound's zero padding; several brackets in
// one name give every combination, as SLURM does). InputError on anything else.
std::vector<std::string> expand_nodelist(std::string_view list);

// The SLURM task this process is, from the variables above; nullopt when
// SLURM_PROCID is not set (not started by srun) or RANK is: another
// launcher (torchrun, `microddp run`) started this process inside an
// allocation, whose batch step carries SLURM_PROCID=0 and the allocation's
// SLURM_NTASKS to everything it runs. InputError, naming the variable, when
// one is malformed or they disagree (rank >= ntasks).
std::optional<SlurmTask> slurm_task();

}  // namespace mddp::worker
