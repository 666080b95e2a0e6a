// `microddp bench allreduce --fit`: the all-reduce sweep run per algorithm
// and transport, interleaved over rounds, and the alpha-beta fit of each
// (core/perf/cost_model.h), stored for `microddp model --fit` and
// `microddp analyze`. cmd_bench_allreduce.cc owns the sweep flags and hands
// them over; this file owns the fit's own flags and the driver.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mddp::cli {

struct FitFlags {
  bool on = false;
  std::string out;         // --fit-out; "" = perf::default_fit_path()
  int rounds = 3;          // interleaved rounds; the median per point is fitted
  double budget_s = 0.25;  // time per measured point (iterations are scaled to it)
  std::string netns;       // comma list: rank r enters network namespace r (the netns lab)
  std::string bind;        // comma list: rank r's TCP address (with --fit-netns)
};

// What the plain benchmark's flags say.
struct FitSweepOptions {
  int nproc = 2;
  std::vector<std::size_t> sizes;
  int iters = 20, warmup = 5;
  int64_t timeout_ms = 60'000;
  std::string algo = "auto", transport = "auto";  // auto: every algorithm / transport
  std::string json;                               // also write the samples and fits here
  std::string backend = "cpu";                    // only cpu (tcp, shm) is fitted here
};

// Adds --fit, --fit-out, --fit-rounds, --fit-budget-s, --fit-netns, --fit-bind to `cmd`.
std::shared_ptr<FitFlags> add_fit_flags(CLI::App& cmd);

// Runs the sweep on sweep.nproc local ranks, prints and saves the fits.
void run_allreduce_fit(const FitFlags& flags, const FitSweepOptions& sweep);

}  // namespace mddp::cli
