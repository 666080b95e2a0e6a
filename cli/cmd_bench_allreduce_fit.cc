// The driver of `microddp bench allreduce --fit` (see bench_allreduce_fit.h).
//
// Measurement: every (size, transport, algorithm) point is measured once per
// round, the points interleaved inside a round, so a burst of load from
// another process hits neighbouring points of every algorithm alike; the
// median over rounds is what gets fitted. One point = one calibrating
// all-reduce, then as many untimed and timed all-reduces as fit the time
// budget (at most --warmup / --iters), issued back to back and waited for at
// the end, as the plain benchmark does; its time is the slowest rank's mean.
//
// Fit: t = messages * alpha + bytes_per_message / beta by least squares
// (perf::fit_alpha_beta, weighted by 1/t^2: on relative error); r2 (same
// weights) and the largest relative error over the sizes say how well one
// line describes the sweep.
//
// The netns lab (bench/netns_overhead.sh): with --fit-netns, rank r enters
// network namespace r before it connects and binds its TCP listener to the
// r-th --fit-bind address, so the all-reduce crosses the lab's (rate-limited)
// links; the FileStore rendezvous goes through the shared filesystem.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/bench_allreduce_fit.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "cli/split_list.h"
#include "core/comm/communicator.h"
#include "core/common/check.h"
#include "core/common/median.h"
#include "core/common/timer.h"
#include "core/perf/cost_model.h"

namespace mddp::cli {
namespace {

const std::vector<std::string> kAlgorithms = {"ring", "tree", "naive", "doubling"};

std::vector<std::string> transports_of(const FitSweepOptions& s, const FitFlags& f) {
  if (s.transport != "auto") return {s.transport};
  // Across namespaces the point is the network: shared memory would bypass it.
  return f.netns.empty() ? std::vector<std::string>{"tcp", "shm"} : std::vector<std::string>{"tcp"};
}

std::vector<std::string> algorithms_of(const FitSweepOptions& s) {
  return s.algo == "auto" ? kAlgorithms : std::vector<std::string>{s.algo};
}

// Enters /run/netns/NAME (what `ip netns add NAME` made) for this process.
void enter_netns(const std::string& name) {
  const std::string path = "/run/netns/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw InputError(str("--fit-netns: cannot open ", path, ": ", std::strerror(errno),
                         " (is the lab up? deploy/netns_lab.sh up N)"));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    throw InputError(str("--fit-netns: setns(", name, "): ", std::strerror(err), " (needs root)"));
}

// Seconds per all-reduce of `count` floats, the slowest rank's; every rank
// gets the same value.
double time_point(comm::Communicator& c, float* buf, int64_t count, comm::Algorithm algo,
                  const FitFlags& f, const FitSweepOptions& s) {
  auto slowest = [&](double seconds) {
    float t = static_cast<float>(seconds);
    c.all_reduce(&t, 1, comm::DataType::kFloat32, comm::ReduceOp::kMax)->wait();
    return static_cast<double>(t);
  };
  auto run = [&](int k) {
    comm::WorkPtr last;
    for (int i = 0; i < k; ++i)
      last = c.all_reduce(buf, count, comm::DataType::kFloat32, comm::ReduceOp::kSum, algo);
    if (last) last->wait();
  };
  c.barrier()->wait();
  int64_t t0 = now_ns();
  run(1);
  const double one = slowest((now_ns() - t0) * 1e-9);
  // The same iteration count on every rank (they agreed on `one`).
  // Clamped as a double: a long budget over a fast iteration exceeds an int.
  const int iters = static_cast<int>(
      std::clamp(f.budget_s / std::max(one, 1e-7), 2.0, static_cast<double>(std::max(2, s.iters))));
  run(std::min(s.warmup, iters / 2));
  c.barrier()->wait();
  t0 = now_ns();
  run(iters);
  return slowest((now_ns() - t0) * 1e-9 / iters);
}

struct Series {  // one (transport, algorithm): per size, the times of every round
  std::string transport, algorithm;
  std::vector<std::vector<double>> seconds;
  std::size_t comm = 0;  // which communicator (one per transport)
};

