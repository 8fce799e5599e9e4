// The fast GEMM: packing, tensor-level preconditions, the cache-blocked OpenMP loop nest, the golden
// fallbacks, and run-time dispatch over the instruction-set variants of gemm_kernels.inc.
#include <algorithm>
#include <atomic>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include <omp.h>
// The AVX-512 and AVX2 kernels are compiled only for x86; elsewhere (aarch64: Grace) the portable kernels
// are the only ones, chosen at compile time, and on x86 the best the CPU runs is chosen at run time.
#if defined(__x86_64__) || defined(__i386__)
#define FP4SIM_X86_KERNELS 1
#include <immintrin.h>
#endif

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/fp32.hpp"
#include "gemm_internal.hpp"

namespace fp4sim::detail {

constexpr int kMR = 4;   // rows of A per micro-tile
constexpr int kNV = 2;   // 16-lane vectors of B columns per micro-tile
constexpr int kNR = 16 * kNV;
constexpr std::size_t kGstMaxSub = 4;
constexpr int kNeg = -100000;  // "no nonzero element": below every exponent
constexpr int kPos = 100000;   // LSB of a block without nonzero products: nothing can be cut

struct KernelArgs {
  std::size_t n_pad = 0, nkb = 0, kb_len = 0;
  const float* a_pack = nullptr;  // [ip][kb][t][kMR]
  const float* b_pack = nullptr;  // [jp][kb][t][kNR]
  const std::uint8_t* a_pack8 = nullptr;  // int8 panels: [ip][k/4][kMR][4] of n + 128
  const std::int8_t* b_pack8 = nullptr;   // [jp][k/4][kNR][4] of n
  const int* b_colsum = nullptr;          // [jp][kb][kNR]: sum over the block of n_b
  const double* a_scale_d = nullptr;  // [row][kb]
  const double* b_scale_d = nullptr;  // [jp][kb][kNR]
  const float* a_scale_f = nullptr;
  const float* b_scale_f = nullptr;
  const int* a_l = nullptr;  // LSB exponent of the block's encoded elements (kPos: no nonzero)
  const int* a_m = nullptr;  // max alignment exponent of the block's nonzero encoded elements (kNeg)
  const int* b_l = nullptr;
  const int* b_m = nullptr;
  const int* a_lo = nullptr;  // per row: smallest LSB exponent of a nonzero element (kPos: none)
  const int* b_lo = nullptr;
  int frac_bits = 0;
  bool may_overflow = true;  // a running sum can reach 2^128 (else the kernels skip that test)
  std::size_t group_blocks = 0;  // probe-matched: blocks per 64-group; GST: sub-blocks per instruction
  double* state_d = nullptr;
  float* state_f = nullptr;
  float* state2_f = nullptr;
  std::uint32_t* state_u = nullptr;
  std::uint32_t (*fix)(const void* ctx, std::size_t i, std::size_t j, std::size_t kb, std::uint32_t c) = nullptr;
  float (*add_rz)(float, float) = nullptr;
  std::uint32_t (*gst_step)(const void* ctx, std::size_t i, std::size_t j, std::size_t kb, const float* sums,
                            std::uint32_t c) = nullptr;
  const void* fix_ctx = nullptr;
};

using TileFn = void (*)(const KernelArgs&, std::size_t ip, std::size_t jp, std::size_t kb0, std::size_t kb1);
struct TileSet {
  TileFn exact, fp32_seq, tfdpa, gst;
  const char* isa;
  bool int8_panels;  // the block products read the int8 panels (VNNI), else the binary32 panels
};

}  // namespace fp4sim::detail

#ifdef FP4SIM_X86_KERNELS
// Each instruction set region compiles its kernels for that target. clang ignores `#pragma GCC target`
// (the fuzzers build with clang, FP4SIM_FUZZ): there the target is an attribute on every function of it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512cd,avx512vnni,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512bw,avx512vl,avx512cd,avx512vnni,fma")
#endif
namespace fp4sim::detail::isa_avx512 {
#define FP4SIM_VNNI 1
#define FP4SIM_DPBUSD(acc, a, b) ((v16si)_mm512_dpbusd_epi32((__m512i)(acc), (__m512i)(a), (__m512i)(b)))
#define FP4SIM_FMADD_PS(a, b, c) ((v16sf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define FP4SIM_FMADD_PD(a, b, c) ((v8df)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(c)))
#define FP4SIM_ALL(m) (_mm512_test_epi32_mask((__m512i)(m), (__m512i)(m)) == 0xFFFF)
#define FP4SIM_ANY(m) (_mm512_test_epi32_mask((__m512i)(m), (__m512i)(m)) != 0)
#include "gemm_kernels.inc"
#undef FP4SIM_FMADD_PS
#undef FP4SIM_FMADD_PD
#undef FP4SIM_ALL
#undef FP4SIM_ANY
#undef FP4SIM_VNNI
#undef FP4SIM_DPBUSD
TileSet tiles() { return {exact_tile, fp32_seq_tile, tfdpa_tile, gst_tile, "avx512", true}; }
}  // namespace fp4sim::detail::isa_avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace fp4sim::detail::isa_avx2 {
#define FP4SIM_FMADD_PS(a, b, c) ((a) * (b) + (c))
#define FP4SIM_FMADD_PD(a, b, c) ((a) * (b) + (c))
// Both 256-bit halves' sign bits (lanes are 0 or -1).
#define FP4SIM_MASK8(m, h) \
  _mm256_movemask_ps((__m256)__builtin_shufflevector((m), (m), 8 * (h), 8 * (h) + 1, 8 * (h) + 2, 8 * (h) + 3, \
                                                     8 * (h) + 4, 8 * (h) + 5, 8 * (h) + 6, 8 * (h) + 7))
