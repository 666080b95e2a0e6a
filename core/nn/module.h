// Modules with explicit forward and backward (no general autograd graph).
//
// forward(x) returns the module's output, a buffer it owns and reuses across
// steps (valid until its next forward); x must stay alive until backward.
// backward(dy) accumulates parameter gradients (like PyTorch: call
// zero_grad() between steps, or don't, for gradient accumulation) and
// returns dx, also owned by the module.
//
// Note [Grad-ready hooks]: backward fires the grad-ready hook for a
// parameter the moment a contribution to its gradient is accumulated, in
// the order autograd would: last layer first, and within a layer before its
// dx is computed, so that DDP can start all-reducing while earlier layers
// are still in backward. A parameter fires once per use in forward
// (Parameter::uses: 1, except the GPT's tied weight, Note [Tied weight] in
// gpt.h), so its gradient is final at its last firing (DDP counts them:
// Note [Contributions] in core/ddp/contributions.h). The last firings are
// in exactly the reverse of parameters() (a layer's bias before its weight).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor/tensor.h"

namespace mddp::nn {

using tensor::Tensor;

struct Parameter {
  std::string name;  // "3.weight": index in the Sequential, then the role
  Tensor value;
  Tensor grad;  // same shape; may be re-pointed to a view (DDP buckets)
  // A lookup table (Embedding) rather than a layer's weight matrix: AdamW
  // never decays it (nn::decays in optimizer.h).
  bool embedding = false;
  // Gradient contributions per backward: the uses in forward, each firing
  // the grad-ready hook (Note [Grad-ready hooks]).
  int uses = 1;
};

using GradReadyHook = std::function<void(Parameter&)>;

// A layer as PyTorch's torch.nn would build it: the class name and its
// constructor's keyword arguments, e.g. {"Conv2d", {{"in_channels", 1},
// {"out_channels", 32}, {"kernel_size", 3}, {"padding", 1}}}. Checkpoints
// store these so that another program can rebuild the model (docs/pytorch.md).
struct LayerSpec {
  std::string type;
  std::vector<std::pair<std::string, int64_t>> args;
};

class Module {
 public:
  virtual ~Module() = default;

  virtual const Tensor& forward(const Tensor& x) = 0;
  // need_dx = false skips computing dx (the first layer's input needs none).
  virtual const Tensor& backward(const Tensor& dy, bool need_dx = true) = 0;
  virtual std::string describe() const = 0;  // "Linear(784 -> 256)"
  virtual LayerSpec spec() const = 0;

  // This module's parameters (and its children's), in registration order.
  virtual void collect_parameters(std::vector<Parameter*>& out) { (void)out; }
  std::vector<Parameter*> parameters();
  int64_t num_parameters();

  // The tensors backward allocates and writes that nothing reads once the
  // backward of the module before it has run: the gradient it hands on and
  // its scratch (views of them excluded). A composite adds its children's.
  // Note [Shared backward buffers] in gpt.h says who shares them.
  virtual void collect_backward_buffers(std::vector<Tensor*>& out) { (void)out; }

  virtual void set_grad_ready_hook(GradReadyHook hook) { hook_ = std::move(hook); }
  void zero_grad();
  // Dropout's switch, PyTorch's train()/eval() with the randomness made
  // explicit: training draws this forward's masks from `seed`, evaluation
  // turns dropout off. Modules without dropout ignore it.
  virtual void set_dropout(bool training, uint64_t seed) {
    (void)training;
    (void)seed;
  }

 protected:
  void grad_ready(Parameter& p) {
    if (hook_) hook_(p);
  }
  GradReadyHook hook_;
};

// Prepends `prefix` to the names of m's parameters: a composite module names
// its children's ("ln_1." + "weight"), as PyTorch's state_dict does.
void add_prefix(Module& m, const std::string& prefix);

// Points m's backward buffers at donor's storage, where donor has one: two
// modules of one kind and shape whose backwards never overlap in time.
void share_backward_buffers(Module& m, Module& donor);

}  // namespace mddp::nn
