// GEMM paths on the GPU: bf16-tc and probe-matched through mma.sync.m16n8k16 (BF16 in, FP32 accumulate),
// and exact on CUDA cores. Independent of the golden datapaths (src/core/datapath.cpp), which judge them.
//
// bf16-tc / probe-matched: the operands are first expanded to the encoded domain (element value x block
// scale, exact in BF16 for the presets) as BF16 [rows, Kp] (Kp = K rounded up to 16, zeros beyond K).
// The GEMM kernel is a classic multistage tensor-core kernel: block tile BM x BN x 32, 8 warps, cp.async
// 16-byte copies into a 4-stage shared-memory ring (16-byte chunks XOR-swizzled per row pair so ldmatrix
// is conflict-free), ldmatrix.x4 fragments, mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32. Each accumulator
// is one chain of k16 steps in ascending k from +0: the order the golden sm90-bf16 T-FDPA chain models.
// A k16 step beyond Kp is skipped (never fed zeros), so the chain has exactly Kp/16 steps.
// probe-matched folds the accumulator into a second register set with add.rz.f32 every 64 k and restarts
// it from +0.
// bf16-tc and probe-matched run on the wgmma kernels of emu/gemm_wgmma.cu and emu/gemm_probe_wgmma.cu (same
// chains, same bits) when the build has sm_90a code and the device loads it; this mma.sync kernel is the
// fallback.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "epilogue.cuh"
#include "fp4sim/emu/device_buffer.hpp"
#include "fp4sim/emu/gpu.hpp"
#include "kernels.hpp"

namespace fp4sim::gpu {
namespace {

constexpr int kBK = 32;
constexpr int kStages = 4;
constexpr int kGemmThreads = 256;

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t addr, std::uint32_t& r0, std::uint32_t& r1,
                                            std::uint32_t& r2, std::uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float* d, const std::uint32_t* a, const std::uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Byte offset of 16-byte chunk c (0..3) of row `row` in a [rows][32 bf16] tile.
__device__ __forceinline__ std::uint32_t tile_offset(int row, int chunk) {
  return static_cast<std::uint32_t>(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
}

template <int BM, int BN, int WM, int WN, bool GROUPED>
__global__ void __launch_bounds__(kGemmThreads) gemm_bf16_kernel(const std::uint16_t* __restrict__ A,
                                                                 const std::uint16_t* __restrict__ B,
                                                                 void* C, int M, int N, int K,
                                                                 Epilogue epilogue, int snap) {
  constexpr int kWarpsN = BN / WN;
  constexpr int MT = WM / 16, NT = WN / 8;
  static_assert((BM / WM) * (BN / WN) == kGemmThreads / 32, "8 warps");
  static_assert(NT % 2 == 0, "n tiles in pairs");
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* sA = smem;
  unsigned char* sB = smem + kStages * BM * 64;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = (warp / kWarpsN) * WM, wn = (warp % kWarpsN) * WN;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int KT = (K + kBK - 1) / kBK;

  // One operand's tile of `rows` rows from global row `row0` (of `limit`) into shared memory at `base`:
  // 16-byte chunks, zero-filled past the matrix.
  auto load_tile = [&](std::uint32_t base, const std::uint16_t* src, int rows, int row0, int limit, int k0) {
#pragma unroll
    for (int i = tid; i < rows * 4; i += kGemmThreads) {
      const int row = i >> 2, chunk = i & 3;
      const int g = row0 + row, gk = k0 + chunk * 8;
      const bool ok = g < limit && gk < K;
      cp_async16(base + tile_offset(row, chunk), ok ? src + static_cast<std::size_t>(g) * K + gk : src, ok);
    }
  };
  auto load_stage = [&](int stage, int kt) {
    load_tile(smem_u32(sA + stage * BM * 64), A, BM, m0, M, kt * kBK);
    load_tile(smem_u32(sB + stage * BN * 64), B, BN, n0, N, kt * kBK);
  };

  float acc[MT][NT][4];
  float total[GROUPED ? MT : 1][GROUPED ? NT : 1][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
  if constexpr (GROUPED) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) total[i][j][r] = 0.0f;
  }

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (kt + kStages - 1 < KT) load_stage((kt + kStages - 1) % kStages, kt + kStages - 1);
    cp_async_commit();

    const int stage = kt % kStages;
    const std::uint32_t a_base = smem_u32(sA + stage * BM * 64);
    const std::uint32_t b_base = smem_u32(sB + stage * BN * 64);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      const int kglobal = kt * kBK + kk;
      if (kglobal >= K) break;  // uniform: never feed a zero step into the chain
      std::uint32_t af[MT][4], bf[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int row = wm + i * 16 + (lane & 15);
        const int chunk = (kk >> 3) + (lane >> 4);
        ldmatrix_x4(a_base + tile_offset(row, chunk), af[i][0], af[i][1], af[i][2], af[i][3]);
      }
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) {
        const int row = wn + j * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int chunk = (kk >> 3) + ((lane >> 3) & 1);
        ldmatrix_x4(b_base + tile_offset(row, chunk), bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0],
                    bf[2 * j + 1][1]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], af[i], bf[j]);
      if constexpr (GROUPED) {
        if (((kglobal + 16) & 63) == 0) {
#pragma unroll
          for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
              for (int r = 0; r < 4; ++r) {
                total[i][j][r] = __fadd_rz(total[i][j][r], acc[i][j][r]);
                acc[i][j][r] = 0.0f;
              }
        }
      }
    }
  }
  cp_async_wait<0>();

  const float alpha = epilogue_alpha(epilogue);