#define FP4SIM_ALL(m) ((FP4SIM_MASK8(m, 0) & FP4SIM_MASK8(m, 1)) == 0xFF)
#define FP4SIM_ANY(m) ((FP4SIM_MASK8(m, 0) | FP4SIM_MASK8(m, 1)) != 0)
#include "gemm_kernels.inc"
#undef FP4SIM_FMADD_PS
#undef FP4SIM_FMADD_PD
#undef FP4SIM_MASK8
#undef FP4SIM_ALL
#undef FP4SIM_ANY
TileSet tiles() { return {exact_tile, fp32_seq_tile, tfdpa_tile, gst_tile, "avx2", false}; }
}  // namespace fp4sim::detail::isa_avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // FP4SIM_X86_KERNELS

namespace fp4sim::detail::isa_portable {
#define FP4SIM_FMADD_PS(a, b, c) ((a) * (b) + (c))
#define FP4SIM_FMADD_PD(a, b, c) ((a) * (b) + (c))
#include "gemm_kernels.inc"
#undef FP4SIM_FMADD_PS
#undef FP4SIM_FMADD_PD
TileSet tiles() { return {exact_tile, fp32_seq_tile, tfdpa_tile, gst_tile, "portable", false}; }
}  // namespace fp4sim::detail::isa_portable

