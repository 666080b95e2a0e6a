// `microddp demo ring`: a ring all-reduce you can watch. --nproc ranks
// (forked processes) run the real ring (core/comm/algorithms/ring_*.cc)
// through their Communicator; its step observer (communicator.h) copies
// each rank's buffer after every step. Rank 0 then prints, step by step,
// which block every rank sent to whom and what it received, with the
// partial sums as they were — the algorithm's own execution, not a
// simulation — and checks the result.
//
//   rank r's element i = r * elements + i + 1 (3 ranks, 3 elements: [1,2,3], [4,5,6], [7,8,9])
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/local_ranks.h"
#include "core/comm/algorithms/context.h"
#include "core/comm/communicator.h"
#include "core/common/check.h"

namespace mddp::cli {
namespace {

constexpr int kMaxElements = 64;  // one printed line per rank and step stays readable

struct Seen {
  comm::AlgoStep step;
  std::vector<float> values;  // this rank's buffer after the step
};

std::string block_values(const std::vector<float>& v, const comm::Blocks& blocks, int b) {
  std::string s = "[";
  for (int64_t i = blocks.begin(b); i < blocks.begin(b) + blocks.size(b); ++i)
    s += str(i == blocks.begin(b) ? "" : " ", v[static_cast<std::size_t>(i)]);
  return s + "]";
}

// Every block of a rank's buffer, `marked` (the one a step completed) with a *.
std::string values_text(const std::vector<float>& v, const comm::Blocks& blocks, int marked) {
  std::string s;
  for (int b = 0; b < blocks.parts; ++b)
    s += str(b ? " " : "", b == marked ? "*" : "", block_values(v, blocks, b));
  return s;
}

nlohmann::json to_json(const Seen& s) {
  const comm::AlgoStep& a = s.step;
  return {{"phase", comm::phase_name(a)},
          {"index", a.index},
          {"send_peer", a.send_peer},
          {"send_block", a.send_block},
          {"recv_peer", a.recv_peer},
          {"recv_block", a.recv_block},
          {"us", static_cast<double>(a.end_ns - a.start_ns) / 1e3},
          {"values", s.values}};
}

// Rank 0's report from every rank's steps (ranks[r][k]: rank r's k-th step).
void print(const std::vector<nlohmann::json>& ranks, const std::vector<std::vector<float>>& before,
           int64_t elements, const std::string& transport) {
  const int n = static_cast<int>(ranks.size());
  const comm::Blocks blocks{elements, n};
  std::printf(
      "ring all-reduce (sum) of %lld elements on %d ranks over %s: %d blocks, 2(n-1) = %d steps\n",
      static_cast<long long>(elements), n, transport.c_str(), n, 2 * (n - 1));
  std::printf("rank r's element i = r * %lld + i + 1; one [...] per block\n\n",
              static_cast<long long>(elements));
  std::printf("before:\n");
  for (int r = 0; r < n; ++r)
    std::printf("  rank %d: %s\n", r, values_text(before[r], blocks, -1).c_str());
  const std::size_t steps = ranks[0].size();
  for (std::size_t k = 0; k < steps; ++k) {
    const auto& first = ranks[0][k];
    const bool rs = first["phase"] == "reduce-scatter";
    std::printf("\n%s step %d: %s\n", first["phase"].get<std::string>().c_str(),
                first["index"].get<int>(),
                rs ? "every rank sends a block to the right and adds the block it receives from "
                     "the left into its copy"
                   : "every rank sends a finished block to the right and stores the one it "
                     "receives from the left");
    for (int r = 0; r < n; ++r) {
      const auto& s = ranks[r][k];
      const int sb = s["send_block"], rb = s["recv_block"];
      const auto values = s["values"].get<std::vector<float>>();
      std::printf(
          "  rank %d: sent block %d to rank %d, received block %d from rank %d (%.1f us) -> block "
          "%d = %s\n",
          r, sb, s["send_peer"].get<int>(), rb, s["recv_peer"].get<int>(), s["us"].get<double>(),
          rb, block_values(values, blocks, rb).c_str());
    }
    if (k + 1 == steps / 2 || k + 1 == steps) {
      std::printf(
          "  after %s:\n",
          rs ? "the reduce-scatter (rank r holds block r complete, marked *)" : "the all-gather");
      for (int r = 0; r < n; ++r) {
        const auto values = ranks[r][k]["values"].get<std::vector<float>>();
        std::printf("    rank %d: %s\n", r, values_text(values, blocks, rs ? r : -1).c_str());
      }
    }
  }
}

void ring_rank(int nproc, int64_t elements, const std::string& transport, int rank,
               comm::Store& store) {
  const comm::JobIdentity job{str("demo-ring-", ::getppid()), 0, ""};
  auto c = comm::connect(store, rank, nproc, job, comm::parse_transport(transport),
                         comm::CommOptions{comm::Algorithm::kRing, std::chrono::seconds(30)});
  std::vector<float> data(static_cast<std::size_t>(elements));
  for (int64_t i = 0; i < elements; ++i)
    data[static_cast<std::size_t>(i)] = static_cast<float>(rank * elements + i + 1);
  const std::vector<float> before = data;
  std::vector<Seen> seen;
  std::mutex mu;  // the observer runs on the progress thread
  c->set_step_observer([&](const comm::AlgoStep& step, const void* buffer) {
    const auto* f = static_cast<const float*>(buffer);
    std::lock_guard lock(mu);
    seen.push_back({step, std::vector<float>(f, f + elements)});
  });
  c->all_reduce(data.data(), elements, comm::DataType::kFloat32, comm::ReduceOp::kSum,
                comm::Algorithm::kRing)
      ->wait();

  nlohmann::json mine = nlohmann::json::array();
  {
    std::lock_guard lock(mu);
    for (const Seen& s : seen) mine.push_back(to_json(s));
  }
  store.set(str("demo-ring/steps/", rank), mine.dump());
  store.set(str("demo-ring/before/", rank), nlohmann::json(before).dump());
  int wrong = 0;
  for (int64_t i = 0; i < elements; ++i) {
    // sum over r of (r * elements + i + 1) = elements * n(n-1)/2 + n (i + 1)
    const double want = static_cast<double>(elements) * nproc * (nproc - 1) / 2 +
                        static_cast<double>(nproc) * (i + 1);
    wrong += data[static_cast<std::size_t>(i)] != static_cast<float>(want);
  }
  store.set(str("demo-ring/wrong/", rank), std::to_string(wrong));
  if (rank != 0) return;

  std::vector<nlohmann::json> ranks;
  std::vector<std::vector<float>> befores;
  int total_wrong = 0;
  for (int r = 0; r < nproc; ++r) {
    const auto timeout = std::chrono::seconds(30);
    ranks.push_back(nlohmann::json::parse(store.get(str("demo-ring/steps/", r), timeout)));
    befores.push_back(nlohmann::json::parse(store.get(str("demo-ring/before/", r), timeout))
                          .get<std::vector<float>>());
    total_wrong += std::stoi(store.get(str("demo-ring/wrong/", r), timeout));
  }
  if (nproc == 1) {
    std::printf("one rank: the all-reduce has nothing to do (0 steps); use --nproc 2 or more\n");
    return;
  }
  print(ranks, befores, elements, c->transport_name());
  std::printf("\n%s\n", total_wrong == 0
                            ? "OK: every rank holds the element-wise sum of all ranks' buffers"
                            : "WRONG: some rank's result differs from the element-wise sum");
  std::fflush(stdout);
  if (total_wrong != 0) throw Error(str(total_wrong, " wrong elements"));
}

}  // namespace

void register_demo_ring(CLI::App& demo) {
  struct Opts {
    int nproc = 4;
    int64_t elements = 12;
    std::string transport = "auto";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = demo.add_subcommand(
      "ring", "Watch a ring all-reduce step by step: blocks sent and partial sums");
  cmd->add_option("--nproc", o->nproc, "ranks (forked processes on this host)")
      ->check(local_ranks())
      ->capture_default_str();
  cmd->add_option("--elements", o->elements, "elements per rank (at most 64)")
      ->capture_default_str();
  cmd->add_option("--transport", o->transport, "tcp | shm | auto")->capture_default_str();
  cmd->callback([o] {
    comm::parse_transport(o->transport);
    if (o->nproc < 1) throw InputError(str("--nproc must be at least 1, got ", o->nproc));
    if (o->elements < 1 || o->elements > kMaxElements)
      throw InputError(str("--elements must be 1 to ", kMaxElements, ", got ", o->elements));
    const int code = run_local_ranks(o->nproc, [o](int rank, comm::Store& store) {
      ring_rank(o->nproc, o->elements, o->transport, rank, store);
    });
    if (code != 0) throw Error(str("demo ring failed (exit code ", code, ")"));
  });
}

}  // namespace mddp::cli
