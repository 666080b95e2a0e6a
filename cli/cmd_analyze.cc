// `microddp analyze RUN_DIR`: what a run's metrics log says about where its
// time went and what limits it (core/perf/analysis.h; docs/analyze.md).
// Prints a table (or --json), and writes a self-contained HTML report with
// plots (cli/analyze_report.h) to RUN_DIR/report.html or --report PATH.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/analyze_report.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/common/check.h"
#include "core/common/strings.h"
#include "core/perf/analysis.h"

namespace mddp::cli {
namespace {

struct AnalyzeFlags {
  std::string run_dir, report, fit_file, transport, algorithm;
  int64_t batch = 0;
  bool json = false, no_report = false;
  perf::AnalyzeOptions options;
};

std::string bytes_str(double b) {
  if (b >= 1024.0 * 1024) return str(std::round(b / 1024 / 1024 * 100) / 100, " MiB");
  if (b >= 1024.0) return str(std::round(b / 1024 * 10) / 10, " KiB");
  return str(static_cast<long long>(b), " B");
}

const char* phase_label(const std::string& name) {
  if (name == "exposed_comm") return "exposed comm";
  if (name == "total_comm") return "total comm *";
  return name.c_str();
}

// The hierarchical all-reduce's two levels (LevelSplit).
void print_levels(const perf::LevelSplit& l) {
  const double total = l.host_ms + l.cross_host_ms;
  const auto share = [&](double v) { return total > 0 ? 100 * v / total : 0.0; };
  std::printf(
      "\nhierarchical all-reduce, per step (mean over ranks, %lld traced steps; %d hosts%s):\n",
      static_cast<long long>(l.traced_steps), l.hosts,
      l.ranks_per_host ? str(" x ", l.ranks_per_host, " ranks").c_str() : "");
  std::printf("  within hosts  %9.3f ms (%5.1f%%)", l.host_ms, share(l.host_ms));
  if (l.predicted_host_ms > 0)
    std::printf("   predicted %9.3f ms (shm ring fit)", l.predicted_host_ms);
  std::printf("\n  across hosts  %9.3f ms (%5.1f%%), %s sent between hosts", l.cross_host_ms,
              share(l.cross_host_ms), bytes_str(l.cross_host_bytes).c_str());
  if (l.predicted_cross_host_ms > 0)
    std::printf("   predicted %9.3f ms (tcp ring fit)", l.predicted_cross_host_ms);
  std::printf("\n");
}

// Each link's rate as the all-reduces saw it (perf::LinkRate), slowest
// first; the median beside them, since a slow link is slow against the rest.
void print_links(const std::vector<perf::LinkRate>& links) {
  if (links.empty()) return;
  std::vector<double> rates;
  for (const auto& l : links) rates.push_back(l.gbps());
  const double median = perf::summarize(rates).median;
  std::printf(
      "\nlinks, as the traced steps' transfers waited on them (slowest first; median %.3f "
      "GB/s):\n",
      median);
  constexpr std::size_t kShown = 6;
  for (std::size_t i = 0; i < std::min(kShown, links.size()); ++i) {
    const auto& l = links[i];
    std::printf("  rank %d -> rank %d  %9.3f GB/s  (%s in %lld transfers, waited %.1f ms)\n",
                l.from, l.to, l.gbps(), bytes_str(static_cast<double>(l.bytes)).c_str(),
                static_cast<long long>(l.transfers), l.wait_ms);
  }
  if (links.size() > kShown)
    std::printf("  ... %zu more (--json has them all)\n", links.size() - kShown);
}

// What the run was: its size, its steps, its job config and its hosts.
void print_run(const perf::Analysis& a) {
  const auto& c = a.config;
  std::printf(
      "microddp analyze %s: %d ranks, %lld training steps in the log, %lld complete steps analysed "
      "(first %lld skipped as warm-up)\n",
      a.dir.c_str(), c.world_size, static_cast<long long>(a.steps_in_log),
      static_cast<long long>(a.steps_used), static_cast<long long>(a.warmup_skipped));
  std::printf(
      "job: ddp %s, transport %s%s, algorithm %s, compress %s, precision %s, global batch %s  "
      "[%s]\n",
      c.ddp.empty() ? "?" : c.ddp.c_str(), c.transport.empty() ? "?" : c.transport.c_str(),
      c.transport_inferred ? " (inferred)" : "", c.algorithm.c_str(),
      c.compress.empty() ? "?" : c.compress.c_str(),
      c.precision.empty() ? "?" : c.precision.c_str(),
      c.global_batch ? std::to_string(c.global_batch).c_str() : "?", c.source.c_str());
  if (std::any_of(a.hosts.begin(), a.hosts.end(), [](const auto& h) { return h.cpus_known(); })) {
    std::printf("hosts (compute threads vs the CPUs its ranks may use):\n");
    for (const auto& h : a.hosts)
      std::printf("  %s%s\n", h.describe().c_str(), h.oversubscribed() ? "  OVERSUBSCRIBED" : "");
  }
  if (perf::oversubscribed(a))
    std::printf(
        "\nWARNING: oversubscribed: a host runs more compute threads than it has CPUs, so its "
        "ranks take turns;\n"
        "the exposed comm, all-reduce and straggler figures below are inflated by that CPU sharing "
        "(see the verdict).\n");
}

// The step's phases: mean, median, p95, share, the spread over ranks.
void print_phases(const perf::Analysis& a) {
  std::printf("\n%-14s %9s %9s %9s %7s   %-22s %s\n", "phase", "mean ms", "median", "p95", "share",
              "rank means (min..max)", "slowest");
  for (const auto& p : a.phases) {
    const auto [lo, hi] = std::minmax_element(p.rank_mean.begin(), p.rank_mean.end());
    const std::string spread =
        str(std::round(*lo * 1000) / 1000, "..", std::round(*hi * 1000) / 1000);
    std::printf("%-14s %9.3f %9.3f %9.3f %6.1f%%   %-22s rank %d\n", phase_label(p.name),
                p.all.mean, p.all.median, p.all.p95, 100 * p.share, spread.c_str(), p.slowest_rank);
  }
  std::printf(
      "(* on the progress thread, mostly hidden behind backward; not part of the step's sum)\n");
}

// Communication per step, compression and throughput.
void print_communication(const perf::Analysis& a) {
  std::printf(
      "\ncommunication: exposed %.3f ms/step (%.1f%% of the step), total %.3f ms/step (%.1f%%), "
      "overlap %.1f%%, "
      "%s all-reduced per step\n",
      a.phases[perf::kExposedComm].all.mean, 100 * a.exposed_comm_share,
      a.phases[perf::kTotalComm].all.mean, 100 * a.total_comm_share, 100 * a.overlap,
      bytes_str(a.comm_bytes_per_step).c_str());
  if (a.grad_bytes_per_step > 0)
    std::printf(
        "compression: %s of fp32 gradients per step travel as %s (ratio %.1fx); each rank sent %s "
        "per step\n",
        bytes_str(a.grad_bytes_per_step).c_str(), bytes_str(a.comm_bytes_per_step).c_str(),
        a.compression_ratio(), bytes_str(a.sent_bytes_per_step).c_str());
  if (a.samples_per_s > 0)
    std::printf("throughput: %.0f samples/s (global batch / mean step time)\n", a.samples_per_s);
  if (a.tokens_per_s > 0) std::printf("tokens: %.0f tokens/s\n", a.tokens_per_s);
}

// The all-reduces by size, measured and as the alpha-beta fit predicts them.
void print_buckets(const perf::Analysis& a) {
  if (a.buckets.empty()) return;
  std::printf("\nall-reduces (time: the shortest span across ranks; busbw = bytes/t x 2(n-1)/n)\n");
  std::printf("%-11s %8s %-12s %9s %9s %10s %12s %12s %9s\n", "size", "per step", "algo",
              "median ms", "p95 ms", "busbw GB/s", "predicted ms", "pred. busbw", "meas/pred");
  for (const auto& b : a.buckets) {
    std::printf("%-11s %8.2f %-12s %9.3f %9.3f %10.3f",
                bytes_str(static_cast<double>(b.bytes)).c_str(), b.per_step, b.algorithm.c_str(),
                b.measured_ms.median, b.measured_ms.p95, b.busbw_gbps);
    if (b.fit)
      std::printf(" %12.3f %12.3f %9.2f\n", b.predicted_ms, b.predicted_busbw_gbps,
                  b.predicted_ms > 0 ? b.measured_ms.median / b.predicted_ms : 0.0);
    else
      std::printf(" %12s %12s %9s\n", "-", "-", "-");
  }
  for (const auto& b : a.buckets)
    if (b.fit) {
      std::printf("fit: %s %s on %d ranks: alpha %.2f us, beta %.3f GB/s (r2 %.3f)\n",
                  b.fit->transport.c_str(), b.fit->algorithm.c_str(), b.fit->world_size,
                  b.fit->link.alpha_s * 1e6, b.fit->link.beta_Bps * 1e-9, b.fit->r2);
      break;
    }
  if (a.predicted_comm_ms_per_step > 0)
    std::printf("predicted total comm %.3f ms/step vs measured %.3f ms/step\n",
                a.predicted_comm_ms_per_step, a.phases[perf::kTotalComm].all.mean);
}

// The ranks that were late, how often and in which phase.
void print_stragglers(const perf::Analysis& a) {
  if (a.config.world_size <= 1) return;
  const auto& s = a.stragglers;
  std::printf(
      "\nstragglers (first bucket ready >= %.2f ms after the median rank's), over %lld "
      "steps:%s\n",
      a.min_late_ms, static_cast<long long>(s.steps), s.ranks.empty() ? " none" : "");
  for (const auto& r : s.ranks) {
    const std::string phases = join(
        r.by_phase, ", ", [](const auto& entry) { return str(entry.first, " ", entry.second); });
    std::printf("  rank %d late in %lld steps (%.1f%%), %.3f ms in all; by phase: %s\n", r.rank,
                static_cast<long long>(r.late_steps),
                s.steps ? 100.0 * r.late_steps / s.steps : 0.0, r.late_ms_total, phases.c_str());
  }
  if (s.worst) std::printf("  worst: rank %d, %s\n", s.worst->rank, s.worst->phase.c_str());
}

// The bottleneck verdict, its evidence and advice; the notes.
void print_verdict(const perf::Analysis& a, const std::string& report) {
  std::printf("\nverdict: %s\n", a.verdict.kind.c_str());
  if (a.verdict.by_shares != a.verdict.kind)
    std::printf("  (by the step's shares alone: %s, measured under CPU sharing)\n",
                a.verdict.by_shares.c_str());
  for (const auto& e : a.verdict.evidence) std::printf("  evidence: %s\n", e.c_str());
  for (const auto& e : a.verdict.advice) std::printf("  advice:   %s\n", e.c_str());
  for (const auto& n : a.notes) std::printf("note: %s\n", n.c_str());
  if (!report.empty()) std::printf("report: %s\n", report.c_str());
}

void print_text(const perf::Analysis& a, const std::string& report) {
  print_run(a);
  print_phases(a);
  print_communication(a);
  print_buckets(a);
  if (a.levels) print_levels(*a.levels);
  print_links(a.links);
  print_stragglers(a);
  print_verdict(a, report);
}

// The job's restarts (metrics.jsonl's "restart" and "resume" lines): why
// each attempt ended, and where the next resumed.
nlohmann::json restarts_json(const std::vector<perf::RestartEvent>& restarts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : restarts)
    out.push_back({{"attempt", r.attempt},
                   {"cause", r.cause},
                   {"rank", r.rank},
                   {"host", r.host},
                   {"message", r.message},
                   {"resumed_from_step", r.resumed_from_step},
                   {"steps_lost", r.steps_lost},
                   {"from_world_size", r.from_world_size},
                   {"world_size", r.world_size},
                   {"shrink", r.shrink},
                   {"grow", r.grow}});
  return out;
}

void print_restarts(const std::vector<perf::RestartEvent>& restarts) {
  if (restarts.empty()) return;
  std::printf("\nrestarts: %zu (the records the restarts superseded are left out above)\n",
              restarts.size());
  for (const auto& r : restarts) {
    std::printf("  attempt %d: %s; %s from step %lld, %lld step%s lost", r.attempt,
                r.message.c_str(),
                r.shrink || r.grow ? "the survivors went on in their processes" : "resumed",
                static_cast<long long>(r.resumed_from_step), static_cast<long long>(r.steps_lost),
                r.steps_lost == 1 ? "" : "s");
    if (r.world_size > 0 && r.from_world_size > 0 && r.world_size != r.from_world_size)
      std::printf("; the world size changed from %d to %d ranks (%s)", r.from_world_size,
                  r.world_size,
                  r.grow     ? "--on-failure heal: the newcomers took the state from live ranks"
                  : r.shrink ? "--on-failure shrink"
                             : "--min-nproc");
    std::printf("\n");
  }
}

// The membership log's changes (docs/recovery.md), the failures survived
// and heals among them, and the goodput.
nlohmann::json membership_json(const perf::MetricsEvents& e) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& m : e.membership)
    changes.push_back({{"attempt", m.attempt},
                       {"from_step", m.from_step},
                       {"how", m.how},
                       {"world_size", m.world_size},
                       {"left", m.left},
                       {"joined", m.joined},
                       {"to_first_step_s", m.to_first_step_s}});
  return {{"membership", changes},
          {"goodput", e.goodput.value()},
          {"counted_s", e.goodput.counted_s()},
          {"wall_s", e.goodput.wall_s()}};
}

