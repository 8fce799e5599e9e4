// probe-matched GEMM on Hopper's wgmma (sm_90a), the UE5M3 recipe's own datapath at tensor-core speed.
//
// The datapath (docs/datapaths.md, golden `probe-matched` with inner sm90-bf16): per output, each 64-deep
// k group is a chain of four k16 tensor-core steps from +0 in ascending k; the group partials are summed
// with add.rz.f32 in group order from +0; then the optional snap RNE(C * 1024) / 1024 and RN(C * alpha).
//
// Structure (emu/gemm_wgmma.cu's bf16-tc kernel, adapted): block tile (64 * CONSUMERS) x BN x 64, one 64-deep
// k tile = one group; a producer warpgroup issues TMA loads into a STAGES-deep shared-memory ring on
// mbarriers; each consumer warpgroup owns 64 x BN outputs and holds two register sets of BN / 2 per thread:
// the group accumulator and the running sum (so BN = 256 does not fit; 192 and 128 do). Per k tile a
// consumer issues the group's four wgmma k16 steps (the first with scale-d = 0, D = A.B: the chain starts
// from nothing, which equals starting from +0 in the model the H200 probes measured, where a zero C takes
// no part in the alignment and an exact-zero sum is +0, docs/datapaths.md O3/O4; crosscheck and the
// benchmark's comparison with the mma.sync kernel confirm it end to end), waits for them (wait_group 0),
// folds the partial into the running sum with add.rz.f32 and releases the stage. While one consumer folds,
// the others' wgmmas keep the tensor cores busy, provided the consumers are out of phase: issuing at the same
// time (all wait for the same stage) they share the tensor cores, finish their groups together and fold
// together, leaving the tensor cores idle for a fold per k tile (and the timing drifts from run to run). So
// the consumers take turns to issue (named barriers pass the turn round, as CUTLASS's ping-pong kernels
// order their math warpgroups): the tensor cores then run the groups one after another, and each consumer
// folds while the next one's group runs. K must be a multiple of 64 (the datapath's precondition).
//
// Without sm_90a code (a plain sm_90 build) the kernel body is empty and gemm.cu keeps the mma.sync
// probe-matched kernel, which computes the same bits.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "epilogue.cuh"
#include "kernels.hpp"
#include "wgmma.cuh"

namespace fp4sim::gpu {
namespace {

using namespace wgmma;

constexpr int kBK = 64;

template <int CONSUMERS, int BN, int STAGES, bool ORDERED>
struct ProbeTile {
  static_assert(BN % 8 == 0 && BN <= 192, "two BN / 2 register sets per thread must fit");
  static constexpr int kBM = 64 * CONSUMERS;
  static constexpr int kThreads = 128 * (CONSUMERS + 1);
  static constexpr int kRegs = BN / 2;  // accumulator registers per thread (m64nBNk16, FP32)
  static constexpr int kStageA = kBM * kBK * 2, kStageB = BN * kBK * 2;
  static constexpr int kSmem = STAGES * (kStageA + kStageB) + 1024;  // + alignment slack
  // setmaxnreg: the producer gives registers back, the consumers take them (65536 per SM in all).
  static constexpr int kConsumerRegs = CONSUMERS == 2 ? 232 : 152;
  static_assert(128 * 40 + 128 * CONSUMERS * kConsumerRegs <= 65536, "register file");
  static_assert(2 * kRegs + 24 <= kConsumerRegs, "accumulator, running sum and addressing fit");
};

#if defined(FP4SIM_WGMMA_BODY)
// Keeps the compiler from moving register reads and writes across the wgmma issue / wait points (the
// registers of an in-flight wgmma belong to the tensor cores until wait_group says otherwise).
template <int R>
__device__ __forceinline__ void fence_registers(float* r) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Consumer c's turn to issue: named barrier c + 1, which consumer c waits on and the consumer before it
// (cyclically) arrives at once it has issued.
__device__ __forceinline__ void wait_turn(int c) { asm volatile("bar.sync %0, 256;\n" ::"r"(c + 1) : "memory"); }
__device__ __forceinline__ void pass_turn(int next) { asm volatile("bar.arrive %0, 256;\n" ::"r"(next + 1) : "memory"); }
#endif

template <int CONSUMERS, int BN, int STAGES, bool ORDERED>
__global__ void __launch_bounds__(ProbeTile<CONSUMERS, BN, STAGES, ORDERED>::kThreads, 1)
    gemm_probe_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                            void* C, int M, int N, int K, Epilogue epilogue, int snap) {
#if defined(FP4SIM_WGMMA_BODY)
  using T = ProbeTile<CONSUMERS, BN, STAGES, ORDERED>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) std::uint64_t full[STAGES], empty[STAGES];
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the swizzle repeats every 1024 bytes
  const std::uint32_t sA = base, sB = base + STAGES * T::kStageA;

