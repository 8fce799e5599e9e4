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
#include "gemm_fast_internal.hpp"

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
  const float alpha = alpha_of_row(ref.options, i);
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

// The accumulator of every output, by datapath kind.
struct State {
  std::vector<double> d;
  std::vector<float> f, f2;
  std::vector<std::uint32_t> u;
};

// Sizes the state the datapath's kernels accumulate into, points g at it and returns their tile kernel.
TileFn prepare_state(DatapathKind kind, const TileSet& tiles, const Grid& grid, State& state, KernelArgs& g) {
  const std::size_t m_pad = grid.m_pad, n_pad = grid.n_pad, group_blocks = grid.group_blocks;
  TileFn tile = nullptr;
  switch (kind) {
    case DatapathKind::exact:
      state.d.assign(m_pad * n_pad, 0.0);
      g.state_d = state.d.data();
      tile = tiles.exact;
      break;
    case DatapathKind::fp32_seq:
      state.f.assign(m_pad * n_pad, 0.0f);
      g.state_f = state.f.data();
      tile = tiles.fp32_seq;
      break;
    case DatapathKind::tfdpa:
    case DatapathKind::probe_matched:
      state.f.assign(m_pad * n_pad, 0.0f);
      g.state_f = state.f.data();
      if (group_blocks) {
        state.f2.assign(m_pad * n_pad, 0.0f);
        g.state2_f = state.f2.data();
      }
      tile = tiles.tfdpa;
      break;
    case DatapathKind::gst_fdpa:
      state.u.assign(m_pad * n_pad, 0u);
      g.state_u = state.u.data();
      tile = tiles.gst;
      break;
  }
  return tile;
}

// The loop nest: K in chunks of ~256 elements so a B micro-panel chunk stays in L1 while the i
// micro-panels of an MC block stream past it; (MC block, j panel) pairs are the parallel tasks.
void run_tiles(const KernelArgs& g, TileFn tile, const Grid& grid, const GemmOptions& options) {
  const std::size_t kb_len = grid.kb_len, group_blocks = grid.group_blocks, nkb = grid.nkb;
  const std::size_t n_ip = grid.n_ip, n_jp = grid.n_jp;
  std::size_t kc = std::max<std::size_t>(1, 256 / kb_len);
  if (group_blocks) kc = std::max(group_blocks, kc / group_blocks * group_blocks);
  constexpr std::size_t kMcPanels = 32;  // 128 rows of A per task
  const std::size_t n_mc = (n_ip + kMcPanels - 1) / kMcPanels;
  const auto tasks = static_cast<std::int64_t>(n_mc * n_jp);
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
}

// Epilogues, exactness fallbacks and special rows; returns how many outputs the reference computed.
std::uint64_t epilogues(const QuantizedTensor& qa, const QuantizedTensor& qb, const GemmOptions& options,
                        const OperandInfo& a, const OperandInfo& b, const Side& sa, const Side& sb, const Grid& grid,
                        const State& state, std::span<float> out) {
  const Datapath& dp = *options.datapath;
  const std::size_t m = grid.m, n = grid.n, k = grid.k, n_pad = grid.n_pad;
  const std::vector<double>& state_d = state.d;
  const std::vector<float>& state_f = state.f;
  const std::vector<float>& state2_f = state.f2;
  const std::vector<std::uint32_t>& state_u = state.u;
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
          if (width <= 53) bits = round_scaled_exact(state_d[s], alpha_of_row(options, i), dp.nan_bits);
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
          bits = epilogue(dp, acc, alpha_of_row(options, i));
          break;
        }
        case DatapathKind::probe_matched: {
          std::uint32_t cb = std::bit_cast<std::uint32_t>(state2_f[s]);
          if (options.snap) cb = snap_1024(cb);
          bits = epilogue(dp, (cb & 0x7FFFFFFFu) > 0x7F800000u ? dp.nan_bits : cb, alpha_of_row(options, i));
          break;
        }
      }
      out[i * n + j] = std::bit_cast<float>(output_cast(bits, options.bf16_output));
    }
  }
  return reference_outputs;
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

  const Grid grid{m, n, k, kb_len, nkb, group_blocks, m_pad, n_pad, n_ip, n_jp};
  const Side sa = describe(a, ta.get(), m_pad, grid), sb = describe(b, tb.get(), n_pad, grid);

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

  const Panels panels = pack(a, b, sb, grid, tiles.int8_panels);

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
  g.a_pack = panels.a_pack.data();
  g.b_pack = panels.b_pack.data();
  g.a_pack8 = panels.a_pack8.data();
  g.b_pack8 = panels.b_pack8.data();
  g.b_colsum = panels.b_colsum.data();
  g.a_scale_d = sa.sd.data();
  g.b_scale_d = panels.b_sd.data();
  g.a_scale_f = sa.sf.data();
  g.b_scale_f = panels.b_sf.data();
  g.a_l = sa.l.data();
  g.a_m = sa.mx.data();
  g.b_l = panels.b_l.data();
  g.b_m = panels.b_m.data();
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

  State state;
  const TileFn tile = prepare_state(dp.kind, tiles, grid, state, g);
  const auto t_kernel = std::chrono::steady_clock::now();
  run_tiles(g, tile, grid, options);

  const auto t_epilogue = std::chrono::steady_clock::now();
  const std::uint64_t reference_outputs = epilogues(qa, qb, options, a, b, sa, sb, grid, state, out);
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