#pragma unroll
  for (int i = 0; i < MT; ++i) {
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = m0 + wm + i * 16 + (lane >> 2) + ((r >> 1) << 3);
        const int col = n0 + wn + j * 8 + ((lane & 3) << 1) + (r & 1);
        float v;
        if constexpr (GROUPED) {
          v = total[i][j][r];
          if (snap) v = __fmul_rn(rintf(__fmul_rn(v, 1024.0f)), 0.0009765625f);
        } else {
          v = acc[i][j][r];
        }
        if (row < M && col < N) {
          epilogue_finish(epilogue, C, N, row, col, __fmul_rn(v, epilogue_row_alpha(epilogue, alpha, row)));
        }
      }
    }
  }
}

template <int BM, int BN, int WM, int WN, bool GROUPED>
cudaError_t launch_gemm_cfg(const std::uint16_t* a, const std::uint16_t* b, void* c, int m, int n, int k,
                            Epilogue epilogue, bool snap, cudaStream_t s) {
  constexpr int smem = kStages * (BM + BN) * 64;
  auto kernel = gemm_bf16_kernel<BM, BN, WM, WN, GROUPED>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  const dim3 grid((n + BN - 1) / BN, (m + BM - 1) / BM);
  kernel<<<grid, kGemmThreads, smem, s>>>(a, b, c, m, n, k, epilogue, snap ? 1 : 0);
  return cudaGetLastError();
}

// ---- encoded-domain operand ----

struct EncodeArgs {
  PackedOperand in;
  std::uint16_t* out;
  std::uint64_t kp;
  bool whole;  // cols == kp, block_cols % 16 == 0 and 8-byte aligned codes: one load, one scale per thread
};

// Sixteen consecutive elements of one row per thread (k_padded is a multiple of 16): two 16-byte stores,
// and on the whole path one 8-byte code load and one scale. The decode tables are copied to shared memory
// first: lanes index them with different codes, which the constant bank holding the parameters serializes.
constexpr int kEncodeThreads = 256;

__device__ __forceinline__ std::uint32_t bf16_product(float e, float s) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(__fmul_rn(e, s)));
}

