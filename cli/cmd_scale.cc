// `microddp scale`: the scaling study, measured. Runs the same job with
// `microddp run --nproc N` (a child process per world size: coordinator and
// N workers, exactly what a user runs) for every N of --world-sizes, in two
// regimes (cli/scaling.h):
//   strong: --batch is the global batch, split over N ranks;
//   weak:   --rank-batch per rank, the global batch N times it;
// and reads each run's metrics.jsonl: per step the slowest rank's step time
// (a synchronous step ends for everyone when the last rank ends), the median
// over the steps after --skip warm-up steps. samples/s = global batch /
// that time; speedup and efficiency as in cli/scaling.h. Points are run in
// interleaved rounds (--rounds; strong and weak, every N, then again) and
// the median over rounds is reported, so slow phases of a shared machine
// fall on all points alike.
//
// Writes DIR/scale.json and DIR/scale.html (uPlot, embedded from the
// dashboard's assets: dashboard/assets.h), and each run's log under DIR.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/scaling.h"
#include "core/common/check.h"
#include "core/common/files.h"
#include "core/common/median.h"
#include "core/common/strings.h"
#include "dashboard/assets.h"

namespace mddp::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct ScaleFlags {
  std::string world_sizes = "1,2,4";
  std::string mode = "both";
  int64_t batch = 256, rank_batch = 64;
  int64_t steps = 30, skip = 5;
  int rounds = 1;
  std::string out = "runs/scale";
  std::vector<std::string> job_args;  // forwarded to `microddp run`
};

struct Point {
  Scaling scaling;
  int n;
  int64_t global_batch;
  std::vector<double> step_ms;     // per round: median step of the slowest rank
  std::vector<double> exposed_ms;  // per round: median exposed communication (slowest rank)
  double samples_per_s = 0, speedup = 0, efficiency = 0;
};

// Runs `microddp run ARGS` as a child (our own binary), output to `log`;
// throws with the log's last line when it fails.
void run_child(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(str("fork: ", std::strerror(errno)));
  if (pid == 0) {
    if (!std::freopen(log.c_str(), "w", stdout) || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
      ::_exit(126);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  throw Error(str("`", join(args, " "), "` failed: ", last, " (log: ", log.string(), ")"));
}

// Per step, the slowest rank's step_ms and exposed_comm_ms; medians over the
// steps after `skip`.
std::pair<double, double> read_metrics(const fs::path& path, int64_t skip, int n) {
  std::ifstream in(path);
  if (!in) throw Error(str("no metrics in ", path.string(), " (did the run write its run dir?)"));
  std::map<int64_t, std::pair<double, double>> slowest;
  std::map<int64_t, int> ranks;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("kind", "") != "step" || j.value("step", int64_t{0}) < skip)
      continue;
    auto& s = slowest[j["step"].get<int64_t>()];
    s.first = std::max(s.first, j.value("step_ms", 0.0));
    s.second = std::max(s.second, j.value("exposed_comm_ms", 0.0));
    ++ranks[j["step"].get<int64_t>()];
  }
  std::vector<double> step, exposed;
  for (const auto& [k, v] : slowest)
    if (ranks[k] == n) step.push_back(v.first), exposed.push_back(v.second);
  if (step.empty())
    throw Error(str(path.string(), " has no step with all ", n, " ranks after --skip ", skip,
                    "; raise --steps"));
  return {median(step), median(exposed)};
}

json point_json(const Point& p) {
  const double step = median(p.step_ms), exposed = median(p.exposed_ms);
  return {{"world_size", p.n},
          {"global_batch", p.global_batch},
          {"per_rank_batch", static_cast<double>(p.global_batch) / p.n},
          {"step_ms", step},
          {"step_ms_rounds", p.step_ms},
          {"exposed_comm_ms", exposed},
          {"comm_overhead", step > 0 ? exposed / step : 0.0},
          {"samples_per_s", p.samples_per_s},
          {"speedup", p.speedup},
          {"efficiency", p.efficiency}};
}

