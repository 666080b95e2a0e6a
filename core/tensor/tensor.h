// Contiguous float32 tensors. A Tensor is a shape plus a window into a
// reference-counted Storage on one Device; view() makes another window into
// the same storage without copying. DDP relies on that: a parameter's
// gradient can be a view into its bucket's flat buffer (See Note [Grad views]
// in core/ddp/reducer.cc), so backward writes straight into what is all-reduced.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor/device.h"

namespace mddp::tensor {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
std::string shape_str(const Shape& shape);

// Owns `bytes` bytes on `device`, 64-byte aligned on the CPU. Not copyable.
namespace cuda {
struct Upload;  // cuda/cuda_runtime.h
}

class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  // Borrows `bytes` of CPU memory at memory.get(), which `memory` keeps
  // alive (the shared buffers DDP's buckets live in, core/comm/shared_memory.h).
  Storage(std::shared_ptr<void> memory, std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  // A GPU storage's pinned host memory for Tensor::fill_from_host, made on first use.
  cuda::Upload* upload();

 private:
  void* data_ = nullptr;
  std::shared_ptr<void> borrowed_;  // set when the memory is someone else's
  cuda::Upload* upload_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage

  static Tensor empty(const Shape& shape, Device device = {});  // contents unspecified
  static Tensor zeros(const Shape& shape, Device device = {});
  // A CPU tensor over memory someone else allocated, at least
  // numel_of(shape) floats at memory.get(), kept alive by `memory`.
  static Tensor wrap(const Shape& shape, std::shared_ptr<void> memory);

  // A window of numel_of(shape) elements starting `offset` elements into this tensor.
  Tensor view(int64_t offset, const Shape& shape) const;
  // The same elements seen with another shape of equal numel.
  Tensor reshape(const Shape& shape) const { return view(0, shape); }

  bool defined() const { return storage_ != nullptr; }
  float* data() const { return static_cast<float*>(storage_->data()) + offset_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int64_t numel() const { return numel_; }
  std::size_t bytes() const { return static_cast<std::size_t>(numel_) * sizeof(float); }
  Device device() const { return storage_ ? storage_->device() : Device{}; }
  // True when both windows lie in the same storage (views of one buffer).
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

  // Host copies, for tests, checkpoints and logging (work on any device;
  // on a GPU they wait for the ops queued before them).
  std::vector<float> to_vector() const;
  void copy_from(const std::vector<float>& values);
  static Tensor from_vector(const Shape& shape, const std::vector<float>& values,
                            Device device = {});
  // Writes this tensor's elements from the host without waiting: `fill`
  // gets host memory for numel() floats — the tensor itself on the CPU; on a
  // GPU pinned memory kept with the storage, whose copy to the tensor is then
  // queued on the compute stream (a training batch each step). The pinned
  // memory is reused once its last copy has run. One thread per tensor.
  void fill_from_host(const std::function<void(std::span<float>)>& fill);
  // Copies src's elements (same numel) from any device, waiting until done.
  // Within one GPU prefer ops::copy, which is queued without waiting.
  void copy_from(const Tensor& src);
  // A new tensor on `device` holding a copy of this one (allocates: for set-up and tests).
  Tensor to(Device device) const;

 private:
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  int64_t numel_ = 0;
  Shape shape_;
};

// Reallocates `t` only when its shape differs: modules keep their output
// buffers across steps, so the steady-state step allocates nothing.
void ensure_shape(Tensor& t, const Shape& shape, Device device);

}  // namespace mddp::tensor
