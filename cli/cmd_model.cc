// `microddp model`: the what-if calculator of the alpha-beta cost model
// (core/perf/cost_model.h). Given a gradient size, a link (alpha, beta from
// flags or from a fit stored by `microddp bench allreduce --fit`) and a
// compute time, it predicts per world size n:
//
//   t_comm(n)   the all-reduce time of the algorithm (ring: 2(n-1)(a + S/(n b));
//               hierarchical, n = H hosts x L ranks (--ranks-per-host): a ring
//               within hosts over the host link (--host-bandwidth-gbps) plus
//               rings across hosts sharing each host's network link, shown
//               beside the flat ring over the network link)
//   busbw       S / t_comm * 2(n-1)/n, what `bench allreduce` would report
//   c(n)        compute per step and rank: C1/n (strong scaling) or C1 (weak)
//   no overlap  step = c + t_comm (naive DDP: all-reduce after backward)
//   overlap     step = c(1-f) + max(c f, t_comm): the all-reduce hidden behind
//               backward (a fraction f of compute, 2/3 by default: backward
//               does two GEMMs per forward one) - the best bucketing can do
//   overhead    exposed communication / step (the seeds' "comm / total")
//   speedup     throughput(n) / throughput(1); efficiency = speedup / n
//
// `--seeds-table` recomputes the seeds' 1M/5M/20M-parameter table and
// worked examples with their own formula, stating the assumptions they left
// out (see docs/performance.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/scaling.h"
#include "core/common/check.h"
#include "core/perf/cost_model.h"