// The plot: speedup and efficiency against n, strong and weak, with the ideal.
void write_html(const fs::path& path, const json& result) {
  const auto* js = dashboard::find_asset("vendor/uPlot.iife.min.js");
  const auto* css = dashboard::find_asset("vendor/uPlot.min.css");
  if (!js || !css) throw Error("the uPlot assets are missing from this binary (dashboard/assets)");
  std::ofstream out(path);
  out << "<!doctype html><html><head><meta charset=\"utf-8\"><title>microddp scale</title><style>"
      << css->body << "body{font:14px sans-serif;margin:20px}</style><script>" << js->body
      << "</script></head><body>"
      << "<h2>microddp scale</h2><p id=\"cfg\"></p><div id=\"speedup\"></div><div "
         "id=\"eff\"></div><script>\n"
      << "const R = " << result.dump() << ";\n"
      << R"JS(
const ns = R.world_sizes;
const col = (mode, key) => ns.map(n => { const p = (R[mode] || []).find(q => q.world_size === n); return p ? p[key] : null; });
document.getElementById("cfg").textContent =
  `strong: global batch ${R.batch}; weak: ${R.rank_batch} per rank; ${R.steps} steps, first ${R.skip} skipped; ` +
  `median of ${R.rounds} round(s). Job: microddp run ${R.job_args.join(" ")}`;
const axes = (y) => [{label: "ranks (n)", splits: () => ns}, {label: y}];  // ticks at the measured n
const x = {time: false};
new uPlot({title: "speedup = samples/s(n) / samples/s(1)", width: 720, height: 320, scales: {x}, axes: axes("speedup"),
  series: [{label: "n"}, {label: "ideal", stroke: "#999", dash: [5, 5]},
           {label: "strong", stroke: "#1f77b4", width: 2}, {label: "weak", stroke: "#d62728", width: 2}]},
  [ns, ns, col("strong", "speedup"), col("weak", "speedup")], document.getElementById("speedup"));
new uPlot({title: "efficiency = speedup / n", width: 720, height: 320, scales: {x, y: {range: [0, 1.2]}},
  axes: axes("efficiency"),
  series: [{label: "n"}, {label: "ideal", stroke: "#999", dash: [5, 5]},
           {label: "strong", stroke: "#1f77b4", width: 2}, {label: "weak", stroke: "#d62728", width: 2}]},
  [ns, ns.map(() => 1), col("strong", "efficiency"), col("weak", "efficiency")], document.getElementById("eff"));
</script></body></html>
)JS";
  if (!out) throw Error(str("cannot write ", path.string()));
}

// The flags the study cannot run with; the points it will measure.
std::vector<Point> plan_points(const ScaleFlags& a, const std::vector<int>& sizes) {
  if (a.mode != "strong" && a.mode != "weak" && a.mode != "both")
    throw InputError(str("--mode must be strong, weak or both, got '", a.mode, "'"));
  if (a.batch < 1 || a.rank_batch < 1)
    throw InputError("--batch and --rank-batch must be positive");
  if (a.steps <= a.skip || a.skip < 0)
    throw InputError(
        str("--steps ", a.steps, " must exceed --skip ", a.skip, " (the warm-up steps left out)"));
  if (a.rounds < 1) throw InputError(str("--rounds must be at least 1, got ", a.rounds));
  for (const std::string& f : a.job_args)
    for (const char* own : {"--nproc", "--batch", "--steps", "--run-dir"})
      if (f == own || f.rfind(std::string(own) + "=", 0) == 0)
        throw InputError(str(f,
                             " is set by `microddp scale` itself (see --world-sizes, --batch, "
                             "--rank-batch, --steps)"));
  std::vector<Point> points;
  for (Scaling s : {Scaling::kStrong, Scaling::kWeak}) {
    if (a.mode != "both" && a.mode != scaling_name(s)) continue;
    for (int n : sizes) {
      const int64_t global = s == Scaling::kStrong ? a.batch : a.rank_batch * n;
      points.push_back({s, n, global, {}, {}});
    }
  }
  return points;
}

// Every point once per round, the rounds interleaved: one `microddp run` each.
void measure_points(const ScaleFlags& a, std::vector<Point>& points) {
  for (int round = 0; round < a.rounds; ++round)
    for (Point& p : points) {
      const std::string name = str(scaling_name(p.scaling), "-n", p.n, "-r", round);
      const fs::path dir = fs::path(a.out) / name;
      std::error_code gone;  // a point of an earlier study; another may be removing it too
      fs::remove_all(dir, gone);
      std::vector<std::string> args = {"microddp",  "run",
                                       "--nproc",   std::to_string(p.n),
                                       "--batch",   std::to_string(p.global_batch),
                                       "--steps",   std::to_string(a.steps),
                                       "--run-dir", dir.string(),
                                       "--no-eval"};
      args.insert(args.end(), a.job_args.begin(), a.job_args.end());
      run_child(args, fs::path(a.out) / (name + ".log"));
      const auto [step, exposed] = read_metrics(dir / "metrics.jsonl", a.skip, p.n);
      p.step_ms.push_back(step);
      p.exposed_ms.push_back(exposed);
      std::printf("  round %d %-6s n=%-3d batch %5lld: step %.2f ms\n", round,
                  scaling_name(p.scaling), p.n, static_cast<long long>(p.global_batch), step);
      std::fflush(stdout);
    }
}

