// What emu/'s sources share beyond the device-pointer API (fp4sim/emu/device.hpp): the operand form the
// quantize and GEMM kernels read, and the raw wgmma launches behind launch_gemm_bf16. Private to emu/: not
// installed, and nothing outside emu/ includes it. No CUDA headers here.
#pragma once

#include <cstdint>

#include "fp4sim/core/quantize.hpp"
#include "fp4sim/emu/device.hpp"

namespace fp4sim::gpu {

// The wgmma bf16-tc kernel (128 x 256 x 64 tiles, TMA, 4 stages): C = RN(acc * alpha), acc a chain of k16
// steps in ascending k from +0. Returns the CUDA error of the launch (cudaSuccess = 0); needs kp % 16 == 0.
int launch_gemm_wgmma_raw(const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, int m, int n, int kp,
                          Epilogue epilogue, void* stream);

// The wgmma probe-matched kernel (emu/gemm_probe_wgmma.cu; TMA, producer + 2 consumer warpgroups, 64-deep
// k tiles = the datapath's groups, 5 stages). config 0: 2 consumers, 128 x 192 tiles; 1: 3 consumers,
// 192 x 128 tiles; both with the consumers issuing in turn; 2 and 3: the same with free issue.
// Needs kp % 64 == 0; returns the CUDA error of the launch.
int launch_gemm_probe_wgmma_raw(int config, const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, int m,
                                int n, int kp, bool snap, Epilogue epilogue, void* stream);

// A quantized tensor as the kernels that read it take it: device codes and scales, its shape and block
// grid, and the decoded value of every element and scale code (host arithmetic, exact).
struct PackedOperand {
  const std::uint8_t* codes = nullptr;
  const std::uint8_t* scales = nullptr;
  std::uint64_t rows = 0, cols = 0, code_cols = 0, scale_cols = 0;
  std::int32_t block_rows = 1, block_cols = 16;
  float element[16];
  float scale[256];
};
PackedOperand packed_operand(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales);

}  // namespace fp4sim::gpu
