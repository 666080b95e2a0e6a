// The NCCL backend on real GPUs, against the CPU as the oracle (label gpu).
// Each test needs some number of local GPUs and reports SKIPPED with the
// reason when the machine has fewer (CI and most development machines have
// none). Ranks are threads, rank r on cuda:r, meeting through a MemoryStore.
//
// Tolerances: fp32 sums of small integers are exact, and so are fp16/bf16
// sums below 256 (NCCL sums 16-bit types in 16 bits); DDP on the GPU vs one
// CPU process: 1e-4 relative per parameter (plain FP32 cuBLAS products, no
// TF32, but other summation orders in gemm, reductions and the all-reduce —
// the CPU DDP tests' 1e-5 with one order of magnitude of headroom for that).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/memory_store.h"
#include "core/comm/nccl/nccl.h"
#include "core/comm/nccl/transport_log.h"
#include "core/comm/reduce_kernels.h"
#include "core/common/half.h"
#include "core/tensor/device.h"
#include "core/tensor/ops.h"
#include "core/tensor/tensor.h"
#include "core/train/distributed.h"
#include "ddp/ddp_fixture.h"
#include "gpu/devices.h"
#include "support/ranks.h"

namespace mddp::comm::nccl {
namespace {

using namespace std::chrono_literals;

// Skips with the reason when the machine has fewer GPUs; FAILS when a GPU is
// present but CUDA cannot start (a broken GPU box must not look like none).
#define REQUIRE_GPUS(n) MDDP_REQUIRE_CUDA_DEVICES(n, "the NCCL backend")

// NCCL's log goes to a file of this process's (as `microddp` sets it up at
// start), read for the transport line: set before any thread runs.
const bool kNcclLogCaptured = (capture_nccl_log(), true);

std::string next_prefix() {
  static std::atomic<int> n{0};
  return "nccl-test-" + std::to_string(n++);
}

// Runs fn(group, rank) on n thread-ranks, rank r on cuda:r.
void with_groups(int n, const std::function<void(ProcessGroup&, int)>& fn,
                 std::chrono::milliseconds timeout = 20s) {
  MemoryStore store;
  const std::string prefix = next_prefix();
  mddp::test::run_threads(
      n,
      [&](int rank) {
        NcclOptions o;
        o.device = rank;
        o.timeout = timeout;
        o.prefix = prefix;
        auto group = connect_nccl(store, rank, n, o);
        fn(*group, rank);
      },
      120s);
}

// `count` elements of type t on cuda:rank, written and read through the host
// as floats (16-bit types through half.h, itself tested in kernels_test.cc).
class DeviceBuffer {
 public:
  DeviceBuffer(DataType t, int64_t count, int rank)
      : t_(t),
        count_(count),
        dev_(tensor::Tensor::zeros({floats(t, count)}, {tensor::DeviceType::kCuda, rank})),
        host_(tensor::Tensor::zeros({floats(t, count)})) {}
  void* data() { return dev_.data(); }
  void set(const std::vector<float>& v) {
    auto* bytes = reinterpret_cast<std::byte*>(host_.data());
    for (int64_t i = 0; i < count_; ++i) {
      if (t_ == DataType::kFloat32) {
        std::memcpy(bytes + 4 * i, &v[i], 4);
      } else {
        const uint16_t h = t_ == DataType::kFloat16 ? float_to_fp16(v[i]) : float_to_bf16(v[i]);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
    }
    dev_.copy_from(host_);
  }
  std::vector<float> get() {
    host_.copy_from(dev_);
    const auto* bytes = reinterpret_cast<const std::byte*>(host_.data());
    std::vector<float> out(count_);
    for (int64_t i = 0; i < count_; ++i) {
      if (t_ == DataType::kFloat32) {
        std::memcpy(&out[i], bytes + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);
        out[i] = t_ == DataType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h);
      }
    }
    return out;
  }

