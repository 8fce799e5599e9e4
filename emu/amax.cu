// The amax passes of the block quantizer (launch_amax, launch_row_amax; fp4sim/emu/device.hpp): the current
// tensor amax, a grid-stride pass (atomicMax on the bit pattern of |x|, per 16-group after the RHT), and each
// row's amax under AmaxScope::row. NaN-ignoring (fmaxf), as the NVFP4 kernels' max is.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "fp4sim/emu/device.hpp"
#include "quantize_common.cuh"

namespace fp4sim::gpu {
namespace {

// Current amax: plain grid-stride over all elements, or per 16-group after the RHT.
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(std::uint16_t bf16) { return __uint_as_float(static_cast<std::uint32_t>(bf16) << 16); }

// T: float, or std::uint16_t (bfloat16 bit patterns); 16-byte loads of 16 / sizeof(T) elements.
template <class T>
__global__ void amax_kernel(const T* __restrict__ x, std::uint64_t n, unsigned int* out) {
  constexpr int kPer = 16 / sizeof(T);
  float m = 0.0f;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t vectors = n / kPer;
  const uint4* x4 = reinterpret_cast<const uint4*>(x);
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += stride) {
    const uint4 q = __ldcs(x4 + i);
    T e[kPer];
    memcpy(e, &q, 16);
#pragma unroll
    for (int j = 0; j < kPer; ++j) m = fmaxf(m, fabsf(widen(e[j])));
  }
  for (std::uint64_t i = vectors * kPer + static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    m = fmaxf(m, fabsf(widen(x[i])));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

__global__ void amax_rht_kernel(QuantizeInput x, std::uint64_t rows, std::uint64_t cols, unsigned int* out) {
  const std::uint64_t groups = (cols + 15) / 16;
  const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float m = 0.0f;
  if (t < rows * groups) {
    const std::uint64_t r = t / groups, c0 = (t % groups) * 16;
    float v[16];
    load_block<16>(x, r, c0, cols, cols % 16 == 0, v);
    rht16(v);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      if (c0 + i < cols) m = fmaxf(m, fabsf(v[i]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0) atomicMax(out, __float_as_uint(m));
}

// Each row's amax (AmaxScope::row), NaN-ignoring, after the RHT when asked, into out[rows]: one warp per row,
// its lanes striding over the row's 16-element groups (loaded and transformed as amax_rht_kernel does), then
// a shuffle butterfly (max is exact, so the order cannot change the value).
__global__ void row_amax_kernel(QuantizeInput x, std::uint64_t rows, std::uint64_t cols, bool rht, float* out) {
  const std::uint64_t r = (static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (r >= rows) return;  // whole warps
  const std::uint64_t groups = (cols + 15) / 16;
  float m = 0.0f;
  for (std::uint64_t g = threadIdx.x & 31; g < groups; g += 32) {
    float v[16];
    load_block<16>(x, r, g * 16, cols, cols % 16 == 0, v);
    if (rht) rht16(v);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      if (g * 16 + i < cols) m = fmaxf(m, fabsf(v[i]));
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if ((threadIdx.x & 31) == 0) out[r] = m;
}

}  // namespace

Status launch_row_amax(const QuantizePlan& p, QuantizeInput d_x, float* d_row_amax, void* stream) {
  if (p.rows == 0) return Status::success;
  const std::uint64_t threads = static_cast<std::uint64_t>(p.rows) * 32;
  row_amax_kernel<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      d_x, p.rows, p.cols, p.rht, d_row_amax);
  return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error;
}

Status launch_amax(const QuantizePlan& p, QuantizeInput d_x, float* d_amax, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (cudaMemsetAsync(d_amax, 0, sizeof(float), s) != cudaSuccess) return Status::cuda_error;
  const std::uint64_t n = static_cast<std::uint64_t>(p.rows) * p.cols;
  if (n == 0) return Status::success;
  auto* out = reinterpret_cast<unsigned int*>(d_amax);
  if (p.rht) {
    const std::uint64_t units = static_cast<std::uint64_t>(p.rows) * ((p.cols + 15) / 16);
    amax_rht_kernel<<<static_cast<unsigned>((units + 255) / 256), 256, 0, s>>>(d_x, p.rows, p.cols, out);
  } else {
    int device = 0, sms = 132;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    const std::uint64_t want = (n / 4 + 255) / 256 + 1;  // (n / 8 suffices for BF16)
    const std::uint64_t cap = static_cast<std::uint64_t>(sms) * 16;
    const unsigned blocks = static_cast<unsigned>(want < cap ? want : cap);
    if (d_x.bf16 != nullptr) {
      amax_kernel<<<blocks, 256, 0, s>>>(d_x.bf16, n, out);
    } else {
      amax_kernel<<<blocks, 256, 0, s>>>(d_x.f32, n, out);
    }
  }
  return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error;
}

}  // namespace fp4sim::gpu