// samples/s, speedup and efficiency of every point; the result as JSON.
json scaling_result(const ScaleFlags& a, const std::vector<int>& sizes,
                    std::vector<Point>& points) {
  json result = {{"world_sizes", sizes},  {"batch", a.batch}, {"rank_batch", a.rank_batch},
                 {"steps", a.steps},      {"skip", a.skip},   {"rounds", a.rounds},
                 {"job_args", a.job_args}};
  for (Scaling s : {Scaling::kStrong, Scaling::kWeak}) {
    double base = 0;  // samples/s at the smallest n measured, scaled to n = 1 if that is not 1
    for (Point& p : points) {
      if (p.scaling != s) continue;
      p.samples_per_s = p.global_batch / (median(p.step_ms) * 1e-3);
      if (base == 0) base = p.samples_per_s / p.n;
      p.speedup = speedup(p.samples_per_s, base);
      p.efficiency = efficiency(p.speedup, p.n);
      result[scaling_name(s)].push_back(point_json(p));
    }
  }
  return result;
}

// One line per n, strong and weak side by side.
void print_scaling_table(const std::vector<int>& sizes, const std::vector<Point>& points) {
  std::printf("#\n# %4s | %-58s | %s\n", "", "strong scaling (fixed global batch)",
              "weak scaling (fixed per-rank batch)");
  std::printf("# %4s", "n");
  for (int k = 0; k < 2; ++k)
    std::printf(" | %6s %6s %9s %7s %10s %7s %5s", "batch", "/rank", "step(ms)", "comm",
                "samples/s", "speedup", "eff");
  std::printf("\n");
  for (int n : sizes) {
    std::printf("  %4d", n);
    for (Scaling s : {Scaling::kStrong, Scaling::kWeak}) {
      const auto it = std::find_if(points.begin(), points.end(),
                                   [&](const Point& p) { return p.scaling == s && p.n == n; });
      if (it == points.end()) {
        std::printf(" | %58s", "-");
        continue;
      }
      const double step = median(it->step_ms);
      std::printf(" | %6lld %6lld %9.2f %6.1f%% %10.1f %7.2f %4.0f%%",
                  static_cast<long long>(it->global_batch),
                  static_cast<long long>(it->global_batch / n), step,
                  100 * median(it->exposed_ms) / step, it->samples_per_s, it->speedup,
                  it->efficiency * 100);
    }
    std::printf("\n");
  }
  std::printf(
      "# comm = exposed communication / step; speedup = samples/s(n) / samples/s(1); "
      "eff = speedup / n\n");
  if (sizes.front() != 1)
    std::printf(
        "# (no n=1 run: speedups are against the smallest n, assuming it scaled perfectly)\n");
}

void run_scale(const ScaleFlags& a) {
  const std::vector<int> sizes = parse_world_sizes(a.world_sizes, "--world-sizes");
  std::vector<Point> points = plan_points(a, sizes);
  make_dirs(a.out, "--out");
  std::printf(
      "# microddp scale: world sizes %s, %s; %lld steps (first %lld skipped), %d round(s); logs in "
      "%s\n",
      a.world_sizes.c_str(), a.mode.c_str(), static_cast<long long>(a.steps),
      static_cast<long long>(a.skip), a.rounds, a.out.c_str());
  std::fflush(stdout);
  measure_points(a, points);
  const json result = scaling_result(a, sizes, points);
  print_scaling_table(sizes, points);
  const fs::path json_path = fs::path(a.out) / "scale.json",
                 html_path = fs::path(a.out) / "scale.html";
  std::ofstream(json_path) << result.dump(2) << "\n";
  write_html(html_path, result);
  std::printf("# wrote %s and %s\n", json_path.c_str(), html_path.c_str());
}

}  // namespace

void register_scale(CLI::App& app) {
  auto a = std::make_shared<ScaleFlags>();
  auto* cmd = app.add_subcommand(
      "scale",
      "Scaling study: the same job (`microddp run`) at several world sizes, strong and weak "
      "scaling; "
      "samples/s, speedup, efficiency; JSON and an HTML plot. Other flags go to `microddp run`");
  cmd->add_option("--world-sizes", a->world_sizes, "ranks to run, increasing: 1,2,4")
      ->capture_default_str();
  cmd->add_option("--mode", a->mode, "strong | weak | both")->capture_default_str();
  cmd->add_option("--batch", a->batch, "strong scaling: the global batch, split over the ranks")
      ->transform(whole_number_in(1))
      ->capture_default_str();
  cmd->add_option("--rank-batch", a->rank_batch, "weak scaling: the batch of every rank")
      ->transform(whole_number_in(1))
      ->capture_default_str();
  cmd->add_option("--steps", a->steps, "steps per run")
      ->transform(whole_number_in(1))
      ->capture_default_str();
  cmd->add_option("--skip", a->skip, "first steps left out of the median (warm-up)")
      ->transform(whole_number_in(0))
      ->capture_default_str();
  cmd->add_option("--rounds", a->rounds,
                  "interleaved repetitions of the whole sweep; medians are reported")
      ->transform(whole_number_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("--out", a->out, "directory for scale.json, scale.html and the runs' logs")
      ->capture_default_str();
  cmd->allow_extras();
  cmd->callback([a, cmd] {
    a->job_args = cmd->remaining();
    run_scale(*a);
  });
}

}  // namespace mddp::cli
