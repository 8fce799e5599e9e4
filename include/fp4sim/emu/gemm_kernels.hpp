// The GEMM kernels of emu/, one row each: its name, the golden datapath row it reproduces bit for bit, the
// K it takes and the device workspace it needs. The one home of these facts: the host API (emu/gemm.cu),
// the crosscheck (which kernel is judged against which golden row), the Python binding (cuda_ops.cpp) and
// fp4sim.torch (through fp4sim._fp4sim.gpu_kernels()) read them here.
//
// Header-only and free of CUDA, like core's datapath rows it points at: a build without the kernels
// (FP4SIM_CUDA=OFF) still knows which golden datapaths the GPU serves, so fp4sim.torch picks the same
// datapath on CPU tensors as on CUDA tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/gemm.hpp"

namespace fp4sim::gpu {

// C [M, N] = A [M, K] . B [N, K]^T from two quantized operands, in the order of kGemmKernels. Every kernel
// ends in emu/epilogue.cuh, so every one takes a per-row alpha (Epilogue::row_alpha: a row-scaled A, the
// golden GemmOptions::row_alpha) wherever its rule below says alpha.
enum class GemmPath : std::uint8_t {
  bf16_tc,        // encoded-domain operands (q * s, exact in BF16) through bf16 tensor cores (wgmma m64n256k16
                  // on an sm_90a build, else mma.sync.m16n8k16: the same bits), FP32 accumulation chained in
                  // ascending k (16 per step) from +0, then RN(acc * alpha)
  probe_matched,  // 64-groups of 4 chained k16 mma steps from +0, add.rz.f32 of the group partials from +0,
                  // optional snap RNE(C * 1024) / 1024, then RN(C * alpha)
  exact,          // exact block-scaled sum on CUDA cores (integer superaccumulator), times alpha exactly,
                  // one RNE to FP32: RN32(alpha * sum)
};

struct GemmKernel {
  GemmPath path;
  std::string_view name;    // as `fp4sim crosscheck --paths` and the benchmarks name it
  const Datapath* golden;   // the golden row it equals, with that row's default inner row and F
  int k_multiple;           // K must be a multiple of this (else the kernel refuses: invalid_argument)
  int group_k;              // the k-groups it sums separately (launch_gemm_bf16's group_k); 0: one chain
  int workspace_k_align;    // 0: reads codes and scales itself; else it reads the operands encoded to BF16
                            // (launch_encode_bf16) in two workspaces, A [M, Kp] and B [N, Kp], uint16

  // Kp: the row length of the BF16 workspaces, K rounded up to workspace_k_align (zeros past K); 0 when
  // the kernel needs none.
  constexpr std::size_t workspace_cols(std::size_t k) const {
    if (workspace_k_align == 0) return 0;
    const auto align = static_cast<std::size_t>(workspace_k_align);
    return (k + align - 1) / align * align;
  }
  constexpr bool takes_k(std::size_t k) const { return k % static_cast<std::size_t>(k_multiple) == 0; }
};

inline constexpr GemmKernel kGemmKernels[] = {
    {GemmPath::bf16_tc, "bf16-tc", &datapaths::sm90_bf16, 1, 0, 16},
    {GemmPath::probe_matched, "probe-matched", &datapaths::probe_matched, 64, 64, 16},
    {GemmPath::exact, "exact", &datapaths::exact, 1, 0, 0},
};
static_assert(kGemmKernels[0].path == GemmPath::bf16_tc && kGemmKernels[1].path == GemmPath::probe_matched &&
              kGemmKernels[2].path == GemmPath::exact);

constexpr std::span<const GemmKernel> gemm_kernels() { return kGemmKernels; }
constexpr const GemmKernel& gemm_kernel(GemmPath path) { return kGemmKernels[static_cast<std::size_t>(path)]; }

// The row of that name, or nullptr.
constexpr const GemmKernel* find_gemm_kernel(std::string_view name) {
  for (const GemmKernel& k : kGemmKernels)
    if (k.name == name) return &k;
  return nullptr;
}

// The kernel that computes what the golden model computes under `options` (gemm_options of a recipe and
// request), or nullptr when the GPU has none: the row whose golden datapath `options` names, with that
// row's default inner row (probe-matched) and no what-if F.
inline const GemmKernel* gemm_kernel_for(const fp4sim::GemmOptions& options) {
  if (options.what_if != nullptr) return nullptr;
  for (const GemmKernel& k : kGemmKernels)
    if (options.datapath == k.golden && options.inner == k.golden->inner) return &k;
  return nullptr;
}

}  // namespace fp4sim::gpu