namespace fp4sim::detail {

namespace {

// The kernels of an x86 instruction set when this CPU runs them; none where they were not compiled.
std::optional<TileSet> avx2_tiles() {
#ifdef FP4SIM_X86_KERNELS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return isa_avx2::tiles();
#endif
  return std::nullopt;
}

std::optional<TileSet> avx512_tiles() {
#ifdef FP4SIM_X86_KERNELS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512vnni")) {
    return isa_avx512::tiles();
  }
#endif
  return std::nullopt;
}

// The kernels for an ISA name ("" = the best this CPU runs); an ISA the CPU lacks is a usage error.
TileSet select_tiles(std::string_view forced) {
  if (forced == "portable") return isa_portable::tiles();
  if (forced == "avx2") {
    if (auto tiles = avx2_tiles()) return *tiles;
    throw UsageError("gemm: this CPU has no AVX2/FMA");
  }
  if (forced == "avx512") {
    if (auto tiles = avx512_tiles()) return *tiles;
    throw UsageError("gemm: this CPU has no AVX-512 (F, DQ, BW, VL, CD, VNNI)");
  }
  if (!forced.empty()) throw UsageError("gemm: unknown ISA '" + std::string(forced) + "' (avx512, avx2, portable)");
  if (auto tiles = avx512_tiles()) return *tiles;
  if (auto tiles = avx2_tiles()) return *tiles;
  return isa_portable::tiles();
}

// Everything the fast kernels and their scalar fallbacks need about the two operands.
struct FastContext {
  mutable std::atomic<std::uint64_t> golden_steps{0};
  const GemmOptions* options = nullptr;
  const Datapath* row = nullptr;  // the fused row: the T-FDPA row, probe-matched's inner, or the GST row
  const OperandInfo* a = nullptr;
  const OperandInfo* b = nullptr;
  const EncodedTable* ta = nullptr;
  const EncodedTable* tb = nullptr;
  std::size_t kb_len = 0;
};

// The golden T-FDPA step of one output over micro-block kb, for lanes the vector test cannot vouch for.
std::uint32_t fix_tfdpa(const void* ctx_ptr, std::size_t i, std::size_t j, std::size_t kb, std::uint32_t c) {
  const auto& ctx = *static_cast<const FastContext*>(ctx_ptr);
  ctx.golden_steps.fetch_add(1, std::memory_order_relaxed);
  const std::size_t k0 = kb * ctx.kb_len, k1 = std::min(ctx.a->k, k0 + ctx.kb_len);
  std::array<Unpacked, 64> ua{}, ub{};
  std::size_t n = 0;
  for (std::size_t col = k0; col < k1; ++col, ++n) {
    if (i < ctx.a->rows)
      ua[n] = ctx.ta->value[static_cast<std::size_t>(ctx.a->scale_code(i, col / ctx.a->block)) * 16 + ctx.a->q->code(i, col)];
    if (j < ctx.b->rows)
      ub[n] = ctx.tb->value[static_cast<std::size_t>(ctx.b->scale_code(j, col / ctx.b->block)) * 16 + ctx.b->q->code(j, col)];
  }
  return tfdpa_step(*ctx.row, std::span<const Unpacked>(ua.data(), n), std::span<const Unpacked>(ub.data(), n), c);
}

float add_rz_scalar(float a, float b) { return fp32::add_rz(a, b); }

// GST-FDPA instruction step in integers (independent of gst_step/fused_sum, which check it): the
// sub-block sums from the SIMD block products, the scales from precomputed tables.
std::uint32_t gst_fast_step(const void* ctx_ptr, std::size_t i, std::size_t j, std::size_t kb, const float* sums,
                            std::uint32_t c_bits) {
  const auto& ctx = *static_cast<const FastContext*>(ctx_ptr);
  if (i >= ctx.a->rows || j >= ctx.b->rows) return 0;
  const FusedParams& p = ctx.row->fused;
  struct T {
    bool neg;
    int exp, frac;
    std::uint64_t sig;
  };
  std::array<T, kGstMaxSub + 1> t{};
  std::size_t n = 0;
  int e_max = p.e_floor;
  bool any = false;
  const std::size_t per = static_cast<std::size_t>(ctx.row->instruction_k) / ctx.kb_len;
  for (std::size_t s = 0; s < per; ++s) {
    const auto sum = static_cast<long long>(sums[s]);
    const std::size_t col = (kb + s) * ctx.kb_len;
    if (sum == 0 || col >= ctx.a->k) continue;
    const Unpacked& sa = ctx.a->scale[ctx.a->scale_code(i, col / ctx.a->block)];
    const Unpacked& sb = ctx.b->scale[ctx.b->scale_code(j, col / ctx.b->block)];
    if (sa.cls != Unpacked::finite || sb.cls != Unpacked::finite) continue;
    t[n] = T{sum < 0, sa.exp + sb.exp, 2 * ctx.a->elem_frac + sa.frac + sb.frac,
             static_cast<std::uint64_t>(sum < 0 ? -sum : sum) * sa.sig * sb.sig};
    e_max = std::max(e_max, t[n].exp);
    any = true;
    ++n;
  }
  const Unpacked c = unpack_fp32(c_bits);
  if (c.cls == Unpacked::inf) return c_bits;
  if (c.cls == Unpacked::finite) {
    t[n++] = T{c.negative, c.exp, c.frac, c.sig};
    e_max = std::max(e_max, c.exp);
    any = true;
  }
  if (!any) return 0u;
  i128 acc = 0;
  for (std::size_t x = 0; x < n; ++x) {
    const int d = p.frac_bits + t[x].exp - e_max - t[x].frac;  // the F-bit window below 2^E_max
    const u128 mag = d >= 0 ? static_cast<u128>(t[x].sig) << d : (-d >= 64 ? 0 : static_cast<u128>(t[x].sig >> -d));
    acc += t[x].neg ? -static_cast<i128>(mag) : static_cast<i128>(mag);
  }
  return round_output(p, acc < 0, e_max - p.frac_bits, static_cast<u128>(acc < 0 ? -acc : acc));
}

// alpha * (exact double) rounded once to binary32, fast form (checked against the integer form below
// by tests/gemm_test.cpp through the reference): p = RN64(acc * alpha) and its exact error
// e = fma(acc, alpha, -p) (no underflow: |acc * alpha| >= 2^-430 here). RN32(p) is RN32(acc * alpha)
// unless p sits exactly on a binary32 midpoint (a binary64 number, so p cannot have crossed it), where
// the sign of e decides; e == 0 there is a true tie, which the RNE conversion already breaks to even.
std::uint32_t round_scaled_exact_fast(double acc, float alpha) {
  const double a = static_cast<double>(alpha);
  const double p = acc * a;
  const double e = std::fma(acc, a, -p);
  if (!(std::fabs(p) < 0x1p128)) return std::signbit(p) ? 0xFF800000u : 0x7F800000u;  // RNE overflow
  float f = static_cast<float>(p);  // RNE: the FP environment is never changed
  if (e != 0.0 && std::isinf(f) && std::fabs(p) == 0x1.ffffffp127 && (e < 0) != (p < 0)) {
    f = std::copysign(std::numeric_limits<float>::max(), f);  // just below the overflow midpoint
  } else if (e != 0.0 && static_cast<double>(f) != p && std::isfinite(f)) {
    const float g = std::nextafter(f, p > static_cast<double>(f) ? INFINITY : -INFINITY);
    const double mid = (static_cast<double>(f) + static_cast<double>(g)) * 0.5;  // exact
    if (p == mid && ((e > 0) == (g > f))) f = g;
  }
  return std::bit_cast<std::uint32_t>(f);
}

// alpha * (exact double) rounded once to binary32 (integer product of the two significands), or by
// the fast form when `fast`.
std::uint32_t round_scaled_exact(double acc, float alpha, std::uint32_t nan_bits, bool fast = true) {
  if (std::isnan(alpha)) return nan_bits;
  // Same order as exact_element: an infinite alpha times an exact zero sum is NaN (0 * Inf).
  if (std::isinf(alpha)) {
    if (acc == 0.0) return nan_bits;
    return (acc < 0) != std::signbit(alpha) ? 0xFF800000u : 0x7F800000u;
  }
  if (acc == 0.0) return 0u;
  const bool negative = (acc < 0) != std::signbit(alpha);
  if (alpha == 0.0f) return negative ? 0x80000000u : 0u;
  if (fast) return round_scaled_exact_fast(acc, alpha);
  const auto db = std::bit_cast<std::uint64_t>(acc);
  const int field = static_cast<int>((db >> 52) & 0x7FF);
  const std::uint64_t m = (db & ((std::uint64_t{1} << 52) - 1)) | (field ? std::uint64_t{1} << 52 : 0);
  const int e = (field ? field : 1) - 1075;
  const Unpacked al = unpack_fp32(std::bit_cast<std::uint32_t>(alpha));
  return round_to_fp32(negative, e + al.exp - al.frac, static_cast<u128>(m) * al.sig, OutputRounding::rne);
}

// The exact sum of one output in an int128 window (or the cpp_int reference when wider).
std::uint32_t exact_scalar(const ReferenceContext& ref, const OperandInfo& a, std::size_t i, const OperandInfo& b,
                           std::size_t j, int base, int width_ok) {
  if (!width_ok) return ref.element(i, j);
  i128 sum = 0;
  for (std::size_t kb = 0; kb < a.blocks; ++kb) {
    const Unpacked& sa = a.scale[a.scale_code(i, kb)];
    const Unpacked& sb = b.scale[b.scale_code(j, kb)];
    if (sa.cls != Unpacked::finite || sb.cls != Unpacked::finite) continue;
    long long p = 0;
    for (std::size_t c = kb * a.block; c < std::min(a.k, (kb + 1) * a.block); ++c)
      p += static_cast<long long>(a.n(i, c)) * b.n(j, c);
    if (p == 0) continue;
    const int lsb = (sa.exp - sa.frac) + (sb.exp - sb.frac) - 2 * a.elem_frac;
    const i128 v = static_cast<i128>(static_cast<u128>(p < 0 ? -p : p) * sa.sig * sb.sig) << (lsb - base);
    sum += p < 0 ? -v : v;
  }
  const float alpha = ref.options.alpha;
  if (std::isnan(alpha)) return ref.options.datapath->nan_bits;
  if (std::isinf(alpha)) {
    if (sum == 0) return ref.options.datapath->nan_bits;
    return (sum < 0) != std::signbit(alpha) ? 0xFF800000u : 0x7F800000u;
  }
  if (sum == 0) return 0u;
  const bool negative = (sum < 0) != std::signbit(alpha);
  if (alpha == 0.0f) return negative ? 0x80000000u : 0u;
  const Unpacked al = unpack_fp32(std::bit_cast<std::uint32_t>(alpha));
  u128 mag = static_cast<u128>(sum < 0 ? -sum : sum);
  // mag < 2^120 (width check); times a 24-bit alpha: keep it in 128 bits by jamming first is not
  // exact in general, so multiply in two halves into 192 bits and jam the low word.
  const auto lo = static_cast<std::uint64_t>(mag), hi = static_cast<std::uint64_t>(mag >> 64);
  const u128 plo = static_cast<u128>(lo) * al.sig;
  const u128 phi = static_cast<u128>(hi) * al.sig + (plo >> 64);
  // product = phi * 2^64 + (plo mod 2^64)
  int lsb = base + al.exp - al.frac;
  u128 top;
  if ((phi >> 64) == 0 && static_cast<std::uint64_t>(phi) == 0) {
    top = static_cast<std::uint64_t>(plo);
  } else {
    top = (phi << 32) | (static_cast<std::uint64_t>(plo) >> 32) | ((static_cast<std::uint32_t>(plo) != 0) ? 1u : 0u);
    lsb += 32;
  }
  return round_to_fp32(negative, lsb, top, OutputRounding::rne);
}

}  // namespace

