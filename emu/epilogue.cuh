// The per-output epilogue every GEMM kernel of emu/ ends with (Epilogue, fp4sim/emu/device.hpp): RN(C·alpha), the
// optional bias added in binary32, and the store as binary32 or BF16.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp4sim/emu/device.hpp"

namespace fp4sim::gpu {

__device__ __forceinline__ float epilogue_alpha(const Epilogue& e) {
  return e.alpha_device != nullptr ? *e.alpha_device : e.alpha;
}

// Output row `row`'s alpha: Epilogue::row_alpha[row] when given (a row-scaled A), else the GEMM's `alpha`.
__device__ __forceinline__ float epilogue_row_alpha(const Epilogue& e, float alpha, int row) {
  return e.row_alpha != nullptr ? e.row_alpha[row] : alpha;
}

// Output (row, col) of a value that already holds alpha: + bias[col], then stored.
__device__ __forceinline__ void epilogue_finish(const Epilogue& e, void* C, int N, int row, int col, float v) {
  if (e.bias != nullptr) v = __fadd_rn(v, e.bias[col]);
  const std::size_t i = static_cast<std::size_t>(row) * N + col;
  if (e.bf16_out) {
    static_cast<std::uint16_t*>(C)[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
  } else {
    static_cast<float*>(C)[i] = v;
  }
}

// Outputs (row, col) and (row, col + 1) from accumulators (col even; either may lie past N): RN(acc·alpha)
// (the row's alpha under Epilogue::row_alpha), + bias, stored as one 8- or 4-byte word when both exist and N
// is even.
__device__ __forceinline__ void epilogue_pair(const Epilogue& e, float alpha, void* C, int N, int row, int col,
                                              float acc0, float acc1) {
  if (col >= N) return;
  alpha = epilogue_row_alpha(e, alpha, row);
  const bool both = col + 1 < N;
  float v0 = __fmul_rn(acc0, alpha), v1 = __fmul_rn(acc1, alpha);
  if (e.bias != nullptr) {
    v0 = __fadd_rn(v0, e.bias[col]);
    if (both) v1 = __fadd_rn(v1, e.bias[col + 1]);
  }
  const std::size_t i = static_cast<std::size_t>(row) * N + col;
  if (e.bf16_out) {
    const std::uint32_t b0 = __bfloat16_as_ushort(__float2bfloat16_rn(v0));
    const std::uint32_t b1 = __bfloat16_as_ushort(__float2bfloat16_rn(v1));
    auto* p = static_cast<std::uint16_t*>(C) + i;
    if (both && N % 2 == 0) {
      *reinterpret_cast<std::uint32_t*>(p) = b0 | (b1 << 16);
    } else {
      p[0] = static_cast<std::uint16_t>(b0);
      if (both) p[1] = static_cast<std::uint16_t>(b1);
    }
  } else {
    float* p = static_cast<float*>(C) + i;
    if (both && N % 2 == 0) {
      *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
      p[0] = v0;
      if (both) p[1] = v1;
    }
  }
}

}  // namespace fp4sim::gpu
