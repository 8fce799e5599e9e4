// bf16-tc GEMM on Hopper's wgmma (sm_90a): TMA (cp.async.bulk.tensor) loads into a 4-stage shared-memory
// ring completing on mbarriers, one producer warpgroup and two consumer warpgroups, block tile
// 128 x 256 x 64, each consumer warpgroup 64 x 256 through wgmma.mma_async.m64n256k16.f32.bf16.bf16 with
// the accumulators in registers.
//
// Bit-exactness (the golden sm90-bf16 T-FDPA chain): every output is one chain of k16 steps in ascending
// k from +0. The accumulators start at +0 and every wgmma runs with scale-d = 1 (D = A.B + D), one k16
// step per instruction, in ascending k within a 64-wide k tile and tiles in ascending order; a k16 step at
// or beyond Kp is never issued (the last tile may hold 1-3 steps). wgmma's k16 step was measured
// identical to mma.sync's (docs/datapaths.md, probes), so this kernel computes the same bits as the
// mma.sync kernel in gemm.cu. Rows beyond M / N are zero-filled by TMA and never stored.
//
// The kernel needs the arch-specific target sm_90a (wgmma). In a build without it (the plain sm_90
// image) the kernel body is empty, wgmma_available() reports false and gemm.cu keeps the mma.sync kernel.
// tools/gpu_session.sh builds emu/ for sm_90a (tools/probes/nvcc_sm90a.sh).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "epilogue.cuh"
#include "fp4sim/emu/device_buffer.hpp"
#include "kernels.hpp"
#include "wgmma.cuh"

namespace fp4sim::gpu {
namespace {

using namespace wgmma;

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 2;
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kStageBytesA = kBM * kBK * 2, kStageBytesB = kBN * kBK * 2;
constexpr int kSmemBytes = kStages * (kStageBytesA + kStageBytesB) + 1024;  // + alignment slack

__global__ void wgmma_flag_kernel(int* out) {
#if defined(FP4SIM_WGMMA_BODY)
  *out = 1;
#else
  *out = 0;
#endif
}

__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      void* C, int M, int N, int K, Epilogue epilogue) {
#if defined(FP4SIM_WGMMA_BODY)
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) std::uint64_t full[kStages], empty[kStages];
  // 1024-byte aligned base (the 128-byte swizzle pattern repeats every 1024 bytes).
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t sA = base, sB = base + kStages * kStageBytesA;

  const auto [m0, n0] = grouped_tile(M, N, kBM, kBN);
  const int KT = (K + kBK - 1) / kBK;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) init_ring<kStages>(full, empty, kConsumers * 4);
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues the copies.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) produce<kStages>(&map_a, &map_b, full, empty, sA, sB, kStageBytesA, kStageBytesB, KT, kBK, m0, n0);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int c = wg - 1;  // consumer index: rows m0 + 64c .. +63
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % kStages;
      mbar_wait(smem_u32(&full[s]), (kt / kStages) & 1);
      const std::uint32_t a_base = sA + s * kStageBytesA + c * (64 * 128);
      const std::uint32_t b_base = sB + s * kStageBytesB;
      const int krem = K - kt * kBK;  // multiple of 16, > 0
      if (krem >= kBK) {
        fence();
#pragma unroll
        for (int j = 0; j < kBK / 16; ++j) mma_m64k16<256>(d, smem_desc(a_base + 32 * j), smem_desc(b_base + 32 * j), 1);
      } else {
        fence();
#pragma unroll
        for (int j = 0; j < kBK / 16 - 1; ++j)
          if (16 * j < krem) mma_m64k16<256>(d, smem_desc(a_base + 32 * j), smem_desc(b_base + 32 * j), 1);
      }
      commit();
      wait<0>();
      __syncwarp();
      if ((tid & 31) == 0) mbar_arrive(smem_u32(&empty[s]));
    }
    // Epilogue straight from the fragments (m64nNk16 f32 layout: n8 block b = i / 4,
    // row = 16 * warp + lane / 4 + 8 * ((i / 2) & 1), col = 8 * b + 2 * (lane % 4) + (i & 1)).
    const float alpha = epilogue_alpha(epilogue);
    const int warp = tid / 32, lane = tid % 32;
    const int row0 = m0 + 64 * c + 16 * warp + lane / 4;
#pragma unroll
    for (int b = 0; b < 32; ++b) {
      const int col = n0 + 8 * b + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
        epilogue_pair(epilogue, alpha, C, N, row, col, d[4 * b + 2 * h], d[4 * b + 2 * h + 1]);
      }
    }
  }
#else
  (void)M, (void)N, (void)K, (void)epilogue, (void)C;
#endif
}

}  // namespace

namespace wgmma {

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

bool make_map(CUtensorMap& map, const std::uint16_t* ptr, std::uint64_t rows, std::uint64_t k, std::uint32_t box_rows) {
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k * 2};
  const cuuint32_t box[2] = {64, box_rows};  // 64 BF16 = one 128-byte swizzle row
  const cuuint32_t estrides[2] = {1, 1};
  return encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<std::uint16_t*>(ptr), dims, strides, box,
                     estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace wgmma

bool wgmma_available() {
  static const bool available = [] {
    if (std::getenv("FP4SIM_NO_WGMMA") != nullptr) return false;  // A/B runs against the mma.sync kernel
    if (wgmma::encode_fn() == nullptr) return false;
    DeviceBuffer flag;
    int h = 0;
    if (!flag.allocate(sizeof(int))) {
      cudaGetLastError();
      return false;
    }
    wgmma_flag_kernel<<<1, 1>>>(flag.as<int>());
    const bool ok = cudaGetLastError() == cudaSuccess &&
                    cudaMemcpy(&h, flag.as<int>(), sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaGetLastError();
    return ok && h == 1;
  }();
  return available;
}

int launch_gemm_wgmma_raw(const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, int m, int n, int kp,
                          Epilogue epilogue, void* stream) {
  CUtensorMap ma, mb;
  if (kp % 16 != 0 || !wgmma::make_map(ma, d_a, static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(kp), kBM) ||
      !wgmma::make_map(mb, d_b, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(kp), kBN))
    return cudaErrorInvalidValue;
  static const cudaError_t attr =
      cudaFuncSetAttribute(gemm_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const int tiles = ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
  gemm_wgmma_kernel<<<tiles, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(ma, mb, d_c, m, n, kp, epilogue);
  return cudaGetLastError();
}

}  // namespace fp4sim::gpu