 private:
  static int64_t floats(DataType t, int64_t count) {
    return static_cast<int64_t>(count * element_size(t) / sizeof(float)) + 1;
  }
  DataType t_;
  int64_t count_;
  tensor::Tensor dev_, host_;
};

float value(int rank, int64_t i) {
  return static_cast<float>((rank + i) % 5) - 2.0f;
}

// The CPU reference of one element reduced over n ranks.
float reference(ReduceOp op, int n, int64_t i) {
  float acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    const float v = value(r, i);
    acc = op == ReduceOp::kMax   ? std::max(acc, v)
          : op == ReduceOp::kMin ? std::min(acc, v)
                                 : acc + v;
  }
  return op == ReduceOp::kAvg ? acc / static_cast<float>(n) : acc;
}

TEST(NcclGpu, AllReduceMatchesTheCpuReference) {
  REQUIRE_GPUS(1);
  const int gpus = std::min(tensor::cuda_device_count(), 8);
  for (int n = 1; n <= gpus; ++n) {
    // One group per world size (a communicator's set-up costs seconds).
    with_groups(n, [&](ProcessGroup& g, int rank) {
      for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16})
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax})
          for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{1031}, int64_t{1} << 20}) {
            SCOPED_TRACE(
                str(n, " ranks, ", to_string(t), " ", to_string(op), ", ", count, " elements"));
            DeviceBuffer buf(t, count, rank);
            std::vector<float> v(count);
            for (int64_t i = 0; i < count; ++i) v[i] = value(rank, i);
            buf.set(v);
            WorkPtr w = g.all_reduce(buf.data(), count, t, op);
            w->wait();
            EXPECT_TRUE(w->completed());
            EXPECT_LE(w->start_ns(), w->end_ns());
            const std::vector<float> got = buf.get();
            // Sums and maxima of small integers are exact in every type. NCCL
            // may average floats as a sum of inputs pre-multiplied by 1/n: up
            // to n + 1 roundings of values of magnitude <= 2.
            const double tol = op == ReduceOp::kAvg ? 2.0 * (n + 1) * unit_roundoff(t) : 0.0;
            int64_t wrong = 0;
            for (int64_t i = 0; i < count; ++i) {
              const float want = reference(op, n, i);
              if (std::abs(got[i] - want) > tol) {
                if (wrong++ < 5)
                  ADD_FAILURE() << "rank " << rank << " element " << i << ": " << got[i]
                                << " != " << want;
              }
            }
            EXPECT_EQ(wrong, 0);
          }
    });
  }
}

TEST(NcclGpu, BroadcastAllGatherBarrierAndHostBuffers) {
  REQUIRE_GPUS(1);
  const int n = std::min(tensor::cuda_device_count(), 4);
  with_groups(n, [&](ProcessGroup& g, int rank) {
    // Device broadcast from the last rank.
    DeviceBuffer b(DataType::kFloat32, 777, rank);
    b.set(std::vector<float>(777, static_cast<float>(rank)));
    g.broadcast(b.data(), 777, DataType::kFloat32, n - 1)->wait();
    for (float x : b.get()) ASSERT_EQ(x, static_cast<float>(n - 1));
    // Host buffers are staged through the GPU (DDP's model check, the loss mean).
    std::vector<float> in(5, static_cast<float>(rank)), out(5 * n, -1.0f);
    g.all_gather(in.data(), out.data(), 5, DataType::kFloat32)->wait();
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 5; ++i) ASSERT_EQ(out[r * 5 + i], static_cast<float>(r));
    float mean = static_cast<float>(rank);
    g.all_reduce(&mean, 1, DataType::kFloat32, ReduceOp::kAvg)->wait();
    EXPECT_FLOAT_EQ(mean, static_cast<float>(n - 1) / 2);
    g.barrier()->wait();
  });
}

// ZeRO-1's collectives (--ddp sharded) on device buffers, in place: the
// average of block r lands in block r, then every block is gathered back.
TEST(NcclGpu, InPlaceReduceScatterThenAllGather) {
  REQUIRE_GPUS(1);
  const int n = std::min(tensor::cuda_device_count(), 4);
  const int64_t shard = 7;
  with_groups(n, [&](ProcessGroup& g, int rank) {
    DeviceBuffer b(DataType::kFloat32, shard * n, rank);
    std::vector<float> mine(shard * n);
    for (int64_t i = 0; i < shard * n; ++i) mine[i] = static_cast<float>(rank * 100 + i);
    b.set(mine);
    // The mean over ranks q of q*100 + i.
    const auto mean = [&](int64_t i) {
      return 50.0f * static_cast<float>(n - 1) + static_cast<float>(i);
    };
    auto* base = static_cast<float*>(b.data());
    g.reduce_scatter(base, base + shard * rank, shard, DataType::kFloat32, ReduceOp::kAvg)->wait();
    std::vector<float> got = b.get();
    for (int64_t i = 0; i < shard; ++i)
      ASSERT_FLOAT_EQ(got[shard * rank + i], mean(shard * rank + i));
    g.all_gather(base + shard * rank, base, shard, DataType::kFloat32)->wait();
    got = b.get();
    for (int64_t i = 0; i < shard * n; ++i) ASSERT_FLOAT_EQ(got[i], mean(i));
  });
}

