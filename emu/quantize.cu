// Block quantization on the GPU (fp4sim::gpu::quantize; the amax passes: emu/amax.cu; dequantization:
// emu/dequantize.cu; what they share: emu/quantize_common.cuh).
//
// Written for the GPU, independently of src/core/quantize.cpp (which judges it through `fp4sim crosscheck`):
//  * one thread owns one 1 x B row segment of a block (B = 16 or 32): it loads its B floats with 16-byte
//    loads, applies the 16-point RHT in registers when asked (FP32 sequential 16-term sums from +0,
//    then BF16 RNE, two values per cvt.rn.bf16x2.f32), and stores B/2 code bytes in one vector
//    store. 2-D tiles (B x B) are B consecutive lanes of a warp, one row each; the tile amax is a
//    butterfly of shuffles, so a tile costs no shared memory and no second pass;
//  * the block scale: two-level u = RN(amax * RN(G * RN(1/6))) through the integer bit path of
//    emu::f32_to_small (RNE, saturating), the zero-scale repair, mult = min(RN(1/RN(s * Gd)), FLT_MAX);
//    or a power-of-two rule into E8M0 (e8m0_scale_code); under 4over6 (BlockScaleChoice::four_over_six_*)
//    both TE candidates, map-to-6 and map-to-4, each row's error under each in FourOverSixError's FP32
//    order, a 2-D tile's rows summed by shuffles in block_sum's tree; under AmaxScope::row the row's own
//    amax (row_amax_kernel, a pass before) gives the row's G and Gd, computed in the thread;
//  * E2M1 elements: RNE branch-free by emu::f32_to_e2m1_rne_fast (equal to the seven thresholds of
//    emu::f32_to_e2m1<rne> on all 2^32 inputs, tests/gpu_quantize_test.cpp); stochastic rounding from the
//    fraction delta = (|y| - lower) / step, exact in binary32 (Sterbenz), compared per mode: sr-fastest
//    floor(2^k delta) + r >= 2^k; sr-fast 2^(k+1) delta + 2r + 1 >= 2^(k+1) (exact); sr-fast-f32
//    RN32(delta + (2r+1) 2^-(k+1)) >= 1. Random integers are Philox4x32-10 (include/fp4sim/core/random.hpp,
//    the one shared host/device helper) under contract v2 (docs/random-bits.md): for k <= 8 one Philox
//    block serves 16 consecutive elements (a byte each); at k = 8 (every preset) a thread whose first element
//    starts a block draws its BC / 16 blocks right after the loads are issued, so the Philox rounds overlap
//    the memory latency; other threads (ragged rows) and other k draw per element.
// The current tensor amax (and under AmaxScope::row each row's) is a separate pass (emu/amax.cu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/emu/device_buffer.hpp"
#include "fp4sim/emu/element_convert.hpp"
#include "fp4sim/emu/gpu.hpp"
#include "kernels.hpp"
#include "quantize_common.cuh"

