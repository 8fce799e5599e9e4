// The host arithmetic of the tensor scalars (tensor_scalars, emu/quantize_plan.cpp), of alpha (gemm_alpha,
// src/core/gemm.cpp) and of the GEMM epilogue, done on the device, so that a caller that keeps the tensor
// amax on the GPU (fp4sim.torch: current or held amax as a device tensor) never waits for the host. Every
// step is one binary32 operation with round-to-nearest-even (__fmul_rn, __fdiv_rn: IEEE, no FTZ), the same
// operations in the same order as the host code, so the results are the same bits.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "fp4sim/emu/device.hpp"

namespace fp4sim::gpu {
namespace {

__global__ void tensor_scalars_kernel(const float* measured, const float* held, float* out, int tensor_scaled,
                                      float target) {
  const float current = measured ? *measured : 0.0f;
  float amax = current, encode = 1.0f, decode = 1.0f;
  if (tensor_scaled) {
    const float ref = held ? *held : current;
    amax = ref;
    if (ref != 0.0f) {
      float g = __fdiv_rn(__fmul_rn(6.0f, target), ref);
      g = g > FLT_MAX ? FLT_MAX : g;
      if (g != 0.0f && !isnan(g)) {
        encode = g;
        decode = __fdiv_rn(1.0f, g);
      }
    }
  }
  out[kTensorAmax] = amax;
  out[kEncode] = encode;
  out[kDecode] = decode;
  out[kBlockMultiplier] = __fmul_rn(encode, __fdiv_rn(1.0f, 6.0f));
}

__device__ float gemm_alpha(int rule, float amax_a, float target_a, float amax_b, float target_b, float element_max) {
  if (rule == static_cast<int>(AlphaRule::one)) return 1.0f;
  const float num = __fmul_rn(amax_a, amax_b);
  const float den = __fmul_rn(__fmul_rn(element_max, target_a), __fmul_rn(element_max, target_b));
  return rule == static_cast<int>(AlphaRule::division) ? __fdiv_rn(num, den) : __fmul_rn(num, __fdiv_rn(1.0f, den));
}

__global__ void gemm_alpha_kernel(int rule, const float* sa, float target_a, const float* sb, float target_b,
                                  float element_max, float* alpha) {
  *alpha = gemm_alpha(rule, sa[kTensorAmax], target_a, sb[kTensorAmax], target_b, element_max);
}

__global__ void gemm_row_alpha_kernel(int rule, const float* row_amax_a, std::size_t rows, float target_a,
                                      const float* sb, float target_b, float element_max, float* row_alpha) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < rows) row_alpha[i] = gemm_alpha(rule, row_amax_a[i], target_a, sb[kTensorAmax], target_b, element_max);
}

Status launched() { return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error; }

}  // namespace

Status launch_tensor_scalars(const QuantizePlan& plan, const float* d_measured, const float* d_held, float* d_scalars,
                             void* stream) {
  const bool held = plan.tensor_scaled && d_held != nullptr;
  tensor_scalars_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(held ? nullptr : d_measured,
                                                                        held ? d_held : nullptr, d_scalars,
                                                                        plan.tensor_scaled ? 1 : 0, plan.target);
  return launched();
}

Status launch_gemm_alpha(AlphaRule rule, const float* d_scalars_a, float target_a, const float* d_scalars_b,
                         float target_b, float element_max, float* d_alpha, void* stream) {
  gemm_alpha_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<int>(rule), d_scalars_a, target_a,
                                                                    d_scalars_b, target_b, element_max, d_alpha);
  return launched();
}

Status launch_gemm_row_alpha(AlphaRule rule, const float* d_row_amax_a, std::size_t rows, float target_a,
                             const float* d_scalars_b, float target_b, float element_max, float* d_row_alpha,
                             void* stream) {
  if (rows == 0) return Status::success;
  constexpr unsigned threads = 256;
  const auto blocks = static_cast<unsigned>((rows + threads - 1) / threads);
  gemm_row_alpha_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<int>(rule), d_row_amax_a, rows, target_a, d_scalars_b, target_b, element_max, d_row_alpha);
  return launched();
}

}  // namespace fp4sim::gpu
