// The worker: one rank of a job run by a coordinator. The call sequence
// (proto/microddp.proto):
//
//   Join            rank (RANK / SLURM_PROCID when set), world size, the job
//                   config (control/job_config_json.h), heartbeat period
//   Heartbeat ...   from now on, every interval, on its own thread
//   Set/Get         the data plane's peer table through the coordinator's
//                   store: comm::connect_transport, keys "comm/..."
//   (DDP setup)     model built, shapes checked and rank 0's parameters
//                   broadcast over the data plane
//   Validate        the model/bucket/wire-type fingerprint against rank 0's
//   Barrier "start"
//   StreamMetrics   one record per step, from a background thread
//   Leave           ok, or the one-line reason
//
// No gRPC in this header: the command (cli/cmd_worker.cc) includes only it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "control/tls.h"
#include "core/nn/sequential.h"
#include "core/train/config.h"

namespace mddp::worker {

struct WorkerOptions {
  std::string coordinator;  // HOST:PORT
  std::string token;
  std::optional<control::TlsConfig> tls;  // see worker/coordinator_client.h
  std::string job_id = "local";
  std::string device;     // "" = the job config's device
  std::string data_addr;  // see data_address.h
  std::string iface;
  std::chrono::milliseconds connect_timeout{
      60'000};  // the coordinator must accept connections by then
  std::chrono::milliseconds join_timeout{
      std::chrono::minutes(6)};  // then the job must form by then
  std::chrono::milliseconds call_timeout{30'000};
  // The job's world size must be this (SLURM_NTASKS under srun); 0: any.
  int expected_world_size = 0;
  // SIGINT / SIGTERM fail this rank cleanly (Leave with "interrupted").
  bool handle_signals = true;
  // Called on rank 0 once the model is built (the config table).
  std::function<void(const train::TrainConfig&, nn::Module&)> on_start;
};

// Runs this rank from Join to Leave. Returns when the job's training
// finished on this rank; throws mddp::Error with one line otherwise: the
// coordinator's verdict naming the rank at fault when the job failed
// elsewhere, this rank's own error when the fault is here.
void run_worker(const WorkerOptions& options);

}  // namespace mddp::worker