__global__ void __launch_bounds__(kEncodeThreads) encode_bf16_kernel(EncodeArgs a) {
  const PackedOperand& q = a.in;
  __shared__ float element[16], scale[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) scale[i] = q.scale[i];
  if (threadIdx.x < 16) element[threadIdx.x] = q.element[threadIdx.x];
  __syncthreads();
  const std::uint64_t groups_per_row = a.kp / 16;
  const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= q.rows * groups_per_row) return;
  const std::uint64_t r = t / groups_per_row, k0 = (t - r * groups_per_row) * 16;
  const std::uint8_t* codes = q.codes + r * q.code_cols;
  const std::uint8_t* scales = q.scales + (r / q.block_rows) * q.scale_cols;
  std::uint32_t word[8];
  if (a.whole) {
    const uint2 packed = *reinterpret_cast<const uint2*>(codes + k0 / 2);
    const std::uint32_t halves[2] = {packed.x, packed.y};
    const float s = scale[scales[k0 / q.block_cols]];
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const std::uint32_t byte = (halves[p / 4] >> (8 * (p % 4))) & 0xFFu;
      word[p] = bf16_product(element[byte & 0xF], s) | (bf16_product(element[byte >> 4], s) << 16);
    }
  } else {
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      const std::uint64_t k = k0 + 2 * p;  // elements k (low nibble) and k + 1 (high nibble) of one byte
      const std::uint32_t byte = k < q.cols ? codes[k / 2] : 0u;
      std::uint32_t bits[2] = {0u, 0u};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (k + h < q.cols) bits[h] = bf16_product(element[(byte >> (4 * h)) & 0xF], scale[scales[(k + h) / q.block_cols]]);
      }
      word[p] = bits[0] | (bits[1] << 16);
    }
  }
  uint4* out = reinterpret_cast<uint4*>(a.out + r * a.kp + k0);
  out[0] = make_uint4(word[0], word[1], word[2], word[3]);
  out[1] = make_uint4(word[4], word[5], word[6], word[7]);
}

// ---- exact GEMM (CUDA cores) ----

constexpr int kLimbs = 22;
constexpr int kEmin = -320;  // weight of bit 0 of limb 0

struct ExactArgs {
  const std::uint8_t *a_codes, *a_scales, *b_codes, *b_scales;
  void* c;
  std::uint64_t m, n, k, a_code_cols, b_code_cols, a_scale_cols, b_scale_cols;
  std::int32_t a_block_rows, b_block_rows, block;
  std::int32_t scale_mbits, scale_bias, scale_pow2;  // scale format shape; pow2: e8m0
  std::int32_t scale_nan_code;                       // code decoding to NaN, or -1
  Epilogue epilogue;
};

// Element code -> twice its value as a signed integer (E2M1: 0, 1, 2, 3, 4, 6, 8, 12).
__device__ __forceinline__ int e2m1_twice(std::uint32_t code) {
  const int mag = code & 7;
  const int v = mag < 4 ? mag : (mag == 4 ? 4 : mag == 5 ? 6 : mag == 6 ? 8 : 12);
  return (code & 8) ? -v : v;
}

// Scale code -> significand M and exponent E with value M * 2^E.
__device__ __forceinline__ void scale_parts(const ExactArgs& a, std::uint32_t code, int& m, int& e) {
  if (a.scale_pow2) {
    m = 1;
    e = static_cast<int>(code) - 127;
    return;
  }
  const int field = static_cast<int>(code >> a.scale_mbits);
  const int mant = static_cast<int>(code & ((1u << a.scale_mbits) - 1u));
  m = field == 0 ? mant : mant | (1 << a.scale_mbits);
  e = (field == 0 ? 1 : field) - a.scale_bias - a.scale_mbits;
}

