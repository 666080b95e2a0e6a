// `microddp bench allreduce --backend nccl` (bench_allreduce_nccl.h): the
// nccl-tests all_reduce_perf measurement through microddp's NCCL group —
// the path DDP uses, events and polling included — with the CPU bench's
// loop and integer pattern (bench_sweep.h), in place in GPU memory.
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
#include "cli/local_ranks.h"
#include "core/comm/nccl/nccl.h"
#include "core/common/check.h"
#include "core/tensor/tensor.h"

namespace mddp::cli {
namespace {

// The sweep's buffer on this rank's GPU, as fp32 tensors big enough for the
// largest message in any type: `dev` on the GPU, `host` its staging copy.
class DeviceBuffer final : public SweepBuffer {
 public:
  DeviceBuffer(std::size_t bytes, int device)
      : dev_(tensor::Tensor::empty({floats(bytes)}, {tensor::DeviceType::kCuda, device})),
        host_(tensor::Tensor::empty({floats(bytes)})),
        zeros_(tensor::Tensor::zeros({floats(bytes)})) {}
  void* data() override { return dev_.data(); }
  std::byte* host() override { return reinterpret_cast<std::byte*>(host_.data()); }
  void to_data() override { dev_.copy_from(host_); }
  void from_data() override { host_.copy_from(dev_); }
  void zero(std::size_t) override { dev_.copy_from(zeros_); }

 private:
  static int64_t floats(std::size_t bytes) {
    return static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  }
  tensor::Tensor dev_, host_, zeros_;
};

void write_nccl_json(const std::string& path, const SweepOptions& s, const std::string& transport,
                     int n, const std::vector<SweepRow>& rows, const SweepTotals& totals) {
  nlohmann::json j = {{"benchmark", "allreduce"},
                      {"backend", "nccl"},
                      {"nproc", n},
                      {"transport", transport},
                      {"dtype", comm::to_string(s.dtype)},
                      {"op", "sum"},
                      {"iters", s.iters},
                      {"warmup", s.warmup},
                      {"avg_busbw_gbps", totals.avg_busbw},
                      {"ok", totals.ok()}};
  for (const SweepRow& r : rows)
    j["results"].push_back({{"bytes", r.bytes},
                            {"count", r.count},
                            {"time_us", r.time_us},
                            {"algbw_gbps", r.algbw},
                            {"busbw_gbps", r.busbw},
                            {"wrong", r.wrong}});
  std::ofstream(path) << j.dump(2) << "\n";
}

void print_nccl_header(const SweepOptions& s, const comm::ProcessGroup& group) {
  const int n = group.size();
  std::printf(
      "# microddp bench allreduce --backend nccl: %d rank%s (processes, one GPU each), %s, dtype "
      "%s, op sum\n",
      n, n == 1 ? "" : "s", group.transport_name().c_str(), comm::to_string(s.dtype));
  std::printf(
      "# iters %d, warmup %d; in place; time = slowest rank's mean; busbw = algbw * "
      "2(n-1)/n\n#\n",
      s.iters, s.warmup);
  std::printf("# %12s %12s %6s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  std::fflush(stdout);
}

void print_nccl_row(const SweepOptions& s, const SweepRow& r) {
  std::printf("  %12zu %12lld %6s %6s %12.2f %12.3f %12.3f %8lld\n", r.bytes,
              static_cast<long long>(r.count), comm::to_string(s.dtype), "sum", r.time_us, r.algbw,
              r.busbw, static_cast<long long>(r.wrong));
  std::fflush(stdout);
}

void bench_nccl_rank(const SweepOptions& s, int64_t timeout_ms, const std::string& json, int nproc,
                     int rank, comm::Store& store) {
  comm::nccl::NcclOptions options;
  options.device = rank;  // one process per GPU
  options.timeout = std::chrono::milliseconds(timeout_ms);
  auto group = comm::nccl::connect_nccl(store, rank, nproc, options);
  if (rank == 0) print_nccl_header(s, *group);
  DeviceBuffer buffer(sweep_buffer_bytes(s.sizes, s.dtype), rank);
  const std::vector<SweepRow> rows = run_sweep(*group, buffer, s, [&](const SweepRow& r) {
    if (rank == 0) print_nccl_row(s, r);
  });
  const SweepTotals totals = totals_of(rows);
  if (rank == 0) {
    print_footer(totals);
    if (!json.empty())
      write_nccl_json(json, s, group->transport_name(), group->size(), rows, totals);
  }
  group->barrier()->wait();
  if (!totals.ok()) throw Error(str("all-reduce gave ", totals.wrong, " wrong elements"));
}

}  // namespace

void run_allreduce_nccl(int nproc, const SweepOptions& sweep, int64_t timeout_ms,
                        const std::string& json) {
  MDDP_CHECK(!sweep.sizes.empty());
  const int code = run_local_ranks(nproc, [&](int rank, comm::Store& store) {
    bench_nccl_rank(sweep, timeout_ms, json, nproc, rank, store);
  });
  if (code != 0)
    throw Error(str("bench allreduce --backend nccl failed (exit code ", code,
                    "); the failing rank's error is above"));
}

}  // namespace mddp::cli
