// The alpha-beta cost model of a collective: sending S bytes in one message
// costs alpha + S / beta (alpha: latency per message, beta: bandwidth). An
// all-reduce algorithm is a number of such messages in sequence:
//   ring   2(n-1) steps of S/n bytes:        2(n-1) (alpha + S / (n beta))
//   tree   2 ceil(log2 n) steps of S bytes:  2 ceil(log2 n) (alpha + S / beta)
//   naive  rank 0 receives n-1 and sends n-1 full messages: 2(n-1)(alpha + S / beta)
//   doubling  floor(log2 n) exchanges of S, 2 steps more (fold-in, send-back)
//          when n is not a power of two:  (floor(log2 n) + 2[n != 2^k])(alpha + S / beta)
//          (its reduction of S per step is not a term here: a fit's beta absorbs it)
//   direct (one host's shared memory, direct_all_reduce.cc): two signal
//          rounds (every buffer posted; every rank finished), and each rank
//          reads its block S/n from n-1 peers and writes it back to them:
//          2 alpha + 2(n-1) S / (n beta), the ring's bytes without its latency
//   hierarchical (H hosts of L ranks, hierarchical_all_reduce.cc): a ring
//          within each host, then rings of one rank per host that share the
//          host's network link:  2(L-1)(a_l + S/(L b_l)) + 2(H-1)(a_g + S/(H b_g))
// Bus bandwidth (nccl-tests' busbw) normalises a measured all-reduce so that
// it is comparable to the link speed whatever n is: busbw = S/t * 2(n-1)/n.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mddp::perf {

struct AlphaBeta {
  double alpha_s = 0;   // seconds per message
  double beta_Bps = 0;  // bytes per second
};

// Predicted all-reduce time (seconds) of `bytes` on `world_size` ranks with
// `algorithm` = ring | tree | naive | doubling | direct. 0 when world_size <= 1.
double allreduce_seconds(const std::string& algorithm, double bytes, int world_size,
                         const AlphaBeta& link);

// The hierarchical all-reduce's two parts (seconds): within hosts over
// `host_link`, across them over `network` (each host's link, shared by its
// L ranks' cross-host rings).
struct TwoLevelTime {
  double host_s = 0, cross_s = 0;
  double total() const { return host_s + cross_s; }
};
TwoLevelTime hierarchical_allreduce_seconds(double bytes, int hosts, int ranks_per_host,
                                            const AlphaBeta& host_link, const AlphaBeta& network);

// busbw in GB/s (1e9 bytes/s) of an all-reduce of `bytes` taking `seconds` on
// `world_size` ranks; 0 when seconds <= 0 or world_size <= 1.
double bus_bandwidth_gbps(double bytes, double seconds, int world_size);

// One data-parallel step: compute c seconds per rank (forward + backward +
// optimizer) and one all-reduce of t seconds. The all-reduce can run during
// backward, a fraction f of c, and at best hides behind it:
//   step    = c (1 - f) + max(c f, t)
//   exposed = step - c = max(0, t - c f)
// f = 0 is naive DDP (the all-reduce after backward): step = c + t.
struct StepTime {
  double step_s = 0;
  double exposed_s = 0;  // communication not hidden behind compute
  // The communication overhead: exposed / step; 0 for an empty step.
  double overhead() const { return step_s > 0 ? exposed_s / step_s : 0; }
};
StepTime step_time(double compute_s, double comm_s, double backward_fraction);

// The compute per step at which an all-reduce of `comm_s`, not overlapped, is
// the fraction `overhead` (in (0, 1]) of the step: t / (t + c) = o gives
// c = t (1 - o) / o.
double compute_for_overhead(double comm_s, double overhead);

// Forward + backward of a dense model (an MLP) in seconds: 6 FLOPs per
// parameter per sample (2 forward, 4 backward) at `flops_per_s`.
double dense_compute_seconds(double params, double samples, double flops_per_s);

// Least-squares fit of t = alpha * messages + bytes_per_message / beta over
// timings of one algorithm: each sample is (bytes of the whole all-reduce,
// seconds). `world_size` and `algorithm` give the message count and size.
struct TimingSample {
  double bytes = 0;
  double seconds = 0;
};
AlphaBeta fit_alpha_beta(const std::string& algorithm, int world_size,
                         const std::vector<TimingSample>& samples);
// How well `link` explains the samples: 1 - weighted residual / weighted
// variance, with the fit's weights (1/t^2, i.e. relative error). 1 is perfect.
double fit_r2(const std::string& algorithm, int world_size,
              const std::vector<TimingSample>& samples, const AlphaBeta& link);

// One stored fit: what `microddp bench allreduce --fit` writes and
// `microddp analyze` / the dashboard read.
struct LinkFit {
  std::string transport;  // tcp | shm | nccl
  std::string algorithm;  // ring | tree | naive | doubling
  int world_size = 0;
  AlphaBeta link;
  double r2 = 0;  // goodness of the fit
};

// Default place of the fits: $MICRODDP_FIT_FILE, else
// $XDG_CACHE_HOME/microddp/alpha_beta.json, else ~/.cache/microddp/alpha_beta.json.
std::filesystem::path default_fit_path();
// Reads the file ({"fits": [...]}); an absent file is an empty list; a bad one
// throws InputError naming the path.
std::vector<LinkFit> load_fits(const std::filesystem::path& path);
// Replaces the fits of the same (transport, algorithm, world_size) and keeps the others.
void save_fits(const std::filesystem::path& path, const std::vector<LinkFit>& fits);
// The fit for (transport, algorithm, world_size); nullopt when none.
std::optional<LinkFit> find_fit(const std::vector<LinkFit>& fits, const std::string& transport,
                                const std::string& algorithm, int world_size);

}  // namespace mddp::perf
