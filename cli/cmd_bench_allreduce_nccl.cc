// `microddp bench allreduce --backend nccl` (bench_allreduce_nccl.h): the
// nccl-tests all_reduce_perf measurement through microddp's NCCL group —
// the path DDP uses, events and polling included. Per size: one checked
// all-reduce (the CPU bench's integer pattern, exact in every type), then
// --warmup untimed and --iters timed in-place all-reduces issued back to
// back, the host waiting for the last; time = the slowest rank's mean.
//
//   algbw = S / t,  busbw = algbw * 2(n-1)/n   (as nccl-tests, PERFORMANCE.md)
//
// NCCL picks its own algorithm and protocol (NCCL_ALGO, NCCL_PROTO steer it)
// and sums 16-bit types in 16 bits, unlike the CPU backend's fp32 sums.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/bench_allreduce_nccl.h"
#include "cli/bench_sweep.h"
#include "cli/local_ranks.h"
#include "core/comm/nccl/nccl.h"
#include "core/common/check.h"
#include "core/common/timer.h"
#include "core/tensor/tensor.h"

namespace mddp::cli {
namespace {

struct NcclRow {
  std::size_t bytes;
  int64_t count;
  double time_us, algbw, busbw;
  int64_t wrong;
};

void write_json(const NcclSweep& s, const std::string& transport, int n,
                const std::vector<NcclRow>& rows, double avg_busbw, bool ok) {
  nlohmann::json j = {{"benchmark", "allreduce"},
                      {"backend", "nccl"},
                      {"nproc", n},
                      {"transport", transport},
                      {"dtype", comm::to_string(s.dtype)},
                      {"op", "sum"},
                      {"iters", s.iters},
                      {"warmup", s.warmup},
                      {"avg_busbw_gbps", avg_busbw},
                      {"ok", ok}};
  for (const NcclRow& r : rows)
    j["results"].push_back({{"bytes", r.bytes},
                            {"count", r.count},
                            {"time_us", r.time_us},
                            {"algbw_gbps", r.algbw},
                            {"busbw_gbps", r.busbw},
                            {"wrong", r.wrong}});
  std::ofstream(s.json) << j.dump(2) << "\n";
}

void bench_rank(const NcclSweep& s, int rank, comm::Store& store) {
  comm::nccl::NcclOptions options;
  options.device = rank;  // one process per GPU
  options.timeout = std::chrono::milliseconds(s.timeout_ms);
  auto group = comm::nccl::connect_nccl(store, rank, s.nproc, options);
  const int n = group->size();
  const std::size_t es = comm::element_size(s.dtype);
  // Buffers as fp32 tensors big enough for the largest message in any type:
  // `dev` on this rank's GPU, `host` its staging copy for the check.
  const auto floats =
      static_cast<int64_t>((s.sizes.back() / es * es + sizeof(float) - 1) / sizeof(float) + 1);
  tensor::Tensor dev = tensor::Tensor::empty({floats}, {tensor::DeviceType::kCuda, rank});
  tensor::Tensor host = tensor::Tensor::empty({floats});
  tensor::Tensor zeros = tensor::Tensor::zeros({floats});
  auto* host_bytes = reinterpret_cast<std::byte*>(host.data());

  if (rank == 0) {
    std::printf(
        "# microddp bench allreduce --backend nccl: %d rank%s (processes, one GPU each), %s, dtype "
        "%s, op sum\n",
        n, n == 1 ? "" : "s", group->transport_name().c_str(), comm::to_string(s.dtype));
    std::printf(
        "# iters %d, warmup %d; in place; time = slowest rank's mean; busbw = algbw * "
        "2(n-1)/n\n#\n",
        s.iters, s.warmup);
    std::printf("# %12s %12s %6s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    std::fflush(stdout);
  }
  std::vector<NcclRow> rows;
  for (std::size_t size : s.sizes) {
    const auto count = static_cast<int64_t>(size / es);
    const std::size_t bytes = static_cast<std::size_t>(count) * es;
    // Checked run.
    s.fill(s.dtype, host_bytes, count, rank);
    dev.copy_from(host);
    group->all_reduce(dev.data(), count, s.dtype, comm::ReduceOp::kSum)->wait();
    host.copy_from(dev);
    float wrong = static_cast<float>(s.count_wrong(s.dtype, host_bytes, count, n));
    // Timed runs on zeros (no overflow across iterations, the same work).
    dev.copy_from(zeros);
    for (int i = 0; i < s.warmup; ++i)
      group->all_reduce(dev.data(), count, s.dtype, comm::ReduceOp::kSum);
    group->barrier()->wait();
    const int64_t t0 = now_ns();
    comm::WorkPtr last;
    for (int i = 0; i < s.iters; ++i)
      last = group->all_reduce(dev.data(), count, s.dtype, comm::ReduceOp::kSum);
    last->wait();
    float time_us = static_cast<float>(static_cast<double>(now_ns() - t0) * 1e-3 / s.iters);
    // Host scalars: staged through the GPU by the group.
    group->all_reduce(&time_us, 1, comm::DataType::kFloat32, comm::ReduceOp::kMax)->wait();
    group->all_reduce(&wrong, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum)->wait();

    const Bandwidth bw = allreduce_bandwidth(bytes, time_us, n);
    rows.push_back({bytes, count, time_us, bw.algbw, bw.busbw, static_cast<int64_t>(wrong)});
    if (rank == 0) {
      std::printf("  %12zu %12lld %6s %6s %12.2f %12.3f %12.3f %8lld\n", bytes,
                  static_cast<long long>(count), comm::to_string(s.dtype), "sum", time_us, bw.algbw,
                  bw.busbw, static_cast<long long>(wrong));
      std::fflush(stdout);
    }
  }
  const SweepTotals totals = totals_of(rows);
  const bool ok = totals.ok();
  if (rank == 0) {
    print_footer(totals);
    if (!s.json.empty()) write_json(s, group->transport_name(), n, rows, totals.avg_busbw, ok);
  }
  group->barrier()->wait();
  if (!ok) throw Error(str("all-reduce gave ", totals.wrong, " wrong elements"));
}

}  // namespace

void run_allreduce_nccl(const NcclSweep& sweep) {
  MDDP_CHECK(sweep.fill && sweep.count_wrong && !sweep.sizes.empty());
  const int code = run_local_ranks(
      sweep.nproc, [&](int rank, comm::Store& store) { bench_rank(sweep, rank, store); });
  if (code != 0)
    throw Error(str("bench allreduce --backend nccl failed (exit code ", code,
                    "); the failing rank's error is above"));
}

}  // namespace mddp::cli
