// `microddp demo collectives`: the collectives sandbox. --nproc ranks (forked
// processes) each print their small tensor before and after every
// collective, one rank at a time so the output reads in rank order, and
// check it against the value worked out by hand (OK / WRONG).
//
//   all_reduce sum   rank r holds [3r+1, 3r+2, 3r+3]; everyone ends with the column sums
//   all_reduce avg   rank r holds [r+1]; everyone ends with (n+1)/2
//   broadcast        rank 0 holds 42, the others 0; everyone ends with 42
//   reduce           rank r holds [r+1]; rank 0 ends with n(n+1)/2
//   scatter          rank 0 holds [10, 20, ..., 10n]; rank r ends with [10(r+1)]
//   gather           rank r holds [r*r]; rank 0 ends with [0, 1, 4, ...]
//   all_gather       rank r holds [r]; everyone ends with [0, 1, ..., n-1]
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "core/comm/communicator.h"
#include "core/common/check.h"

namespace mddp::cli {
namespace {

using comm::DataType;
using comm::ReduceOp;

std::string show(const std::vector<float>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%g", i ? ", " : "", static_cast<double>(v[i]));
    s += buf;
  }
  return s + "]";
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// One step of the demo, printed rank by rank: barriers order the ranks'
// lines (each rank flushes before the next one's turn).
class Stage {
 public:
  Stage(comm::Communicator& c, int& wrong) : comm_(c), wrong_(wrong) {}

  void title(const std::string& text) {
    comm_.barrier()->wait();
    if (comm_.rank() == 0) {
      std::printf("\n== %s ==\n", text.c_str());
      std::fflush(stdout);
    }
  }
  // Prints "rank r: before ... after ... OK" in rank order. An empty `want`
  // means nothing is defined on this rank; `note` says why instead.
  void report(const std::vector<float>& before, const std::vector<float>& after,
              const std::vector<float>& want, const char* note = "") {
    const bool checked = !want.empty();
    const bool ok = !checked || after == want;
    if (!ok) ++wrong_;
    const std::string verdict = !checked ? "" : ok ? "OK" : "WRONG, expected " + show(want);
    for (int r = 0; r < comm_.size(); ++r) {
      comm_.barrier()->wait();
      if (r != comm_.rank()) continue;
      std::string line = str("rank ", r, ": before ", pad(show(before), 18), " after ",
                             pad(checked ? show(after) : note, 22), " ", verdict);
      while (line.back() == ' ') line.pop_back();
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }

 private:
  comm::Communicator& comm_;
  int& wrong_;
};

void demo_rank(int nproc, const std::string& algo_name, int rank, comm::Store& store) {
  const auto algo = comm::parse_algorithm(algo_name);
  const comm::JobIdentity job{"demo-collectives", 0, ""};
  auto c = comm::connect(store, rank, nproc, job, comm::TransportKind::kAuto,
                         comm::CommOptions{algo, std::chrono::seconds(30)});
  const int n = c->size(), r = rank;
  const auto fn = static_cast<float>(n), fr = static_cast<float>(r);
  int wrong = 0;
  Stage stage(*c, wrong);
  if (r == 0) {
    std::printf("%d ranks over %s; all_reduce uses --algo %s\n", n, c->transport_name().c_str(),
                algo_name.c_str());
    std::fflush(stdout);
  }

  {
    stage.title(str("all_reduce(sum, ", algo_name, "): every rank ends with the element-wise sum"));
    std::vector<float> v{3 * fr + 1, 3 * fr + 2, 3 * fr + 3}, before = v;
    c->all_reduce(v.data(), 3, DataType::kFloat32, ReduceOp::kSum, algo)->wait();
    // sum over r of 3r+k = 3 n(n-1)/2 + k n
    const float base = 3 * fn * (fn - 1) / 2;
    stage.report(before, v, {base + fn, base + 2 * fn, base + 3 * fn});
  }
  {
    stage.title(str("all_reduce(avg, ", algo_name, "): the mean, sum / world size"));
    std::vector<float> v{fr + 1}, before = v;
    c->all_reduce(v.data(), 1, DataType::kFloat32, ReduceOp::kAvg, algo)->wait();
    stage.report(before, v, {(fn + 1) / 2});
  }
  {
    stage.title("broadcast(root 0): rank 0's value reaches everyone (binomial tree)");
    std::vector<float> v{r == 0 ? 42.0f : 0.0f}, before = v;
    c->broadcast(v.data(), 1, DataType::kFloat32, 0)->wait();
    stage.report(before, v, {42.0f});
  }
  {
    stage.title("reduce(sum, root 0): only rank 0 receives the sum (binomial tree)");
    std::vector<float> v{fr + 1}, before = v;
    c->reduce(v.data(), 1, DataType::kFloat32, ReduceOp::kSum, 0)->wait();
    stage.report(before, v, r == 0 ? std::vector<float>{fn * (fn + 1) / 2} : std::vector<float>{},
                 "(unspecified: not the root)");
  }
  {
    stage.title("scatter(root 0): rank 0 hands block r to rank r");
    std::vector<float> all;
    if (r == 0)
      for (int q = 0; q < n; ++q) all.push_back(10.0f * static_cast<float>(q + 1));
    std::vector<float> mine{0.0f};
    c->scatter(all.data(), mine.data(), 1, DataType::kFloat32, 0)->wait();
    stage.report(all, mine, {10 * (fr + 1)});
  }
  {
    stage.title("gather(root 0): every rank's block lands in rank 0's buffer, in rank order");
    std::vector<float> v{fr * fr}, out(r == 0 ? n : 0), want;
    c->gather(v.data(), out.data(), 1, DataType::kFloat32, 0)->wait();
    if (r == 0)
      for (int q = 0; q < n; ++q) want.push_back(static_cast<float>(q * q));
    stage.report(v, out, want, "(nothing: not the root)");
  }
  {
    stage.title("all_gather: everyone gets every rank's block (ring)");
    std::vector<float> v{fr}, out(n), want;
    c->all_gather(v.data(), out.data(), 1, DataType::kFloat32)->wait();
    for (int q = 0; q < n; ++q) want.push_back(static_cast<float>(q));
    stage.report(v, out, want);
  }

  float total = static_cast<float>(wrong);
  c->all_reduce(&total, 1, DataType::kFloat32, ReduceOp::kSum)->wait();
  if (r == 0) {
    std::printf("\n%s\n", total == 0 ? "OK: every rank's result matches" : "WRONG results above");
    std::fflush(stdout);
  }
  if (total != 0) throw Error(str(total, " wrong results"));
}

}  // namespace

void register_demo_collectives(CLI::App& demo) {
  struct Opts {
    int nproc = 4;
    std::string algo = "ring";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = demo.add_subcommand("collectives",
                                  "Each rank prints its tensor before and after every collective");
  cmd->add_option("--nproc", o->nproc, "ranks (forked processes on this host)")
      ->check(local_ranks())
      ->capture_default_str();
  cmd->add_option("--algo", o->algo, "all_reduce algorithm: ring | naive | tree | doubling | auto")
      ->capture_default_str();
  cmd->callback([o] {
    comm::parse_algorithm(o->algo);
    const int code = run_local_ranks(
        o->nproc, [o](int rank, comm::Store& store) { demo_rank(o->nproc, o->algo, rank, store); });
    if (code != 0) throw Error(str("demo collectives failed (exit code ", code, ")"));
  });
}

}  // namespace mddp::cli
