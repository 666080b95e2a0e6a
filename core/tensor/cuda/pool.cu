// Max pooling with window = stride = k (floor mode). Both directions find a
// window's maximum the same way, so the gradient goes where the forward
// maximum came from: the first maximum in row-major window order, as on the CPU.
#include "core/tensor/cuda/kernels.h"
#include "core/tensor/cuda/launch.cuh"

namespace mddp::tensor::cuda {
namespace {

struct Pool {
  int64_t h, w;
  int k;
  int64_t ho, wo;
  // Offset in a plane [H, W] of the first maximum of window (oy, ox).
  __device__ int64_t argmax(const float* plane, int64_t oy, int64_t ox) const {
    int64_t best = oy * k * w + ox * k;
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b) {
        const int64_t idx = (oy * k + a) * w + ox * k + b;
        if (plane[idx] > plane[best]) best = idx;
      }
    return best;
  }
};

// One thread per output element.
struct MaxPoolForward {
  Pool pool;
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const {
    const int64_t ox = i % pool.wo, oy = (i / pool.wo) % pool.ho, plane = i / (pool.wo * pool.ho);
    const float* xp = x + plane * pool.h * pool.w;
    y[i] = xp[pool.argmax(xp, oy, ox)];
  }
};

// One thread per input element: it receives dy of its window if it is that
// window's maximum, else 0 (also for the rows/columns floor mode leaves out).
// Windows do not overlap, so this overwrites dx without a separate zeroing pass.
struct MaxPoolBackward {
  Pool pool;
  const float *x, *dy;
  float* dx;
  __device__ void operator()(int64_t i) const {
    const int64_t ix = i % pool.w, iy = (i / pool.w) % pool.h, plane = i / (pool.w * pool.h);
    const int64_t oy = iy / pool.k, ox = ix / pool.k;
    float g = 0.0f;
    if (oy < pool.ho && ox < pool.wo &&
        pool.argmax(x + plane * pool.h * pool.w, oy, ox) == iy * pool.w + ix)
      g = dy[(plane * pool.ho + oy) * pool.wo + ox];
    dx[i] = g;
  }
};

}  // namespace

void maxpool2d_forward(int device, const float* x, int64_t nc, int64_t h, int64_t w, int k,
                       float* y) {
  const Pool pool{h, w, k, h / k, w / k};
  for_each_index(context(device), nc * pool.ho * pool.wo, MaxPoolForward{pool, x, y});
}

void maxpool2d_backward(int device, const float* x, const float* dy, int64_t nc, int64_t h,
                        int64_t w, int k, float* dx) {
  const Pool pool{h, w, k, h / k, w / k};
  for_each_index(context(device), nc * h * w, MaxPoolBackward{pool, x, dy, dx});
}

}  // namespace mddp::tensor::cuda
