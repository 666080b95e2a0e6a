#include "core/perf/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/common/check.h"
#include "core/common/json_number.h"

namespace mddp::perf {
namespace {

// An all-reduce as a sequence of messages: time = messages * alpha +
// bytes_factor * S / beta (see the table in the header).
struct Shape {
  double messages = 0;
  double bytes_factor = 0;
};

Shape shape_of(const std::string& algorithm, int n) {
  if (n <= 1) return {};
  if (algorithm == "ring") return {2.0 * (n - 1), 2.0 * (n - 1) / n};
  if (algorithm == "direct") return {2.0, 2.0 * (n - 1) / n};
  if (algorithm == "tree") {
    const double rounds = 2.0 * std::ceil(std::log2(n));
    return {rounds, rounds};
  }
  if (algorithm == "naive") return {2.0 * (n - 1), 2.0 * (n - 1)};
  if (algorithm == "doubling") {
    const double steps = std::floor(std::log2(n)) + ((n & (n - 1)) != 0 ? 2 : 0);
    return {steps, steps};
  }
  throw InputError(str("unknown all-reduce algorithm '", algorithm,
                       "' (ring, tree, naive, doubling or direct)"));
}

}  // namespace

double allreduce_seconds(const std::string& algorithm, double bytes, int world_size,
                         const AlphaBeta& link) {
  const Shape s = shape_of(algorithm, world_size);
  if (s.messages == 0) return 0;
  if (link.beta_Bps <= 0) throw InputError("the link bandwidth must be positive");
  return s.messages * link.alpha_s + s.bytes_factor * bytes / link.beta_Bps;
}

TwoLevelTime hierarchical_allreduce_seconds(double bytes, int hosts, int ranks_per_host,
                                            const AlphaBeta& host_link, const AlphaBeta& network) {
  MDDP_CHECK(hosts >= 1 && ranks_per_host >= 1, hosts, " hosts of ", ranks_per_host, " ranks");
  // The host level is a ring over L ranks moving S; the cross level's L
  // rings each move S/L over H ranks at once through one link of beta_g,
  // as one ring of S over H ranks would: 2(H-1)(a + (S/L)/(H b/L)).
  return {allreduce_seconds("ring", bytes, ranks_per_host, host_link),
          allreduce_seconds("ring", bytes, hosts, network)};
}

double bus_bandwidth_gbps(double bytes, double seconds, int world_size) {
  if (seconds <= 0 || world_size <= 1) return 0;
  return bytes / seconds * 2.0 * (world_size - 1) / world_size * 1e-9;
}

StepTime step_time(double compute_s, double comm_s, double backward_fraction) {
  MDDP_CHECK(backward_fraction >= 0 && backward_fraction <= 1, "backward fraction ",
             backward_fraction);
  const double hidden_behind = compute_s * backward_fraction;
  const double step = compute_s * (1 - backward_fraction) + std::max(hidden_behind, comm_s);
  return {step, std::max(0.0, comm_s - hidden_behind)};
}

double compute_for_overhead(double comm_s, double overhead) {
  MDDP_CHECK(overhead > 0 && overhead <= 1, "overhead ", overhead);
  return comm_s * (1 - overhead) / overhead;
}

double dense_compute_seconds(double params, double samples, double flops_per_s) {
  MDDP_CHECK(flops_per_s > 0, "flops_per_s ", flops_per_s);
  return 6 * params * samples / flops_per_s;
}

// Time is linear in S for one algorithm and world size: t = A + B S with
// A = messages * alpha and B = bytes_factor / beta. The line is fitted by
// least squares weighted by 1/t^2, i.e. on relative error: unweighted, the
// largest sizes (seconds) would swamp the smallest (microseconds), and the
// intercept, which is all of alpha, would be noise.
AlphaBeta fit_alpha_beta(const std::string& algorithm, int world_size,
                         const std::vector<TimingSample>& samples) {
  const Shape s = shape_of(algorithm, world_size);
  if (s.messages == 0) throw InputError("an all-reduce on one rank sends nothing: nothing to fit");
  if (samples.size() < 2)
    throw InputError("fitting alpha and beta needs timings of at least two sizes");
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : samples) {
    if (p.seconds <= 0)
      throw InputError(str("a timing of ", p.bytes, " bytes is not positive: ", p.seconds, " s"));
    const double w = 1.0 / (p.seconds * p.seconds);
    sw += w;
    sx += w * p.bytes;
    sy += w * p.seconds;
    sxx += w * p.bytes * p.bytes;
    sxy += w * p.bytes * p.seconds;
  }
  const double det = sw * sxx - sx * sx;
  if (det <= 0)
    throw InputError("fitting alpha and beta needs timings of at least two different sizes");
  const double slope = (sw * sxy - sx * sy) / det;
  const double intercept = (sy - slope * sx) / sw;
  if (slope <= 0)
    throw InputError("the timings do not grow with the message size: no bandwidth to fit");
  // A negative intercept is noise around a latency too small to resolve: 0.
  return {std::max(0.0, intercept) / s.messages, s.bytes_factor / slope};
}