// RN32(alpha * value of the superaccumulator): the exact product, rounded once to binary32 (RNE,
// subnormals, overflow to Inf); +0 for an exact zero; alpha = +-0 times a nonzero sum: the zero of the
// product's sign, as the golden exact row has it (a row-scaled A's row of zeros and NaNs: amax 0, alpha 0,
// codes nonzero). alpha is not NaN.
__device__ float limbs_to_float_rne(long long* limb, float alpha) {
  auto propagate = [&] {
    for (int l = 0; l < kLimbs - 1; ++l) {
      const long long carry = limb[l] >> 32;  // floor
      limb[l] -= carry * (1ll << 32);
      limb[l + 1] += carry;
    }
  };
  propagate();
  bool negative = limb[kLimbs - 1] < 0;
  if (negative) {
    for (int l = 0; l < kLimbs; ++l) limb[l] = -limb[l];
    propagate();
  }
  if (isinf(alpha) || alpha == 0.0f) {  // Inf * exact sum: +-Inf, or NaN for an exact zero; 0 * sum: +-0
    bool zero = true;
    for (int l = 0; l < kLimbs; ++l) zero &= limb[l] == 0;
    if (alpha == 0.0f) return zero || negative == static_cast<bool>(signbit(alpha)) ? 0.0f : -0.0f;
    if (zero) return __uint_as_float(0x7FFFFFFFu);
    return (negative != (alpha < 0.0f)) ? -INFINITY : INFINITY;
  }
  // alpha = ma * 2^ea with ma < 2^24: multiply every digit (< 2^32) by ma, then carry again.
  const std::uint32_t ab = __float_as_uint(alpha);
  const std::uint32_t afield = (ab >> 23) & 0xFF;
  const long long ma = afield ? ((ab & 0x7FFFFF) | 0x800000) : (ab & 0x7FFFFF);
  const int ea = (afield ? static_cast<int>(afield) : 1) - 150;
  if (ab >> 31) negative = !negative;
  for (int l = 0; l < kLimbs; ++l) limb[l] *= ma;
  propagate();
  const int emin = kEmin + ea;  // weight of bit 0 of limb 0 after the multiplication
  int top = -1;
  for (int l = kLimbs - 1; l >= 0; --l) {
    if (limb[l] != 0) {
      top = l;
      break;
    }
  }
  if (top < 0) return 0.0f;
  const int msb = top * 32 + 63 - __clzll(limb[top]);  // bit p weighs 2^(p + kEmin)
  int lsb = msb - 23;
  if (lsb < -149 - emin) lsb = -149 - emin;
  auto bit = [&](int p) -> unsigned long long {
    return p < 0 ? 0ull : static_cast<unsigned long long>(limb[p >> 5] >> (p & 31)) & 1ull;
  };
  unsigned long long mant = 0;
  for (int p = msb; p >= lsb; --p) mant = (mant << 1) | bit(p);
  const unsigned long long round = bit(lsb - 1);
  bool sticky = false;
  const int sp = lsb - 1;  // bits strictly below sp
  if (sp > 0) {
    for (int l = 0; l < (sp >> 5); ++l) sticky |= limb[l] != 0;
    sticky |= (limb[sp >> 5] & ((1ll << (sp & 31)) - 1)) != 0;
  }
  if (round && (sticky || (mant & 1))) ++mant;
  const float r = ldexpf(static_cast<float>(mant), lsb + emin);
  return negative ? -r : r;
}

__global__ void gemm_exact_kernel(ExactArgs a) {
  const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.m * a.n) return;
  const std::uint64_t i = t / a.n, j = t % a.n;
  long long limb[kLimbs];
