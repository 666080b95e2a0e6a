// Note [Bottleneck verdict]. What limits a DDP step, from what the metrics
// log measures: the mean step time split into shares (data, forward +
// backward = compute, exposed comm, optimizer).
//
//   communication-bound  exposed comm >= kCommBoundShare of the step
//   input-bound          data         >= kInputBoundShare
//   memory-bound         optimizer    >= kMemoryBoundShare
//   compute-bound        none of the above: forward + backward dominate
//
// When several hold, the one furthest over its threshold (share / threshold)
// wins: it is the first thing to fix. Memory-boundness cannot be measured
// directly here (the log has no FLOP or byte counters), so it is defined by
// what the log has: the optimiser step is an element-wise pass over every
// parameter and its state, with no data reuse, so its time is memory
// traffic; forward and backward do ~6 x batch FLOPs per parameter on the
// same bytes. A step that spends a quarter of its time in that pass is
// limited by memory bandwidth, not arithmetic.
//
// The advice follows from the evidence: what the all-reduces' sizes, the
// alpha-beta fit, the overlap and the stragglers say about which knob helps.
//
// One thing overrides the shares: a host whose ranks run more compute
// threads than it has CPUs (job.json's members; core/perf/host_load.h).
//
//   oversubscribed       sum of --threads of a host's ranks > its CPUs
//
// Its ranks take turns on the CPUs, so a rank descheduled mid-step holds the
// others in the next all-reduce: exposed comm and stragglers then measure
// the scheduler, and the shares would blame the network (typically
// "communication-bound") for what fewer ranks per host fixes. The shares'
// verdict is kept in Bottleneck::by_shares and its evidence follows, marked as
// measured under CPU sharing. A run dir without CPU counts is never called
// oversubscribed.
#include <algorithm>
#include <cmath>

#include "core/common/check.h"
#include "core/perf/analysis.h"