namespace fp4sim::gpu {
namespace {

constexpr int kThreads = 256;

// Kernel arguments (by value, so they sit in the constant bank).
struct QuantArgs {
  QuantizeInput x;
  const std::uint32_t* explicit_bits;
  std::uint8_t* codes;
  std::uint8_t* scales;
  std::uint64_t rows, cols, code_cols, scale_rows, scale_cols, threads;
  float tensor_amax, encode, block_multiplier, gd;
  float six_target;              // RN(6 * T): per-row G under AmaxScope::row, the 4over6 error's RN(F * T)
  const float* row_amax;         // non-null (AmaxScope::row): each row's amax makes that row's G and Gd
  std::uint32_t error_squared;   // 4over6: MSE (else MAE)
  std::uint32_t error_fast_math; // 4over6: the error in the fast-math domain (else the input domain)
  emu::SmallFormat scale_format;
  std::uint32_t scale_mbits;
  std::int32_t scale_bias;
  std::uint32_t one_code;
  std::uint32_t zero_to_one;
  std::uint64_t seed, stream;
  std::int32_t sr_bits;
  ScaleRule pow2_rule;  // ScaleKind::pow2: the same for every thread (no divergence)
  const float* device_scalars;  // non-null: block_multiplier and gd are read from here (DeviceScalar order)
};

// 2^e for -149 <= e <= 127, built from bits (exact).
__device__ __forceinline__ float pow2f(int e) {
  if (e >= -126) return __uint_as_float(static_cast<std::uint32_t>(e + 127) << 23);
  return __uint_as_float(1u << (e + 149));
}

// The E8M0 block-scale code of a finite block of E2M1 elements (emax 2, max 6) with amax >= 0, by each
// power-of-two rule as ScaleChooser::pow2 (src/core/scale_chooser.cpp) defines it; 0xFF: torchao EVEN's
// NaN block. Unbiased exponents are clamped to E8M0's [-127, 127]; amax 0 gives 2^-127.
__device__ __forceinline__ std::uint32_t e8m0_scale_code(ScaleRule rule, float amax) {
  const std::uint32_t bits = __float_as_uint(amax);
  const int field = static_cast<int>(bits >> 23);
  const std::uint32_t mantissa = bits & 0x7FFFFFu;
  int shared = -129;
  if (amax > 0.0f) {
    switch (rule) {
      case ScaleRule::pow2_floor: shared = field - 127 - 2; break;  // a subnormal amax reads as -127
      case ScaleRule::pow2_ceil_exponent: shared = field - 127 + (mantissa != 0u) - 2; break;
      case ScaleRule::pow2_ceil: {
        // floor(log2 amax) - 2, one more when amax > 6 * 2^that (compared in binary64, as the CPU does).
        const int floor_log2 = field != 0 ? field - 127 : 31 - __clz(static_cast<int>(mantissa)) - 149;
        shared = floor_log2 - 2;
        if (static_cast<double>(amax) > scalbn(6.0, shared)) ++shared;
        break;
      }
      case ScaleRule::pow2_even: {
        // half an ulp of E2M1's 1-bit mantissa added to the bits; a carry into the top exponent is +Inf
        const std::uint32_t rounded = (bits + (1u << 21)) & 0x7F800000u;
        if (rounded == 0x7F800000u) return 0xFFu;
        shared = static_cast<int>(rounded >> 23) - 127 - 2;
        break;
      }
      case ScaleRule::pow2_rceil: {
        // RN(amax * RN(1/6)) rounded up to a power of two, saturating at 2^127: from the bits, up by one
        // binade when any mantissa bit is set; binary32 subnormals round up to 2^-127 or 2^-126.
        constexpr float kInverseMax = 1.0f / 6.0f;  // binary32 RN, as fp32::div_rn(1, 6)
        const std::uint32_t d = __float_as_uint(__fmul_rn(amax, kInverseMax));
        const int d_field = static_cast<int>(d >> 23);
        const std::uint32_t code = d_field != 0 ? d_field + ((d & 0x7FFFFFu) != 0u) : ((d & 0x7FFFFFu) > 0x400000u);
        return code > 254u ? 254u : code;
      }
      case ScaleRule::two_level: break;
    }
  }
  shared = shared < -127 ? -127 : (shared > 127 ? 127 : shared);
  return static_cast<std::uint32_t>(shared + 127);
}

// Value of a two-level scale code (unsigned, mantissa bits M, bias; code < max+1, no specials reached).
__device__ __forceinline__ float decode_scale(const QuantArgs& a, std::uint32_t code) {
  const std::uint32_t field = code >> a.scale_mbits;
  const std::uint32_t mant = code & ((1u << a.scale_mbits) - 1u);
  const int m = static_cast<int>(a.scale_mbits);
  if (field == 0) return static_cast<float>(mant) * pow2f(1 - a.scale_bias - m);
  return static_cast<float>(mant | (1u << m)) * pow2f(static_cast<int>(field) - a.scale_bias - m);
}

__device__ __forceinline__ BlockScalars block_scalars(const QuantArgs& a, std::uint64_t r) {
  if (a.row_amax != nullptr) return global_scalars(a.row_amax[r], a.six_target);
  if (a.device_scalars != nullptr) {
    const float* d = a.device_scalars;
    return {d[kTensorAmax], d[kEncode], d[kDecode], d[kBlockMultiplier]};
  }
  return {a.tensor_amax, a.encode, a.gd, a.block_multiplier};
}

// A two-level block scale from its ideal value u (ScaleChooser::two_level_from_ideal): the code by saturating
// RNE into the scale format, the zero-scale repair, and the element multiplier min(RN(1 / RN(s * Gd)), FLT_MAX).
struct TwoLevelScale {
  std::uint32_t code;
  float value, multiplier;
};

__device__ __forceinline__ TwoLevelScale two_level_scale(const QuantArgs& a, float ideal, float gd) {
  TwoLevelScale s;
  s.code = emu::f32_to_small<emu::Round::rne>(a.scale_format, __float_as_uint(ideal));
  s.value = decode_scale(a, s.code);
  if (s.value == 0.0f && a.zero_to_one) {
    s.code = a.one_code;
    s.value = 1.0f;
  }
  s.multiplier = fminf(__frcp_rn(__fmul_rn(s.value, gd)), FLT_MAX);
  return s;
}

// Value of an E2M1 code (sign bit 3, exponent field bits 2-1, mantissa bit 0), exact.
__device__ __forceinline__ float e2m1_value(std::uint32_t code) {
  const std::uint32_t field = (code >> 1) & 3u, m = code & 1u;
  const float magnitude = field == 0 ? 0.5f * static_cast<float>(m)
                                     : (1.0f + 0.5f * static_cast<float>(m)) * static_cast<float>(1u << (field - 1));
  return (code & 8u) ? -magnitude : magnitude;
}

// The 4over6 error of one row segment of a block under one candidate scale, FourOverSixError::operator()
// (src/core/four_over_six.cpp) operation for operation: from +0, in ascending column, err += |diff| (MAE) or
// RN(diff * diff) (MSE), with q the RNE code's value, s the candidate's scale value, A and G the block's
// amax scalars (tensor or row) and
//   input:     diff = RN(RN(RN(RN(q * s) * A) / RN(6T)) - x)
//   fast_math: diff = RN(RN(q * s) - RN(x * G)).
// Columns past the tensor's (zeros in v) take no part.
template <int BC>
__device__ __forceinline__ float four_over_six_row_error(const QuantArgs& a, const float (&v)[BC], std::uint64_t c0,
                                                         const TwoLevelScale& s, const BlockScalars& sc) {
  float err = 0.0f;
#pragma unroll
  for (int i = 0; i < BC; ++i) {
    if (c0 + i >= a.cols) break;
    const float q = e2m1_value(emu::f32_to_e2m1_rne_fast(__float_as_uint(__fmul_rn(v[i], s.multiplier))));
    const float product = __fmul_rn(q, s.value);
    const float diff = a.error_fast_math ? __fsub_rn(product, __fmul_rn(v[i], sc.encode))
                                         : __fsub_rn(__fdiv_rn(__fmul_rn(product, sc.amax), a.six_target), v[i]);
    err = __fadd_rn(err, a.error_squared ? __fmul_rn(diff, diff) : fabsf(diff));
  }
  return err;
}

// E2M1 stochastic rounding of y with the k-bit integer r.
template <ElementRound R>
__device__ __forceinline__ std::uint32_t e2m1_stochastic(float y, std::uint32_t r, int k) {
  const std::uint32_t bits = __float_as_uint(y);
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  const std::uint32_t sign = (bits >> 28) & 0x8u;
  if (abs > 0x7F800000u) return 0x7u;           // NaN: +max finite (satfinite)
  if (abs >= 0x40C00000u) return 0x7u | sign;   // |y| >= 6 (Inf too): saturate
  const float a = __uint_as_float(abs);
  // Lower code (rounding toward zero), its value and the step to the next code.
  const std::uint32_t lower = emu::f32_to_e2m1<emu::Round::rtz>(abs);
  const std::uint32_t field = lower >> 1, m = lower & 1u;
  const float lower_value = field == 0 ? 0.5f * static_cast<float>(m)
                                       : (1.0f + 0.5f * static_cast<float>(m)) * static_cast<float>(1u << (field - 1));
  const float inv_step = lower < 4 ? 2.0f : lower < 6 ? 1.0f : 0.5f;
  const float delta = __fmul_rn(__fsub_rn(a, lower_value), inv_step);  // exact
  bool up = false;
  if constexpr (R == ElementRound::sr_fastest) {
    // floor(2^k delta) + r >= 2^k
    const float scaled = floorf(__fmul_rn(delta, __uint_as_float(static_cast<std::uint32_t>(127 + k) << 23)));
    up = static_cast<std::uint64_t>(scaled) + r >= (std::uint64_t{1} << k);
  } else if constexpr (R == ElementRound::sr_fast) {
    // floor(2^(k+1) delta) + 2r + 1 >= 2^(k+1), in integers
    const float scaled = floorf(__fmul_rn(delta, __uint_as_float(static_cast<std::uint32_t>(128 + k) << 23)));
    up = static_cast<std::uint64_t>(scaled) + 2 * std::uint64_t{r} + 1 >= (std::uint64_t{1} << (k + 1));
  } else {
    // RN32(delta + (2r+1) * 2^-(k+1)) >= 1, (2r+1) formed in 32-bit unsigned arithmetic
    const float offset = __fmul_rn(__uint2float_rn(2u * r + 1u),
                                   __uint_as_float(static_cast<std::uint32_t>(127 - (k + 1)) << 23));
    up = __fadd_rn(delta, offset) >= 1.0f;
  }
  return (lower + (up ? 1u : 0u)) | sign;
}

// Stochastic rounding in integers only (emu::f32_to_e2m1_sr, fp4sim/emu/element_convert.hpp): the same decision as
// e2m1_stochastic for r < 2^k, used with Philox bits (masked to k); explicit bits keep e2m1_stochastic.
template <ElementRound R>
__device__ __forceinline__ std::uint32_t e2m1_stochastic_int(std::uint32_t bits, std::uint32_t r, int k) {
  constexpr emu::Sr kMode = R == ElementRound::sr_fastest ? emu::Sr::fastest
                            : R == ElementRound::sr_fast  ? emu::Sr::fast
                                                          : emu::Sr::fast_f32;
  return emu::f32_to_e2m1_sr<kMode>(bits, r, k);
}

// The Philox blocks that hold the byte lanes of elements base .. base + BC - 1 (base a multiple of 16):
// element i's integer is byte i % 4 of words[i / 4].
template <int BC>
__device__ __forceinline__ void draw_byte_lanes(const QuantArgs& a, std::uint64_t base, std::uint32_t* words) {
#pragma unroll
  for (int q = 0; q < BC / 16; ++q) {
    const Philox4x32::Counter w = Philox4x32::block(a.seed, a.stream, base / 16 + q);
#pragma unroll
    for (int j = 0; j < 4; ++j) words[4 * q + j] = w[j];
  }
}

template <int BC, int BR, ElementRound R, ScaleKind SK, bool RHT>
__global__ void __launch_bounds__(kThreads) quantize_kernel(QuantArgs a) {
  const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const std::uint64_t group = t / BR;
  const int lane_in_group = static_cast<int>(t % BR);
  std::uint64_t sr, cb;
  if (a.threads <= 0xFFFFFFFFu && a.scale_cols <= 0xFFFFFFFFu) {
    // 32-bit division (a 64-bit one is a ~70-instruction routine per thread)
    const std::uint32_t g32 = static_cast<std::uint32_t>(group), sc = static_cast<std::uint32_t>(a.scale_cols);
    const std::uint32_t q = g32 / sc;
    sr = q;
    cb = g32 - q * sc;
  } else {
    sr = group / a.scale_cols;
    cb = group % a.scale_cols;
  }
  const std::uint64_t r = sr * BR + lane_in_group;
  const bool valid = t < a.threads && r < a.rows;
  const std::uint64_t c0 = cb * BC;
  const bool vector_path = (a.cols % BC) == 0;

  float v[BC];
  // Random integers of this thread's elements at k = 8 (every preset: byte lanes), drawn in whole blocks when
  // the first element starts one (always, for rows of whole blocks of 16).
  std::uint32_t rwords[R != ElementRound::rne ? BC / 4 : 1];
  const std::uint64_t base_index = r * a.cols + c0;
  const bool whole_blocks = a.explicit_bits == nullptr && a.sr_bits == 8 && (base_index & 15u) == 0;
  if (valid) {
    load_block<BC>(a.x, r, c0, a.cols, vector_path, v);
    if constexpr (R != ElementRound::rne) {
      // Philox words for the stochastic rounding, drawn while the loads are in flight (they do not
      // depend on x).
      if (whole_blocks) draw_byte_lanes<BC>(a, base_index, rwords);
    }
    if constexpr (RHT) {
#pragma unroll
      for (int g = 0; g < BC / 16; ++g) rht16(v + 16 * g);
      if (!vector_path) {
#pragma unroll
        for (int i = 0; i < BC; ++i)
          if (c0 + i >= a.cols) v[i] = 0.0f;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < BC; ++i) v[i] = 0.0f;
  }

  float amax = 0.0f;
  std::uint32_t nonfinite = 0;
#pragma unroll
  for (int i = 0; i < BC; ++i) {
    amax = fmaxf(amax, fabsf(v[i]));  // fmaxf ignores NaN, as the NVFP4 kernels' max does
    nonfinite |= (__float_as_uint(v[i]) & 0x7F800000u) == 0x7F800000u;
  }
  if constexpr (BR > 1) {
#pragma unroll
    for (int o = BR / 2; o > 0; o >>= 1) {
      amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
      nonfinite |= __shfl_xor_sync(0xFFFFFFFFu, nonfinite, o);
    }
  }
  // 4over6 (ScaleChooser::four_over_six and quantize()'s candidate choice): from base =
  // min(RN(RN(amax / 6) * G), FLT_MAX), map-to-6 scales min(base, max) and map-to-4 min(RN(base * 1.5), max);
  // each row's error under each (RNE codes), a 2-D tile's rows summed by the shuffle tree of
  // FourOverSixError::block_sum (v[i] + v[i ^ offset], offsets BR/2 .. 1; lanes past the tensor's rows add
  // +0, which leaves every partial sum as the golden tree's, padded to the next power of two, has it);
  // map-to-4 wins only with the strictly smaller error (a NaN error keeps map-to-6). Lanes of a tile that
  // hold no row still take part in the shuffles.
  TwoLevelScale chosen{};
  if constexpr (SK == ScaleKind::four_over_six) {
    if (BR == 1 && !valid) return;
    const BlockScalars sc = block_scalars(a, valid ? r : 0);
    const float base = fminf(__fmul_rn(__fdiv_rn(amax, 6.0f), sc.encode), FLT_MAX);
    const TwoLevelScale map6 = two_level_scale(a, base, sc.decode);
    const TwoLevelScale map4 = two_level_scale(a, fminf(__fmul_rn(base, 1.5f), FLT_MAX), sc.decode);
    float error6 = valid ? four_over_six_row_error<BC>(a, v, c0, map6, sc) : 0.0f;
    float error4 = valid ? four_over_six_row_error<BC>(a, v, c0, map4, sc) : 0.0f;
    if constexpr (BR > 1) {
#pragma unroll
      for (int o = BR / 2; o > 0; o >>= 1) {
        error6 = __fadd_rn(error6, __shfl_xor_sync(0xFFFFFFFFu, error6, o));
        error4 = __fadd_rn(error4, __shfl_xor_sync(0xFFFFFFFFu, error4, o));
      }
    }
    chosen = error4 < error6 ? map4 : map6;
  }
  if (!valid) return;

  std::uint32_t scale_code;
  float mult;
  if constexpr (SK == ScaleKind::two_level) {
    const BlockScalars sc = block_scalars(a, r);
    const TwoLevelScale s = two_level_scale(a, fminf(__fmul_rn(amax, sc.block_multiplier), FLT_MAX), sc.decode);
    scale_code = s.code;
    mult = s.multiplier;
  } else if constexpr (SK == ScaleKind::four_over_six) {
    scale_code = chosen.code;
    mult = chosen.multiplier;
  } else {
    scale_code = nonfinite ? 0xFFu : e8m0_scale_code(a.pow2_rule, amax);
    // NaN or Inf in the block (or torchao EVEN's rounded amax overflowing): scale NaN (0xFF), the
    // elements encoded unscaled (docs/semantics.md M5).
    mult = scale_code == 0xFFu ? 1.0f : pow2f(127 - static_cast<int>(scale_code));
  }
  if (lane_in_group == 0) a.scales[sr * a.scale_cols + cb] = static_cast<std::uint8_t>(scale_code);

  std::uint32_t codes[BC];
#pragma unroll
  for (int i = 0; i < BC; ++i) {
    const float y = __fmul_rn(v[i], mult);
    if constexpr (R == ElementRound::rne) {
      codes[i] = emu::f32_to_e2m1_rne_fast(__float_as_uint(y));
    } else {
      codes[i] = 0;  // filled below, four at a time
    }
  }
  if constexpr (R != ElementRound::rne) {
    if (a.explicit_bits != nullptr) {
#pragma unroll
      for (int i = 0; i < BC; ++i) {
        const std::uint32_t rb = c0 + i < a.cols ? a.explicit_bits[base_index + i] : 0u;
        codes[i] = e2m1_stochastic<R>(__fmul_rn(v[i], mult), rb, a.sr_bits);
      }
    } else if (whole_blocks) {
      // k = 8 as a constant: the decision's shifts and offsets become immediates.
#pragma unroll
      for (int i = 0; i < BC; ++i) {
        const std::uint32_t rb = (rwords[i / 4] >> (8 * (i % 4))) & 0xFFu;
        codes[i] = e2m1_stochastic_int<R>(__float_as_uint(__fmul_rn(v[i], mult)), rb, 8);
      }
    } else {
      // Ragged rows and k != 8: one draw per element, in a loop kept rolled (the integers go through a
      // small local array) so that this rare path does not inline BC Philox blocks.
      std::uint32_t drawn[BC];
#pragma unroll 1
      for (int i = 0; i < BC; ++i) drawn[i] = random_bits(a.seed, a.stream, base_index + i, a.sr_bits);
#pragma unroll
      for (int i = 0; i < BC; ++i)
        codes[i] = e2m1_stochastic_int<R>(__float_as_uint(__fmul_rn(v[i], mult)), drawn[i], a.sr_bits);
    }
  }

  std::uint8_t* out = a.codes + r * a.code_cols + c0 / 2;
  if (vector_path) {
    std::uint32_t words[BC / 8];
#pragma unroll
    for (int w = 0; w < BC / 8; ++w) {
      std::uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) word |= codes[8 * w + j] << (4 * j);
      words[w] = word;
    }
    if constexpr (BC == 16) {
      *reinterpret_cast<uint2*>(out) = make_uint2(words[0], words[1]);
    } else {
      *reinterpret_cast<uint4*>(out) = make_uint4(words[0], words[1], words[2], words[3]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < BC; j += 2) {
      if (c0 + j < a.cols) {
        const std::uint32_t hi = c0 + j + 1 < a.cols ? codes[j + 1] : 0u;
        out[j / 2] = static_cast<std::uint8_t>(codes[j] | (hi << 4));
      }
    }
  }
}

template <int BC, int BR, ElementRound R, ScaleKind SK, bool RHT>
cudaError_t launch_q(const QuantArgs& args, cudaStream_t s) {
  const std::uint64_t blocks = (args.threads + kThreads - 1) / kThreads;
  quantize_kernel<BC, BR, R, SK, RHT><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(args);
  return cudaGetLastError();
}

template <int BC, int BR, ElementRound R, ScaleKind SK>
cudaError_t dispatch_rht(bool rht, const QuantArgs& args, cudaStream_t s) {
  if constexpr (BR == 1) {
    if (rht) return launch_q<BC, BR, R, SK, true>(args, s);
  }
  return launch_q<BC, BR, R, SK, false>(args, s);
}

template <int BC, int BR, ElementRound R>
cudaError_t dispatch_scale(const QuantizePlan& p, const QuantArgs& args, cudaStream_t s) {
  if (p.scale_kind == ScaleKind::pow2) return dispatch_rht<BC, BR, R, ScaleKind::pow2>(p.rht, args, s);
  if (p.scale_kind == ScaleKind::four_over_six) {
    // RNE only (make_plan): TE's 4over6 kernel has no stochastic path.
    if constexpr (R == ElementRound::rne) return dispatch_rht<BC, BR, R, ScaleKind::four_over_six>(p.rht, args, s);
    return cudaErrorInvalidValue;
  }
  return dispatch_rht<BC, BR, R, ScaleKind::two_level>(p.rht, args, s);
}

template <int BC, int BR>
cudaError_t dispatch_round(const QuantizePlan& p, const QuantArgs& args, cudaStream_t s) {
  switch (p.rounding) {
    case ElementRound::rne: return dispatch_scale<BC, BR, ElementRound::rne>(p, args, s);
    case ElementRound::sr_fast: return dispatch_scale<BC, BR, ElementRound::sr_fast>(p, args, s);
    case ElementRound::sr_fast_f32: return dispatch_scale<BC, BR, ElementRound::sr_fast_f32>(p, args, s);
    case ElementRound::sr_fastest: return dispatch_scale<BC, BR, ElementRound::sr_fastest>(p, args, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

// Both launch_quantize overloads: the scalars from sc, or from device memory when d_scalars is given.
static Status launch_quantize_scalars(const QuantizePlan& p, const TensorScalars& sc, const float* d_scalars,
                                      QuantizeInput d_x, const std::uint32_t* d_explicit_bits, std::uint8_t* d_codes,
                                      std::uint8_t* d_scales, const float* d_row_amax, void* stream);

Status launch_quantize(const QuantizePlan& p, const TensorScalars& sc, QuantizeInput d_x,
                       const std::uint32_t* d_explicit_bits, std::uint8_t* d_codes, std::uint8_t* d_scales,
                       void* stream, const float* d_row_amax) {
  return launch_quantize_scalars(p, sc, nullptr, d_x, d_explicit_bits, d_codes, d_scales, d_row_amax, stream);
}

Status launch_quantize(const QuantizePlan& p, const float* d_scalars, QuantizeInput d_x,
                       const std::uint32_t* d_explicit_bits, std::uint8_t* d_codes, std::uint8_t* d_scales,
                       void* stream, const float* d_row_amax) {
  return launch_quantize_scalars(p, TensorScalars{}, d_scalars, d_x, d_explicit_bits, d_codes, d_scales, d_row_amax,
                                 stream);
}

static Status launch_quantize_scalars(const QuantizePlan& p, const TensorScalars& sc, const float* d_scalars,
                                      QuantizeInput d_x, const std::uint32_t* d_explicit_bits, std::uint8_t* d_codes,
                                      std::uint8_t* d_scales, const float* d_row_amax, void* stream) {
  if (p.row_scaled != (d_row_amax != nullptr)) return Status::invalid_argument;
  const QuantArgs a{.x = d_x,
                    .explicit_bits = d_explicit_bits,
                    .codes = d_codes,
                    .scales = d_scales,
                    .rows = p.rows,
                    .cols = p.cols,
                    .code_cols = p.code_cols,
                    .scale_rows = p.scale_rows,
                    .scale_cols = p.scale_cols,
                    .threads = static_cast<std::uint64_t>(p.scale_rows) * p.block_rows * p.scale_cols,
                    .tensor_amax = sc.tensor_amax,
                    .encode = sc.encode,
                    .block_multiplier = sc.block_multiplier,
                    .gd = sc.decode,
                    .six_target = six_times(p.target),
                    .row_amax = d_row_amax,
                    .error_squared = p.four_over_six_mse ? 1u : 0u,
                    .error_fast_math = p.four_over_six_fast_math ? 1u : 0u,
                    .scale_format = p.scale_format,
                    .scale_mbits = p.scale_format.mantissa_bits,
                    .scale_bias = p.scale_format.bias,
                    .one_code = p.one_code,
                    .zero_to_one = p.zero_scale_to_one ? 1u : 0u,
                    .seed = p.seed,
                    .stream = p.stream,
                    .sr_bits = p.sr_bits,
                    .pow2_rule = p.pow2_rule,
                    .device_scalars = d_scalars};
  if (a.threads == 0) return Status::success;
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  if (p.block_cols == 16) {
    e = p.block_rows == 1 ? dispatch_round<16, 1>(p, a, s) : dispatch_round<16, 16>(p, a, s);
  } else if (p.block_cols == 32) {
    e = p.block_rows == 1 ? dispatch_round<32, 1>(p, a, s) : dispatch_round<32, 32>(p, a, s);
  }
  return e == cudaSuccess ? Status::success : Status::cuda_error;
}

// ---- host-memory API ----


namespace {

// Both host-memory quantize overloads; T: float or std::uint16_t (bfloat16 bit patterns).
template <class T>
Status quantize_host(const Recipe& recipe, const QuantizeRequest& request, std::span<const T> x, std::size_t rows,
                     std::size_t cols, QuantizedTensor& q) {
  if (x.size() != rows * cols) return Status::invalid_argument;
  QuantizePlan plan;
  if (const Status s = make_plan(recipe, request, rows, cols, plan); s != Status::success) return s;
  const bool stochastic = plan.rounding != ElementRound::rne;
  if (stochastic && !request.random.explicit_bits.empty() && request.random.explicit_bits.size() != x.size()) {
    return Status::invalid_argument;
  }
  if (!device_available()) return Status::no_device;

  q = blank_quantized(recipe, request, rows, cols);

  DeviceBuffer dx, dcodes, dscales, damax, dbits;
  if (!upload(dx, x) || !dcodes.allocate(q.codes.size()) || !dscales.allocate(q.scales.size()) ||
      !damax.allocate(sizeof(float)))
    return cuda_failed();
  const std::uint32_t* bits = nullptr;
  if (stochastic && !request.random.explicit_bits.empty()) {
    if (!upload(dbits, request.random.explicit_bits)) return cuda_failed();
    bits = dbits.as<std::uint32_t>();
  }
  float amax = 0.0f;
  if (!(plan.tensor_scaled && plan.amax_ref)) {  // a held amax needs no pass over the tensor
    if (const Status s = launch_amax(plan, dx.as<const T>(), damax.as<float>(), nullptr); s != Status::success)
      return s;
    if (cudaMemcpy(&amax, damax.as<float>(), sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      return cuda_failed();
  }
  const TensorScalars sc = tensor_scalars(plan, amax);
  DeviceBuffer drow;
  if (plan.row_scaled) {
    if (!drow.allocate(rows * sizeof(float))) return cuda_failed();
    if (const Status s = launch_row_amax(plan, dx.as<const T>(), drow.as<float>(), nullptr); s != Status::success)
      return s;
  }
  if (const Status s = launch_quantize(plan, sc, dx.as<const T>(), bits, dcodes.as<std::uint8_t>(),
                                       dscales.as<std::uint8_t>(), nullptr,
                                       plan.row_scaled ? drow.as<float>() : nullptr);
      s != Status::success)
    return s;
  if (cudaMemcpy(q.codes.data(), dcodes.as<std::uint8_t>(), q.codes.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(q.scales.data(), dscales.as<std::uint8_t>(), q.scales.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
    return cuda_failed();
  if (plan.row_scaled) {
    q.row_amax.resize(rows);
    if (cudaMemcpy(q.row_amax.data(), drow.as<float>(), rows * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      return cuda_failed();
  }
  q.tensor_amax = sc.tensor_amax;
  q.tensor_scaled = plan.tensor_scaled;
  q.global_encode_scale = sc.encode;
  q.global_decode_scale = sc.decode;
  q.counts.elements = rows * cols;
  q.counts.blocks = plan.scale_rows * plan.scale_cols;
  return Status::success;
}

}  // namespace

Status quantize(const Recipe& recipe, const QuantizeRequest& request, std::span<const float> x, std::size_t rows,
                std::size_t cols, QuantizedTensor& q) {
  return quantize_host(recipe, request, x, rows, cols, q);
}

Status quantize(const Recipe& recipe, const QuantizeRequest& request, std::span<const std::uint16_t> x_bf16,
                std::size_t rows, std::size_t cols, QuantizedTensor& q) {
  return quantize_host(recipe, request, x_bf16, rows, cols, q);
}

}  // namespace fp4sim::gpu