// Prints the sweep and the fits and stores them; false when no series could
// be fitted. A series whose timings do not grow with the size (noise swamping
// a short sweep) is reported and left out; the others are still stored.
bool report(const FitFlags& f, const FitSweepOptions& s, int n, std::vector<Series>& series) {
  std::printf("# median of %d interleaved rounds, time per all-reduce (us), slowest rank\n# %12s",
              f.rounds, "size(B)");
  for (const Series& x : series) std::printf(" %12s", (x.transport + "/" + x.algorithm).c_str());
  std::printf("\n");
  for (std::size_t k = 0; k < s.sizes.size(); ++k) {
    std::printf("  %12zu", s.sizes[k] / 4 * 4);
    for (const Series& x : series) std::printf(" %12.1f", median(x.seconds[k]) * 1e6);
    std::printf("\n");
  }
  std::printf(
      "#\n# fit t = messages * alpha + bytes_per_message / beta (least squares on the medians)\n");
  std::printf("# %-9s %-8s %3s %11s %11s %8s %13s\n", "transport", "algo", "n", "alpha(us)",
              "beta(GB/s)", "r2", "max |err| %");
  std::vector<perf::LinkFit> fits;
  nlohmann::json j = {{"nproc", n}, {"rounds", f.rounds}, {"sizes", s.sizes}};
  for (const Series& x : series) {
    std::vector<perf::TimingSample> samples;
    for (std::size_t k = 0; k < s.sizes.size(); ++k)
      samples.push_back({static_cast<double>(s.sizes[k] / 4 * 4), median(x.seconds[k])});
    nlohmann::json js = {{"transport", x.transport}, {"algorithm", x.algorithm}};
    for (std::size_t k = 0; k < s.sizes.size(); ++k)
      js["median_us"].push_back(median(x.seconds[k]) * 1e6);
    perf::AlphaBeta ab;
    try {
      ab = perf::fit_alpha_beta(x.algorithm, n, samples);
    } catch (const InputError& e) {
      std::printf("  %-9s %-8s %3d   not fitted: %s\n", x.transport.c_str(), x.algorithm.c_str(), n,
                  e.what());
      js["error"] = e.what();
      j["series"].push_back(js);
      continue;
    }
    double max_err = 0;
    for (const auto& p : samples)
      max_err = std::max(
          max_err,
          std::abs(perf::allreduce_seconds(x.algorithm, p.bytes, n, ab) - p.seconds) / p.seconds);
    const double r2 = perf::fit_r2(x.algorithm, n, samples, ab);
    fits.push_back({x.transport, x.algorithm, n, ab, r2});
    std::printf("  %-9s %-8s %3d %11.2f %11.3f %8.4f %13.1f\n", x.transport.c_str(),
                x.algorithm.c_str(), n, ab.alpha_s * 1e6, ab.beta_Bps * 1e-9, r2, max_err * 100);
    js.update({{"alpha_us", ab.alpha_s * 1e6},
               {"beta_gbps", ab.beta_Bps * 1e-9},
               {"r2", r2},
               {"max_rel_err", max_err}});
    j["series"].push_back(js);
  }
  const std::size_t unfitted = series.size() - fits.size();
  if (unfitted > 0)
    std::printf(
        "# %zu series not fitted: timings this noisy need more --fit-rounds, a larger "
        "--fit-budget-s or a sweep to larger sizes (-e)\n",
        unfitted);
  if (!fits.empty()) {
    const std::filesystem::path path =
        f.out.empty() ? perf::default_fit_path() : std::filesystem::path(f.out);
    perf::save_fits(path, fits);
    std::printf("# saved %zu fit%s to %s\n", fits.size(), fits.size() == 1 ? "" : "s",
                path.c_str());
  }
  if (!s.json.empty()) {
    std::ofstream out(s.json);
    out << j.dump(2) << "\n";
    if (!out) throw InputError(str("cannot write --json file '", s.json, "'"));
  }
  std::fflush(stdout);
  return !fits.empty();
}

// Zeros: sums of zeros stay finite however many rounds run. The direct
// all-reduce runs on auto's path over a buffer every rank can read (shared
// memory); the others on a private one.
struct Buffers {
  std::vector<float> own;
  std::shared_ptr<void> shared;
  float* of(const Series& x) {
    return x.algorithm == "direct" && shared ? static_cast<float*>(shared.get()) : own.data();
  }
};

