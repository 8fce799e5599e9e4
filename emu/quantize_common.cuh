// What the block quantizer's kernels share (private to emu/): emu/quantize.cu, the amax passes of
// emu/amax.cu and the dequantizer of emu/dequantize.cu load rows the same way, transform them with the same
// RHT and form a row's tensor scalars with the same binary32 operations.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "fp4sim/emu/device.hpp"

namespace fp4sim::gpu {

// The scalars a block's scale is formed with: the tensor's (host arguments, or device memory), or under
// AmaxScope::row its row's, global_scale() of the row amax (src/core/quantize.cpp) in the same binary32
// order as tensor_scalars: G = min(RN(RN(6T) / amax), FLT_MAX), left 1 when amax is 0 or G is 0 or NaN
// (amax +Inf); Gd = RN(1 / G); the block multiplier RN(G * RN(1/6)).
struct BlockScalars {
  float amax, encode, decode, block_multiplier;
};

__device__ __forceinline__ BlockScalars global_scalars(float amax, float six_target) {
  BlockScalars s{amax, 1.0f, 1.0f, 0.0f};
  if (amax != 0.0f) {
    float g = __fdiv_rn(six_target, amax);
    g = g > FLT_MAX ? FLT_MAX : g;
    if (g != 0.0f && !isnan(g)) {
      s.encode = g;
      s.decode = __fdiv_rn(1.0f, g);
    }
  }
  s.block_multiplier = __fmul_rn(s.encode, __fdiv_rn(1.0f, 6.0f));
  return s;
}

// RN(6 * T) in binary32 (exact for the targets in use), as tensor_scalars and the golden model form it.
inline float six_times(float target) {
  const volatile float six = 6.0f;
  return six * target;
}

// The 16-point RHT of 16 values in place: out_j = BF16_RNE(sum_i (x_i * s_i H[i][j] / 4)), FP32 sums
// in ascending i from +0.
__device__ __forceinline__ void rht16(float* v) {
  constexpr int kSigns[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  float quarter[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) quarter[i] = __fmul_rn(v[i], 0.25f);  // RN(x * 0.25); sign applied below
  float out[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const bool negative = (kSigns[i] < 0) != ((__popc(i & j) & 1) != 0);
      sum = __fadd_rn(sum, negative ? -quarter[i] : quarter[i]);
    }
    out[j] = sum;
  }
  // BF16 RNE two at a time (cvt.rn.bf16x2.f32): the golden bits except a NaN's payload (canonical
  // here), which no consumer of v can see: E2M1 codes a NaN as 0x7 whatever its payload, and
  // the amax (fmaxf) and the non-finite test do not look at payloads.
#pragma unroll
  for (int j = 0; j < 16; j += 2) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(out[j], out[j + 1]);
    const std::uint32_t packed = *reinterpret_cast<const std::uint32_t*>(&h);
    out[j] = __uint_as_float(packed << 16);
    out[j + 1] = __uint_as_float(packed & 0xFFFF0000u);
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) v[j] = out[j];
}

// Elements c0 .. c0 + N - 1 of one row (zeros past `cols`): as N/4 streaming float4 loads when `vector`
// (the row holds whole groups of N, so they are aligned), element by element otherwise.
template <int N>
__device__ __forceinline__ void load_block(const float* row, std::uint64_t c0, std::uint64_t cols, bool vector,
                                           float (&v)[N]) {
  if (vector) {
    const float4* p = reinterpret_cast<const float4*>(row + c0);
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 q = __ldcs(p + i);
      v[4 * i] = q.x;
      v[4 * i + 1] = q.y;
      v[4 * i + 2] = q.z;
      v[4 * i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = c0 + i < cols ? row[c0 + i] : 0.0f;
  }
}

// The same from a row of bfloat16 bit patterns (N/8 streaming 16-byte loads when `vector`), widened exactly.
template <int N>
__device__ __forceinline__ void load_block(const std::uint16_t* row, std::uint64_t c0, std::uint64_t cols,
                                           bool vector, float (&v)[N]) {
  if (vector) {
    const uint4* p = reinterpret_cast<const uint4*>(row + c0);
#pragma unroll
    for (int i = 0; i < N / 8; ++i) {
      const uint4 q = __ldcs(p + i);
      const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[8 * i + 2 * j] = __uint_as_float(w[j] << 16);
        v[8 * i + 2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = c0 + i < cols ? __uint_as_float(static_cast<std::uint32_t>(row[c0 + i]) << 16) : 0.0f;
  }
}

// Row r's elements c0 .. c0 + N - 1 of whichever tensor x holds.
template <int N>
__device__ __forceinline__ void load_block(QuantizeInput x, std::uint64_t r, std::uint64_t c0, std::uint64_t cols,
                                           bool vector, float (&v)[N]) {
  if (x.bf16 != nullptr) {
    load_block<N>(x.bf16 + r * cols, c0, cols, vector, v);
  } else {
    load_block<N>(x.f32 + r * cols, c0, cols, vector, v);
  }
}

}  // namespace fp4sim::gpu
