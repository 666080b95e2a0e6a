// --compress topk:RATIO and powersgd:RANK over real transports: settings
// that keep everything equal uncompressed DDP; error feedback loses nothing
// (top-k exactly, PowerSGD to rounding); a rank-1 gradient survives rank-1
// PowerSGD; and ranks that are real processes hold bitwise the same
// parameters after every step. Compression's own pieces (top-k selection,
// the orthonormalisation) are in tests/unit/compression_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/comm/communicator.h"
#include "core/comm/file_store.h"
#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/common/rng.h"
#include "core/ddp/powersgd.h"
#include "core/ddp/topk.h"
#include "core/train/distributed.h"
#include "ddp/ddp_fixture.h"
#include "support/files.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

using ddp::Compression;
using ddp::CompressionKind;

std::unique_ptr<comm::Communicator> connect(comm::Store& store, int rank, int world,
                                            const std::string& name) {
  auto t = comm::connect_transport(store, rank, world, {name, 0, ""}, comm::TransportKind::kTcp,
                                   std::chrono::seconds(20));
  return std::make_unique<comm::Communicator>(std::move(t), comm::CommOptions{});
}

// Gradients of a small model's shapes: matrices, a conv kernel, biases.
const std::vector<tensor::Shape> kShapes = {{12, 8}, {8}, {6, 3, 2, 2}, {6}, {3, 20}, {3}};

std::vector<float> random_values(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = rng.normal();
  return v;
}

Compression keep_everything(CompressionKind kind) {
  Compression c;
  c.kind = kind;
  c.ratio = 1.0;               // top-k: every entry
  c.rank = 64;                 // PowerSGD: more than any dimension here, so full rank
  c.min_compression_rate = 0;  // and every matrix compressed
  return c;
}

struct KeepCase {
  CompressionKind kind;
  std::string mode;
  double bucket_mb;
  std::string name() const {
    return std::string(kind == CompressionKind::kTopK ? "topk" : "powersgd") + "_" + mode + "_" +
           std::to_string(static_cast<int>(bucket_mb * 1e6)) + "B";
  }
};

void PrintTo(const KeepCase& c, std::ostream* os) {
  *os << c.name();
}

class KeepEverything : public ::testing::TestWithParam<KeepCase> {};

// One backward's worth of gradients, synchronised: every gradient must be
// the plain average of the ranks' gradients, as with --compress none.
TEST_P(KeepEverything, GradientsAreTheUncompressedAverage) {
  const KeepCase c = GetParam();
  const int world = 3;
  std::vector<std::vector<std::vector<float>>> local(world), synced(world);
  std::vector<std::size_t> second_rounds(world);
  comm::MemoryStore store;
  run_threads(
      world,
      [&](int rank) {
        std::vector<nn::Parameter> params(kShapes.size());
        std::vector<nn::Parameter*> ptrs;
        for (std::size_t i = 0; i < kShapes.size(); ++i) {
          params[i] = {str(i), tensor::Tensor::zeros(kShapes[i]),
                       tensor::Tensor::zeros(kShapes[i])};
          ptrs.push_back(&params[i]);
        }
        auto comm = connect(store, rank, world, "keep-" + c.name());
        ddp::SyncOptions o{.mode = ddp::parse_mode(c.mode),
                           .bucket_mb = c.bucket_mb,
                           .first_bucket_mb = c.bucket_mb,
                           .compress = keep_everything(c.kind)};
        auto sync = ddp::make_grad_sync(o, ptrs, *comm);
        for (std::size_t i = 0; i < params.size();
             ++i) {  // after make_grad_sync: buckets re-point grads
          local[rank].push_back(random_values(params[i].grad.numel(), 100 * rank + i));
          std::copy(local[rank][i].begin(), local[rank][i].end(), params[i].grad.data());
        }
        for (std::size_t i = params.size(); i-- > 0;)
          sync->on_grad_ready(params[i]);  // backward order
        sync->finish();
        for (const auto& p : params) synced[rank].push_back(p.grad.to_vector());
        for (const auto& s : sync->stats().spans) second_rounds[rank] += s.round == 1;
      },
      std::chrono::seconds(60));
  if (c.kind == CompressionKind::kPowerSgd) {
    EXPECT_GT(second_rounds[0], 0u)
        << "no matrix went through PowerSGD's factors; the test would be vacuous";
  }
  for (std::size_t p = 0; p < kShapes.size(); ++p) {
    std::vector<float> mean(local[0][p].size(), 0.0f);
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < mean.size(); ++i)
        mean[i] += local[r][p][i] / static_cast<float>(world);
    for (int r = 0; r < world; ++r) {
      EXPECT_LE(rel_error(synced[r][p], mean), 1e-5) << "parameter " << p << " on rank " << r;
      EXPECT_EQ(synced[r][p], synced[0][p])
          << "parameter " << p << ": rank " << r << " differs from rank 0";
    }
  }
}