  const auto [m0, n0] = grouped_tile(M, N, T::kBM, BN);
  const int KT = K / kBK;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) init_ring<STAGES>(full, empty, CONSUMERS * 4);
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) produce<STAGES>(&map_a, &map_b, full, empty, sA, sB, T::kStageA, T::kStageB, KT, kBK, m0, n0);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(T::kConsumerRegs));
    const int c = wg - 1;  // rows m0 + 64c .. +63
    float acc[T::kRegs];
    float total[T::kRegs];
#pragma unroll
    for (int i = 0; i < T::kRegs; ++i) acc[i] = total[i] = 0.0f;
    for (int kt = 0; kt < KT; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(smem_u32(&full[s]), (kt / STAGES) & 1);
      const std::uint32_t a_base = sA + s * T::kStageA + c * (64 * 128);
      const std::uint32_t b_base = sB + s * T::kStageB;
      if constexpr (ORDERED) {
        if (kt > 0 || c > 0) wait_turn(c);
      }
      fence_registers<T::kRegs>(acc);
      fence();
#pragma unroll
      for (int j = 0; j < kBK / 16; ++j)
        mma_m64k16<BN>(acc, smem_desc(a_base + 32 * j), smem_desc(b_base + 32 * j), j > 0);
      commit();
      if constexpr (ORDERED) {
        const int next = (c + 1) % CONSUMERS;
        if (kt + 1 < KT || next != 0) pass_turn(next);
      }
      wait<0>();
      fence_registers<T::kRegs>(acc);
      __syncwarp();
      if ((tid & 31) == 0) mbar_arrive(smem_u32(&empty[s]));
#pragma unroll
      for (int i = 0; i < T::kRegs; ++i) total[i] = __fadd_rz(total[i], acc[i]);
    }

    // Epilogue from the fragments (m64nNk16 f32 layout: n8 block b = i / 4, row = 16 * warp + lane / 4 +
    // 8 * ((i / 2) & 1), col = 8 * b + 2 * (lane % 4) + (i & 1)): optional snap, then the epilogue.
    const float alpha = epilogue_alpha(epilogue);
    const int warp = tid / 32, lane = tid % 32;
    const int row0 = m0 + 64 * c + 16 * warp + lane / 4;
#pragma unroll
    for (int b = 0; b < BN / 8; ++b) {
      const int col = n0 + 8 * b + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
        float v[2] = {total[4 * b + 2 * h], total[4 * b + 2 * h + 1]};
        if (snap) {
#pragma unroll
          for (int e = 0; e < 2; ++e) v[e] = __fmul_rn(rintf(__fmul_rn(v[e], 1024.0f)), 0.0009765625f);
        }
        epilogue_pair(epilogue, alpha, C, N, row, col, v[0], v[1]);
      }
    }
  }
#else
  (void)M, (void)N, (void)K, (void)epilogue, (void)C, (void)snap;
#endif
}

template <int CONSUMERS, int BN, int STAGES, bool ORDERED>
int launch_cfg(const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, int m, int n, int kp, bool snap,
               Epilogue epilogue, void* stream) {
  using T = ProbeTile<CONSUMERS, BN, STAGES, ORDERED>;
  CUtensorMap ma, mb;
  if (kp % kBK != 0 || !make_map(ma, d_a, static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(kp), T::kBM) ||
      !make_map(mb, d_b, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(kp), BN))
    return cudaErrorInvalidValue;
  auto kernel = gemm_probe_wgmma_kernel<CONSUMERS, BN, STAGES, ORDERED>;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmem);
  if (attr != cudaSuccess) return attr;
  const int tiles = ((m + T::kBM - 1) / T::kBM) * ((n + BN - 1) / BN);
  kernel<<<tiles, T::kThreads, T::kSmem, static_cast<cudaStream_t>(stream)>>>(ma, mb, d_c, m, n, kp, epilogue,
                                                                                snap ? 1 : 0);
  return cudaGetLastError();
}

}  // namespace

int launch_gemm_probe_wgmma_raw(int config, const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, int m,
                                int n, int kp, bool snap, Epilogue epilogue, void* stream) {
  switch (config) {
    case 0: return launch_cfg<2, 192, 5, true>(d_a, d_b, d_c, m, n, kp, snap, epilogue, stream);
    case 1: return launch_cfg<3, 128, 5, true>(d_a, d_b, d_c, m, n, kp, snap, epilogue, stream);
    case 2: return launch_cfg<2, 192, 5, false>(d_a, d_b, d_c, m, n, kp, snap, epilogue, stream);
    case 3: return launch_cfg<3, 128, 5, false>(d_a, d_b, d_c, m, n, kp, snap, epilogue, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fp4sim::gpu
