#include "core/nn/loss.h"

#include "core/common/check.h"
#include "core/tensor/ops.h"

namespace mddp::nn {

float CrossEntropyLoss::forward(const Tensor& output, const Tensor& target) {
  target_ = &target;
  tensor::ensure_shape(probs_, output.shape(), output.device());
  return tensor::softmax_xent_forward(output, target, probs_);
}

const Tensor& CrossEntropyLoss::backward() {
  MDDP_CHECK(target_ != nullptr, "backward before forward");
  tensor::ensure_shape(grad_, probs_.shape(), probs_.device());
  tensor::softmax_xent_backward(probs_, *target_, grad_, /*labels_checked=*/true);  // by forward()
  return grad_;
}

float MSELoss::forward(const Tensor& output, const Tensor& target) {
  MDDP_CHECK(output.numel() == target.numel(), "mse: output ", tensor::shape_str(output.shape()),
             " vs target ", tensor::shape_str(target.shape()));
  output_ = &output;
  target_ = &target;
  return tensor::mse_forward(output, target);
}

const Tensor& MSELoss::backward() {
  MDDP_CHECK(output_ != nullptr, "backward before forward");
  tensor::ensure_shape(grad_, output_->shape(), output_->device());
  tensor::mse_backward(*output_, *target_, grad_);
  return grad_;
}

std::unique_ptr<Loss> make_loss(const std::string& name) {
  if (name == "xent") return std::make_unique<CrossEntropyLoss>();
  if (name == "mse") return std::make_unique<MSELoss>();
  throw InputError("unknown loss '" + name + "' (use xent or mse)");
}

}  // namespace mddp::nn
