#include "core/nn/layers.h"

#include <cmath>

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::nn {

namespace ops = tensor;
using tensor::ensure_shape;
using tensor::Shape;

namespace {
// PyTorch's default init: kaiming_uniform(a=sqrt(5)) for the weight, which is
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the same bound for the bias.
Parameter make_param(const std::string& name, const Shape& shape, float bound, Rng& rng,
                     tensor::Device device) {
  std::vector<float> values(tensor::numel_of(shape));
  for (float& v : values) v = rng.uniform(-bound, bound);
  return {name, Tensor::from_vector(shape, values, device), Tensor::zeros(shape, device)};
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, Rng& rng, tensor::Device device) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in));
  weight = make_param("weight", {out, in}, bound, rng, device);
  bias = make_param("bias", {out}, bound, rng, device);
}

Linear::Linear(int64_t in, int64_t out, float init_std, Rng& rng, tensor::Device device) {
  std::vector<float> w(static_cast<std::size_t>(in * out));
  for (float& v : w) v = init_std * rng.normal();
  weight = {"weight", Tensor::from_vector({out, in}, w, device), Tensor::zeros({out, in}, device)};
  bias = {"bias", Tensor::zeros({out}, device), Tensor::zeros({out}, device)};
}

const Tensor& Linear::forward(const Tensor& x) {
  MDDP_CHECK(x.ndim() == 2 && x.dim(1) == weight.value.dim(1), describe(), " got input ",
             tensor::shape_str(x.shape()));
  x_ = &x;
  ensure_shape(y_, {x.dim(0), weight.value.dim(0)}, x.device());
  ops::gemm(false, true, 1.0f, x, weight.value, 0.0f, y_);
  ops::bias_add(y_, bias.value);
  return y_;
}

const Tensor& Linear::backward(const Tensor& dy, bool need_dx) {
  MDDP_CHECK(x_ != nullptr, "backward before forward");
  // db += column sums of dy; dW [out, in] += dy^T [out, N] @ x [N, in].
  // Bias first: hooks fire in reverse parameters() order (Note [Grad-ready hooks]).
  ops::bias_grad(dy, bias.grad);
  grad_ready(bias);
  ops::gemm(true, false, 1.0f, dy, *x_, 1.0f, weight.grad);
  grad_ready(weight);
  if (!need_dx) return dx_;
  ensure_shape(dx_, x_->shape(), dy.device());
  ops::gemm(false, false, 1.0f, dy, weight.value, 0.0f, dx_);  // dx [N, in] = dy @ W
  return dx_;
}

std::string Linear::describe() const {
  return str("Linear(", weight.value.dim(1), " -> ", weight.value.dim(0), ")");
}

LayerSpec Linear::spec() const {
  return {"Linear", {{"in_features", weight.value.dim(1)}, {"out_features", weight.value.dim(0)}}};
}

void Linear::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  out.push_back(&bias);
}

const Tensor& ReLU::forward(const Tensor& x) {
  ensure_shape(y_, x.shape(), x.device());
  ops::relu_forward(x, y_);
  return y_;
}

const Tensor& ReLU::backward(const Tensor& dy, bool need_dx) {
  if (!need_dx) return dx_;
  ensure_shape(dx_, dy.shape(), dy.device());
  ops::relu_backward(y_, dy, dx_);
  return dx_;
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int k, Rng& rng, tensor::Device device)
    : k_(k) {
  MDDP_CHECK(k % 2 == 1, "Conv2d kernel size must be odd for same padding, got ", k);
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_channels * k * k));
  weight = make_param("weight", {out_channels, in_channels, k, k}, bound, rng, device);
  bias = make_param("bias", {out_channels}, bound, rng, device);
}

const Tensor& Conv2d::forward(const Tensor& x) {
  MDDP_CHECK(x.ndim() == 4 && x.dim(1) == weight.value.dim(1), describe(), " got input ",
             tensor::shape_str(x.shape()));
  x_ = &x;
  const int pad = k_ / 2;
  ensure_shape(y_, {x.dim(0), weight.value.dim(0), x.dim(2), x.dim(3)}, x.device());
  ensure_shape(col_, {x.dim(1) * k_ * k_, x.dim(2) * x.dim(3)}, x.device());
  ops::conv2d_forward(x, weight.value, bias.value, pad, col_, y_);
  return y_;
}

const Tensor& Conv2d::backward(const Tensor& dy, bool need_dx) {
  MDDP_CHECK(x_ != nullptr, "backward before forward");
  ops::conv2d_backward_params(*x_, dy, k_ / 2, col_, weight.grad, bias.grad);
  grad_ready(bias);  // reverse parameters() order, as in Linear
  grad_ready(weight);
  if (!need_dx) return dx_;
  ensure_shape(dx_, x_->shape(), dy.device());
  ops::conv2d_backward_input(weight.value, dy, k_ / 2, col_, dx_);
  return dx_;
}

std::string Conv2d::describe() const {
  const auto& w = weight.value;
  return str("Conv2d(", w.dim(1), " -> ", w.dim(0), ", ", k_, "x", k_, ")");
}

LayerSpec Conv2d::spec() const {
  const auto& w = weight.value;
  return {"Conv2d",
          {{"in_channels", w.dim(1)},
           {"out_channels", w.dim(0)},
           {"kernel_size", k_},
           {"stride", 1},
           {"padding", k_ / 2}}};
}

void Conv2d::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  out.push_back(&bias);
}

const Tensor& MaxPool2d::forward(const Tensor& x) {
  MDDP_CHECK(x.ndim() == 4, describe(), " got input ", tensor::shape_str(x.shape()));
  x_ = &x;
  ensure_shape(y_, {x.dim(0), x.dim(1), x.dim(2) / k_, x.dim(3) / k_}, x.device());
  ops::maxpool2d_forward(x, k_, y_);
  return y_;
}

const Tensor& MaxPool2d::backward(const Tensor& dy, bool need_dx) {
  MDDP_CHECK(x_ != nullptr, "backward before forward");
  if (!need_dx) return dx_;
  ensure_shape(dx_, x_->shape(), dy.device());
  ops::maxpool2d_backward(*x_, dy, k_, dx_);
  return dx_;
}

std::string MaxPool2d::describe() const {
  return str("MaxPool2d(", k_, ")");
}

const Tensor& Flatten::forward(const Tensor& x) {
  in_shape_ = x.shape();
  y_ = x.reshape({x.dim(0), x.numel() / std::max<int64_t>(x.dim(0), 1)});
  return y_;
}

const Tensor& Flatten::backward(const Tensor& dy, bool need_dx) {
  if (need_dx) dx_ = dy.reshape(in_shape_);
  return dx_;
}

}  // namespace mddp::nn