namespace mddp::perf {
namespace {

// Above 30% exposed, every added rank buys at most 70% of a rank's
// throughput: scaling out is mostly paying for the network.
constexpr double kCommBoundShare = 0.30;
// Input is ideally prefetched and ~free; a fifth of the step on it is the
// cheapest fifth to win back.
constexpr double kInputBoundShare = 0.20;
// See the Note: a quarter of the step in the element-wise optimiser pass.
constexpr double kMemoryBoundShare = 0.25;
// Overlap below this: most communication waits after backward.
constexpr double kLowOverlap = 0.5;
// The alpha (per-message) part of a predicted all-reduce above this share:
// the buckets are too small to amortise the latency.
constexpr double kLatencyBoundShare = 0.5;
// Without a fit: buckets smaller than this are latency-bound on every
// transport here (alpha*beta ~ 32 KiB per message; core/comm auto_select.cc).
constexpr double kSmallBucketBytes = 64.0 * 1024;
// Measured all-reduces this much slower than the fit predicts point at the
// link (contention, another transport) rather than at the model's sizes.
constexpr double kSlowerThanFit = 1.5;
// A rank late in at least this share of the steps is a straggler worth naming.
constexpr double kStragglerStepShare = 0.25;
// Waiting for the straggler this share of the exposed comm or more: it, not
// the network, is what to fix first.
constexpr double kStragglerExposedShare = 0.5;

std::string pct(double x) {
  return str(std::lround(100 * x), "%");
}
std::string ms(double x) {
  return str(std::round(x * 1000) / 1000, " ms");
}

void comm_advice(const Analysis& a, Bottleneck& v) {
  v.advice.push_back(
      "a bigger per-rank batch (--batch): compute per step grows with it, the gradient bytes do "
      "not");
  const auto& c = a.config;
  double buckets_per_step = 0;
  for (const auto& b : a.buckets) buckets_per_step += b.per_step;
  if (a.overlap < kLowOverlap) {
    v.evidence.push_back(
        str("overlap is ", pct(a.overlap), ": most communication waits after backward"));
    if (c.ddp == "naive")
      v.advice.push_back("--ddp bucketed: launch all-reduces during backward instead of after it");
    else if (buckets_per_step <= 2)
      v.advice.push_back("smaller buckets (--bucket-mb, --first-bucket-mb): with only " +
                         str(std::lround(buckets_per_step)) +
                         " per step the first all-reduce starts late in backward");
  }
  if (a.buckets.empty()) return;
  const BucketStats& big = a.buckets.front();  // largest first
  const bool latency_bound = big.fit ? big.latency_share > kLatencyBoundShare
                                     : static_cast<double>(big.bytes) < kSmallBucketBytes;
  if (latency_bound) {
    v.evidence.push_back(big.fit ? str("the largest all-reduce (", big.bytes, " B) is ",
                                       pct(big.latency_share),
                                       " per-message latency (alpha) by the fit")
                                 : str("the largest all-reduce is only ", big.bytes,
                                       " B: latency (alpha), not bandwidth, sets its time"));
    v.advice.push_back("larger buckets (--bucket-mb): fewer all-reduces, each paying alpha once");
  } else {
    if (c.compress.empty() || c.compress == "none")
      v.advice.push_back(
          "gradient compression (--compress fp16 or bf16): half the bytes on the wire");
    v.advice.push_back(c.transport == "tcp"
                           ? "a faster link: shared memory (--transport shm) when the ranks share "
                             "a host, else a faster network"
                           : "a faster link (the all-reduces are bandwidth-bound)");
  }
  if (big.fit && big.predicted_ms > 0 && big.measured_ms.median > kSlowerThanFit * big.predicted_ms)
    v.evidence.push_back(str("all-reduces of ", big.bytes, " B take ", ms(big.measured_ms.median),
                             ", ", std::round(10 * big.measured_ms.median / big.predicted_ms) / 10,
                             "x the fit's prediction: the link is slower than benchmarked "
                             "(contention, more ranks than cores?)"));
}

// What the step's shares say (the table in the Note).
Bottleneck classify_by_shares(const Analysis& a) {
  const auto& p = a.phases;
  const double exposed = p[kExposedComm].share, data = p[kData].share, opt = p[kOptimizer].share;
  const double compute = p[kForward].share + p[kBackward].share;
  struct Candidate {
    const char* kind;
    double share, threshold;
  };
  const Candidate candidates[] = {{"communication-bound", exposed, kCommBoundShare},
                                  {"input-bound", data, kInputBoundShare},
                                  {"memory-bound", opt, kMemoryBoundShare}};
  const Candidate* worst = nullptr;
  for (const auto& c : candidates)
    if (c.share >= c.threshold &&
        (!worst || c.share / c.threshold > worst->share / worst->threshold))
      worst = &c;

  Bottleneck v;
  v.kind = worst ? worst->kind : "compute-bound";
  v.evidence.push_back(str("of a ", ms(p[kStep].all.mean), " step: forward+backward ", pct(compute),
                           ", exposed comm ", pct(exposed), " (communication-bound from ",
                           pct(kCommBoundShare), "), data ", pct(data), " (input-bound from ",
                           pct(kInputBoundShare), "), optimizer ", pct(opt), " (memory-bound from ",
                           pct(kMemoryBoundShare), ")"));
  if (v.kind == "communication-bound") {
    comm_advice(a, v);
  } else if (v.kind == "input-bound") {
    v.advice.push_back(
        "make input cheaper: keep the dataset decoded in memory and prefetch the next batch on "
        "another "
        "thread; a bigger per-rank batch does not help (the data phase grows with it)");
  } else if (v.kind == "memory-bound") {
    v.evidence.push_back(
        "the optimiser is an element-wise pass over every parameter and its state: memory traffic, "
        "not FLOPs");
    v.advice.push_back(
        "a bigger per-rank batch (--batch) or gradient accumulation (--accumulate K): the same "
        "parameter pass serves more samples; SGD keeps less state than Adam");
  } else {
    v.advice.push_back(
        "the GEMMs set the pace: adding ranks scales nearly linearly while exposed comm stays "
        "small; "
        "per rank, a faster GEMM (more --threads, a GPU)");
    if (exposed >= kCommBoundShare / 2)
      v.advice.push_back(
          str("watch exposed comm (", pct(exposed), ") as ranks are added: it grows with them"));
  }
  const auto& s = a.stragglers;
  if (!s.ranks.empty() && a.steps_used > 0 &&
      static_cast<double>(s.ranks.front().late_steps) >=
          kStragglerStepShare * static_cast<double>(a.steps_used)) {
    const auto& r = s.ranks.front();
    const std::string phase = s.worst && s.worst->rank == r.rank ? s.worst->phase : "";
    const double wait_ms =
        r.late_ms_total / static_cast<double>(a.steps_used);  // per step, averaged
    const double exposed_ms = p[kExposedComm].all.mean;
    v.evidence.push_back(str(
        "rank ", r.rank, " was late in ", r.late_steps, " of ", a.steps_used, " steps",
        phase.empty()      ? ""
        : phase == "start" ? ", mostly starting the step late"
                           : ", mostly in " + phase,
        ": the others wait for it in the first all-reduce, ", ms(wait_ms), " per step on average",
        exposed_ms > 0
            ? str(" (", pct(std::min(1.0, wait_ms / exposed_ms)), " of the exposed comm)")
            : ""));
    const std::string advice =
        str("look at rank ", r.rank,
            " (other load on its host or core, a slower core, its data, "
            "work between its steps) before tuning DDP: the whole job runs at its pace");
    // When waiting for it is most of the exposed comm, no network knob helps: it goes first.
    if (v.kind == "communication-bound" && wait_ms >= kStragglerExposedShare * exposed_ms)
      v.advice.insert(v.advice.begin(), advice);
    else
      v.advice.push_back(advice);
  }
  return v;
}

// A host with more compute threads than CPUs overrides the shares: its
// ranks take turns on the CPUs, so every figure that measures one rank
// waiting for another (exposed comm, all-reduce spans, stragglers) is
// inflated by the scheduler, and no DDP knob fixes that.
Bottleneck oversubscribed_verdict(const Analysis& a, const Bottleneck& shares) {
  Bottleneck v;
  v.kind = "oversubscribed";
  v.by_shares = shares.kind;
  for (const auto& h : a.hosts)
    if (h.oversubscribed()) v.evidence.push_back(h.describe());
  v.evidence.push_back(
      str("ranks that share a CPU take turns: a rank descheduled mid-step holds the others in the "
          "next all-reduce, so exposed comm (",
          pct(a.phases[kExposedComm].share),
          " of the step), the all-reduce times and the stragglers are inflated by the CPU sharing, "
          "not set by the network or a slow rank; forward and backward run slower too"));
  v.evidence.push_back(str("the shares alone, measured under that sharing, would say ", shares.kind,
                           ": ",
                           shares.evidence.empty() ? std::string() : shares.evidence.front()));
  v.evidence.insert(v.evidence.end(), shares.evidence.begin() + (shares.evidence.empty() ? 0 : 1),
                    shares.evidence.end());
  for (const auto& h : a.hosts) {
    if (!h.oversubscribed()) continue;
    int per_rank = 0;  // the fewest compute threads a rank of this host runs
    for (int t : h.rank_threads)
      per_rank = per_rank == 0 ? std::max(1, t) : std::min(per_rank, std::max(1, t));
    const int n = static_cast<int>(h.ranks.size());
    const std::string cpus = str(h.cpus, h.cpus == 1 ? " CPU" : " CPUs");
    if (n == 1) {
      v.advice.push_back(str("fewer compute threads on host ", h.host, ": --threads ", h.cpus,
                             " fits its ", cpus));
      continue;
    }
    const int fit = std::max(1, h.cpus / per_rank);
    std::string advice =
        str("fewer ranks on host ", h.host, ": its ", cpus, h.cpus == 1 ? " fits " : " fit ", fit,
            fit == 1 ? " rank" : " ranks", " of ", per_rank,
            per_rank == 1 ? " compute thread" : " compute threads", " (--nproc ", fit,
            " there), or spread the ", n, " ranks over more hosts");
    if (per_rank > 1 && h.cpus >= n)
      advice += str("; or fewer compute threads: --threads ", h.cpus / n, " fits ", n,
                    " ranks in its ", cpus);
    v.advice.push_back(advice);
  }
  v.advice.push_back(
      str("then analyze again: with a CPU per compute thread the exposed comm and the stragglers "
          "measure the network and the ranks, and the verdict by the shares (",
          shares.kind, " now) can be trusted"));
  return v;
}

}  // namespace

Bottleneck classify(const Analysis& a) {
  Bottleneck v = classify_by_shares(a);
  v.by_shares = v.kind;
  return oversubscribed(a) ? oversubscribed_verdict(a, v) : v;
}

}  // namespace mddp::perf
