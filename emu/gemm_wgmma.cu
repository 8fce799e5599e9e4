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

#include "device.hpp"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FP4SIM_WGMMA_BODY 1
#endif

namespace fp4sim::gpu::detail {
namespace {

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

#if defined(FP4SIM_WGMMA_BODY)
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// Shared-memory matrix descriptor: K-major tile of 128-byte rows written by TMA with the 128-byte swizzle;
// 8-row groups 1024 bytes apart (stride byte offset), leading byte offset unused (16), base 1024-aligned.
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4);
  d |= static_cast<std::uint64_t>(16 >> 4) << 16;
  d |= static_cast<std::uint64_t>(1024 >> 4) << 32;
  d |= std::uint64_t{1} << 62;  // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_m64n256k16(float* d, std::uint64_t desc_a, std::uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

#endif

__global__ void __launch_bounds__(kThreads, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      float* __restrict__ C, int M, int N, int K, float alpha) {
#if defined(FP4SIM_WGMMA_BODY)
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) std::uint64_t full[kStages], empty[kStages];
  // 1024-byte aligned base (the 128-byte swizzle pattern repeats every 1024 bytes).
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const std::uint32_t sA = base, sB = base + kStages * kStageBytesA;

  const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
  // Grouped rasterisation: 8 m tiles at a time sweep the n tiles (L2 reuse of B).
  constexpr int kGroup = 8;
  const int bid = static_cast<int>(blockIdx.x);
  const int per_group = kGroup * tiles_n;
  const int first_m = (bid / per_group) * kGroup;
  const int gsize = min(tiles_m - first_m, kGroup);
  const int tm = first_m + (bid % per_group) % gsize, tn = (bid % per_group) / gsize;
  const int m0 = tm * kBM, n0 = tn * kBN;
  const int KT = (K + kBK - 1) / kBK;

  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(smem_u32(&full[s]), 1);
      mbar_init(smem_u32(&empty[s]), kConsumers * 4);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues the copies.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0) {
      for (int kt = 0; kt < KT; ++kt) {
        const int s = kt % kStages;
        if (kt >= kStages) mbar_wait(smem_u32(&empty[s]), ((kt / kStages) - 1) & 1);
        const std::uint32_t bar = smem_u32(&full[s]);
        mbar_expect_tx(bar, kStageBytesA + kStageBytesB);
        tma_load_2d(sA + s * kStageBytesA, &map_a, bar, kt * kBK, m0);
        tma_load_2d(sB + s * kStageBytesB, &map_b, bar, kt * kBK, n0);
      }
    }
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
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < kBK / 16; ++j) wgmma_m64n256k16(d, smem_desc(a_base + 32 * j), smem_desc(b_base + 32 * j));
      } else {
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < kBK / 16 - 1; ++j)
          if (16 * j < krem) wgmma_m64n256k16(d, smem_desc(a_base + 32 * j), smem_desc(b_base + 32 * j));
      }
      wgmma_commit();
      wgmma_wait0();
      __syncwarp();
      if ((tid & 31) == 0) mbar_arrive(smem_u32(&empty[s]));
    }
    // Epilogue: RN(acc * alpha), straight from the fragments (m64nNk16 f32 layout: n8 block b = i / 4,
    // row = 16 * warp + lane / 4 + 8 * ((i / 2) & 1), col = 8 * b + 2 * (lane % 4) + (i & 1)).
    const int warp = tid / 32, lane = tid % 32;
    const int row0 = m0 + 64 * c + 16 * warp + lane / 4;
    const bool pairs = (N % 2) == 0;
#pragma unroll
    for (int b = 0; b < 32; ++b) {
      const int col = n0 + 8 * b + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= M) continue;
        const float v0 = __fmul_rn(d[4 * b + 2 * h], alpha), v1 = __fmul_rn(d[4 * b + 2 * h + 1], alpha);
        float* p = C + static_cast<std::size_t>(row) * N + col;
        if (pairs && col + 1 < N) {
          *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
        } else {
          if (col < N) p[0] = v0;
          if (col + 1 < N) p[1] = v1;
        }
      }
    }
  }
#else
  (void)M, (void)N, (void)K, (void)alpha, (void)C;
#endif
}

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
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBK), box_rows};
  const cuuint32_t estrides[2] = {1, 1};
  return encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<std::uint16_t*>(ptr), dims, strides, box,
                     estrides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace

bool wgmma_available() {
  static const bool available = [] {
    if (std::getenv("FP4SIM_NO_WGMMA") != nullptr) return false;  // A/B runs against the mma.sync kernel
    if (encode_fn() == nullptr) return false;
    int* d = nullptr;
    int h = 0;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return false;
    wgmma_flag_kernel<<<1, 1>>>(d);
    const bool ok = cudaGetLastError() == cudaSuccess && cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
    cudaGetLastError();
    return ok && h == 1;
  }();
  return available;
}

int launch_gemm_wgmma_raw(const std::uint16_t* d_a, const std::uint16_t* d_b, float* d_c, int m, int n, int kp,
                          float alpha, void* stream) {
  CUtensorMap ma, mb;
  if (kp % 16 != 0 || !make_map(ma, d_a, static_cast<std::uint64_t>(m), static_cast<std::uint64_t>(kp), kBM) ||
      !make_map(mb, d_b, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(kp), kBN))
    return cudaErrorInvalidValue;
  static const cudaError_t attr =
      cudaFuncSetAttribute(gemm_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (attr != cudaSuccess) return attr;
  const int tiles = ((m + kBM - 1) / kBM) * ((n + kBN - 1) / kBN);
  gemm_wgmma_kernel<<<tiles, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(ma, mb, d_c, m, n, kp, alpha);
  return cudaGetLastError();
}

}  // namespace fp4sim::gpu::detail