void print_membership(const perf::MetricsEvents& e) {
  if (e.goodput.wall_s() <= 0) return;
  int left = 0, heals = 0;
  for (const auto& m : e.membership) {
    left += static_cast<int>(m.left.size());
    heals += m.how == "grow";
  }
  std::printf("\ngoodput: %.1f%% (%.1f s of steps that count in %.1f s)", e.goodput.value() * 100,
              e.goodput.counted_s(), e.goodput.wall_s());
  if (e.membership.size() > 1)
    std::printf("; %d rank%s left, %d heal%s", left, left == 1 ? "" : "s", heals,
                heals == 1 ? "" : "s");
  std::printf("\n");
  if (e.membership.size() <= 1) return;
  std::printf("membership (membership.jsonl):\n");
  for (const auto& m : e.membership) {
    std::printf("  from step %lld, attempt %d (%s): %d rank%s", static_cast<long long>(m.from_step),
                m.attempt, m.how.c_str(), m.world_size, m.world_size == 1 ? "" : "s");
    if (!m.left.empty()) std::printf("; left: %s", join(m.left, ", ").c_str());
    if (!m.joined.empty() && m.how != "start")
      std::printf("; joined: %s", join(m.joined, ", ").c_str());
    if (m.how != "start") std::printf("; %.2f s to its first step", m.to_first_step_s);
    std::printf("\n");
  }
}

