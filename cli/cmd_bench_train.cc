// `microddp bench train`: training throughput, single process or N local
// ranks with DDP. Warm-up steps, then timed steps; global samples/s, the
// phase breakdown, overlap, peak RSS and optimiser state per rank. Defaults are the
// benchmark's FullMLP (16 square layers, MSE, SGD), as in bench/README.md.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/bench_train.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "cli/train_flags.h"
#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/perf/step_metrics.h"
#include "core/tensor/device.h"
#include "core/train/distributed.h"

namespace mddp::cli {
namespace {

using nlohmann::json;

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Resident memory now (MB), from /proc/self/statm: what training holds in
// steady state, where the peak also counts what start-up freed again.
double rss_mb() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

// Runs warm-up and timed steps of `step`, returns this rank's measurements.
json time_steps(const BenchTrainFlags& o, const std::function<train::StepResult()>& step,
                const std::function<ddp::SyncStats()>& sync_stats,
                const std::function<void()>& barrier) {
  for (int i = 0; i < o.warmup; ++i) step();
  barrier();
  double data = 0, fwd = 0, bwd = 0, exposed = 0, opt = 0, comm_total = 0;
  const int64_t waits0 = tensor::gpu_host_waits();
  const int64_t t0 = now_ns();
  for (int i = 0; i < o.iters; ++i) {
    const train::StepResult r = step();
    data += r.times.data;
    fwd += r.times.forward;
    bwd += r.times.backward;
    exposed += r.times.sync;
    opt += r.times.optimizer;
    comm_total += sync_stats().total_ms;
  }
  const double n = o.iters;
  // On a GPU: how often a step made the host wait for the GPU (docs/gpu.md).
  const double host_waits = static_cast<double>(tensor::gpu_host_waits() - waits0) / n;
  barrier();
  const double wall_s = (now_ns() - t0) * 1e-9;
  return {{"wall_s", wall_s},
          {"data_ms", data / n},
          {"forward_ms", fwd / n},
          {"backward_ms", bwd / n},
          {"exposed_comm_ms", exposed / n},
          {"total_comm_ms", comm_total / n},
          {"optimizer_ms", opt / n},
          {"overlap", perf::overlap_fraction(exposed, comm_total)},
          {"peak_rss_mb", peak_rss_mb()},
          {"rss_mb", rss_mb()},
          {"host_waits_per_step", host_waits}};
}

// The model's parameters and the optimiser state this rank holds (MiB):
// ZeRO-1 keeps 1/n of the state (docs/ddp.md, docs/transformer.md).
json with_sizes(json j, train::Trainer& t) {
  int64_t state = 0;
  if (const auto* sharded = dynamic_cast<const train::ShardedOptimizer*>(&t.optimizer()))
    state = sharded->state_numel();
  else
    for (const auto& named : t.optimizer().state()) state += named.second.numel();
  j["parameters"] = t.model().num_parameters();
  j["optimizer_state_mb"] = static_cast<double>(state) * 4.0 / (1024.0 * 1024.0);  // fp32
  return j;
}

json run_rank(const train::TrainConfig& cfg, const BenchTrainFlags& o, int rank,
              comm::Store* store) {
  if (o.nproc == 1) {
    train::Trainer t(cfg);
    return with_sizes(time_steps(
                          o, [&] { return t.step(); }, [] { return ddp::SyncStats{}; }, [] {}),
                      t);
  }
  train::DistributedTrainer dt(
      cfg, train::connect_process_group(*store, rank, o.nproc, {"bench-train", 0, ""}, cfg));
  return with_sizes(time_steps(
                        o, [&] { return dt.step(); }, [&] { return dt.ddp().last_stats(); },
                        [&] { dt.comm().barrier()->wait(); }),
                    dt.trainer());
}

}  // namespace

json summarize(const train::TrainConfig& cfg, const BenchTrainFlags& o,
               const std::vector<json>& ranks) {
  double wall = 0;
  json mean = json::object();
  for (const char* k : {"data_ms", "forward_ms", "backward_ms", "exposed_comm_ms", "total_comm_ms",
                        "optimizer_ms", "overlap"}) {
    double s = 0;
    for (const auto& r : ranks) s += r[k].get<double>();
    mean[k] = s / static_cast<double>(ranks.size());
  }
  std::vector<double> rss;
  for (const auto& r : ranks) {
    wall = std::max(wall, r["wall_s"].get<double>());
    rss.push_back(r["peak_rss_mb"].get<double>());
  }
  const double sps = o.iters * cfg.batch * cfg.accumulate / wall;
  json out = {{"samples_per_s", sps},
              {"step_ms", wall * 1e3 / o.iters},
              {"nproc", o.nproc},
              {"ddp", o.nproc > 1 ? cfg.dist.ddp : "none"},
              {"bucket_mb", cfg.dist.bucket_mb},
              {"width", cfg.model.width},
              {"depth", cfg.model.depth},
              {"batch", cfg.batch},
              {"phases_ms", mean},
              {"parameters", ranks.front()["parameters"]},
              {"peak_rss_mb", rss},
              {"ranks", ranks}};
  if (cfg.model.kind == "gpt") {  // a sample is --block tokens
    out["tokens_per_s"] = sps * static_cast<double>(cfg.model.block);
    out["layers"] = cfg.model.layers;
    out["embd"] = cfg.model.embd;
  }
  return out;
}

namespace {

void report(const train::TrainConfig& cfg, const BenchTrainFlags& o, const json& j) {
  const json& mean = j["phases_ms"];
  const double sps = j["samples_per_s"].get<double>(), step_ms = j["step_ms"].get<double>();
  const bool gpt = cfg.model.kind == "gpt";
  std::printf(
      "bench train: %s %s %lld %s %lld, global batch %lld on %d rank(s), %s",
      cfg.model.kind.c_str(), gpt ? "layers" : "width",
      static_cast<long long>(gpt ? cfg.model.layers : cfg.model.width), gpt ? "embd" : "depth",
      static_cast<long long>(gpt ? cfg.model.embd : cfg.model.depth),
      static_cast<long long>(cfg.batch), o.nproc, o.nproc > 1 ? cfg.dist.ddp.c_str() : "no DDP");
  if (o.nproc > 1 && (cfg.dist.ddp == "bucketed" || cfg.dist.ddp == "sharded"))
    std::printf(" (buckets %.3g MiB, first %.3g MiB)", cfg.dist.bucket_mb,
                cfg.dist.first_bucket_mb);
  std::printf("\n  samples/s %.1f   ", sps);
  if (j.contains("tokens_per_s")) std::printf("tokens/s %.0f   ", j["tokens_per_s"].get<double>());
  std::printf("step %.2f ms   (%d warm-up + %d timed steps)\n", step_ms, o.warmup, o.iters);
  std::printf(
      "  per step, mean over ranks (ms): data %.2f  forward %.2f  backward %.2f  exposed comm %.2f "
      " optimizer %.2f\n",
      mean["data_ms"].get<double>(), mean["forward_ms"].get<double>(),
      mean["backward_ms"].get<double>(), mean["exposed_comm_ms"].get<double>(),
      mean["optimizer_ms"].get<double>());
  if (o.nproc > 1)
    std::printf("  all-reduce: total %.2f ms per step, overlap %.0f%% (hidden behind backward)\n",
                mean["total_comm_ms"].get<double>(), mean["overlap"].get<double>() * 100);
  if (tensor::Device::parse(cfg.device).is_cuda()) {
    std::printf("  host waits for the GPU per step, by rank:");
    for (const auto& r : j["ranks"]) std::printf(" %.1f", r["host_waits_per_step"].get<double>());
    std::printf("\n");
  }
  std::printf("  peak RSS per rank (MB):");
  for (const auto& r : j["peak_rss_mb"]) std::printf(" %.0f", r.get<double>());
  std::printf("\n  RSS after the timed steps per rank (MB):");
  for (const auto& r : j["ranks"]) std::printf(" %.0f", r["rss_mb"].get<double>());
  std::printf("\n  optimiser state per rank (MB), of %lld parameters:",
              static_cast<long long>(j["parameters"].get<int64_t>()));
  for (const auto& r : j["ranks"]) std::printf(" %.2f", r["optimizer_state_mb"].get<double>());
  std::printf("\n");
  if (!o.json_path.empty()) std::ofstream(o.json_path) << j.dump(2) << "\n";
}

}  // namespace

json bench_train(const train::TrainConfig& config, const BenchTrainFlags& o) {
  if (o.iters < 1 || o.warmup < 0) throw InputError("--iters must be >= 1 and --warmup >= 0");
  train::TrainConfig cfg = config;
  cfg.steps = o.warmup + o.iters;
  tensor::require_gpu_per_local_rank(cfg.device, o.nproc);
  if (o.nproc == 1) return summarize(cfg, o, {run_rank(cfg, o, 0, nullptr)});
  const std::string dir = make_temp_dir("microddp-bench");
  const std::string out = dir + "/result.json";
  const int rc = run_local_ranks(o.nproc, [&](int rank, comm::Store& store) {
    const json mine = run_rank(cfg, o, rank, &store);
    store.set("bench/result/" + std::to_string(rank), mine.dump());
    if (rank != 0) return;
    std::vector<json> all;
    for (int r = 0; r < o.nproc; ++r)
      all.push_back(
          json::parse(store.get("bench/result/" + std::to_string(r), std::chrono::minutes(10))));
    std::ofstream(out) << summarize(cfg, o, all).dump();
  });
  if (rc != 0) throw Error(str("bench train failed (a rank exited with status ", rc, ")"));
  json j = json::parse(std::ifstream(out));
  std::filesystem::remove_all(dir);
  return j;
}

void register_bench_train(CLI::App& bench) {
  auto cfg = std::make_shared<train::TrainConfig>();
  // The benchmark model: FullMLP, 16 square layers of 1024, MSE, plain SGD.
  cfg->model.width = 1024;
  cfg->model.depth = 16;
  cfg->model.classes = 0;
  cfg->loss = "mse";
  cfg->data.spec = "synthetic-regression";
  cfg->data.synthetic_size = 4096;
  cfg->batch = 256;
  cfg->optim = {.name = "sgd", .lr = 0.01f};
  cfg->eval = false;
  auto o = std::make_shared<BenchTrainFlags>();
  auto* cmd =
      bench.add_subcommand("train", "Training throughput: samples/s, phases, overlap, memory");
  cmd->add_option("--nproc", o->nproc, "ranks (processes on this host); 1 = no DDP")
      ->check(local_ranks())
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed steps first")->capture_default_str();
  cmd->add_option("--iters", o->iters, "timed steps")->capture_default_str();
  cmd->add_option("--json", o->json_path, "also write the results as JSON to this file");
  add_training_flags(*cmd, *cfg);
  add_ddp_flags(*cmd, *cfg);
  cmd->callback([cfg, o] { report(*cfg, *o, bench_train(*cfg, *o)); });
}

}  // namespace mddp::cli