#pragma unroll
  for (int l = 0; l < kLimbs; ++l) limb[l] = 0;
  bool nan = false;
  const std::uint64_t blocks = (a.k + a.block - 1) / a.block;
  const std::uint8_t* arow = a.a_codes + i * a.a_code_cols;
  const std::uint8_t* brow = a.b_codes + j * a.b_code_cols;
  for (std::uint64_t kb = 0; kb < blocks; ++kb) {
    const std::uint32_t sa = a.a_scales[(i / a.a_block_rows) * a.a_scale_cols + kb];
    const std::uint32_t sb = a.b_scales[(j / a.b_block_rows) * a.b_scale_cols + kb];
    if (static_cast<int>(sa) == a.scale_nan_code || static_cast<int>(sb) == a.scale_nan_code) {
      nan = true;
      continue;
    }
    long long dot = 0;
    const std::uint64_t k0 = kb * a.block, k1 = k0 + a.block < a.k ? k0 + a.block : a.k;
    for (std::uint64_t k = k0; k < k1; ++k) {
      const std::uint8_t ab = arow[k / 2], bb = brow[k / 2];
      const std::uint32_t ca = (k & 1) ? ab >> 4 : ab & 0xF, cbc = (k & 1) ? bb >> 4 : bb & 0xF;
      dot += e2m1_twice(ca) * e2m1_twice(cbc);
    }
    if (dot == 0) continue;
    int ma, ea, mb, eb;
    scale_parts(a, sa, ma, ea);
    scale_parts(a, sb, mb, eb);
    const long long term = dot * ma * mb;  // value term * 2^(ea + eb - 2)
    const int shift = ea + eb - 2 - kEmin;
    const int idx = shift >> 5, off = shift & 31;
    const long long v = term * (1ll << off);  // |term| < 2^26, so |v| < 2^57
    limb[idx] += v & 0xFFFFFFFFll;
    limb[idx + 1] += v >> 32;
  }
  const float alpha = epilogue_row_alpha(a.epilogue, epilogue_alpha(a.epilogue), static_cast<int>(i));
  const float c = nan || isnan(alpha) ? __uint_as_float(0x7FFFFFFFu) : limbs_to_float_rne(limb, alpha);
  epilogue_finish(a.epilogue, a.c, static_cast<int>(a.n), static_cast<int>(i), static_cast<int>(j), c);
}

}  // namespace

Status launch_gemm_bf16(const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c, std::size_t m,
                        std::size_t n, std::size_t kp, int group_k, bool snap, Epilogue epilogue,
                        void* stream) {
  if (m == 0 || n == 0) return Status::success;
  if (kp % 16 != 0 || m > 0x7FFFFFFF || n > 0x7FFFFFFF || kp > 0x7FFFFFFF) return Status::invalid_argument;
  if (group_k != 0 && (group_k != 64 || kp % 64 != 0)) return Status::invalid_argument;
  auto s = static_cast<cudaStream_t>(stream);
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(kp);
  cudaError_t e;
  if (group_k == 0) {
    // The wgmma kernel (emu/gemm_wgmma.cu) where this build and device have it, for every shape (so that
    // crosscheck's many small and ragged GEMMs judge it too); else mma.sync: large problems 128 x 256 tiles
    // (warp tile 64 x 64), small ones 128 x 128 for more blocks.
    if (wgmma_available()) {
      e = static_cast<cudaError_t>(launch_gemm_wgmma_raw(d_a, d_b, d_c, M, N, K, epilogue, stream));
    } else if (m * n >= std::size_t{4096} * 4096) {
      e = launch_gemm_cfg<128, 256, 64, 64, false>(d_a, d_b, d_c, M, N, K, epilogue, false, s);
    } else {
      e = launch_gemm_cfg<128, 128, 64, 32, false>(d_a, d_b, d_c, M, N, K, epilogue, false, s);
    }
  } else if (wgmma_available()) {
    e = static_cast<cudaError_t>(launch_gemm_probe_wgmma_raw(0, d_a, d_b, d_c, M, N, K, snap, epilogue, stream));
  } else {
    e = launch_gemm_cfg<128, 128, 64, 32, true>(d_a, d_b, d_c, M, N, K, epilogue, snap, s);
  }
  return e == cudaSuccess ? Status::success : Status::cuda_error;
}

