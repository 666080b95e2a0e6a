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
//   overhead    exposed communication / step (not / compute: a share of the step)
//   speedup     throughput(n) / throughput(1); efficiency = speedup / n
//
// See docs/performance.md.
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

struct ModelFlags {
  double bytes = 0;
  int64_t params = 0;
  std::string world_sizes = "4";
  double bandwidth_gbps = 10, latency_ms = 0.1;  // 10 Gbit/s Ethernet, 0.1 ms per message
  std::string algorithm = "ring";
  int ranks_per_host = 0;                                    // hierarchical: L
  double host_bandwidth_gbps = 80, host_latency_ms = 0.002;  // shared memory (docs/allreduce.md)
  double compute_ms = 0;  // per step at n = 1, or per sample with --batch
  int64_t batch = 0;
  std::string scaling = "strong";
  double backward_fraction = 2.0 / 3.0;
  bool use_fit = false;
  std::string fit_file, transport = "tcp";
  bool json = false;
};

struct Link {
  perf::AlphaBeta ab;
  std::string source;  // "flags" or "fit tcp/ring n=2 (r2 0.999)"
};

perf::AlphaBeta link_from_flags(const ModelFlags& a) {
  return {a.latency_ms * 1e-3, a.bandwidth_gbps * 1e9 / 8};  // Gbit/s -> bytes/s
}

// The stored fit of (transport, algorithm) at world size n, else the one
// measured at the nearest world size: alpha and beta are properties of the
// link and the implementation, so they carry over approximately.
Link link_from_fit(const std::vector<perf::LinkFit>& fits, const ModelFlags& a, int n,
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
double compute_ms_n1(const ModelFlags& a) {
  return a.batch > 0 ? a.compute_ms * static_cast<double>(a.batch) : a.compute_ms;
}

struct Regime {  // one way of running the step: without or with overlap
  double step_s = 0, overhead = 0, speedup = 0, efficiency = 0;
};

struct WhatIfRow {
  int n = 1;
  Link link;
  double comm_s = 0, busbw_gbps = 0, compute_s = 0;
  perf::TwoLevelTime levels;  // hierarchical: its two parts ...
  double flat_ring_s = 0;     // ... and the flat ring over the network link
  Regime serial, overlap;
};

bool hierarchical(const ModelFlags& a) {
  return a.algorithm == "hierarchical";
}

// The hierarchical all-reduce's host link: flags, or the shm ring fit at L ranks.
Link host_link(const ModelFlags& a, const std::vector<perf::LinkFit>& fits,
               const std::string& path) {
  if (!a.use_fit) return {{a.host_latency_ms * 1e-3, a.host_bandwidth_gbps * 1e9 / 8}, "flags"};
  ModelFlags shm = a;
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

std::vector<WhatIfRow> predict(const ModelFlags& a, double bytes, const std::vector<int>& sizes) {
  const Scaling scaling = parse_scaling(a.scaling);
  std::vector<perf::LinkFit> fits;
  const auto fit_path =
      a.fit_file.empty() ? perf::default_fit_path() : std::filesystem::path(a.fit_file);
  if (a.use_fit) fits = perf::load_fits(fit_path);
  // Compute per step at n = 1 (the whole global batch, or one rank's batch for weak scaling).
  const double c1 = compute_ms_n1(a) * 1e-3;
  const double f = a.backward_fraction;
  std::vector<WhatIfRow> rows;
  ModelFlags network = a;  // the link between hosts is measured as a flat ring's
  if (hierarchical(a)) network.algorithm = "ring";
  for (int n : sizes) {
    WhatIfRow r;
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

void print_prediction(const ModelFlags& a, double bytes, const std::vector<WhatIfRow>& rows) {
  const bool compute = rows.front().compute_s > 0;
  if (a.json) {
    json out = {{"algorithm", a.algorithm},
                {"bytes", bytes},
                {"scaling", a.scaling},
                {"compute_ms_n1", compute_ms_n1(a)},
                {"backward_fraction", a.backward_fraction}};
    for (const WhatIfRow& r : rows) {
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
      "# doubling (floor(log2 n) + 2 if n is not a power of 2)(a + S/b); direct 2a + 2(n-1) S/(n "
      "b);\n"
      "# busbw = S/t * 2(n-1)/n\n");
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
  for (const WhatIfRow& r : rows) {
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

void run_model(const ModelFlags& a) {
  if (a.batch < 0) throw InputError(str("--batch must be positive, got ", a.batch));
  parse_scaling(a.scaling);
  const std::vector<int> sizes = parse_world_sizes(a.world_sizes, "--world-size");
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
  auto a = std::make_shared<ModelFlags>();
  auto* cmd = app.add_subcommand(
      "model",
      "What-if calculator of the alpha-beta cost model: all-reduce time, step time, overhead, "
      "speedup and efficiency against world size");
  cmd->add_option("--bytes", a->bytes, "gradient bytes all-reduced per step")
      ->check(finite_above(0));
  cmd->add_option("--params", a->params, "parameters (fp32: 4 bytes each), instead of --bytes")
      ->transform(whole_number_in(1));
  cmd->add_option("--world-size", a->world_sizes, "ranks, or a list: 2,4,8")->capture_default_str();
  cmd->add_option("--algorithm,--algo", a->algorithm,
                  "ring | tree | naive | doubling | direct (one host's shared memory) | "
                  "hierarchical")
      ->check(CLI::IsMember({"ring", "tree", "naive", "doubling", "direct", "hierarchical"}))
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
      "samples per step: global (strong) or per rank (weak); makes --compute-ms per sample");
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
  cmd->add_flag("--json", a->json, "print JSON instead of the table");
  cmd->callback([a] { run_model(*a); });
}

}  // namespace mddp::cli
