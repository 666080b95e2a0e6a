// The GPT's small layers: Embedding, LayerNorm, GELU and Dropout (the
// attention is in attention.h, the blocks and the model in gpt.h). They take
// rows [N, C] (any leading dimensions: [B, T, C] is read as [B*T, C]) and
// return their output in their input's shape. Initialisation is GPT-2's,
// not PyTorch's default: embeddings N(0, init_std^2), LayerNorm 1 and 0.
#pragma once

#include "core/common/rng.h"
#include "core/nn/module.h"

namespace mddp::nn {

// ids (N token ids stored as floats, any shape) -> rows of weight [num, dim]:
// y [N, dim]. The ids get no gradient; backward adds dy's rows into the
// rows of weight.grad they came from.
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, float init_std, Rng& rng, tensor::Device device = {});
  const Tensor& forward(const Tensor& ids) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override;
  void collect_parameters(std::vector<Parameter*>& out) override { out.push_back(&weight); }

  Parameter weight;  // [num, dim], Parameter::embedding set

 private:
  const Tensor* ids_ = nullptr;
  Tensor y_, none_;
};

// Normalises each row over its C features, then scales and shifts:
// y = (x - mean) / sqrt(var + 1e-5) * weight + bias, as torch.nn.LayerNorm(C).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, tensor::Device device = {});
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override { return {"LayerNorm", {{"normalized_shape", dim()}}}; }
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_backward_buffers(std::vector<Tensor*>& out) override { out.push_back(&dx_rows_); }
  int64_t dim() const { return weight.value.numel(); }

  Parameter weight, bias;  // [C], [C]

 private:
  // The input and the buffers as rows [N, C]; y_ and dx_ view them in the input's shape.
  Tensor x_rows_, y_rows_, dx_rows_, mean_, rstd_, y_, dx_;
  tensor::Shape in_shape_;
};

// GPT-2's GELU, the tanh approximation (torch.nn.GELU(approximate="tanh")).
class Gelu : public Module {
 public:
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override { return "GELU(tanh)"; }
  LayerSpec spec() const override { return {"GELU", {}}; }
  void collect_backward_buffers(std::vector<Tensor*>& out) override { out.push_back(&dx_); }

 private:
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// Inverted dropout: each element zeroed with probability p, the rest scaled
// by 1 / (1 - p). The mask is a pure function of the seed set_dropout gave
// (tensor::dropout), so backward redraws it rather than storing it. Off in
// evaluation and at p = 0, where it passes its input through untouched.
class Dropout : public Module {
 public:
  explicit Dropout(float p) : p_(p) {}
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override { return {"Dropout", {}}; }
  void collect_backward_buffers(std::vector<Tensor*>& out) override { out.push_back(&dx_); }
  void set_dropout(bool training, uint64_t seed) override {
    active_ = training && p_ > 0.0f;
    seed_ = seed;
  }

 private:
  float p_;
  bool active_ = false;
  uint64_t seed_ = 0;
  Tensor y_, dx_;
};

}  // namespace mddp::nn