namespace mddp::cli {
namespace {

using nlohmann::json;

struct ModelArgs {
  double bytes = 0;
  int64_t params = 0;
  std::string world_sizes = "4";
  double bandwidth_gbps = 10,
         latency_ms = 0.1;  // the seeds' defaults (estimate_communication_time)
  std::string algorithm = "ring";
  int ranks_per_host = 0;                                    // hierarchical: L
  double host_bandwidth_gbps = 80, host_latency_ms = 0.002;  // shared memory (docs/allreduce.md)
  double compute_ms = 0;  // per step at n = 1, or per sample with --batch
  int64_t batch = 0;
  std::string scaling = "strong";
  double backward_fraction = 2.0 / 3.0;
  bool use_fit = false;
  std::string fit_file, transport = "tcp";
  double gflops = 100;  // --seeds-table: compute rate per rank
  bool json = false, seeds_table = false;
};

struct Link {
  perf::AlphaBeta ab;
  std::string source;  // "flags" or "fit tcp/ring n=2 (r2 0.999)"
};

perf::AlphaBeta link_from_flags(const ModelArgs& a) {
  return {a.latency_ms * 1e-3, a.bandwidth_gbps * 1e9 / 8};  // Gbit/s -> bytes/s
}

// The stored fit of (transport, algorithm) at world size n, else the one
// measured at the nearest world size: alpha and beta are properties of the
// link and the implementation, so they carry over approximately.
Link link_from_fit(const std::vector<perf::LinkFit>& fits, const ModelArgs& a, int n,
                   const std::string& path) {
  if (auto f = perf::find_fit(fits, a.transport, a.algorithm, n))
    return {f->link, str("fit ", a.transport, "/", a.algorithm, " n=", n)};
  const perf::LinkFit* best = nullptr;
  for (const auto& f : fits)
    if (f.transport == a.transport && f.algorithm == a.algorithm &&
        (!best || std::abs(f.world_size - n) < std::abs(best->world_size - n)))
      best = &f;
  if (!best)
    throw InputError(str("no stored fit for transport ", a.transport, ", algorithm ", a.algorithm,
                         " in ", path, "; run `microddp bench allreduce --fit --nproc ",
                         std::max(2, n),
                         "` first, or give --bandwidth-gbps/--latency-ms instead of --fit"));
  return {best->link,
          str("fit ", a.transport, "/", a.algorithm, " n=", best->world_size, " (nearest)")};
}

// Compute per step at n = 1: the whole global batch (strong) or one rank's
// batch (weak); --batch makes --compute-ms a per-sample figure.
double compute_ms_n1(const ModelArgs& a) {
  return a.batch > 0 ? a.compute_ms * static_cast<double>(a.batch) : a.compute_ms;
}

struct Regime {  // one way of running the step: without or with overlap
  double step_s = 0, overhead = 0, speedup = 0, efficiency = 0;
};

struct Row {
  int n = 1;
  Link link;
  double comm_s = 0, busbw_gbps = 0, compute_s = 0;
  perf::TwoLevelTime levels;  // hierarchical: its two parts ...
  double flat_ring_s = 0;     // ... and the flat ring over the network link
  Regime serial, overlap;
};

bool hierarchical(const ModelArgs& a) {
  return a.algorithm == "hierarchical";
}

// The hierarchical all-reduce's host link: flags, or the shm ring fit at L ranks.
Link host_link(const ModelArgs& a, const std::vector<perf::LinkFit>& fits,
               const std::string& path) {
  if (!a.use_fit) return {{a.host_latency_ms * 1e-3, a.host_bandwidth_gbps * 1e9 / 8}, "flags"};
  ModelArgs shm = a;
  shm.transport = "shm";
  shm.algorithm = "ring";
  return link_from_fit(fits, shm, a.ranks_per_host, path);
}

// step_1: the step at n = 1, where nothing is communicated (the compute alone).
Regime regime(const perf::StepTime& t, double step_1, Scaling scaling, int n) {
  Regime r;
  r.step_s = t.step_s;
  r.overhead = t.overhead();
  r.speedup = speedup_from_steps(scaling, step_1, t.step_s, n);
  r.efficiency = efficiency(r.speedup, n);
  return r;
}

std::vector<Row> predict(const ModelArgs& a, double bytes, const std::vector<int>& sizes) {
  const Scaling scaling = parse_scaling(a.scaling);
  std::vector<perf::LinkFit> fits;
  const auto fit_path =
      a.fit_file.empty() ? perf::default_fit_path() : std::filesystem::path(a.fit_file);
  if (a.use_fit) fits = perf::load_fits(fit_path);
  // Compute per step at n = 1 (the whole global batch, or one rank's batch for weak scaling).
  const double c1 = compute_ms_n1(a) * 1e-3;
  const double f = a.backward_fraction;
  std::vector<Row> rows;
  ModelArgs network = a;  // the link between hosts is measured as a flat ring's
  if (hierarchical(a)) network.algorithm = "ring";
  for (int n : sizes) {
    Row r;
    r.n = n;
    const int hosts = hierarchical(a) ? n / a.ranks_per_host : n;
    // One rank sends nothing: no link to look up (a fit exists only for n >= 2).
    r.link = n == 1      ? Link{{}, "n=1: nothing sent"}
             : a.use_fit ? link_from_fit(fits, network, std::max(2, hosts), fit_path.string())
                         : Link{link_from_flags(a), "flags"};
    if (hierarchical(a)) {
      const Link host = host_link(a, fits, fit_path.string());
      r.levels =
          perf::hierarchical_allreduce_seconds(bytes, hosts, a.ranks_per_host, host.ab, r.link.ab);
      r.comm_s = r.levels.total();
      r.flat_ring_s = perf::allreduce_seconds("ring", bytes, n, r.link.ab);
      r.link.source += ", host link " + host.source;
    } else {
      r.comm_s = perf::allreduce_seconds(a.algorithm, bytes, n, r.link.ab);
    }
    r.busbw_gbps = perf::bus_bandwidth_gbps(bytes, r.comm_s, n);
    if (c1 > 0) {
      r.compute_s = compute_per_rank(scaling, c1, n);
      r.serial = regime(perf::step_time(r.compute_s, r.comm_s, 0), c1, scaling, n);
      r.overlap = regime(perf::step_time(r.compute_s, r.comm_s, f), c1, scaling, n);
    }
    rows.push_back(r);
  }
  return rows;
}

json regime_json(const Regime& r) {
  return {{"step_ms", r.step_s * 1e3},
          {"overhead", r.overhead},
          {"speedup", r.speedup},
          {"efficiency", r.efficiency}};
}

void print_prediction(const ModelArgs& a, double bytes, const std::vector<Row>& rows) {
  const bool compute = rows.front().compute_s > 0;
  if (a.json) {
    json out = {{"algorithm", a.algorithm},
                {"bytes", bytes},
                {"scaling", a.scaling},
                {"compute_ms_n1", compute_ms_n1(a)},
                {"backward_fraction", a.backward_fraction}};
    for (const Row& r : rows) {
      json j = {{"world_size", r.n},
                {"alpha_us", r.link.ab.alpha_s * 1e6},
                {"beta_gbps", r.link.ab.beta_Bps * 1e-9},
                {"link", r.link.source},
                {"allreduce_ms", r.comm_s * 1e3},
                {"busbw_gbps", r.busbw_gbps}};
      if (hierarchical(a)) {
        j["host_ms"] = r.levels.host_s * 1e3;
        j["cross_host_ms"] = r.levels.cross_s * 1e3;
        j["flat_ring_ms"] = r.flat_ring_s * 1e3;
      }
      if (compute) {
        j["compute_ms"] = r.compute_s * 1e3;
        j["no_overlap"] = regime_json(r.serial);
        j["overlap"] = regime_json(r.overlap);
      }
      out["rows"].push_back(j);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("# microddp model: %s all-reduce of %.0f bytes (%.2f MiB, %.3g fp32 parameters)\n",
              a.algorithm.c_str(), bytes, bytes / (1 << 20), bytes / 4);
  std::printf(
      "# ring 2(n-1)(a + S/(n b)); tree 2 ceil(log2 n)(a + S/b); naive 2(n-1)(a + S/b);\n"
      "# doubling (floor(log2 n) + 2 if n is not a power of 2)(a + S/b); busbw = S/t * 2(n-1)/n\n");
  if (hierarchical(a))
    std::printf(
        "# hierarchical, n = H hosts x L = %d ranks: 2(L-1)(a_l + S/(L b_l)) within hosts + "
        "2(H-1)(a + S/(H b)) across;\n# flat ring = the ring over all n ranks on the network "
        "link\n",
        a.ranks_per_host);
  if (compute)
    std::printf(
        "# %s scaling, compute %.3f ms per step at n=1%s; overlap = all-reduce hidden behind "
        "backward (%.0f%% of compute) at best\n",
        a.scaling.c_str(), compute_ms_n1(a),
        a.scaling == "strong" ? ", split over n ranks" : ", the same on every rank",
        a.backward_fraction * 100);
  std::printf("# %4s %9s %9s %13s %11s", "n", "alpha(us)", "beta(GB/s)", "allreduce(ms)",
              "busbw(GB/s)");
  if (hierarchical(a)) std::printf(" %9s %10s %13s", "host(ms)", "cross(ms)", "flat ring(ms)");
  if (compute)
    std::printf(" %11s | %9s %8s %7s %4s | %9s %8s %7s %4s", "compute(ms)", "step(ms)", "overhead",
                "speedup", "eff", "step(ms)", "overhead", "speedup", "eff");
  std::printf("  link\n");
  if (compute) std::printf("# %62s | %-36s | overlap with backward\n", "", "no overlap");
  for (const Row& r : rows) {
    std::printf("  %4d %9.1f %9.3f %13.3f %11.3f", r.n, r.link.ab.alpha_s * 1e6,
                r.link.ab.beta_Bps * 1e-9, r.comm_s * 1e3, r.busbw_gbps);
    if (hierarchical(a))
      std::printf(" %9.3f %10.3f %13.3f", r.levels.host_s * 1e3, r.levels.cross_s * 1e3,
                  r.flat_ring_s * 1e3);
    if (compute) std::printf(" %11.3f", r.compute_s * 1e3);
    if (compute)
      for (const Regime* g : {&r.serial, &r.overlap})
        std::printf(" | %9.3f %7.1f%% %7.2f %4.0f%%", g->step_s * 1e3, g->overhead * 100,
                    g->speedup, g->efficiency * 100);
    std::printf("  %s\n", r.link.source.c_str());
  }
}

// ---- The seeds' table -------------------------------------------------------
//
// The seeds' README: "Communication time ~ (gradient_bytes * 2 * (N-1) / N) /
// bandwidth" and a table of 1M / 5M / 20M parameters (4 / 20 / 80 MB) with
// "~60% / ~40% / ~20%" overhead at 10 Gbit/s. No compute time, batch or N
// is given, so the percentages cannot follow from the formula; below they
// are recomputed under stated assumptions (compute = 6 FLOPs per parameter
// per sample, as for an MLP, at --gflops on a per-rank batch --batch), and
// the compute time each claim would need is shown next to it, with how much
// faster than the gradient that compute would have to grow from row to row.

struct SeedRow {
  const char* name;
  double params;
  double claimed;  // the seeds' overhead
};
constexpr SeedRow kSeedRows[] = {{"Tiny", 1e6, 0.60}, {"Small", 5e6, 0.40}, {"Medium", 20e6, 0.20}};

// The seeds' break-down scenarios (examples/performance.py when_ddp_breaks_down):
// bytes as MB of 2^20, compute ms, Gbit/s; 4 ranks, 0.1 ms latency.
struct Scenario {
  const char* name;
  double mbytes, compute_ms, gbps;
};
constexpr Scenario kScenarios[] = {
    {"Small model", 1, 1, 10}, {"Large model", 1000, 100, 10}, {"Slow network", 100, 50, 1}};

void print_seeds_table(const ModelArgs& a) {
  const int n = parse_world_sizes(a.world_sizes, "--world-size").back();
  const perf::AlphaBeta link = link_from_flags(a);
  const int64_t b = a.batch > 0 ? a.batch : 32;
  json out = {{"world_size", n},
              {"bandwidth_gbps", a.bandwidth_gbps},
              {"latency_ms", a.latency_ms},
              {"per_rank_batch", b},
              {"gflops", a.gflops}};
  if (!a.json) {
    std::printf(
        "# The seeds' table (README 'Typical Results'), recomputed. Assumptions: n = %d ranks, "
        "ring, "
        "%.3g Gbit/s, latency %.3g ms,\n# fp32 gradients (4 bytes/param, MB = 1e6 B), compute = "
        "6 FLOPs x params x %lld samples per rank at %.0f GFLOP/s (an MLP), no overlap.\n",
        n, a.bandwidth_gbps, a.latency_ms, static_cast<long long>(b), a.gflops);
    std::printf("# %-7s %7s %8s %16s %14s %11s %10s %8s %14s\n", "model", "params", "grad MB",
                "seeds' formula ms", "ring a-b ms", "compute ms", "overhead", "claimed",
                "claim needs ms");
  }
  // Row to row, the compute each claim needs grows by needed_growth while the
  // gradient grows by the parameter ratio; the claim needs compute to outgrow
  // the gradient by their quotient (1 would be compute in proportion).
  std::vector<double> needed_growths, grad_growths, faster;  // rows 2.., against the row above
  const SeedRow* prev = nullptr;
  double prev_needed = 0;
  for (const SeedRow& s : kSeedRows) {
    const double bytes = 4 * s.params;
    const double bw_only =
        bytes * 2 * (n - 1) / n / link.beta_Bps;  // the seeds' formula, no latency
    const double ring = perf::allreduce_seconds("ring", bytes, n, link);
    const double compute =
        perf::dense_compute_seconds(s.params, static_cast<double>(b), a.gflops * 1e9);
    const double overhead = perf::step_time(compute, ring, 0).overhead();
    const double needed = perf::compute_for_overhead(ring, s.claimed);
    json row = {{"model", s.name},
                {"params", s.params},
                {"grad_bytes", bytes},
                {"seeds_formula_ms", bw_only * 1e3},
                {"ring_ms", ring * 1e3},
                {"compute_ms", compute * 1e3},
                {"overhead", overhead},
                {"claimed_overhead", s.claimed},
                {"claim_needs_compute_ms", needed * 1e3}};
    if (prev) {
      needed_growths.push_back(needed / prev_needed);
      grad_growths.push_back(s.params / prev->params);
      faster.push_back(needed_growths.back() / grad_growths.back());
      row["claim_needs_compute_growth"] = needed_growths.back();
      row["gradient_growth"] = grad_growths.back();
      row["claim_needs_compute_growth_over_gradient"] = faster.back();
    }
    prev = &s;
    prev_needed = needed;
    out["rows"].push_back(row);
    if (!a.json)
      std::printf("  %-7s %6.0fM %8.0f %16.2f %14.2f %11.2f %9.1f%% %7.0f%% %14.2f\n", s.name,
                  s.params / 1e6, bytes / 1e6, bw_only * 1e3, ring * 1e3, compute * 1e3,
                  overhead * 100, s.claimed * 100, needed * 1e3);
  }
  // The worked example of the seeds' docs/performance.md: 100 MB, 4 GPUs, 10 Gbit/s, 0.1 ms.
  const perf::AlphaBeta ex{1e-4, 10e9 / 8};
  const double ex_dec = perf::allreduce_seconds("ring", 100e6, 4, ex);
  const double ex_bin = perf::allreduce_seconds("ring", 100.0 * (1 << 20), 4, ex);
  const double ex_claim_like = 100e6 / ex.beta_Bps;  // S / beta: what ~0.08 s equals
  out["worked_example"] = {{"claimed_s", 0.08},
                           {"formula_s_1e8_bytes", ex_dec},
                           {"formula_s_100_MiB", ex_bin},
                           {"s_over_beta_s", ex_claim_like}};
  for (const Scenario& s : kScenarios) {
    const double comm =
        perf::allreduce_seconds("ring", s.mbytes * (1 << 20), 4, {1e-4, s.gbps * 1e9 / 8});
    out["scenarios"].push_back({{"name", s.name},
                                {"mbytes", s.mbytes},
                                {"compute_ms", s.compute_ms},
                                {"gbps", s.gbps},
                                {"comm_ms", comm * 1e3},
                                {"comm_over_compute", comm * 1e3 / s.compute_ms},
                                {"comm_over_total", comm * 1e3 / (comm * 1e3 + s.compute_ms)}});
  }
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf(
      "# With compute proportional to parameters (any MLP, any fixed batch), comm and compute grow "
      "together:\n"
      "# the overhead stays about the same at every size; only the latency term (2(n-1) alpha) "
      "makes small\n"
      "# models slightly worse. The claimed fall from 60%% to 20%% needs compute (last column) to "
      "grow\n#");
  for (std::size_t i = 0; i < needed_growths.size(); ++i)
    std::printf("%s %.1fx from %.0fM to %.0fM", i ? " and" : "", needed_growths[i],
                kSeedRows[i].params / 1e6, kSeedRows[i + 1].params / 1e6);
  std::printf(", while the gradient grows");
  for (std::size_t i = 0; i < grad_growths.size(); ++i)
    std::printf("%s %.1fx", i ? " and" : "", grad_growths[i]);
  const auto [fmin, fmax] = std::minmax_element(faster.begin(), faster.end());
  std::printf(
      ":\n# compute would have to grow %.1f-%.1fx faster than the gradient, which the seeds never "
      "state.\n#\n",
      *fmin, *fmax);
  std::printf(
      "# The seeds' worked example (100 MB, 4 GPUs, 10 Gbit/s, 0.1 ms): claimed ~0.08 s; their "
      "formula\n"
      "# 2(n-1)(alpha + S/(n beta)) gives %.4f s (S = 1e8 B) or %.4f s (S = 100 MiB). 0.08 s is "
      "S/beta = "
      "%.4f s:\n# one full buffer over one link, dropping the 2(n-1)/n = 1.5 of the ring and the "
      "latency.\n#\n",
      ex_dec, ex_bin, ex_claim_like);
  std::printf("# The seeds' scenarios (when_ddp_breaks_down: 4 ranks, 0.1 ms, MB = 2^20 B):\n");
  std::printf("# %-13s %8s %11s %8s %10s %13s %11s\n", "scenario", "MB", "compute ms", "Gbit/s",
              "comm ms", "comm/compute", "comm/total");
  for (const json& s : out["scenarios"])
    std::printf("  %-13s %8.0f %11.0f %8.0f %10.1f %12.0f%% %10.1f%%\n",
                s["name"].get<std::string>().c_str(), s["mbytes"].get<double>(),
                s["compute_ms"].get<double>(), s["gbps"].get<double>(), s["comm_ms"].get<double>(),
                s["comm_over_compute"].get<double>() * 100,
                s["comm_over_total"].get<double>() * 100);
  std::printf(
      "# The seeds divide by compute (not by the total) and call all three 'Inefficient' (>50%%): "
      "by their\n"
      "# own formula every scenario is communication-bound, the 'large model' one included.\n");
}

void run_model(const ModelArgs& a) {
  if (a.batch < 0) throw InputError(str("--batch must be positive, got ", a.batch));
  parse_scaling(a.scaling);
  const std::vector<int> sizes = parse_world_sizes(a.world_sizes, "--world-size");
  if (a.seeds_table) return print_seeds_table(a);
  if ((a.bytes > 0) == (a.params > 0))
    throw InputError(
        "give the gradient size: --bytes B or --params N (fp32, 4 bytes each), not both");
  const double bytes = a.bytes > 0 ? a.bytes : 4.0 * static_cast<double>(a.params);
  if (hierarchical(a)) {
    if (a.ranks_per_host < 1)
      throw InputError(
          "--algorithm hierarchical needs --ranks-per-host L (the ranks on each host)");
    for (int n : sizes)
      if (n % a.ranks_per_host != 0)
        throw InputError(str("--world-size ", n,
                             " is not a whole number of hosts of --ranks-per-host ",
                             a.ranks_per_host));
  } else if (a.ranks_per_host > 0) {
    throw InputError("--ranks-per-host applies to --algorithm hierarchical only");
  }
  // Speedup is against n = 1, computed analytically (no communication), so a
  // row for n = 1 is shown only when the list asks for it.
  print_prediction(a, bytes, predict(a, bytes, sizes));
}

}  // namespace

void register_model(CLI::App& app) {
  auto a = std::make_shared<ModelArgs>();
  auto* cmd = app.add_subcommand(
      "model",
      "What-if calculator of the alpha-beta cost model: all-reduce time, step time, overhead, "
      "speedup and efficiency against world size");
  cmd->add_option("--bytes", a->bytes, "gradient bytes all-reduced per step")
      ->check(finite_above(0));
  cmd->add_option("--params", a->params, "parameters (fp32: 4 bytes each), instead of --bytes");
  cmd->add_option("--world-size", a->world_sizes, "ranks, or a list: 2,4,8")->capture_default_str();
  cmd->add_option("--algorithm,--algo", a->algorithm,
                  "ring | tree | naive | doubling | hierarchical")
      ->check(CLI::IsMember({"ring", "tree", "naive", "doubling", "hierarchical"}))
      ->capture_default_str();
  cmd->add_option("--ranks-per-host", a->ranks_per_host,
                  "hierarchical: the ranks on each host, L (world size = hosts x L)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--host-bandwidth-gbps", a->host_bandwidth_gbps,
                  "hierarchical: the link within a host (shared memory), Gbit/s")
      ->check(finite_above(0))
      ->capture_default_str();
  cmd->add_option("--host-latency-ms", a->host_latency_ms, "hierarchical: latency within a host")
      ->check(finite_in(0))
      ->capture_default_str();
  cmd->add_option("--bandwidth-gbps", a->bandwidth_gbps,
                  "link bandwidth in Gbit/s (beta = this / 8 GB/s)")
      ->check(finite_above(0))
      ->capture_default_str();
  cmd->add_option("--latency-ms", a->latency_ms, "latency per message (alpha)")
      ->check(finite_in(0))
      ->capture_default_str();
  cmd->add_option(
         "--compute-ms", a->compute_ms,
         "compute (forward+backward+optimizer) per step at world size 1; per sample with --batch")
      ->check(finite_in(0))
      ->capture_default_str();
  cmd->add_option(
      "--batch", a->batch,
      "samples per step: global (strong) or per rank (weak); makes --compute-ms per sample. "
      "--seeds-table: per-rank batch (default 32)");
  cmd->add_option("--scaling", a->scaling,
                  "strong (fixed global batch) | weak (fixed per-rank batch)")
      ->check(CLI::IsMember({"strong", "weak"}))
      ->capture_default_str();
  cmd->add_option("--backward-fraction", a->backward_fraction,
                  "share of compute that is backward (what an all-reduce can hide behind)")
      ->check(finite_in(0, 1))
      ->capture_default_str();
  cmd->add_flag("--fit", a->use_fit,
                "take alpha and beta from the fits of `bench allreduce --fit`");
  cmd->add_option(
      "--fit-file", a->fit_file,
      "the fits' file (default: $MICRODDP_FIT_FILE or ~/.cache/microddp/alpha_beta.json)");
  cmd->add_option("--transport", a->transport, "the fit's transport: tcp | shm | nccl")
      ->capture_default_str();
  cmd->add_option("--gflops", a->gflops, "--seeds-table: compute rate per rank, GFLOP/s")
      ->check(finite_above(0))
      ->capture_default_str();
  cmd->add_flag("--seeds-table", a->seeds_table,
                "recompute the seeds' 1M/5M/20M-parameter overhead table and worked examples");
  cmd->add_flag("--json", a->json, "print JSON instead of the table");
  cmd->callback([a] { run_model(*a); });
}

}  // namespace mddp::cli