TEST(NcclGpu, ARankThatNeverJoinsTimesOutInsteadOfHanging) {
  REQUIRE_GPUS(1);
  MemoryStore store;
  NcclOptions o;
  o.timeout = 2s;
  o.prefix = next_prefix();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(connect_nccl(store, 0, 2, o), TimeoutError);  // rank 1 never comes
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
}

TEST(NcclGpu, AbortUnblocksAWaitOnAPeerThatNeverIssues) {
  REQUIRE_GPUS(2);
  std::atomic<ProcessGroup*> rank0{nullptr};
  with_groups(2, [&](ProcessGroup& g, int rank) {
    if (rank == 1) {  // never issues the all-reduce; aborts rank 0 instead, as its heartbeat would
      while (!rank0.load()) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(200ms);
      rank0.load()->abort("test: the job failed elsewhere");
      return;
    }
    DeviceBuffer b(DataType::kFloat32, 1024, rank);
    // Published first: NCCL may connect lazily inside the collective call
    // itself, which then waits for rank 1 until the abort.
    rank0 = &g;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(g.all_reduce(b.data(), 1024, DataType::kFloat32, ReduceOp::kSum)->wait(),
                 AbortedError);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
    EXPECT_THROW(g.barrier(), AbortedError);  // one failure ends the group
  });
}

// An abort that lands after the group did real work — here while the
// collective waits behind a long computation on the compute stream — makes
// wait() throw: the aborted collective's `end` event completes too, and a
// wait that only watched the event reported an aborted collective as a
// success. One GPU suffices.
TEST(NcclGpu, AnAbortAfterAWarmUpCollectiveMakesWaitThrow) {
  REQUIRE_GPUS(1);
  with_groups(1, [&](ProcessGroup& g, int rank) {
    const tensor::Device gpu{tensor::DeviceType::kCuda, rank};
    DeviceBuffer b(DataType::kFloat32, 1024, rank);
    g.all_reduce(b.data(), 1024, DataType::kFloat32, ReduceOp::kSum)
        ->wait();  // warm-up: connected, healthy
    tensor::Tensor a = tensor::Tensor::zeros({1024, 1024}, gpu),
                   c = tensor::Tensor::zeros({1024, 1024}, gpu);
    for (int i = 0; i < 200; ++i)
      tensor::gemm(false, false, 1.0f, a, a, 0.0f, c);  // ~0.4 TFLOP queued
    WorkPtr w =
        g.all_reduce(b.data(), 1024, DataType::kFloat32, ReduceOp::kSum);  // waits for the gemms
    g.abort("test: the job failed elsewhere");
    EXPECT_THROW(w->wait(), AbortedError);
    EXPECT_THROW(w->wait(), AbortedError)
        << "a second wait must not turn the failure into a success";
  });
}

// Stream ordering with no host synchronisation: kernels queued on the
// compute stream just before the collective are all in its input, and the
// result can be read right after wait().
TEST(NcclGpu, ACollectiveSeesEveryKernelQueuedBeforeIt) {
  REQUIRE_GPUS(2);
  const int n = std::min(tensor::cuda_device_count(), 4);
  with_groups(n, [&](ProcessGroup& g, int rank) {
    const tensor::Device gpu{tensor::DeviceType::kCuda, rank};
    constexpr int64_t kCount = int64_t{1} << 20;
    tensor::Tensor acc = tensor::Tensor::zeros({kCount}, gpu);
    const tensor::Tensor one =
        tensor::Tensor::from_vector({kCount}, std::vector<float>(kCount, 1.0f)).to(gpu);
    for (int i = 0; i < 300; ++i) tensor::axpy(1.0f, one, acc);  // queued, not run yet
    g.all_reduce(acc.data(), kCount, DataType::kFloat32, ReduceOp::kSum)->wait();
    const std::vector<float> got = acc.to_vector();
    int64_t wrong = 0;
    for (int64_t i = 0; i < kCount; ++i)
      if (got[i] != 300.0f * n && wrong++ < 5)
        ADD_FAILURE() << "rank " << rank << " element " << i << ": " << got[i];
    EXPECT_EQ(wrong, 0);
  });
}

