#include "labs/support/collective_check.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "core/comm/transport/connect.h"
#include "core/common/timer.h"
#include "core/perf/cost_model.h"
#include "labs/support/ranks.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

using comm::ReduceOp;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Counts that catch the classic mistakes: divisible, one element, fewer
// elements than ranks (empty blocks), one more than a multiple, a prime, zero.
std::vector<int64_t> counts_for(int n, bool large) {
  std::vector<int64_t> c{4LL * n, 1, n - 1LL, n + 1LL, 2LL * n + 1, 37, 0};
  if (large) c.push_back(600'001);
  std::vector<int64_t> out;
  for (int64_t x : c)
    if (x >= 0 && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

std::string blocks_text(int64_t count, int n) {
  const comm::Blocks b{count, n};
  std::string s;
  for (int k = 0; k < n && k < 8; ++k) s += (k ? ", " : "") + std::to_string(b.size(k));
  return str("blocks of ", s, n > 8 ? ", ..." : "");
}

std::string case_name(const CollectiveCase& c, comm::TransportKind kind) {
  std::string s = str(c.stage, ", ", group_name(c.world, kind), ", ", c.count,
                      c.count == 1 ? " element" : " elements");
  if (c.world > 1 && c.count > 0 && c.count < 1000)
    s += str(" (", blocks_text(c.count, c.world), ")");
  s += str(", ", comm::to_string(c.op));
  return s;
}

// Which block of count split over n holds element i, as "block b (elements x..y)".
std::string where(int64_t i, int64_t count, int n) {
  const comm::Blocks b{count, n};
  for (int k = 0; k < n; ++k)
    if (i < b.begin(k) + b.size(k))
      return str("block ", k, " of ", n, ": elements ", b.begin(k), "..",
                 b.begin(k) + b.size(k) - 1);
  return "?";
}

void fill(const CollectiveStage& st, const CollectiveCase& c, int r, std::vector<float>& data) {
  const comm::Blocks blocks{c.count, c.world};
  for (int64_t i = 0; i < c.count; ++i) {
    switch (st.input) {
      case CollectiveStage::Input::kContributions:
        data[i] = contribution(r, i);
        break;
      case CollectiveStage::Input::kOwnBlockResult: {
        const bool mine = i >= blocks.begin(r) && i < blocks.begin(r) + blocks.size(r);
        data[i] = mine ? reduced(c.world, i, ReduceOp::kSum) : kNaN;
        break;
      }
      case CollectiveStage::Input::kRootResult:
        data[i] = r == c.root ? reduced(c.world, i, ReduceOp::kSum) : kNaN;
        break;
    }
  }
}

// The result rank r must hold at element i, or nullopt where nothing is promised.
std::optional<float> expected(const CollectiveStage& st, const CollectiveCase& c, int r,
                              int64_t i) {
  const comm::Blocks blocks{c.count, c.world};
  switch (st.output) {
    case CollectiveStage::Output::kOwnBlock:
      if (i < blocks.begin(r) || i >= blocks.begin(r) + blocks.size(r)) return std::nullopt;
      // a reduce-scatter leaves kAvg as the sum (the division is the all-reduce's)
      return reduced(c.world, i, c.op == ReduceOp::kAvg ? ReduceOp::kSum : c.op);
    case CollectiveStage::Output::kRoot:
      if (r != c.root) return std::nullopt;
      break;
    case CollectiveStage::Output::kAll:
      break;
  }
  return st.input == CollectiveStage::Input::kContributions ? reduced(c.world, i, c.op)
                                                            : reduced(c.world, i, ReduceOp::kSum);
}

CaseResult run_case(const CollectiveStage& st, const CollectiveCase& c, int r,
                    RecordingTransport& rec, comm::Scratch& scratch,
                    std::chrono::milliseconds timeout) {
  std::vector<float> data(static_cast<std::size_t>(c.count));
  fill(st, c, r, data);
  rec.clear();
  const comm::AlgoContext ctx{rec, r, c.world, comm::Clock::now() + timeout, scratch};
  st.run(ctx, data.data(), c);
  for (int64_t i = 0; i < c.count; ++i) {
    const auto want = expected(st, c, r, i);
    if (!want || close(data[i], *want)) continue;
    CaseResult bad;
    bad.message = str("rank ", r, ", element ", i, " (", where(i, c.count, c.world), "): expected ",
                      show(*want), ", got ", show(data[i]));
    const auto p = decode(data[i]);
    const uint32_t all = (1u << c.world) - 1;
    if (c.op == ReduceOp::kSum && p && p->element_mod == i % 1000 && p->ranks != all)
      bad.details.push_back(str(show(data[i]), " is the sum of the contributions of ranks ",
                                rank_set(p->ranks),
                                " only (every rank's element i is 128 (i mod 1000) + 2^rank)"));
    if (p && p->element_mod != i % 1000)
      bad.details.push_back(str(show(data[i]), " belongs to element ", p->element_mod,
                                " (mod 1000): it landed in the wrong place"));
    const double ratio = data[i] / *want;
    if (std::abs(ratio * c.world - 1) < 1e-5 && c.world > 1)
      bad.details.push_back(
          str("that is the expected value divided by ", c.world, " (the world size) once more"));
    if (std::abs(ratio - c.world) < 1e-5 && c.world > 1)
      bad.details.push_back(
          str("that is ", c.world, " times the expected value: the sum, not the average"));
    return bad;
  }
  return CaseResult::ok();
}

// Every case of the lab on one group of ranks.
RankFinding rank_main(const CollectiveLab& lab, const CheckOptions& o, int world,
                      comm::TransportKind kind, int r, comm::Store& store) {
  const comm::JobIdentity job{str("lab-", ::getppid()), ""};
  auto transport = comm::connect_transport(store, r, world, job, kind, o.timeout);
  RecordingTransport rec(*transport);
  comm::Scratch scratch;
  CaseLog log(r, world, store, o.timeout + std::chrono::seconds(5));
  for (const auto& st : lab.stages) {
    std::vector<int> roots{0};
    if (st.roots && world > 1) roots.push_back(world - 1);
    for (int64_t count : counts_for(world, st.large_count)) {
      for (ReduceOp op : st.ops) {
        if (count > 1000 && op != ReduceOp::kSum) continue;  // one large case is enough
        for (int root : roots) {
          const CollectiveCase c{st.name, world, count, op, root};
          std::string name = case_name(c, kind);
          if (st.roots) name += str(", root ", root);
          const bool ok = log.run(
              name, [&] { return run_case(st, c, r, rec, scratch, o.timeout); },
              [&] { transport.reset(); },
              [&] {
                return nlohmann::json{{"stage", c.stage},
                                      {"count", c.count},
                                      {"op", comm::to_string(c.op)},
                                      {"root", c.root},
                                      {"log", rec.log().to_json()}};
              });
          if (!ok) return log.finding();
        }
      }
    }
  }
  return log.finding();
}

// The diagnosis of a failed group, from every rank's evidence.
std::vector<std::string> diagnose(const CollectiveLab& lab, int world,
                                  const std::vector<RankFinding>& ranks) {
  if (!lab.diagnose) return {};
  const RankFinding* worst = worst_finding(ranks);
  // A wrong result, or a rank left waiting (a deadlock): the messages show why.
  if (worst == nullptr || (worst->problem != Problem::kWrong && worst->problem != Problem::kComm) ||
      worst->evidence.is_null())
    return {};
  const auto& e = worst->evidence;
  CollectiveCase c{e.at("stage").get<std::string>(), world, e.at("count").get<int64_t>(),
                   comm::parse_reduce_op(e.at("op").get<std::string>()), e.at("root").get<int>()};
  if (c.op != ReduceOp::kSum || c.count >= 1000 || c.count < world) return {};
  std::vector<MessageLog> logs;
  for (const auto& f : ranks) {
    if (f.evidence.is_null() || !f.evidence.contains("log")) return {};
    logs.push_back(MessageLog::from_json(f.evidence.at("log")));
  }
  return lab.diagnose(c, logs);
}

// ---- speed ------------------------------------------------------------------

struct Timing {
  std::size_t bytes;
  double yours_s, reference_s;
};

RankFinding time_rank(const CollectiveLab& lab, const CheckOptions& o, int world, int r,
                      comm::Store& store) {
  const comm::JobIdentity job{str("lab-speed-", ::getppid()), ""};
  auto transport = comm::connect_transport(store, r, world, job, o.speed_transport, o.timeout);
  comm::Scratch scratch;
  const std::vector<std::size_t> sizes{64 << 10, 256 << 10, 1 << 20, 4 << 20};
  std::vector<float> buf(sizes.back() / 4, 0.0f);  // zeros: sums of zeros stay zero
  // times[size][impl]: one mean per round; the median of the rounds is kept.
  std::vector<std::array<std::vector<double>, 2>> times(sizes.size());
  const AllReduceFn fns[2] = {lab.student_all_reduce, lab.reference_all_reduce};
  RankFinding f;
  f.rank = r;
  try {
    for (int round = 0; round < 3; ++round) {
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const auto count = static_cast<int64_t>(sizes[k] / 4);
        const int iters = static_cast<int>(std::clamp<std::size_t>((8u << 20) / sizes[k], 3, 50));
        for (int which = 0; which < 2; ++which) {
          const auto call = [&] {
            fns[which](
                comm::AlgoContext{*transport, r, world, comm::Clock::now() + o.timeout, scratch},
                buf.data(), count, comm::DataType::kFloat32, ReduceOp::kSum);
          };
          call();  // warm-up
          const int64_t t0 = now_ns();
          for (int i = 0; i < iters; ++i) call();
          times[k][which].push_back(static_cast<double>(now_ns() - t0) * 1e-9 / iters);
        }
      }
    }
  } catch (const std::exception& e) {
    f.problem = Problem::kException;
    f.message = str("while timing: ", e.what());
    return f;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    rows.push_back({sizes[k], median(times[k][0]), median(times[k][1])});
  }
  f.evidence = rows;
  return f;
}

std::string human_bytes(std::size_t b) {
  return b >= (1 << 20) ? str(b >> 20, " MiB") : str(b >> 10, " KiB");
}

std::string time_bw(double s, std::size_t bytes, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%8.1f us (%5.2f GB/s)", s * 1e6,
                perf::bus_bandwidth_gbps(static_cast<double>(bytes), s, n));
  return buf;
}

void speed_table(const CollectiveLab& lab, const CheckOptions& o, Report& report) {
  const int n = o.speed_ranks;
  if (n < 2) return;
  const auto ranks = run_timing(
      n, [&](int r, comm::Store& store) { return time_rank(lab, o, n, r, store); },
      o.timeout * 20 + std::chrono::seconds(30), report);
  if (!ranks) return;
  std::vector<Timing> rows;
  std::vector<perf::TimingSample> samples;
  for (const auto& row : (*ranks)[0].evidence) {
    rows.push_back({row[0].get<std::size_t>(), row[1].get<double>(), row[2].get<double>()});
    samples.push_back({static_cast<double>(rows.back().bytes), rows.back().reference_s});
  }
  const perf::AlphaBeta fit = perf::fit_alpha_beta(lab.algorithm, n, samples);
  report.note(str("speed: ", n, " ranks over ", comm::to_string(o.speed_transport),
                  ", fp32 sum, median of 3 rounds; busbw = size/time * 2(n-1)/n"));
  char line[256];
  std::snprintf(line, sizeof line, "%8s   %-24s %-24s %-24s %s", "size", "yours", "reference",
                str("alpha-beta ", lab.algorithm).c_str(), "yours/reference");
  report.note(line);
  for (const auto& t : rows) {
    const double model =
        perf::allreduce_seconds(lab.algorithm, static_cast<double>(t.bytes), n, fit);
    std::snprintf(line, sizeof line, "%8s   %-24s %-24s %-24s %.2f", human_bytes(t.bytes).c_str(),
                  time_bw(t.yours_s, t.bytes, n).c_str(),
                  time_bw(t.reference_s, t.bytes, n).c_str(), time_bw(model, t.bytes, n).c_str(),
                  t.yours_s / t.reference_s);
    report.note(line);
  }
  std::snprintf(
      line, sizeof line,
      "the model: alpha %.1f us, beta %.2f GB/s, fitted to the reference's times above (r2 %.2f)",
      fit.alpha_s * 1e6, fit.beta_Bps * 1e-9, perf::fit_r2(lab.algorithm, n, samples, fit));
  report.note(line);
}

}  // namespace