void fit_rank(const FitFlags& f, const FitSweepOptions& s, int rank, comm::Store& store) {
  const auto netns = split_list(f.netns), bind = split_list(f.bind);
  if (!netns.empty()) enter_netns(netns[static_cast<std::size_t>(rank)]);
  const std::string host = bind.empty() ? "127.0.0.1" : bind[static_cast<std::size_t>(rank)];
  const comm::JobIdentity job{str("bench-fit-", ::getppid()), 0, ""};
  const std::size_t floats = s.sizes.back() / 4 + 1;
  std::vector<std::unique_ptr<comm::Communicator>> comms;
  Buffers buf{std::vector<float>(floats, 0.0f), nullptr};  // after comms: freed before them
  std::vector<Series> series;
  for (const std::string& t : transports_of(s, f)) {
    comms.push_back(comm::connect(
        store, rank, s.nproc, job, comm::parse_transport(t),
        comm::CommOptions{comm::Algorithm::kAuto, std::chrono::milliseconds(s.timeout_ms)}, host,
        "fit-" + t));
    std::vector<std::string> algos = algorithms_of(s);
    if (t == "shm" && s.algo == "auto" && s.nproc > 1) {
      algos.push_back("direct");
      buf.shared = comms.back()->allocate_shared(floats * sizeof(float));
      if (buf.shared)
        std::fill_n(static_cast<float*>(buf.shared.get()), floats, 0.0f);
      else
        std::fprintf(stderr,
                     "rank %d: no shared memory for the direct all-reduce's buffer: "
                     "its series runs the flat algorithm\n",
                     rank);
    }
    for (const std::string& a : algos)
      series.push_back({t, a, std::vector<std::vector<double>>(s.sizes.size()), comms.size() - 1});
  }
  if (rank == 0) {
    std::printf("# microddp bench allreduce --fit: %d ranks, %zu sizes, %zu series, %d rounds%s\n",
                s.nproc, s.sizes.size(), series.size(), f.rounds,
                netns.empty() ? "" : ", across network namespaces");
    std::fflush(stdout);
  }
  for (int round = 0; round < f.rounds; ++round)
    for (std::size_t k = 0; k < s.sizes.size(); ++k)
      for (Series& x : series) {
        const auto count = static_cast<int64_t>(s.sizes[k] / 4);
        const comm::Algorithm algo =
            x.algorithm == "direct" ? comm::Algorithm::kAuto : comm::parse_algorithm(x.algorithm);
        x.seconds[k].push_back(time_point(*comms[x.comm], buf.of(x), count, algo, f, s));
      }
  const bool fitted = rank != 0 || report(f, s, s.nproc, series);
  for (auto& c : comms) c->barrier()->wait();
  if (!fitted) throw InputError("no series could be fitted; nothing was saved");
}

}  // namespace

std::shared_ptr<FitFlags> add_fit_flags(CLI::App& cmd) {
  auto f = std::make_shared<FitFlags>();
  const char* g = "Fit (alpha-beta)";
  cmd.add_flag("--fit", f->on,
               "measure every algorithm and transport (unless --algo/--transport pick one), fit "
               "alpha and "
               "beta, store the fits")
      ->group(g);
  cmd.add_option("--fit-out", f->out,
                 "where to store the fits (default: $MICRODDP_FIT_FILE or "
                 "~/.cache/microddp/alpha_beta.json)")
      ->group(g);
  cmd.add_option("--fit-rounds", f->rounds, "interleaved rounds; the median is fitted")
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--fit-budget-s", f->budget_s, "time spent per measured point")
      ->check(timeout_seconds())
      ->group(g)
      ->capture_default_str();
  cmd.add_option("--fit-netns", f->netns,
                 "rank r runs in network namespace r of this comma list (needs root)")
      ->group(g);
  cmd.add_option("--fit-bind", f->bind, "rank r's TCP address, a comma list (with --fit-netns)")
      ->group(g);
  return f;
}

void run_allreduce_fit(const FitFlags& f, const FitSweepOptions& s) {
  if (s.backend != "cpu")
    throw InputError(str("--fit measures the CPU transports (tcp, shm); a fit of --backend ",
                         s.backend, " is not implemented: leave --backend out"));
  if (s.nproc < 2) throw InputError(str("--fit needs at least 2 ranks (--nproc), got ", s.nproc));
  if (f.rounds < 1) throw InputError(str("--fit-rounds must be at least 1, got ", f.rounds));
  if (s.sizes.size() < 2)
    throw InputError("--fit needs at least 2 sizes in the sweep (-b, -e, -f)");
  for (std::size_t b : s.sizes)
    if (b < 4) throw InputError("--fit sweeps float32 buffers: -b must be at least 4 bytes");
  for (const auto& [list, flag] :
       {std::pair{f.netns, "--fit-netns"}, std::pair{f.bind, "--fit-bind"}})
    if (!list.empty() && split_list(list).size() != static_cast<std::size_t>(s.nproc))
      throw InputError(
          str(flag, " names ", split_list(list).size(), " entries for ", s.nproc, " ranks"));
  // Fail on a bad fit file now, not after the sweep.
  perf::load_fits(f.out.empty() ? perf::default_fit_path() : std::filesystem::path(f.out));
  const int code =
      run_local_ranks(s.nproc, [&](int rank, comm::Store& store) { fit_rank(f, s, rank, store); });
  if (code != 0)
    throw Error(str("bench allreduce --fit failed (exit code ", code,
                    "); the failing rank's error is above"));
}

}  // namespace mddp::cli