void run(AnalyzeFlags& args) {
  perf::RunLog run = perf::load_run(args.run_dir);
  // The flags fill in (or override) what job.json says.
  if (!args.transport.empty()) {
    run.config.transport = args.transport;
    run.config.transport_inferred = false;
  }
  if (!args.algorithm.empty()) run.config.algorithm = args.algorithm;
  if (args.batch > 0) run.config.global_batch = args.batch;
  const std::filesystem::path fits =
      args.fit_file.empty() ? perf::default_fit_path() : std::filesystem::path(args.fit_file);
  args.options.fits = perf::load_fits(fits);
  const perf::Analysis a = perf::analyze(run, args.options);

  std::string report;
  if (!args.no_report) {
    report = args.report.empty() ? (std::filesystem::path(args.run_dir) / "report.html").string()
                                 : args.report;
    write_analysis_report(a, report);
  }
  if (args.json) {
    nlohmann::json j = perf::to_json(a);
    j["report"] = report.empty() ? nlohmann::json(nullptr) : nlohmann::json(report);
    j["restarts"] = restarts_json(run.events.restarts);
    j.update(membership_json(run.events));
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_text(a, report);
    print_restarts(run.events.restarts);
    print_membership(run.events);
  }
}

}  // namespace

void register_analyze(CLI::App& app) {
  auto args = std::make_shared<AnalyzeFlags>();
  auto* cmd = app.add_subcommand(
      "analyze", "Where a run's time went and what limits it, from RUN_DIR/metrics.jsonl");
  cmd->add_option("run_dir", args->run_dir, "the --run-dir of a `microddp run` or coordinator")
      ->required();
  cmd->add_flag("--json", args->json, "print the analysis as JSON instead of the table");
  cmd->add_option("--report", args->report,
                  "where to write the HTML report (default RUN_DIR/report.html)");
  cmd->add_flag("--no-report", args->no_report, "do not write the HTML report");
  cmd->add_option("--fit", args->fit_file,
                  "alpha-beta fits from `microddp bench allreduce --fit` (default: the cache)");
  cmd->add_option("--transport", args->transport,
                  "the job's transport, when job.json is absent or says auto")
      ->check(CLI::IsMember({"tcp", "shm", "nccl"}));
  cmd->add_option("--algo", args->algorithm,
                  "the job's all-reduce algorithm (default: job.json, else auto)")
      ->check(
          CLI::IsMember({"auto", "ring", "tree", "naive", "doubling", "direct", "hierarchical"}));
  cmd->add_option("--batch", args->batch,
                  "the job's global batch, for samples/s (default: job.json)")
      ->check(at_least(1));
  cmd->add_option("--warmup", args->options.warmup_steps, "complete steps to skip at the start")
      ->check(at_least(0))
      ->capture_default_str();
  cmd->add_option("--min-late-ms", args->options.min_late_ms,
                  "a rank this much behind the median is late")
      ->check(finite_in(0))
      ->capture_default_str();
  cmd->callback([args] { run(*args); });
}

}  // namespace mddp::cli