// Note [Averaging in 16 bits]: at a world size that is not a power of two,
// NCCL's ncclAvg rounds 1/n to 16 bits (bf16: 1/3 -> 0.333984, every average
// 1.00195x too large). microddp's 16-bit average has no such bias: the mean
// signed relative error over a million averages is ten times below it.
TEST(NcclGpu, SixteenBitAveragesHaveNoBiasAtWorldThree) {
  REQUIRE_GPUS(3);
  constexpr int64_t kCount = int64_t{1} << 20;
  const auto input = [](int rank, int64_t i) {
    return 1.0f + static_cast<float>((i * 7919 + rank * 104729) % 4093) / 4093.0f;
  };
  with_groups(3, [&](ProcessGroup& g, int rank) {
    for (DataType t : {DataType::kBFloat16, DataType::kFloat16}) {
      SCOPED_TRACE(to_string(t));
      DeviceBuffer buf(t, kCount, rank);
      std::vector<float> v(kCount);
      for (int64_t i = 0; i < kCount; ++i) v[i] = input(rank, i);
      buf.set(v);  // rounded to 16 bits on the way
      g.all_reduce(buf.data(), kCount, t, ReduceOp::kAvg)->wait();
      const std::vector<float> got = buf.get();
      const auto round16 = [&](float x) {
        return t == DataType::kBFloat16 ? bf16_to_float(float_to_bf16(x))
                                        : fp16_to_float(float_to_fp16(x));
      };
      double signed_rel = 0;
      for (int64_t i = 0; i < kCount; ++i) {
        double exact = 0;
        for (int r = 0; r < 3; ++r) exact += round16(input(r, i));
        exact /= 3;
        signed_rel += (got[i] - exact) / exact;
      }
      const double bias = signed_rel / kCount;
      EXPECT_LT(std::abs(bias), 2e-4)
          << "mean relative error " << bias << " (ncclAvg's bf16 bias: +1.95e-3)";
    }
  });
}

// Trains `cfg` for `steps` steps with DDP over NCCL on up to four GPUs (one
// thread per rank, rank r on cuda:r; the fixture's batch of 12 divides by 2,
// 3 and 4) and returns each rank's parameters.
std::vector<mddp::test::Params> train_on_gpus(const train::TrainConfig& cfg, int steps) {
  const int world = std::min(tensor::cuda_device_count(), 4);
  std::vector<mddp::test::Params> got(world);
  MemoryStore store;
  const std::string prefix = next_prefix();
  mddp::test::run_threads(
      world,
      [&](int rank) {
        train::TrainConfig c = cfg;
        c.device = str("cuda:", rank);
        auto group = train::connect_process_group(store, rank, world, {"gpu-test", 0, ""}, c,
                                                  "127.0.0.1", prefix);
        train::DistributedTrainer dt(c, std::move(group));
        for (int s = 0; s < steps; ++s) {
          const train::StepResult r = dt.step();
          const perf::StepMetrics m = dt.metrics(r);
          EXPECT_GT(m.step_ms, 0) << "GPU phase timing";
          for (const comm::CommSpan& span : m.buckets) {
            EXPECT_GT(span.start_ns, 0);
            EXPECT_LE(span.start_ns, span.end_ns);
          }
        }
        got[rank] = mddp::test::snapshot(dt.trainer().model());
      },
      300s);
  return got;
}

void expect_all_close(const std::vector<mddp::test::Params>& got, const mddp::test::Params& want,
                      double tol) {
  for (std::size_t r = 0; r < got.size(); ++r)
    for (std::size_t p = 0; p < want.size(); ++p)
      EXPECT_LE(mddp::test::rel_error(got[r][p], want[p]), tol)
          << "rank " << r << " parameter " << p;
}

