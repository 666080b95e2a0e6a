#include "ddp/ddp_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/comm/gloo/gloo.h"
#include "core/comm/memory_store.h"
#include "core/comm/transport/connect.h"
#include "core/common/rng.h"
#include "core/train/distributed.h"
#include "support/ranks.h"

namespace mddp::test {
namespace {

void put_be32(std::ofstream& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                     static_cast<char>(v >> 8), static_cast<char>(v)};
  out.write(b, 4);
}

void write_split(const std::string& dir, const std::string& prefix, int n, uint64_t seed) {
  Rng rng(seed);
  std::ofstream img(dir + "/" + prefix + "-images-idx3-ubyte", std::ios::binary);
  std::ofstream lab(dir + "/" + prefix + "-labels-idx1-ubyte", std::ios::binary);
  put_be32(img, 0x803);
  put_be32(img, n);
  put_be32(img, 8);
  put_be32(img, 8);
  put_be32(lab, 0x801);
  put_be32(lab, n);
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng.below(10));
    for (int p = 0; p < 64; ++p) {  // a class-dependent stripe plus noise, so it is learnable
      const int v = (p % 8 == label % 8 ? 180 : 20) + static_cast<int>(rng.below(60));
      img.put(static_cast<char>(v));
    }
    lab.put(static_cast<char>(label));
  }
}

}  // namespace

std::string tiny_image_dataset() {
  static const std::string dir = [] {
    std::string d =
        (std::filesystem::temp_directory_path() / ("mddp-ddp-test-" + std::to_string(getpid())))
            .string();
    std::filesystem::create_directories(d);
    write_split(d, "train", 64, 1);
    write_split(d, "t10k", 16, 2);
    return d;
  }();
  return "idx:" + dir;
}

train::TrainConfig mlp_config() {
  train::TrainConfig c;
  c.data.spec = "synthetic";
  c.data.synthetic_size = 96;
  c.model.kind = "mlp";
  c.model.width = 12;
  c.model.depth = 3;
  c.model.classes = 5;
  c.batch = 12;  // divisible by 2, 3 and 4 ranks
  c.optim = {.name = "sgd", .lr = 0.05f, .momentum = 0.9f};
  c.eval = false;
  c.dist.timeout_ms = 20'000;
  return c;
}

train::TrainConfig cnn_config() {
  train::TrainConfig c = mlp_config();
  c.data.spec = tiny_image_dataset();
  c.model.kind = "cnn";
  c.model.channels = {3, 4};
  c.model.hidden = 10;
  c.model.classes = 10;
  return c;
}

train::TrainConfig gpt_config() {
  train::TrainConfig c = mlp_config();
  c.data.spec = "synthetic-tokens";
  c.model.kind = "gpt";
  c.model.classes = 11;  // the synthetic vocabulary
  c.model.layers = 2;
  c.model.heads = 2;
  c.model.embd = 8;
  c.model.block = 8;
  return c;
}

train::TrainConfig ddp_config(const std::string& model, const std::string& mode, double bucket_mb) {
  train::TrainConfig c = model == "cnn"   ? cnn_config()
                         : model == "gpt" ? gpt_config()
                                          : mlp_config();
  c.dist.ddp = mode;
  c.dist.bucket_mb = bucket_mb;
  c.dist.first_bucket_mb = bucket_mb;
  return c;
}

Params snapshot(nn::Module& model) {
  Params out;
  for (nn::Parameter* p : model.parameters()) out.push_back(p->value.to_vector());
  return out;
}

std::vector<Params> train_ranks(const train::TrainConfig& cfg, int world, comm::TransportKind kind,
                                int steps) {
  static std::atomic<int> job_counter{0};
  comm::MemoryStore store;
  const std::string prefix = "job" + std::to_string(job_counter++);
  std::vector<Params> out(world);
  run_threads(
      world,
      [&](int rank) {
        std::unique_ptr<comm::ProcessGroup> c;
        if (cfg.dist.backend == "gloo") {
          c = comm::gloo::connect_gloo(store, rank, world,
                                       {std::chrono::seconds(20), "127.0.0.1", prefix});
        } else {
          auto transport =
              comm::connect_transport(store, rank, world, {"ddp-test", 0, "secret"}, kind,
                                      std::chrono::seconds(20), "127.0.0.1", prefix);
          c = std::make_unique<comm::Communicator>(std::move(transport), train::comm_options(cfg));
        }
        train::DistributedTrainer dt(cfg, std::move(c));
        for (int s = 0; s < steps; ++s) dt.step();
        out[rank] = snapshot(dt.trainer().model());
      },
      std::chrono::seconds(120));
  return out;
}

Params train_single(const train::TrainConfig& cfg, int steps) {
  train::TrainConfig single = cfg;
  single.batch = cfg.batch * cfg.accumulate;
  single.accumulate = 1;
  train::Trainer t(single);
  for (int s = 0; s < steps; ++s) t.step();
  return snapshot(t.model());
}

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return a.size() != b.size() ? 1e30 : diff / std::max(scale, 1e-12);
}

void expect_identical_across_ranks(const std::vector<Params>& ranks) {
  for (std::size_t r = 1; r < ranks.size(); ++r)
    for (std::size_t p = 0; p < ranks[0].size(); ++p)
      ASSERT_EQ(
          std::memcmp(ranks[r][p].data(), ranks[0][p].data(), ranks[0][p].size() * sizeof(float)),
          0)
          << "rank " << r << " parameter " << p << " differs from rank 0";
}

void expect_close(const Params& got, const Params& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t p = 0; p < want.size(); ++p)
    EXPECT_LE(rel_error(got[p], want[p]), tol) << what << ": parameter " << p;
}

}  // namespace mddp::test