std::vector<KeepCase> keep_cases() {
  std::vector<KeepCase> cases;
  for (auto kind : {CompressionKind::kTopK, CompressionKind::kPowerSgd}) {
    cases.push_back({kind, "naive", 25});
    cases.push_back({kind, "hooked", 25});
    cases.push_back({kind, "bucketed", 25});
    cases.push_back({kind, "bucketed", 0.0001});  // several buckets
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Modes, KeepEverything, ::testing::ValuesIn(keep_cases()),
                         [](const auto& info) { return info.param.name(); });

// The same through the trainer: topk:1 trains the model one process trains
// on the whole batch (like --compress none, within fp32 summation order).
TEST(DdpTopK, KeepingEverythingTrainsLikeOneProcess) {
  for (const char* mode : {"naive", "hooked", "bucketed"}) {
    train::TrainConfig cfg = ddp_config("mlp", mode, 0.001);
    cfg.dist.compress = "topk:1";
    const auto ranks = train_ranks(cfg, 2, comm::TransportKind::kTcp, 4);
    for (std::size_t p = 0; p < ranks[0].size(); ++p) {
      EXPECT_EQ(ranks[1][p], ranks[0][p])
          << mode << ": parameter " << p << " differs between ranks";
      EXPECT_LE(rel_error(ranks[0][p], train_single(cfg, 4)[p]), 1e-5)
          << mode << ": parameter " << p;
    }
  }
}

// Error feedback: what the ranks sent over all steps plus what they still
// owe is exactly the sum of their gradients. Integer gradients make every
// float sum here exact, so the check is equality.
TEST(DdpTopK, SentPlusResidualIsExactlyTheGradientSum) {
  const int world = 2, steps = 6;
  const int64_t n = 257;
  std::vector<double> grad_sum(n, 0.0), carried(n, 0.0);  // sum of g; world * sum of the averages
  std::vector<std::vector<float>> residual(world);
  std::mutex mu;
  comm::MemoryStore store;
  run_threads(
      world,
      [&](int rank) {
        auto comm = connect(store, rank, world, "topk-feedback");
        tensor::Tensor region = tensor::Tensor::zeros({n});
        ddp::TopKUnit unit(0, region, 0.05);
        Rng rng(1000 + rank);
        for (int s = 0; s < steps; ++s) {
          std::vector<float> g(n);
          for (float& v : g) v = static_cast<float>(static_cast<int>(rng.next_u64() % 201) - 100);
          std::copy(g.begin(), g.end(), region.data());
          unit.launch(*comm);
          unit.advance(*comm);
          ddp::SyncStats stats;
          unit.complete(stats);
          EXPECT_EQ(stats.bytes, static_cast<std::size_t>(2 * unit.k()) * sizeof(float));
          EXPECT_EQ(stats.grad_bytes, static_cast<std::size_t>(n) * sizeof(float));
          std::lock_guard lock(mu);
          for (int64_t i = 0; i < n; ++i) {
            grad_sum[i] += g[i];
            if (rank == 0) carried[i] += static_cast<double>(region.data()[i]) * world;
          }
        }
        residual[rank] = unit.residual().to_vector();
      },
      std::chrono::seconds(60));
  double owed = 0;
  for (int64_t i = 0; i < n; ++i) {
    double still = 0;
    for (int r = 0; r < world; ++r) still += residual[r][i];
    owed += std::fabs(still);
    EXPECT_EQ(carried[i] + still, grad_sum[i]) << "entry " << i;
  }
  EXPECT_GT(owed, 0) << "nothing was held back; the check would be vacuous";
}

// PowerSGD's error feedback: each rank's residual is what the average did
// not carry of its M = g + e, so the residuals plus world copies of the
// average are the sum of the Ms (up to fp32 rounding).
TEST(DdpPowerSgd, ResidualsPlusTheAverageAreTheSumOfWhatWasOwed) {
  const int world = 2;
  const tensor::Shape shape = {16, 10};
  const int64_t n = 160;
  std::vector<std::vector<float>> owed(world), residual(world), average(world);
  comm::MemoryStore store;
  run_threads(
      world,
      [&](int rank) {
        auto comm = connect(store, rank, world, "powersgd-feedback");
        tensor::Tensor region = tensor::Tensor::zeros({n});
        Compression c;
        c.kind = CompressionKind::kPowerSgd;
        c.rank = 2;
        ddp::PowerSgdUnit unit(0, region, {region.view(0, shape)}, c);
        ASSERT_EQ(unit.compressed_matrices(), 1u);
        std::vector<float> e(n, 0.0f);
        for (int s = 0; s < 4; ++s) {
          const std::vector<float> g = random_values(n, 50 * rank + s);
          owed[rank].assign(n, 0.0f);
          for (int64_t i = 0; i < n; ++i) owed[rank][i] = g[i] + e[i];
          std::copy(g.begin(), g.end(), region.data());
          unit.launch(*comm);
          unit.advance(*comm);
          ddp::SyncStats stats;
          unit.complete(stats);
          EXPECT_EQ(stats.bytes,
                    static_cast<std::size_t>((16 + 10) * 2) * sizeof(float));  // P then Q
          e = unit.residual().to_vector();
        }
        residual[rank] = e;
        average[rank] = region.to_vector();
      },
      std::chrono::seconds(60));
  EXPECT_EQ(average[1], average[0]);
  std::vector<float> got(n), want(n);
  double held = 0;
  for (int64_t i = 0; i < n; ++i) {
    got[i] = residual[0][i] + residual[1][i] + world * average[0][i];
    want[i] = owed[0][i] + owed[1][i];
    held += std::fabs(residual[0][i]);
  }
  EXPECT_LE(rel_error(got, want), 1e-5);
  EXPECT_GT(held, 1e-3) << "rank 2 of a random 16x10 should leave a residual";
}

float max_abs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// A gradient that is itself rank 1 (the same u v^T on every rank) comes
// through rank-1 PowerSGD whole, and nothing is owed.
TEST(DdpPowerSgd, ARankOneGradientComesThroughRankOne) {
  const int world = 2, rows = 24, cols = 9;
  const std::vector<float> u = random_values(rows, 1), v = random_values(cols, 2);
  std::vector<float> m(rows * cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m[i * cols + j] = u[i] * v[j];
  std::vector<std::vector<float>> got(world), residual(world);
  comm::MemoryStore store;
  run_threads(
      world,
      [&](int rank) {
        auto comm = connect(store, rank, world, "powersgd-rank1");
        tensor::Tensor region = tensor::Tensor::from_vector({rows * cols}, m);
        Compression c;
        c.kind = CompressionKind::kPowerSgd;
        ddp::PowerSgdUnit unit(0, region, {region.view(0, {rows, cols})}, c);
        unit.launch(*comm);
        unit.advance(*comm);
        ddp::SyncStats stats;
        unit.complete(stats);
        got[rank] = region.to_vector();
        residual[rank] = unit.residual().to_vector();
      },
      std::chrono::seconds(60));
  EXPECT_LE(rel_error(got[0], m), 1e-5);
  EXPECT_LE(rel_error(got[1], m), 1e-5);
  EXPECT_LE(max_abs(residual[0]) / max_abs(m), 1e-5)
      << "rank 0 still owes part of a rank-1 gradient";
}

// Ranks as real processes (fork, FileStore, the transport a job picks):
// after every step every rank holds bitwise the same parameters, though
// each keeps its own residual.
TEST(DdpCompressedProcesses, EveryRankHoldsTheSameParametersAfterEveryStep) {
  const int world = 3, steps = 4;
  for (const char* compress : {"topk:0.05", "powersgd:2"})
    for (const char* model : {"mlp", "cnn"}) {
      SCOPED_TRACE(std::string(compress) + " " + model);
      train::TrainConfig cfg = ddp_config(model, "bucketed", 0.0005);
      cfg.dist.compress = compress;
      TempDir dir;
      run_processes(
          world,
          [&](int rank) {
            comm::FileStore store(dir.path());
            train::DistributedTrainer dt(
                cfg, train::connect_process_group(store, rank, world, {"cmp", 0, ""}, cfg));
            for (int s = 0; s < steps; ++s) {
              dt.step();
              std::ofstream out(dir.path() + "/r" + std::to_string(rank) + "s" + std::to_string(s),
                                std::ios::binary);
              for (const auto& p : snapshot(dt.trainer().model()))
                out.write(reinterpret_cast<const char*>(p.data()),
                          static_cast<std::streamsize>(p.size() * sizeof(float)));
            }
          },
          std::chrono::seconds(120));
      const auto read = [&](int r, int s) {
        return read_file(dir.path() + "/r" + std::to_string(r) + "s" + std::to_string(s));
      };
      for (int s = 0; s < steps; ++s) {
        const std::string rank0 = read(0, s);
        ASSERT_FALSE(rank0.empty()) << "step " << s;
        for (int r = 1; r < world; ++r)
          EXPECT_TRUE(read(r, s) == rank0) << "rank " << r << " step " << s;
      }
      EXPECT_FALSE(read(0, 0) == read(0, steps - 1)) << "the parameters did not move";
    }
}

}  // namespace
}  // namespace mddp::test
