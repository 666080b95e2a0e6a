// Losses: forward returns the batch-mean loss, backward the gradient of that
// mean with respect to the model output (a buffer the loss owns).
#pragma once

#include <memory>
#include <string>

#include "core/tensor/tensor.h"

namespace mddp::nn {

using tensor::Tensor;

class Loss {
 public:
  virtual ~Loss() = default;
  virtual float forward(const Tensor& output, const Tensor& target) = 0;
  virtual const Tensor& backward() = 0;  // d(mean loss)/d(output), after forward
  virtual std::string name() const = 0;
};

// Softmax + cross-entropy; targets are class indices [N] (as floats).
class CrossEntropyLoss : public Loss {
 public:
  float forward(const Tensor& output, const Tensor& target) override;
  const Tensor& backward() override;
  std::string name() const override { return "xent"; }

 private:
  const Tensor* target_ = nullptr;
  Tensor probs_, grad_;
};

// Mean squared error over all elements; targets have the output's shape.
class MSELoss : public Loss {
 public:
  float forward(const Tensor& output, const Tensor& target) override;
  const Tensor& backward() override;
  std::string name() const override { return "mse"; }

 private:
  const Tensor* output_ = nullptr;
  const Tensor* target_ = nullptr;
  Tensor grad_;
};

// "xent" or "mse"; throws InputError otherwise.
std::unique_ptr<Loss> make_loss(const std::string& name);

}  // namespace mddp::nn
