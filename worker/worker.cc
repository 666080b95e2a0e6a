#include "worker/worker.h"

#include <grpcpp/support/status_code_enum.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "control/exit_status.h"
#include "control/job_config_json.h"
#include "core/comm/communicator.h"
#include "core/comm/types.h"
#include "core/common/log.h"
#include "core/common/stop_signals.h"
#include "core/ddp/strategies.h"
#include "core/tensor/device.h"
#include "core/train/distributed.h"
#include "core/train/lab_fault.h"
#include "core/train/loop.h"
#include "mddp/config.h"
#include "worker/coordinator_client.h"
#include "worker/cpus.h"
#include "worker/data_address.h"
#include "worker/heartbeat.h"
#include "worker/job_watch.h"
#include "worker/metrics_streamer.h"
#include "worker/protocol_probe.h"
#include "worker/test_hold.h"

namespace mddp::worker {
namespace {

using namespace std::chrono_literals;

std::string hostname() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
}

// RANK (torchrun) or SLURM_PROCID (srun), -1 when neither is set.
int requested_rank() {
  for (const char* var : {"RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end != '\0' || r < 0 || r > 1'000'000)
      throw InputError(str(var, "='", v, "' is not a rank (0, 1, ...)"));
    return static_cast<int>(r);
  }
  return -1;
}

// SIGINT / SIGTERM: a handler records the signal (in whichever thread it
// lands: libraries start threads before we can block signals in them) and a
// watcher thread acts on it. Before the job is joined they end the process;
// after, they fail this rank through the heartbeat (the collectives abort,
// the worker leaves with "interrupted").
class Signals {
 public:
  Signals() {
    thread_ = std::thread([this] {
      while (!stop_) {
        std::this_thread::sleep_for(50ms);
        const int sig = caught_.take();
        if (sig == 0) continue;
        const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        Heartbeat* hb = hb_.load();
        if (!hb) {
          std::fflush(stdout);
          std::fprintf(stderr, "microddp: error: interrupted (%s) before the job started\n", name);
          std::_Exit(128 + sig);
        }
        hb->fail_locally(str("rank ", rank_.load(), " was interrupted (", name, ")"));
      }
    });
  }
  ~Signals() {
    stop_ = true;
    thread_.join();
  }
  void arm(Heartbeat* hb, int rank) {
    rank_ = rank;
    hb_ = hb;
  }

 private:
  StopSignals caught_;  // declared first: catching starts before the watcher thread
  std::atomic<bool> stop_{false};
  std::atomic<Heartbeat*> hb_{nullptr};
  std::atomic<int> rank_{-1};
  std::thread thread_;
};

// Disarms on scope exit, before the heartbeat it points to is destroyed.
struct Armed {
  Signals* s;
  Armed(Signals* signals, Heartbeat* hb, int rank) : s(signals) {
    if (s) s->arm(hb, rank);
  }
  ~Armed() {
    if (s) s->arm(nullptr, -1);
  }
};

control::Fingerprint fingerprint(train::DistributedTrainer& dt, const train::TrainConfig& cfg) {
  control::Fingerprint f;
  nn::Module& model = dt.trainer().model();
  f.model = model.describe();
  for (nn::Parameter* p : model.parameters()) f.parameters.push_back({p->name, p->value.shape()});
  if (auto* reducer = dynamic_cast<ddp::Reducer*>(&dt.ddp().grad_sync()))
    for (const auto& b : reducer->buckets()) f.buckets.emplace_back(b.begin(), b.end());
  f.dtype = cfg.dist.compress == "none" ? "fp32" : cfg.dist.compress;
  f.version = MDDP_VERSION;
  return f;
}

// The job's training config as this rank runs it.
train::TrainConfig rank_config(const JoinInfo& info, const WorkerOptions& o) {
  train::TrainConfig cfg = control::parse_job_config(info.job_config_json);
  if (!o.device.empty()) {
    cfg.device = o.device;
  } else if (cfg.device == "cuda") {  // one GPU per local rank, as torchrun does
    cfg.device =
        tensor::gpu_of_local_rank(tensor::Device::parse("cuda").index).str();  // cuda:LOCAL_RANK
  }
  // Rank 0 writes the run directory (train.jsonl, checkpoints); the others
  // would only write the same lines again. It alone reads the weights to
  // start from: the DistributedTrainer broadcasts what it loaded.
  if (info.rank != 0) {
    cfg.run_dir.clear();
    cfg.checkpoint_every = 0;
    cfg.init_from.clear();
    cfg.resume.clear();
  }
  train::LabFault::from_environment().adjust_config(info.rank, cfg);  // a diagnosis Lab's, if any
  return cfg;
}

// The data plane and what trains over it. It outlives train_rank and is
// closed only after this rank left: a rank that fails on its own says so
// (Leave) before its peers see its connections close, so they are never
// taken for a broken link or a death (Note [Who is at fault] in
// coordinator/health.cc). The heartbeat may abort the communicator from its
// own thread, so it is detached before the last reference goes, even when
// the trainer's constructor fails and drops its own.
struct DataPlane {
  std::shared_ptr<comm::ProcessGroup> comm;
  std::optional<AttachedComm> attached;
  std::optional<train::DistributedTrainer> dt;
  // --on-failure shrink: the Trainer this process kept from the attempt
  // before, to go on from (Note [Survivors train on] in core/train/distributed.cc).
  std::unique_ptr<train::Trainer> kept;
  void close() {
    dt.reset();
    attached.reset();
    comm.reset();
  }
  // Closes the data plane but keeps the trainer and its state, when it was built.
  std::unique_ptr<train::Trainer> close_keeping_trainer() {
    std::unique_ptr<train::Trainer> t = dt ? dt->release_trainer() : std::move(kept);
    close();
    return t;
  }
  ~DataPlane() { close(); }
};

struct Session {
  const WorkerOptions& options;
  CoordinatorClient& client;
  const JoinInfo& info;
  const DataAddress& data;
  ProgressBoard& board;
  Heartbeat& hb;
  MetricsStreamer& metrics;
  DataPlane& plane;
};

// Data plane, model, validation, barrier, training. Throws on any failure.
train::TrainSummary train_rank(Session& s) {
  const train::TrainConfig cfg = rank_config(s.info, s.options);
  // What this rank runs on, for the coordinator's members (job.json, the
  // dashboard) and `microddp analyze`: from the next heartbeat on.
  const int cpus = usable_cpus();
  s.hb.set_resources({cfg.device, cfg.threads, cpus});
  spdlog::info("running on {} with {} compute thread{}; this process may use {} CPU{}", cfg.device,
               cfg.threads, cfg.threads == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s");
  // The token never reaches the data plane: the attempt's key does (control/proof.h).
  const comm::JobIdentity job{s.info.job_id, s.info.attempt, s.info.data_key};
  TestHold().before_data_plane(s.info.rank);
  std::unique_ptr<comm::ProcessGroup> comm;
  {  // the verdict ends the set-up's waits too, not only the collectives'
    comm::AbortSignal setup_abort;
    Attached<comm::AbortSignal> attached(s.hb, &setup_abort);
    comm = train::connect_process_group(s.client, s.info.rank, s.info.world_size, job, cfg,
                                        s.data.addr, "comm", &setup_abort);
  }
  spdlog::info("data plane connected: {} transport, {} ranks", comm->transport_name(),
               comm->size());
  s.plane.comm = std::move(comm);
  s.plane.attached.emplace(s.hb, s.plane.comm.get());  // the heartbeat may abort it from now on
  std::optional<train::DistributedTrainer>& dt = s.plane.dt;
  if (s.plane.kept) {  // a survivor: the state it holds, in its new place; a newcomer: none yet
    if (s.plane.kept->holds_state())
      spdlog::info("going on from step {} as rank {} of {}", s.plane.kept->steps_done(),
                   s.info.rank, s.info.world_size);
    else
      spdlog::info("taking the state from the live ranks as rank {} of {}", s.info.rank,
                   s.info.world_size);
    s.plane.kept->set_world(s.info.rank, s.info.world_size, cfg);
    dt.emplace(s.plane.kept, s.plane.comm);  // hands the trainer back if the re-form fails
  } else {
    dt.emplace(cfg, s.plane.comm);
  }

  if (const auto& copy = dt->state_copy(); copy.bytes > 0)
    spdlog::info(
        "the group took the state of step {} from {} live rank{}: {:.1f} MB in {:.3f} s ({:.0f} "
        "MB/s), checked in {:.3f} s",
        dt->trainer().steps_done(), copy.sources, copy.sources == 1 ? "" : "s", copy.bytes / 1e6,
        copy.seconds, copy.bytes / 1e6 / std::max(copy.seconds, 1e-9), copy.check_seconds);
  s.client.validate(fingerprint(*dt, cfg), Millis(cfg.dist.timeout_ms));
  s.client.barrier("start", Millis(cfg.dist.timeout_ms));

  train::Trainer& trainer = dt->trainer();
  if (s.info.rank == 0) {
    if (s.options.on_start) s.options.on_start(trainer.config(), trainer.model());
    std::printf("%d ranks, %lld steps (%lld per epoch, %lld samples), %s DDP\n", s.info.world_size,
                static_cast<long long>(trainer.total_steps()),
                static_cast<long long>(trainer.steps_per_epoch()),
                static_cast<long long>(trainer.train_set().size()), cfg.dist.ddp.c_str());
    std::fflush(stdout);
  }
  train::LoopHooks hooks = dt->loop_hooks();
  hooks.step.on_phase = [&s, timing = hooks.step.on_phase](int64_t step, const char* phase) {
    if (timing) timing(step, phase);  // the GPU's phase marks (DistributedTrainer)
    s.board.set(step, phase);
    if (s.hb.stopping()) throw comm::AbortedError(s.hb.stop_reason()->message);
  };
  s.board.set_total_steps(trainer.total_steps());
  hooks.on_step = [&s, &dt, hold = TestHold()](const train::StepResult& r) {
    perf::StepMetrics m = dt->metrics(r);
    m.clock_offset_ns = s.hb.clock_offset_ns();
    s.metrics.push(m);
    hold.after_step(r.step, s.info.rank);
  };
  hooks.on_eval = [&s](int64_t step, const train::EvalResult& e) {
    perf::StepMetrics m;
    m.rank = s.info.rank;
    m.step = step;
    m.eval = true;
    m.eval_loss = e.loss;
    m.eval_accuracy = e.accuracy;
    m.eval_sample = e.sample;
    s.metrics.push(m);
  };
  const train::TrainSummary summary = train::run_training(trainer, hooks);
  s.board.set(trainer.total_steps(), "done");
  return summary;
}

// When the data plane failed at a peer (its connection closed or broke, or
// its process exited), tells the coordinator what was seen: with what it
// knows of that peer it names the rank that died, or the link that broke
// between two live ranks. The verdict, if it is known already, is handed to
// the heartbeat.
void report_peer_fault(CoordinatorClient& client, Heartbeat& hb, const std::exception& e) {
  const auto* pe = dynamic_cast<const comm::PeerError*>(&e);
  if (!pe || pe->peer() < 0 || pe->fault() == comm::PeerFault::kUnknown) return;
  std::string detail = pe->what();
  detail = detail.substr(0, detail.find('\n'));  // the line, without the hint and the history
  try {
    hb.heard(client.report_peer_fault(pe->peer(), pe->fault(), detail, 5s));
  } catch (const CoordinatorError& ce) {
    spdlog::debug("could not report the lost connection to rank {}: {}", pe->peer(), ce.what());
  }
}

bool waits_on_verdict(const std::exception& e) {
  if (dynamic_cast<const comm::CommError*>(&e)) return true;  // a peer died, or is stuck
  // ABORTED (the job failed while we waited), a session of an attempt that
  // ended (FAILED_PRECONDITION), unreachable: the heartbeat will tell.
  if (const auto* c = dynamic_cast<const CoordinatorError*>(&e))
    return c->code() == static_cast<int>(grpc::StatusCode::ABORTED) ||
           c->code() == static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION) || c->unreachable();
  return false;
}

// Connects to the coordinator and joins the job: this rank's place in it.
JoinInfo join_job(const WorkerOptions& o, CoordinatorClient& client, const std::string& host,
                  int want_rank, const DataAddress& data, bool ready) {
  spdlog::info("joining job '{}' at {} as host {}{}", o.job_id, o.coordinator, host,
               want_rank >= 0 ? str(", rank ", want_rank) : std::string());
  // A port that speaks another protocol (the dashboard's, say) is named at
  // once; gRPC alone would retry it until the connect timeout.
  // (With TLS the handshake's own failure names the other protocol.)
  if (const std::string other =
          o.tls ? "" : probe_other_protocol(o.coordinator, std::min<Millis>(o.connect_timeout, 5s));
      !other.empty())
    throw InputError(
        str("--coordinator ", o.coordinator, " is not a microddp coordinator: ", other,
            ". Give the address the coordinator printed (\"start each worker with: ...\"), "
            "not its dashboard's"));
  client.wait_connected(o.connect_timeout);
  const JoinInfo info = client.join({host, data.addr, o.device, want_rank, o.join_timeout, ready});
  if (info.prepare) return info;  // no rank yet
  if (o.expected_world_size > 0 && info.world_size != o.expected_world_size) {
    const std::string why =
        str("srun started ", o.expected_world_size, " tasks (SLURM_NTASKS) but the job at ",
            o.coordinator, " has --world-size ", info.world_size,
            ": start the coordinator with --world-size $SLURM_NTASKS");
    client.leave(false, why, 3s);
    throw InputError(why);
  }
  const auto level = spdlog::get_level();
  log::init(str("rank ", info.rank));
  spdlog::set_level(level);
  spdlog::info("rank {} of {} in job '{}'{}; data plane address {} ({})", info.rank,
               info.world_size, info.job_id,
               info.attempt > 0 ? str(", attempt ", info.attempt) : std::string(), data.addr,
               data.how);
  return info;
}

// After this rank's training threw `e`: why it stopped. A collective that
// failed here is usually the echo of a fault elsewhere (a peer died: the
// socket closed). Say what was seen of the peer, then wait for the
// coordinator's verdict, which names the rank at fault, rather than blaming
// this one (none: this rank's own error, or the coordinator said nothing).
std::optional<StopReason> verdict_after(Session& s, const std::exception& e) {
  std::optional<StopReason> reason = s.hb.stop_reason();
  if (!reason) report_peer_fault(s.client, s.hb, e);
  reason = s.hb.stop_reason();
  if (!reason && waits_on_verdict(e))
    reason = s.hb.wait_stop_reason(s.info.heartbeat_timeout + 2 * s.info.heartbeat_interval + 1s);
  return reason;
}

// Whether this rank's attempt ended in a re-form that it survives (Notes
// [Shrinking] and [Healing] in coordinator/job.cc): the job shrinks and the
// rank at fault is another, or it grows. It then leaves the attempt keeping
// its trainer (the coordinator re-forms the next one from the survivors,
// and the newcomers) and joins again.
std::unique_ptr<train::Trainer> survive(Session& s, const std::optional<StopReason>& reason) {
  if (!reason || !reason->restart() ||
      !control::parse_job_config(s.info.job_config_json).survivors_train_on())
    return nullptr;
  const int at_fault = reason->status.failed_rank();
  const bool grows = reason->status.verdict.cause == control::Cause::kGrow;
  if (!grows && (at_fault < 0 || at_fault == s.info.rank)) return nullptr;
  s.metrics.flush(1s);  // the steps this attempt completed
  s.metrics.stop();
  s.hb.stop();
  std::unique_ptr<train::Trainer> t = s.plane.close_keeping_trainer();
  if (t) spdlog::warn("{}; this rank trains on with the others", reason->message);
  return t;
}

// This rank stops after `e`, for `reason` (verdict_after's): metrics
// delivered, its Leave, the data plane closed. Always throws: RestartError
// when this rank's attempt ended, else the verdict's line or this rank's
// own error.
[[noreturn]] void stop_after(Session& s, const std::exception& e, const std::string& host,
                             std::optional<StopReason> reason) {
  const std::string mine = e.what();
  const bool reachable = !(reason && reason->coordinator_lost);
  const bool restart = reason && reason->restart();
  spdlog::debug("stopping after: {}", mine);
  // The steps up to the checkpoint are kept: deliver what there is (an
  // attempt that ended may still deliver until the next one forms).
  if (reachable) s.metrics.flush(1s);
  s.metrics.stop();
  s.hb.stop();
  spdlog::debug("metrics and heartbeat stopped");
  if (reachable && !restart) {
    try {
      s.client.leave(false, reason ? reason->message : mine, 3s);
    } catch (const std::exception&) {
    }
  }
  s.plane.close();
  if (restart) throw control::RestartError(reason->message);
  throw Error(reason ? reason->message : str("rank ", s.info.rank, " (host ", host, "): ", mine));
}

// This rank finished, but the job may have failed elsewhere meanwhile, or
// restarted (then this rank is needed in the next attempt); else rank 0
// says how training went.
void after_training(const JoinInfo& info, const control::JobStatus& after,
                    const train::TrainSummary& summary) {
  if (after.state == control::State::kRestarting)
    throw control::RestartError(
        str("this rank finished, but its attempt ended: ", after.verdict.message));
  if (after.state == control::State::kFailed) throw Error("the job failed: " + after.failure());
  if (info.rank == 0) {
    std::printf("done: %lld steps in %.1f s (%.0f samples/s), final train loss %.4f",
                static_cast<long long>(summary.steps), summary.seconds, summary.samples_per_s,
                summary.final_loss);
    if (summary.eval.accuracy >= 0)
      std::printf(", test accuracy %.2f%%", summary.eval.accuracy * 100);
    std::printf("\n");
    std::fflush(stdout);
  }
  if (!summary.lost_records.empty())
    throw control::RecordsLostError("rank 0 finished, but " + summary.lost_records);
}

// What one attempt leaves to the next in this process: nothing (the job
// ended for this rank), or the trainer to join the next with: a survivor's,
// with its state and rank, or a newcomer's, prepared.
struct Survivor {
  std::unique_ptr<train::Trainer> trainer;
  int rank = -1;  // in the attempt that ended: asked for again, to keep the ranks' order
};

// A newcomer to a running job (--on-failure heal, Note [Healing] in
// coordinator/job.cc): its model and optimiser built from the job's config
// before it joins again, so that the job pauses for the copy of the state
// alone. It holds no state until it took the live ranks'.
Survivor prepare(const WorkerOptions& o, const JoinInfo& info) {
  spdlog::info("the job runs already: building the model before joining it (--on-failure heal)");
  const train::TrainConfig cfg = rank_config(info, o);
  auto trainer = std::make_unique<train::Trainer>(cfg, info.world_size - 1, info.world_size);
  trainer->set_holds_state(false);
  return {std::move(trainer), -1};
}

// Joins the job (its next attempt, for a survivor holding `kept`) and
// trains in it: returns normally when the job is done for this rank, or a
// Survivor when the attempt ended in a shrink this rank outlived; throws
// when this rank stops.
Survivor run_attempt(const WorkerOptions& o, CoordinatorClient& client, const std::string& host,
                     int want_rank, const DataAddress& data, Signals* signals,
                     std::unique_ptr<train::Trainer> kept) {
  const JoinInfo info = join_job(o, client, host, want_rank, data, kept != nullptr);
  if (info.prepare) return prepare(o, info);
  TestHold().after_join(info.rank);

  ProgressBoard board;
  Heartbeat hb(client, board, {info.heartbeat_interval, info.heartbeat_timeout});
  hb.start();
  // Open from here until after Leave (destroyed last): the coordinator sees
  // this process go the moment it dies, and pushes the job's verdict at once.
  JobWatch watch(client, [&hb](const control::JobStatus& status) { hb.heard(status); });
  Armed armed(signals, &hb, info.rank);
  MetricsStreamer metrics(client, {.call_deadline = info.heartbeat_timeout + 5s});
  metrics.start();
  DataPlane plane;
  plane.kept = std::move(kept);
  Session session{o, client, info, data, board, hb, metrics, plane};

  train::TrainSummary summary;
  control::JobStatus after;
  try {
    summary = train_rank(session);
    if (!metrics.flush(info.heartbeat_timeout + 5s))
      spdlog::warn("some metrics records could not be delivered to the coordinator");
    metrics.stop();
    hb.stop();
    after = client.leave(true, "", o.call_timeout);
    plane.close();
  } catch (const std::exception& e) {
    std::optional<StopReason> reason = verdict_after(session, e);
    if (auto t = survive(session, reason)) return {std::move(t), info.rank};
    stop_after(session, e, host, std::move(reason));
  }
  after_training(info, after, summary);
  return {};
}

}  // namespace

void run_worker(const WorkerOptions& o) {
  std::optional<Signals> signals;
  if (o.handle_signals) signals.emplace();
  const std::string host = hostname();
  const DataAddress data = choose_data_address(o.coordinator, o.data_addr, o.iface);
  CoordinatorClient client({o.coordinator, o.job_id, o.token, o.call_timeout, o.tls});
  Survivor s{nullptr, requested_rank()};
  do {
    s = run_attempt(o, client, host, s.rank, data, signals ? &*signals : nullptr,
                    std::move(s.trainer));
  } while (s.trainer);
}

}  // namespace mddp::worker