double fit_r2(const std::string& algorithm, int world_size,
              const std::vector<TimingSample>& samples, const AlphaBeta& link) {
  double sw = 0, mean = 0;
  for (const auto& p : samples) {
    const double w = 1.0 / (p.seconds * p.seconds);
    sw += w;
    mean += w * p.seconds;
  }
  if (sw == 0) return 0;
  mean /= sw;
  double residual = 0, variance = 0;
  for (const auto& p : samples) {
    const double w = 1.0 / (p.seconds * p.seconds);
    const double e = p.seconds - allreduce_seconds(algorithm, p.bytes, world_size, link);
    residual += w * e * e;
    variance += w * (p.seconds - mean) * (p.seconds - mean);
  }
  return variance > 0 ? 1.0 - residual / variance : 0;
}

std::filesystem::path default_fit_path() {
  if (const char* f = std::getenv("MICRODDP_FIT_FILE"); f && *f) return f;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::filesystem::path(x) / "microddp/alpha_beta.json";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : ".") / ".cache/microddp/alpha_beta.json";
}

namespace {

// One fit as the file has it; every number read through json_number (a
// world size of 1e10 or 2.5 is refused, not converted with undefined
// behaviour), and a fit that predicts nothing sensible (a negative latency,
// a bandwidth of zero, an unknown algorithm) is refused too.
LinkFit parse_fit(const nlohmann::json& f) {
  const auto number = [&](const char* key) {
    const std::optional<double> x = json_number<double>(f.at(key));
    if (!x) throw InputError(str("\"", key, "\" is not a number"));
    return *x;
  };
  const std::optional<int> world = json_number<int>(f.at("world_size"));
  if (!world || *world < 1) throw InputError("\"world_size\" is not a whole number of ranks");
  const double alpha_us = number("alpha_us"), beta_gbps = number("beta_gbps");
  // Bounds that keep every prediction finite (a latency of up to 11 days a
  // message, a bandwidth of at least a millibyte a second), not plausible.
  if (!(alpha_us >= 0 && alpha_us <= 1e12 && beta_gbps >= 1e-12))
    throw InputError(str("alpha_us ", alpha_us, " and beta_gbps ", beta_gbps,
                         " are no link: want 0 <= alpha_us <= 1e12 and beta_gbps >= 1e-12"));
  const LinkFit fit{f.at("transport").get<std::string>(),
                    f.at("algorithm").get<std::string>(),
                    *world,
                    {alpha_us * 1e-6, beta_gbps * 1e9},
                    number_at<double>(f, "r2").value_or(0.0)};
  allreduce_seconds(fit.algorithm, 0, fit.world_size, fit.link);  // an unknown algorithm throws
  return fit;
}

}  // namespace

std::vector<LinkFit> load_fits(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(
        str(path.string(), ": is a directory, not a fit file of `microddp bench allreduce --fit`"));
  std::ifstream in(path);
  if (!in) return {};
  const auto refuse = [&](const std::string& why) {
    return InputError(
        str(path.string(), ": not a fit file of `microddp bench allreduce --fit` (", why, ")"));
  };
  std::vector<LinkFit> fits;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    for (const auto& f : j.at("fits")) fits.push_back(parse_fit(f));
  } catch (const nlohmann::json::exception& e) {
    throw refuse(e.what());
  } catch (const InputError& e) {
    throw refuse(e.what());
  }
  return fits;
}

void save_fits(const std::filesystem::path& path, const std::vector<LinkFit>& fits) {
  std::vector<LinkFit> all = load_fits(path);
  for (const auto& f : fits) {
    std::erase_if(all, [&](const LinkFit& o) {
      return o.transport == f.transport && o.algorithm == f.algorithm &&
             o.world_size == f.world_size;
    });
    all.push_back(f);
  }
  nlohmann::json j{{"fits", nlohmann::json::array()}};
  for (const auto& f : all)
    j["fits"].push_back({{"transport", f.transport},
                         {"algorithm", f.algorithm},
                         {"world_size", f.world_size},
                         {"alpha_us", f.link.alpha_s * 1e6},
                         {"beta_gbps", f.link.beta_Bps * 1e-9},
                         {"r2", f.r2}});
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw Error(str("cannot write the fits to ", path.string()));
}

std::optional<LinkFit> find_fit(const std::vector<LinkFit>& fits, const std::string& transport,
                                const std::string& algorithm, int world_size) {
  for (const auto& f : fits)
    if (f.transport == transport && f.algorithm == algorithm && f.world_size == world_size)
      return f;
  return std::nullopt;
}

}  // namespace mddp::perf
