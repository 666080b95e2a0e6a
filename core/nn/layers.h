// The layers: Linear, ReLU, Conv2d, MaxPool2d, Flatten. Shapes: N batch,
// C/O channels in/out, H/W spatial. Initialisation follows PyTorch's default
// (uniform in +-1/sqrt(fan_in) for weights and biases) from microddp's own Rng,
// so a seed gives the same model everywhere.
#pragma once

#include "core/common/rng.h"
#include "core/nn/module.h"

namespace mddp::nn {

// y [N, out] = x [N, in] @ W^T + b, with W [out, in], b [out].
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, Rng& rng, tensor::Device device = {});
  // GPT-2's initialisation instead: weight ~ N(0, init_std^2), bias 0.
  Linear(int64_t in, int64_t out, float init_std, Rng& rng, tensor::Device device = {});
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override;
  void collect_parameters(std::vector<Parameter*>& out) override;
  void collect_backward_buffers(std::vector<Tensor*>& out) override { out.push_back(&dx_); }

  Parameter weight, bias;

 private:
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

class ReLU : public Module {
 public:
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override { return "ReLU"; }
  LayerSpec spec() const override { return {"ReLU", {}}; }

 private:
  Tensor y_, dx_;
};

// k x k convolution, stride 1, "same" zero padding k/2 (k odd).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int k, Rng& rng, tensor::Device device = {});
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override;
  void collect_parameters(std::vector<Parameter*>& out) override;

  Parameter weight, bias;  // [O, C, k, k], [O]

 private:
  int k_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_, col_;
};

// k x k max pooling with stride k.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int k) : k_(k) {}
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override;
  LayerSpec spec() const override { return {"MaxPool2d", {{"kernel_size", k_}, {"stride", k_}}}; }

 private:
  int k_;
  const Tensor* x_ = nullptr;
  Tensor y_, dx_;
};

// [N, ...] -> [N, prod(...)], a view: no copy either way.
class Flatten : public Module {
 public:
  const Tensor& forward(const Tensor& x) override;
  const Tensor& backward(const Tensor& dy, bool need_dx) override;
  std::string describe() const override { return "Flatten"; }
  LayerSpec spec() const override { return {"Flatten", {}}; }  // PyTorch's default start_dim=1

 private:
  tensor::Shape in_shape_;
  Tensor y_, dx_;
};

}  // namespace mddp::nn