Status launch_gemm_bf16_variant(int variant, const std::uint16_t* d_a, const std::uint16_t* d_b, void* d_c,
                                std::size_t m, std::size_t n, std::size_t kp, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(kp);
  cudaError_t e = cudaErrorInvalidValue;
  switch (variant) {
    case 0: e = launch_gemm_cfg<128, 128, 64, 32, false>(d_a, d_b, d_c, M, N, K, {}, false, s); break;
    case 1: e = launch_gemm_cfg<128, 256, 64, 64, false>(d_a, d_b, d_c, M, N, K, {}, false, s); break;
    case 2: e = launch_gemm_cfg<256, 128, 64, 64, false>(d_a, d_b, d_c, M, N, K, {}, false, s); break;
    case 3: e = launch_gemm_cfg<128, 128, 64, 32, true>(d_a, d_b, d_c, M, N, K, {}, true, s); break;
    case 4:
      if (wgmma_available()) e = static_cast<cudaError_t>(launch_gemm_wgmma_raw(d_a, d_b, d_c, M, N, K, {}, stream));
      break;
    case 5:
    case 6:
    case 7:
    case 8:
      if (wgmma_available())
        e = static_cast<cudaError_t>(launch_gemm_probe_wgmma_raw(variant - 5, d_a, d_b, d_c, M, N, K, true, {}, stream));
      break;
    default: break;
  }
  return e == cudaSuccess ? Status::success : Status::cuda_error;
}

Status launch_encode_bf16(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales,
                          std::uint16_t* d_out, std::size_t kp, void* stream) {
  if (q.element != formats::e2m1) return Status::unsupported_format;
  EncodeArgs a{};
  a.in = packed_operand(q, d_codes, d_scales);
  a.out = d_out;
  a.kp = kp;
  if (kp % 16 != 0 || reinterpret_cast<std::uintptr_t>(d_out) % 16 != 0) return Status::invalid_argument;
  a.whole = q.cols == kp && q.block_cols % 16 == 0 && reinterpret_cast<std::uintptr_t>(d_codes) % 8 == 0;
  const std::uint64_t threads = q.rows * kp / 16;
  if (threads == 0) return Status::success;
  encode_bf16_kernel<<<static_cast<unsigned>((threads + kEncodeThreads - 1) / kEncodeThreads), kEncodeThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(a);
  return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error;
}

Status launch_gemm_exact(const QuantizedTensor& qa, const std::uint8_t* d_a_codes, const std::uint8_t* d_a_scales,
                         const QuantizedTensor& qb, const std::uint8_t* d_b_codes, const std::uint8_t* d_b_scales,
                         void* d_c, Epilogue epilogue, void* stream) {
  if (qa.element != formats::e2m1 || qb.element != formats::e2m1 || !(qa.scale == qb.scale))
    return Status::unsupported_format;
  if (qa.cols != qb.cols || qa.block_cols != qb.block_cols) return Status::invalid_argument;
  const Format& sf = qa.scale;
  ExactArgs a{};
  a.a_codes = d_a_codes;
  a.a_scales = d_a_scales;
  a.b_codes = d_b_codes;
  a.b_scales = d_b_scales;
  a.c = d_c;
  a.m = qa.rows;
  a.n = qb.rows;
  a.k = qa.cols;
  a.a_code_cols = qa.code_cols();
  a.b_code_cols = qb.code_cols();
  a.a_scale_cols = qa.scale_cols;
  a.b_scale_cols = qb.scale_cols;
  a.a_block_rows = qa.block_rows;
  a.b_block_rows = qb.block_rows;
  a.block = qa.block_cols;
  a.scale_pow2 = sf.specials == Specials::pow2_nan ? 1 : 0;
  if (!a.scale_pow2 && (sf.is_signed || sf.mantissa_bits < 1 || sf.bits() > 8)) return Status::unsupported_format;
  a.scale_mbits = sf.mantissa_bits;
  a.scale_bias = sf.bias;
  a.scale_nan_code = sf.has_nan() ? static_cast<std::int32_t>(sf.nan_code()) : -1;
  a.epilogue = epilogue;
  const std::uint64_t n = a.m * a.n;
  if (n == 0) return Status::success;
  gemm_exact_kernel<<<static_cast<unsigned>((n + 127) / 128), 128, 0, static_cast<cudaStream_t>(stream)>>>(a);
  return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error;
}