// DDP over NCCL on N GPUs trains the same model as one CPU process on the
// whole global batch: MLP and CNN, every mode, and gradient accumulation
// (no_sync on all but the last micro-batch), as the CPU equivalence tests do.
TEST(NcclGpu, DdpOnGpusMatchesOneCpuProcess) {
  REQUIRE_GPUS(1);
  constexpr int kSteps = 4;
  for (const std::string model : {"mlp", "cnn"})
    for (const std::string mode : {"bucketed", "hooked", "naive", "sharded"})
      for (const int64_t accumulate : {int64_t{1}, int64_t{3}}) {
        SCOPED_TRACE(str(model, " ", mode, " accumulate ", accumulate));
        train::TrainConfig cfg = mddp::test::ddp_config(model, mode, 0.001);  // several buckets
        cfg.dist.first_bucket_mb = 0.0005;
        cfg.accumulate = accumulate;
        expect_all_close(train_on_gpus(cfg, kSteps), mddp::test::train_single(cfg, kSteps), 1e-4);
      }
}

// --on-failure heal on GPUs (Note [Survivors train on]): the ranks train 3
// steps over NCCL; the last rank's process is lost, and a newcomer (a
// Trainer built from the config, from_peers) takes its place on its GPU next
// to the survivors, which kept theirs, over a new NCCL communicator. Its copy
// is all-reduces with -0.0 from the others, so it arrives bit for bit, and
// after 3 more steps every rank holds what 6 steps of an unbroken job give,
// bit for bit (the same communicator size, the same kernels).
TEST(NcclGpu, ANewcomerHealsFromLiveGpusAndTheJobTrainsOnBitwise) {
  REQUIRE_GPUS(2);
  train::TrainConfig cfg = mddp::test::ddp_config("mlp", "bucketed", 25);
  cfg.optim = {.name = "adam", .lr = 1e-2f};
  const std::vector<mddp::test::Params> want = train_on_gpus(cfg, 6);
  const int world = static_cast<int>(want.size());
  std::vector<mddp::test::Params> got(world);
  MemoryStore store;
  const std::string before = next_prefix(), after = next_prefix();
  mddp::test::run_threads(
      world,
      [&](int rank) {
        train::TrainConfig c = cfg;
        c.device = str("cuda:", rank);
        std::unique_ptr<train::Trainer> kept;
        {
          train::DistributedTrainer dt(
              c, train::connect_process_group(store, rank, world, {"gpu-heal", 1, ""}, c,
                                              "127.0.0.1", before));
          for (int s = 0; s < 3; ++s) dt.step();
          if (rank < world - 1) kept = dt.release_trainer();  // the last rank's state is lost
        }
        std::shared_ptr<ProcessGroup> group = train::connect_process_group(
            store, rank, world, {"gpu-heal", 2, ""}, c, "127.0.0.1", after);
        std::optional<train::DistributedTrainer> dt;
        if (kept) {
          kept->set_world(rank, world, c);
          dt.emplace(kept, group);
        } else {
          c.from_peers = true;
          dt.emplace(c, group);
          EXPECT_EQ(dt->state_copy().sources, world - 1);
        }
        EXPECT_EQ(dt->trainer().steps_done(), 3);
        for (int s = 0; s < 3; ++s) dt->step();
        got[rank] = mddp::test::snapshot(dt->trainer().model());
      },
      300s);
  for (int r = 0; r < world; ++r)
    EXPECT_EQ(got[r], want[r]) << "rank " << r << ": not what an unbroken job holds after 6 steps";
}

// The compression hook on the GPU: gradients rounded to 16 bits by a kernel
// on the compute stream, all-reduced by NCCL in fp16/bf16 (summed in 16 bits,
// unlike the CPU backend's fp32 accumulation) and widened back. Close to one
// fp32 CPU process within the CPU hook's tolerances, with 2x headroom for the
// 16-bit sums; every rank receives the same bytes, so the ranks agree exactly.
TEST(NcclGpu, CompressedGradientsStayCloseToOneCpuProcess) {
  REQUIRE_GPUS(1);
  constexpr int kSteps = 4;
  for (auto [compress, tol] : {std::pair{"fp16", 2e-3}, std::pair{"bf16", 2e-2}}) {
    SCOPED_TRACE(compress);
    train::TrainConfig cfg = mddp::test::mlp_config();
    cfg.dist.compress = compress;
    cfg.dist.bucket_mb = 0.001;
    const std::vector<mddp::test::Params> got = train_on_gpus(cfg, kSteps);
    expect_all_close(got, mddp::test::train_single(cfg, kSteps), tol);
    for (std::size_t r = 1; r < got.size(); ++r)
      EXPECT_EQ(got[r], got[0]) << "rank " << r << " differs from rank 0";
  }
}

}  // namespace
}  // namespace mddp::comm::nccl
