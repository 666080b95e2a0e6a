#include "labs/support/dp_fixture.h"

#include <algorithm>
#include <cmath>

#include "core/common/rng.h"
#include "core/nn/loss.h"
#include "core/nn/models.h"
#include "labs/support/values.h"

namespace mddp::labs {
namespace {

constexpr int64_t kFeatures = 5, kClasses = 3;

// max |a - b| / max |b| over one parameter (norm-wise relative error).
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-12;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

// Whether got == factor * want over every parameter.
bool scaled(const Grads& got, const Grads& want, double factor) {
  for (std::size_t p = 0; p < want.size(); ++p) {
    std::vector<float> w(want[p]);
    for (float& v : w) v = static_cast<float>(v * factor);
    if (rel_error(got[p], w) > 1e-4) return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<nn::Sequential> dp_model(uint64_t seed) {
  return nn::build_sequential(
      {.kind = "mlp", .width = 7, .depth = 2, .classes = kClasses, .seed = seed}, {kFeatures});
}

Grads grads_of(nn::Module& model) {
  Grads g;
  for (nn::Parameter* p : model.parameters()) g.push_back(p->grad.to_vector());
  return g;
}

Grads values_of(nn::Module& model) {
  Grads g;
  for (nn::Parameter* p : model.parameters()) g.push_back(p->value.to_vector());
  return g;
}

void backward_on(nn::Sequential& model, int64_t first, int64_t rows, int64_t total,
                 uint64_t batch) {
  Rng rng(1000 + batch);  // the whole batch, the same on every rank; then the rows wanted
  std::vector<float> xs(static_cast<std::size_t>(total * kFeatures)),
      ys(static_cast<std::size_t>(total));
  for (float& v : xs) v = rng.normal();
  for (float& v : ys) v = static_cast<float>(rng.below(kClasses));
  const auto x = tensor::Tensor::from_vector(
      {rows, kFeatures},
      std::vector<float>(xs.begin() + first * kFeatures, xs.begin() + (first + rows) * kFeatures));
  const auto y = tensor::Tensor::from_vector(
      {rows}, std::vector<float>(ys.begin() + first, ys.begin() + first + rows));
  nn::CrossEntropyLoss loss;
  loss.forward(model.forward(x), y);
  model.backward(loss.backward(), false);
}

void backward_shard(nn::Sequential& model, int rank, int world, uint64_t batch) {
  backward_on(model, rank * kSamplesPerRank, kSamplesPerRank, world * kSamplesPerRank, batch);
}

namespace {

// Gradients of a fresh model (values `start`, or seed 42's) after backward
// on rows [first, first + rows) of each batch of `total` samples.
Grads grads_after(const std::vector<uint64_t>& batches, const Grads* start, int64_t first,
                  int64_t rows, int64_t total) {
  auto model = dp_model();
  if (start != nullptr) {
    auto params = model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i)
      params[i]->value = tensor::Tensor::from_vector(params[i]->value.shape(), (*start)[i]);
  }
  model->zero_grad();
  for (uint64_t b : batches) backward_on(*model, first, rows, total, b);
  return grads_of(*model);
}

}  // namespace

Grads whole_batch_grads(int world, const std::vector<uint64_t>& batches, const Grads* start) {
  return grads_after(batches, start, 0, world * kSamplesPerRank, world * kSamplesPerRank);
}

Grads shard_grads(int rank, int world, const std::vector<uint64_t>& batches, const Grads* start) {
  return grads_after(batches, start, rank * kSamplesPerRank, kSamplesPerRank,
                     world * kSamplesPerRank);
}

std::string param_name(nn::Module& model, std::size_t i) {
  return str("parameter '", model.parameters()[i]->name, "'");
}

CaseResult compare_grads(nn::Module& model, const Grads& want, const Grads& local, int world,
                         const std::string& who) {
  const Grads got = grads_of(model);
  std::size_t bad = want.size();
  for (std::size_t p = 0; p < want.size() && bad == want.size(); ++p)
    if (rel_error(got[p], want[p]) > 1e-4) bad = p;
  if (bad == want.size()) return CaseResult::ok();

  std::size_t k = 0;
  while (k + 1 < want[bad].size() && close(got[bad][k], want[bad][k])) ++k;
  CaseResult r;
  r.message = str(who, ", the gradient of ", param_name(model, bad), " element ", k,
                  ": expected the whole batch's ", show(want[bad][k]), ", got ", show(got[bad][k]));
  if (world > 1 && scaled(got, want, world)) {
    r.details.push_back(
        str("every gradient is ", world,
            " times the average: the sum over ranks, never divided by the world size (use "
            "ReduceOp::kAvg)"));
  } else if (world > 1 && scaled(got, want, 1.0 / world)) {
    r.details.push_back(
        str("every gradient is the average divided by ", world,
            " once more: averaging twice (ReduceOp::kAvg already divides by the world size)"));
  } else if (world > 1 && rel_error(got[bad], local[bad]) <= 1e-6) {
    r.details.push_back(
        str("that is ", who, "'s own gradient: ", param_name(model, bad),
            " was never averaged with the others (or the result never waited for)"));
  }
  return r;
}

}  // namespace mddp::labs