// ---- host API ----

float gemm_alpha(AlphaRule rule, const QuantizedTensor& a, const QuantizedTensor& b) {
  if (rule == AlphaRule::one || !a.tensor_scaled || !b.tensor_scaled) return 1.0f;
  const volatile float amax = a.tensor_amax * b.tensor_amax;
  const volatile float fa = 6.0f * a.target, fb = 6.0f * b.target;
  const volatile float denom = fa * fb;
  if (rule == AlphaRule::division) return amax / denom;
  const volatile float inv = 1.0f / denom;
  return amax * inv;
}


Status gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& o, std::span<float> c) {
  if (a.cols != b.cols || c.size() < a.rows * b.rows) return Status::invalid_argument;
  if (a.element != formats::e2m1 || b.element != formats::e2m1) return Status::unsupported_format;
  // A row-scaled A takes one alpha per row (o.row_alpha); a row-scaled B would need one per column.
  if (!b.row_amax.empty()) return Status::unsupported_options;
  if ((!a.row_amax.empty() || !o.row_alpha.empty()) && o.row_alpha.size() != a.rows) return Status::invalid_argument;
  const GemmKernel& kernel = gemm_kernel(o.path);
  if (!kernel.takes_k(a.cols)) return Status::invalid_argument;
  if (!device_available()) return Status::no_device;
  DeviceBuffer ac, as, bc, bs, dc, drow;
  if (!upload<std::uint8_t>(ac, a.codes) || !upload<std::uint8_t>(as, a.scales) || !upload<std::uint8_t>(bc, b.codes) ||
      !upload<std::uint8_t>(bs, b.scales) || !dc.allocate(a.rows * b.rows * sizeof(float)) ||
      (!o.row_alpha.empty() && !upload<float>(drow, o.row_alpha)))
    return cuda_failed();
  const Epilogue epilogue{.alpha = o.alpha, .row_alpha = o.row_alpha.empty() ? nullptr : drow.as<float>()};
  Status st;
  if (o.path == GemmPath::exact) {
    st = launch_gemm_exact(a, ac.as<std::uint8_t>(), as.as<std::uint8_t>(), b, bc.as<std::uint8_t>(),
                           bs.as<std::uint8_t>(), dc.as<float>(), epilogue, nullptr);
  } else {
    const std::size_t kp = kernel.workspace_cols(a.cols);
    DeviceBuffer ea, eb;
    if (!ea.allocate(a.rows * kp * 2) || !eb.allocate(b.rows * kp * 2)) return cuda_failed();
    st = launch_encode_bf16(a, ac.as<std::uint8_t>(), as.as<std::uint8_t>(), ea.as<std::uint16_t>(), kp, nullptr);
    if (st == Status::success)
      st = launch_encode_bf16(b, bc.as<std::uint8_t>(), bs.as<std::uint8_t>(), eb.as<std::uint16_t>(), kp, nullptr);
    if (st == Status::success)
      st = launch_gemm_bf16(ea.as<std::uint16_t>(), eb.as<std::uint16_t>(), dc.as<float>(), a.rows, b.rows, kp,
                            kernel.group_k, o.snap, epilogue, nullptr);
  }
  if (st != Status::success) return st;
  if (cudaMemcpy(c.data(), dc.as<float>(), a.rows * b.rows * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
    return cuda_failed();
  return Status::success;
}

}  // namespace fp4sim::gpu
