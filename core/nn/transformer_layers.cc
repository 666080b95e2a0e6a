#include "core/nn/transformer_layers.h"

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::nn {

namespace ops = tensor;
using tensor::ensure_shape;

namespace {
// N(0, std^2) values: GPT-2's initialisation of weights and embeddings.
Tensor normal_values(const tensor::Shape& shape, float std, Rng& rng, tensor::Device device) {
  std::vector<float> v(tensor::numel_of(shape));
  for (float& x : v) x = std * rng.normal();
  return Tensor::from_vector(shape, v, device);
}

Parameter constant_param(const std::string& name, int64_t n, float value, tensor::Device device) {
  Parameter p{name, Tensor::empty({n}, device), Tensor::zeros({n}, device)};
  ops::fill(p.value, value);
  return p;
}
}  // namespace

Embedding::Embedding(int64_t num, int64_t dim, float init_std, Rng& rng, tensor::Device device) {
  weight = {"weight", normal_values({num, dim}, init_std, rng, device),
            Tensor::zeros({num, dim}, device)};
  weight.embedding = true;
}

const Tensor& Embedding::forward(const Tensor& ids) {
  ids_ = &ids;
  ensure_shape(y_, {ids.numel(), weight.value.dim(1)}, ids.device());
  ops::embedding_forward(ids, weight.value, y_);
  return y_;
}

const Tensor& Embedding::backward(const Tensor& dy, bool) {
  MDDP_CHECK(ids_ != nullptr, "backward before forward");
  ops::embedding_backward(*ids_, dy, weight.grad);
  grad_ready(weight);
  return none_;  // token ids have no gradient
}

std::string Embedding::describe() const {
  return str("Embedding(", weight.value.dim(0), ", ", weight.value.dim(1), ")");
}

LayerSpec Embedding::spec() const {
  return {"Embedding",
          {{"num_embeddings", weight.value.dim(0)}, {"embedding_dim", weight.value.dim(1)}}};
}

LayerNorm::LayerNorm(int64_t dim, tensor::Device device)
    : weight(constant_param("weight", dim, 1.0f, device)),
      bias(constant_param("bias", dim, 0.0f, device)) {}

const Tensor& LayerNorm::forward(const Tensor& x) {
  MDDP_CHECK(x.ndim() >= 2 && x.dim(-1) == dim(), describe(), " got input ",
             tensor::shape_str(x.shape()));
  in_shape_ = x.shape();
  const int64_t n = x.numel() / dim();
  x_rows_ = x.reshape({n, dim()});
  ensure_shape(y_rows_, {n, dim()}, x.device());
  ensure_shape(mean_, {n}, x.device());
  ensure_shape(rstd_, {n}, x.device());
  ops::layernorm_forward(x_rows_, weight.value, bias.value, 1e-5f, y_rows_, mean_, rstd_);
  y_ = y_rows_.reshape(in_shape_);  // a view: the buffer stays [N, C] across steps
  return y_;
}

const Tensor& LayerNorm::backward(const Tensor& dy, bool) {
  MDDP_CHECK(x_rows_.defined(), "backward before forward");
  ensure_shape(dx_rows_, x_rows_.shape(), dy.device());
  ops::layernorm_backward(x_rows_, weight.value, mean_, rstd_, dy.reshape(x_rows_.shape()),
                          dx_rows_, weight.grad, bias.grad);
  grad_ready(bias);  // reverse parameters() order (Note [Grad-ready hooks])
  grad_ready(weight);
  dx_ = dx_rows_.reshape(in_shape_);
  return dx_;
}

std::string LayerNorm::describe() const {
  return str("LayerNorm(", dim(), ")");
}

void LayerNorm::collect_parameters(std::vector<Parameter*>& out) {
  out.push_back(&weight);
  out.push_back(&bias);
}

const Tensor& Gelu::forward(const Tensor& x) {
  x_ = &x;
  ensure_shape(y_, x.shape(), x.device());
  ops::gelu_forward(x, y_);
  return y_;
}

const Tensor& Gelu::backward(const Tensor& dy, bool need_dx) {
  MDDP_CHECK(x_ != nullptr, "backward before forward");
  if (!need_dx) return dx_;
  ensure_shape(dx_, dy.shape(), dy.device());
  ops::gelu_backward(*x_, dy, dx_);
  return dx_;
}

const Tensor& Dropout::forward(const Tensor& x) {
  if (!active_) return x;
  ensure_shape(y_, x.shape(), x.device());
  ops::dropout(x, p_, seed_, y_);
  return y_;
}

const Tensor& Dropout::backward(const Tensor& dy, bool need_dx) {
  if (!active_ || !need_dx) return dy;
  ensure_shape(dx_, dy.shape(), dy.device());
  ops::dropout(dy, p_, seed_, dx_);  // the forward's mask, redrawn from the same seed
  return dx_;
}

std::string Dropout::describe() const {
  return str("Dropout(", p_, ")");
}

}  // namespace mddp::nn