std::uint32_t round_scaled_alpha(double acc, float alpha, std::uint32_t nan_bits, bool fast) {
  return round_scaled_exact(acc, alpha, nan_bits, fast);
}

bool gemm_fast(const QuantizedTensor& qa, const QuantizedTensor& qb, const GemmOptions& options, std::span<float> out) {
  const auto t_start = std::chrono::steady_clock::now();
  static const TileSet best = select_tiles("");
  TileSet tiles = options.isa.empty() ? best : select_tiles(options.isa);
  const Datapath& dp = *options.datapath;
  const bool sign_ignored = dp.kind == DatapathKind::gst_fdpa && dp.fused.scale_sign_ignored;
  const OperandInfo a(qa, sign_ignored), b(qb, sign_ignored);
  const std::size_t m = a.rows, n = b.rows, k = a.k;
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    const ReferenceContext ref(qa, qb, options);
    for (std::size_t x = 0; x < m * n; ++x) out[x] = std::bit_cast<float>(ref.element(x / n, x % n));
    return true;
  }

  // The fused row and the micro-block length.
  const Datapath* row = nullptr;
  std::size_t kb_len = a.block;
  std::size_t group_blocks = 0;
  switch (dp.kind) {
    case DatapathKind::exact:
    case DatapathKind::fp32_seq: kb_len = a.block; break;
    case DatapathKind::tfdpa: row = &dp; break;
    case DatapathKind::probe_matched: row = &inner_of(options); break;
    case DatapathKind::gst_fdpa:
      row = &dp;
      kb_len = static_cast<std::size_t>(dp.fused.subblock);
      group_blocks = static_cast<std::size_t>(dp.instruction_k) / kb_len;
      break;
  }
  if (kb_len > 64 || kb_len == 0) return false;
  std::unique_ptr<EncodedTable> ta, tb;
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::probe_matched) {
    const FusedParams& p = row->fused;
    if (p.out != formats::fp32 || p.out_rounding != OutputRounding::rz || p.addend != AddendRounding::trunc_signmag ||
        !p.c_in_alignment || !p.product_unnormalized || p.zero_exponent != kNoExponent || !p.overflow_to_inf ||
        p.frac_bits < 23)
      return false;
    kb_len = static_cast<std::size_t>(p.group);
    if (kb_len > 64 || a.block % kb_len != 0) return false;
    if (p.e_floor != kNoExponent && p.e_floor - p.frac_bits > -149) return false;
    if (dp.kind == DatapathKind::probe_matched) {
      if (static_cast<std::size_t>(dp.group_k) % kb_len != 0) return false;
      group_blocks = static_cast<std::size_t>(dp.group_k) / kb_len;
    }
    const Format input = row->inputs.front().format;
    ta = std::make_unique<EncodedTable>(a, input);
    tb = std::make_unique<EncodedTable>(b, input);
  }

  if (tiles.int8_panels && kb_len % 4 != 0) tiles = avx2_tiles().value_or(isa_portable::tiles());
  if (dp.kind == DatapathKind::gst_fdpa && (group_blocks == 0 || group_blocks > kGstMaxSub)) return false;
  // Micro-blocks along K; a GST-FDPA instruction covers group_blocks of them, so K is padded with zero
  // blocks to whole instructions there (a zero sub-block contributes nothing).
  std::size_t nkb = (k + kb_len - 1) / kb_len;
  if (dp.kind == DatapathKind::gst_fdpa) nkb = round_up(nkb, group_blocks);
  const std::size_t m_pad = round_up(m, kMR), n_pad = round_up(n, kNR);
  const std::size_t n_ip = m_pad / kMR, n_jp = n_pad / kNR;

  // Per (row, micro-block) scale data; rows with a NaN/Inf scale are recomputed by the reference.
  struct Side {
    std::vector<double> sd;
    std::vector<float> sf;
    std::vector<int> l, mx;
    std::vector<char> special;    // per row
    std::vector<int> lo, hi;      // per row: min LSB and bound exponent of nonzero elements (exact)
    int min_l = kPos, max_l = kNeg, max_d = kNeg;
  };
  // One row's element codes (unpacked nibbles) and integers.
  auto row_codes = [](const OperandInfo& op, std::size_t r, std::vector<std::uint8_t>& out) {
    out.resize(2 * op.q->code_cols());
    const std::uint8_t* codes = op.q->codes.data() + r * op.q->code_cols();
    for (std::size_t c2 = 0; c2 < op.q->code_cols(); ++c2) {
      out[2 * c2] = codes[c2] & 0xF;
      out[2 * c2 + 1] = codes[c2] >> 4;
    }
  };
  auto row_values = [&](const OperandInfo& op, std::size_t r, std::vector<std::int8_t>& out) {
    thread_local std::vector<std::uint8_t> codes;
    row_codes(op, r, codes);
    out.resize(codes.size());
    for (std::size_t c = 0; c < codes.size(); ++c) out[c] = op.elem_n[codes[c]];
  };
  auto describe = [&](const OperandInfo& op, const EncodedTable* table_full, std::size_t rows_pad) {
    // The alignment exponent of every (scale code, element code) pair, compactly.
    std::vector<int> exp_table;
    if (table_full) {
      exp_table.resize(256 * 16);
      for (std::size_t x = 0; x < exp_table.size(); ++x)
        exp_table[x] = table_full->value[x].cls == Unpacked::finite ? table_full->value[x].exp : kNeg;
    }
    const int* table = table_full ? exp_table.data() : nullptr;
    Side s;
    s.sd.assign(rows_pad * nkb, 0.0);
    s.sf.assign(rows_pad * nkb, 0.0f);
    s.l.assign(rows_pad * nkb, kPos);
    s.mx.assign(rows_pad * nkb, kNeg);
    s.special.assign(rows_pad, 0);
    s.lo.assign(rows_pad, kPos);
    s.hi.assign(rows_pad, kNeg);
    int min_l = kPos, max_l = kNeg, max_d = kNeg;
    const auto rows = static_cast<std::int64_t>(op.rows);
#pragma omp parallel for schedule(static) reduction(min : min_l) reduction(max : max_l, max_d)
    for (std::int64_t rr = 0; rr < rows; ++rr) {
      const auto r = static_cast<std::size_t>(rr);
      std::vector<std::uint8_t> codes;
      row_codes(op, r, codes);
      const std::uint8_t* scale_row = op.q->scales.data() + (r / static_cast<std::size_t>(op.q->block_rows)) * op.q->scale_cols;
      for (std::size_t kb = 0; kb < nkb; ++kb) {
        const std::size_t k0 = kb * kb_len, k1 = std::min(k, k0 + kb_len);
        if (k0 >= k) break;  // padding blocks: no elements, no scale
        const std::uint8_t code = scale_row[k0 / op.block];
        const Unpacked& sc = op.scale[code];
        if (sc.cls == Unpacked::nan || sc.cls == Unpacked::inf) {
          s.special[r] = 1;
          continue;
        }
        int maxn = 0, me = kNeg;
        for (std::size_t c = k0; c < k1; ++c) {
          const int v = op.elem_n[codes[c]];
          maxn = std::max(maxn, v < 0 ? -v : v);
        }
        if (table && maxn != 0) {
          const int* row_exp = table + static_cast<std::size_t>(code) * 16;
          for (std::size_t c = k0; c < k1; ++c) me = std::max(me, row_exp[codes[c]]);
        }
        if (sc.cls != Unpacked::finite || maxn == 0) continue;  // no nonzero element: contributes nothing
        const int lsb = sc.exp - sc.frac - op.elem_frac;
        s.sd[r * nkb + kb] = std::ldexp(static_cast<double>(sc.sig), lsb);  // exact (8-bit scale formats)
        // exact when the checks below pass (a scale beyond binary32's range fails them)
        s.sf[r * nkb + kb] = std::fabs(s.sd[r * nkb + kb]) <= 0x1p127 ? static_cast<float>(s.sd[r * nkb + kb]) : INFINITY;
        s.l[r * nkb + kb] = lsb;
        s.mx[r * nkb + kb] = me;
        min_l = std::min(min_l, lsb);
        max_l = std::max(max_l, lsb);
        if (table) max_d = std::max(max_d, me - lsb);
        s.lo[r] = std::min(s.lo[r], lsb);
        s.hi[r] = std::max(s.hi[r], lsb + bit_length(static_cast<std::uint64_t>(maxn) * sc.sig));
      }
    }
    s.min_l = min_l;
    s.max_l = max_l;
    s.max_d = max_d;
    return s;
  };
  const Side sa = describe(a, ta.get(), m_pad), sb = describe(b, tb.get(), n_pad);

  // Tensor-level preconditions of the binary32 kernels (else the whole GEMM takes the reference).
  const bool any_term = sa.min_l != kPos && sb.min_l != kPos;
  const int log2_kb = bit_length(kb_len);
  const int term_bits = 2 * 7 + log2_kb + 16;  // |P| < 2^(14 + log2 KB), sig_a * sig_b < 2^16 (8-bit scales)
  const bool f32_terms_exact = !any_term || (sa.min_l >= -149 && sb.min_l >= -149 && sa.min_l + sb.min_l >= -149 &&
                                             sa.max_l + sb.max_l + term_bits < 127 && sa.max_l + term_bits < 127);
  if (dp.kind == DatapathKind::fp32_seq && !f32_terms_exact) return false;
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::probe_matched) {
    const FusedParams& p = row->fused;
    if (!f32_terms_exact) return false;
    if (any_term && sa.max_d + sb.max_d > p.frac_bits) return false;
    if (any_term && p.e_floor != kNoExponent && p.e_floor - p.frac_bits > sa.min_l + sb.min_l) return false;
  }

  // Pack the element integers, micro-panel by micro-panel: binary32 (exact), or int8 for VNNI.
  std::vector<float> a_pack, b_pack;
  std::vector<std::uint8_t> a_pack8;
  std::vector<std::int8_t> b_pack8;
  std::vector<int> b_colsum;
  const std::size_t k_pad = nkb * kb_len;
  const auto ipn = static_cast<std::int64_t>(n_ip), jpn = static_cast<std::int64_t>(n_jp);
  if (tiles.int8_panels) {
    a_pack8.assign(n_ip * k_pad * kMR, 128);
    b_pack8.assign(n_jp * k_pad * kNR, 0);
    b_colsum.assign(n_jp * nkb * kNR, 0);
  } else {
    a_pack.assign(n_ip * k_pad * kMR, 0.0f);
    b_pack.assign(n_jp * k_pad * kNR, 0.0f);
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t ip = 0; ip < ipn; ++ip) {
    std::vector<std::int8_t> vals;
    for (int r = 0; r < kMR; ++r) {
      const std::size_t row_i = static_cast<std::size_t>(ip) * kMR + static_cast<std::size_t>(r);
      if (row_i >= m) continue;
      row_values(a, row_i, vals);
      const std::size_t base = static_cast<std::size_t>(ip) * k_pad * kMR;
      if (tiles.int8_panels) {
        std::uint8_t* dst = a_pack8.data() + base + 4 * static_cast<std::size_t>(r);
        for (std::size_t c = 0; c < k; ++c)
          dst[(c >> 2) * 4 * kMR + (c & 3)] = static_cast<std::uint8_t>(vals[c] + 128);
      } else {
        float* dst = a_pack.data() + base + static_cast<std::size_t>(r);
        for (std::size_t c = 0; c < k; ++c) dst[c * kMR] = static_cast<float>(vals[c]);  // [kb][t] is c
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t jp = 0; jp < jpn; ++jp) {
    std::vector<std::int8_t> vals;
    for (int cc = 0; cc < kNR; ++cc) {
      const std::size_t row_j = static_cast<std::size_t>(jp) * kNR + static_cast<std::size_t>(cc);
      if (row_j >= n) continue;
      row_values(b, row_j, vals);
      const std::size_t base = static_cast<std::size_t>(jp) * k_pad * kNR;
      if (tiles.int8_panels) {
        std::int8_t* dst = b_pack8.data() + base + 4 * static_cast<std::size_t>(cc);
        int* sums = b_colsum.data() + static_cast<std::size_t>(jp) * nkb * kNR + static_cast<std::size_t>(cc);
        for (std::size_t c = 0; c < k; ++c) dst[(c >> 2) * 4 * kNR + (c & 3)] = vals[c];
        for (std::size_t kb = 0; kb < nkb; ++kb) {
          int sum = 0;
          for (std::size_t c = kb * kb_len; c < std::min(k, (kb + 1) * kb_len); ++c) sum += vals[c];
          sums[kb * kNR] = sum;
        }
      } else {
        float* dst = b_pack.data() + base + static_cast<std::size_t>(cc);
        for (std::size_t c = 0; c < k; ++c) dst[c * kNR] = static_cast<float>(vals[c]);
      }
    }
  }
  // B-side scale data packed like the panels: [jp][kb][kNR].
  std::vector<double> b_sd(n_jp * nkb * kNR);
  std::vector<float> b_sf(n_jp * nkb * kNR);
  std::vector<int> b_l(n_jp * nkb * kNR), b_m(n_jp * nkb * kNR);
  for (std::size_t jp = 0; jp < n_jp; ++jp)
    for (std::size_t kb = 0; kb < nkb; ++kb)
      for (int cc = 0; cc < kNR; ++cc) {
        const std::size_t row_j = jp * kNR + static_cast<std::size_t>(cc);
        const std::size_t dst = (jp * nkb + kb) * kNR + static_cast<std::size_t>(cc);
        b_sd[dst] = sb.sd[row_j * nkb + kb];
        b_sf[dst] = sb.sf[row_j * nkb + kb];
        b_l[dst] = sb.l[row_j * nkb + kb];
        b_m[dst] = sb.mx[row_j * nkb + kb];
      }

  FastContext ctx;
  ctx.options = &options;
  ctx.row = row;
  ctx.a = &a;
  ctx.b = &b;
  ctx.ta = ta.get();
  ctx.tb = tb.get();
  ctx.kb_len = kb_len;

  KernelArgs g;
  g.n_pad = n_pad;
  g.nkb = nkb;
  g.kb_len = kb_len;
  g.a_pack = a_pack.data();
  g.b_pack = b_pack.data();
  g.a_pack8 = a_pack8.data();
  g.b_pack8 = b_pack8.data();
  g.b_colsum = b_colsum.data();
  g.a_scale_d = sa.sd.data();
  g.b_scale_d = b_sd.data();
  g.a_scale_f = sa.sf.data();
  g.b_scale_f = b_sf.data();
  g.a_l = sa.l.data();
  g.a_m = sa.mx.data();
  g.b_l = b_l.data();
  g.b_m = b_m.data();
  g.a_lo = sa.lo.data();
  g.b_lo = sb.lo.data();
  g.frac_bits = row ? row->fused.frac_bits : 0;
  {
    // |partial sums| <= sum |a||b| < 2^(max hi_a + max hi_b + log2 K): no Inf below 2^128.
    int hi_a = kNeg, hi_b = kNeg;
    for (std::size_t r = 0; r < m; ++r) hi_a = std::max(hi_a, sa.hi[r]);
    for (std::size_t r = 0; r < n; ++r) hi_b = std::max(hi_b, sb.hi[r]);
    g.may_overflow = hi_a + hi_b + bit_length(k) + 1 >= 128;
  }
  g.group_blocks = group_blocks;
  g.fix = fix_tfdpa;
  g.add_rz = add_rz_scalar;
  g.gst_step = gst_fast_step;
  g.fix_ctx = &ctx;

  std::vector<double> state_d;
  std::vector<float> state_f, state2_f;
  std::vector<std::uint32_t> state_u;
  TileFn tile = nullptr;
  switch (dp.kind) {
    case DatapathKind::exact:
      state_d.assign(m_pad * n_pad, 0.0);
      g.state_d = state_d.data();
      tile = tiles.exact;
      break;
    case DatapathKind::fp32_seq:
      state_f.assign(m_pad * n_pad, 0.0f);
      g.state_f = state_f.data();
      tile = tiles.fp32_seq;
      break;
    case DatapathKind::tfdpa:
    case DatapathKind::probe_matched:
      state_f.assign(m_pad * n_pad, 0.0f);
      g.state_f = state_f.data();
      if (group_blocks) {
        state2_f.assign(m_pad * n_pad, 0.0f);
        g.state2_f = state2_f.data();
      }
      tile = tiles.tfdpa;
      break;
    case DatapathKind::gst_fdpa:
      state_u.assign(m_pad * n_pad, 0u);
      g.state_u = state_u.data();
      tile = tiles.gst;
      break;
  }

  // The loop nest: K in chunks of ~256 elements so a B micro-panel chunk stays in L1 while the i
  // micro-panels of an MC block stream past it; (MC block, j panel) pairs are the parallel tasks.
  std::size_t kc = std::max<std::size_t>(1, 256 / kb_len);
  if (group_blocks) kc = std::max(group_blocks, kc / group_blocks * group_blocks);
  constexpr std::size_t kMcPanels = 32;  // 128 rows of A per task
  const std::size_t n_mc = (n_ip + kMcPanels - 1) / kMcPanels;
  const auto tasks = static_cast<std::int64_t>(n_mc * n_jp);
  const auto t_kernel = std::chrono::steady_clock::now();
  // Dynamic: a thread that is descheduled (shared machines) does not leave the other spinning at the
  // end; tasks are numbered MC-block-major, so consecutive tasks share the block of A.
  // Progress counts finished tasks; only the calling thread (OpenMP's thread 0) reports them.
  std::atomic<std::uint64_t> tasks_done{0};
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::size_t mc = static_cast<std::size_t>(task) / n_jp, jp = static_cast<std::size_t>(task) % n_jp;
    const std::size_t ip1 = std::min(n_ip, (mc + 1) * kMcPanels);
    for (std::size_t kb0 = 0; kb0 < nkb; kb0 += kc) {
      const std::size_t kb1 = std::min(nkb, kb0 + kc);
      for (std::size_t ip = mc * kMcPanels; ip < ip1; ++ip) tile(g, ip, jp, kb0, kb1);
    }
    const std::uint64_t done = tasks_done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (options.progress && omp_get_thread_num() == 0) {
      options.progress(done, static_cast<std::uint64_t>(tasks), "GEMM tiles");
    }
  }
  if (options.progress) options.progress(static_cast<std::uint64_t>(tasks), static_cast<std::uint64_t>(tasks), "done");

  const auto t_epilogue = std::chrono::steady_clock::now();
  // Epilogues, exactness fallbacks and special rows.
  const ReferenceContext ref(qa, qb, options);
  const int log2_k = bit_length(k);
  const auto mi = static_cast<std::int64_t>(m);
  std::uint64_t reference_outputs = 0;
#pragma omp parallel for schedule(dynamic, 8) reduction(+ : reference_outputs)
  for (std::int64_t ii = 0; ii < mi; ++ii) {
    const auto i = static_cast<std::size_t>(ii);
    for (std::size_t j = 0; j < n; ++j) {
      std::uint32_t bits = 0;
      const std::size_t s = i * n_pad + j;
      if (sa.special[i] || sb.special[j]) {
        out[i * n + j] = std::bit_cast<float>(ref.element(i, j));
        ++reference_outputs;
        continue;
      }
      switch (dp.kind) {
        case DatapathKind::exact: {
          const bool zero = sa.lo[i] == kPos || sb.lo[j] == kPos;
          const int width = zero ? 0 : (sa.hi[i] - sa.lo[i]) + (sb.hi[j] - sb.lo[j]) + log2_k;
          if (width <= 53) bits = round_scaled_exact(state_d[s], options.alpha, dp.nan_bits);
          else {
            bits = exact_scalar(ref, a, i, b, j, sa.lo[i] + sb.lo[j], width <= 120);
            ++reference_outputs;
          }
          break;
        }
        case DatapathKind::fp32_seq:
        case DatapathKind::tfdpa:
        case DatapathKind::gst_fdpa: {
          const std::uint32_t acc = dp.kind == DatapathKind::gst_fdpa ? state_u[s] : std::bit_cast<std::uint32_t>(state_f[s]);
          bits = epilogue(dp, acc, options.alpha);
          break;
        }
        case DatapathKind::probe_matched: {
          std::uint32_t cb = std::bit_cast<std::uint32_t>(state2_f[s]);
          if (options.snap) cb = snap_1024(cb);
          bits = epilogue(dp, (cb & 0x7FFFFFFFu) > 0x7F800000u ? dp.nan_bits : cb, options.alpha);
          break;
        }
      }
      out[i * n + j] = std::bit_cast<float>(output_cast(bits, options.bf16_output));
    }
  }
  if (options.report) {
    options.report->simd_kernel = true;
    options.report->isa = tiles.isa;
    options.report->golden_steps = ctx.golden_steps.load();
    options.report->reference_outputs = reference_outputs;
    using ms = std::chrono::duration<double, std::milli>;
    options.report->prepare_ms = ms(t_kernel - t_start).count();
    options.report->kernel_ms = ms(t_epilogue - t_kernel).count();
    options.report->epilogue_ms = ms(std::chrono::steady_clock::now() - t_epilogue).count();
  }
  return true;
}



}  // namespace fp4sim::detail