CollectiveStage all_reduce_stage(AllReduceFn fn) {
  return {.name = "all-reduce",
          .ops = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax},
          .large_count = true,
          .run = [fn](const comm::AlgoContext& ctx, float* data, const CollectiveCase& c) {
            fn(ctx, data, c.count, comm::DataType::kFloat32, c.op);
          }};
}

std::string group_name(int world, comm::TransportKind kind) {
  return str("world ", world, " over ", comm::to_string(kind));
}

void check_collective(const CollectiveLab& lab, const CheckOptions& o, Report& report) {
  for (int world : o.world_sizes) {
    for (comm::TransportKind kind : o.transports) {
      const auto ranks = run_group(
          world,
          [&](int r, comm::Store& store) { return rank_main(lab, o, world, kind, r, store); },
          o.timeout * 30 + std::chrono::seconds(60));
      if (const RankFinding* worst = worst_finding(ranks)) {
        std::vector<std::string> details = worst->details;
        for (auto& line : diagnose(lab, world, ranks)) details.push_back(std::move(line));
        report.fail(worst->failed_case.empty() ? worst->message
                                               : worst->failed_case + ": " + worst->message,
                    details);
        return;
      }
      report.passed(group_name(world, kind), ranks[0].cases);
    }
  }
  speed_table(lab, o, report);
}

}  // namespace mddp::labs
