#include "core/tensor/tensor.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/common/check.h"
#include "core/common/strings.h"
#include "core/tensor/cuda/context.h"
#include "core/tensor/cuda/cuda_runtime.h"
#include "mddp/config.h"

namespace mddp::tensor {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    MDDP_CHECK(d >= 0, "negative dimension in ", shape_str(shape));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  return str("[", join(shape, ", "), "]");
}

namespace {

// Note [Huge pages for large tensors]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A large batch's activations and their gradients are gigabytes that are
// written once before anything reads them: `demo manual --batch 100000`
// touches 6.6 GB, 1.66 million first-touch page faults of 4 KiB, which cost
// more user and system time than the step's arithmetic (docs/engine.md).
// Tensors of a huge page or more are therefore mapped on their own, on a
// 2 MiB boundary, and advised as transparent huge pages (PyTorch's CPU
// allocator can do the same from the same size, THP_MEM_ALLOC_ENABLE). The
// mapping is the tensor's length to the 4 KiB page, no more: the kernel puts
// huge pages only on whole 2 MiB ranges inside it, so the tail past the last
// one gets 4 KiB pages. (Rounded up to whole huge pages, a 2.4 MiB weight
// and each of its gradient and AdamW moments filled 4 MiB: the 10.7 M
// parameter GPT's peak RSS grew by a quarter.) Where THP is off the advice
// is ignored and nothing else changes. Smaller tensors keep 64-byte
// alignment from malloc: a mapping each would cost more than it saves.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kPage = 4096;

std::size_t mapped_length(std::size_t bytes) {
  return (bytes + kPage - 1) / kPage * kPage;
}

void* allocate_cpu(std::size_t bytes) {
  if (bytes < kHugePage) {
    const std::size_t padded = (bytes + 63) / 64 * 64;
    return std::aligned_alloc(64, padded == 0 ? 64 : padded);
  }
  // A huge page more than needed; then the slack before the boundary and past the length goes back.
  const std::size_t length = mapped_length(bytes);
  void* raw = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* const first = static_cast<char*>(raw);
  char* const start =
      first + (kHugePage - reinterpret_cast<std::uintptr_t>(raw) % kHugePage) % kHugePage;
  if (start > first) ::munmap(first, static_cast<std::size_t>(start - first));
  char* const end = first + length + kHugePage;
  if (end > start + length)
    ::munmap(start + length, static_cast<std::size_t>(end - (start + length)));
  ::madvise(start, length, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
  return start;
}

void free_cpu(void* p, std::size_t bytes) {
  if (bytes < kHugePage)
    std::free(p);
  else
    ::munmap(p, mapped_length(bytes));
}

}  // namespace

Storage::Storage(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (device.is_cpu()) {
    data_ = allocate_cpu(bytes);
    if (!data_) throw Error(str("out of memory allocating ", bytes, " bytes on the CPU"));
    return;
  }
  require_available(device);
#if MDDP_HAVE_CUDA
  const std::size_t padded = (bytes + 63) / 64 * 64;
  data_ = cuda::allocate(padded == 0 ? 64 : padded, device.index);
#endif
}

Storage::Storage(std::shared_ptr<void> memory, std::size_t bytes)
    : data_(memory.get()), borrowed_(std::move(memory)), bytes_(bytes) {
  MDDP_CHECK(data_ != nullptr || bytes == 0, "a borrowed storage of ", bytes, " bytes at null");
}

Storage::~Storage() {
  if (borrowed_) return;
  if (device_.is_cpu()) {
    free_cpu(data_, bytes_);
    return;
  }
#if MDDP_HAVE_CUDA
  cuda::upload_destroy(upload_, device_.index);
  cuda::free(data_, device_.index);
#endif
}

cuda::Upload* Storage::upload() {
  MDDP_CHECK(device_.is_cuda(), "a CPU tensor needs no upload buffer");
#if MDDP_HAVE_CUDA
  if (!upload_) upload_ = cuda::upload_create(bytes_, device_.index);
#endif
  return upload_;
}

namespace {
// Between any two devices. A copy that touches a GPU is queued on that GPU's
// compute stream, after the ops already issued there
// (See Note [One compute stream] in cuda/context.h), and waited for.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, std::size_t n) {
  if (n == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
#if MDDP_HAVE_CUDA
  if (src_dev.is_cuda() && dst_dev.is_cuda() && src_dev != dst_dev)
    cuda::synchronize(src_dev.index);  // the source's writes are on its own stream
  cuda::copy(dst, src, n, dst_dev.is_cuda() ? dst_dev.index : src_dev.index);
#else
  throw InputError(
      "a CUDA tensor in a build without CUDA support; rebuild with the CUDA toolkit installed");
#endif
}
}  // namespace

Tensor Tensor::empty(const Shape& shape, Device device) {
  Tensor t;
  t.numel_ = numel_of(shape);
  t.shape_ = shape;
  t.storage_ = std::make_shared<Storage>(t.bytes(), device);
  return t;
}

Tensor Tensor::wrap(const Shape& shape, std::shared_ptr<void> memory) {
  Tensor t;
  t.numel_ = numel_of(shape);
  t.shape_ = shape;
  t.storage_ = std::make_shared<Storage>(std::move(memory), t.bytes());
  return t;
}

Tensor Tensor::zeros(const Shape& shape, Device device) {
  Tensor t = empty(shape, device);
  t.copy_from(std::vector<float>(t.numel(), 0.0f));
  return t;
}

Tensor Tensor::view(int64_t offset, const Shape& shape) const {
  MDDP_CHECK(defined(), "view of an undefined tensor");
  const int64_t n = numel_of(shape);
  MDDP_CHECK(offset >= 0 && offset + n <= numel_, "view [", offset, ", ", offset + n,
             ") out of range for a tensor of ", numel_, " elements");
  Tensor t = *this;
  t.offset_ = offset_ + offset;
  t.numel_ = n;
  t.shape_ = shape;
  return t;
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(numel_);
  if (numel_) copy_bytes(out.data(), Device{}, data(), device(), bytes());
  return out;
}

void Tensor::copy_from(const std::vector<float>& values) {
  MDDP_CHECK_EQ(static_cast<int64_t>(values.size()), numel_, "copy_from size");
  if (numel_) copy_bytes(data(), device(), values.data(), Device{}, bytes());
}

void Tensor::copy_from(const Tensor& src) {
  MDDP_CHECK_EQ(src.numel(), numel_, "copy_from size");
  if (numel_) copy_bytes(data(), device(), src.data(), src.device(), bytes());
}

void Tensor::fill_from_host(const std::function<void(std::span<float>)>& fill) {
  MDDP_CHECK(defined(), "fill_from_host of an undefined tensor");
  if (device().is_cpu()) {
    fill(std::span<float>(data(), static_cast<std::size_t>(numel_)));
    return;
  }
#if MDDP_HAVE_CUDA
  cuda::Upload* up = storage_->upload();
  fill(std::span<float>(static_cast<float*>(cuda::upload_buffer(up)),
                        static_cast<std::size_t>(numel_)));
  cuda::upload_queue(up, data(), bytes(), device().index);
#endif
}

Tensor Tensor::to(Device device) const {
  MDDP_CHECK(defined(), "to() of an undefined tensor");
  Tensor t = empty(shape_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::from_vector(const Shape& shape, const std::vector<float>& values, Device device) {
  Tensor t = empty(shape, device);
  t.copy_from(values);
  return t;
}

void ensure_shape(Tensor& t, const Shape& shape, Device device) {
  if (t.defined() && t.shape() == shape && t.device() == device) return;
  t = Tensor::empty(shape, device);
}

}  // namespace mddp::tensor
