// Host side of the tensor-core probes: the random case generator (deterministic from kSeed, so the D bits
// dumped on the H200 can be judged later by any model), bf16/f16 codes, and a small parametric T-FDPA
// model (docs/datapaths.md §1.3) with the variants the open points O3/O8 ask about. This model is the
// probe's own quick judge; the golden one is src/core/datapath.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace probes {

inline constexpr std::uint64_t kSeed = 0x5EED0F4u;

struct Case {
  float a[16] = {};
  float b[16] = {};
  float c = 0.0f;
};

inline std::uint32_t f2u(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float u2f(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct SplitMix {
  std::uint64_t s;
  explicit SplitMix(std::uint64_t seed) : s(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int uniform(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
};

// 16-bit code of a value exactly representable in bf16 / f16 (else truncated).
inline std::uint16_t to_code(float v, bool f16) {
  const std::uint32_t u = f2u(v);
  if (!f16) return static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const float a = std::fabs(v);
  if (std::isnan(v)) return 0x7E00u | sign;
  if (std::isinf(v)) return 0x7C00u | sign;
  if (a == 0.0f) return sign;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;             // leading-bit exponent
  if (e < -14) return sign | static_cast<std::uint16_t>(std::ldexp(a, 24));  // subnormal: a / 2^-24
  if (e > 15) return sign | 0x7C00u;
  const std::uint32_t mant = static_cast<std::uint32_t>(std::ldexp(a, 10 - e)) & 0x3FFu;
  return sign | static_cast<std::uint16_t>(((e + 15) << 10) | mant);
}

inline float from_code(std::uint16_t c, bool f16) {
  if (!f16) return u2f(static_cast<std::uint32_t>(c) << 16);
  const bool neg = (c >> 15) != 0;
  const int e = (c >> 10) & 31, m = c & 0x3FF;
  float v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else v = std::ldexp(static_cast<float>(m | 0x400), e - 25);
  return neg ? -v : v;
}

inline bool representable_f16(const Case& c) {
  for (int k = 0; k < 16; ++k) {
    for (float v : {c.a[k], c.b[k]}) {
      if (std::isnan(v)) continue;
      if (from_code(to_code(v, true), true) != v) return false;
    }
  }
  return true;
}

// Random tiles with wide exponent spreads; zeros, subnormals and a few specials.
inline std::uint16_t random_code(SplitMix& r, bool f16, int center, int spread) {
  const std::uint16_t sign = (r.next() & 1) ? 0x8000u : 0u;
  const int roll = r.uniform(0, 9999);
  if (roll < 600) return sign;                                       // zero
  if (roll < 800) return sign | static_cast<std::uint16_t>(r.uniform(1, f16 ? 0x3FF : 0x7F));  // subnormal
  if (roll < 805) return sign | (f16 ? 0x7C00u : 0x7F80u);           // Inf
  if (roll < 810) return f16 ? 0x7E01u : 0x7FC1u;                    // NaN
  int e = center + r.uniform(-spread, spread);
  if (f16) {
    e = e < -14 ? -14 : (e > 15 ? 15 : e);
    return sign | static_cast<std::uint16_t>(((e + 15) << 10) | r.uniform(0, 0x3FF));
  }
  e = e < -126 ? -126 : (e > 127 ? 127 : e);
  return sign | static_cast<std::uint16_t>(((e + 127) << 7) | r.uniform(0, 0x7F));
}

inline float random_c(SplitMix& r, int center, int spread) {
  const std::uint32_t sign = (r.next() & 1) ? 0x80000000u : 0u;
  const int roll = r.uniform(0, 9999);
  if (roll < 800) return u2f(sign);
  if (roll < 1000) return u2f(sign | static_cast<std::uint32_t>(r.uniform(1, 0x7FFFFF)));
  int e = center + r.uniform(-spread, spread);
  e = e < -126 ? -126 : (e > 127 ? 127 : e);
  return u2f(sign | (static_cast<std::uint32_t>(e + 127) << 23) | static_cast<std::uint32_t>(r.next() & 0x7FFFFF));
}

inline void fill_random(bool f16, int rows, int instances, std::vector<std::uint16_t>& A,
                        std::vector<std::uint16_t>& B, std::vector<float>& C) {
  SplitMix r(kSeed ^ (f16 ? 0x16u : 0xBFu) ^ (static_cast<std::uint64_t>(rows) << 8));
  const int spreads_bf16[] = {0, 1, 3, 6, 10, 20, 40};
  const int spreads_f16[] = {0, 1, 2, 4, 8, 12};
  for (int inst = 0; inst < instances; ++inst) {
    const int center = f16 ? r.uniform(-8, 6) : r.uniform(-70, 60);
    const int spread = f16 ? spreads_f16[r.uniform(0, 5)] : spreads_bf16[r.uniform(0, 6)];
    for (int i = 0; i < rows * 16; ++i) A[static_cast<std::size_t>(inst) * rows * 16 + i] = random_code(r, f16, center, spread);
    for (int i = 0; i < 128; ++i) B[static_cast<std::size_t>(inst) * 128 + i] = random_code(r, f16, center, spread);
    const int c_spread = 2 * spread + r.uniform(0, 30);
    for (int i = 0; i < rows * 8; ++i) C[static_cast<std::size_t>(inst) * rows * 8 + i] = random_c(r, 2 * center, c_spread);
  }
}

// ---- parametric T-FDPA (G = 16, F = 25, truncation toward zero, C joint, products unnormalised, RZ) ----
enum class Variant {
  km,           // E_max >= -133; zero products and zero C take no part (Khattak–Mikaitis)
  mmasim_head,  // a zero operand has exponent -126 (so a zero product has -126 + e_other); zero C -126; no floor
  no_floor,     // zeros take no part, no floor
  km_zero_c,    // floor -133, and a zero C takes part with exponent -126
};

using i128 = __int128;

// |v| = sig * 2^(e - frac) with e the leading-bit exponent (emin for subnormals).
inline void split(float v, int frac, int emin, std::int64_t& sig, int& e) {
  const float a = std::fabs(v);
  int ex;
  std::frexp(a, &ex);
  e = ex - 1;
  if (e < emin) e = emin;
  sig = static_cast<std::int64_t>(std::ldexp(static_cast<double>(a), frac - e));
}

inline std::uint32_t model(const Case& c, Variant var, bool f16) {
  const int F = 25;
  const int in_frac = f16 ? 10 : 7, in_emin = f16 ? -14 : -126;
  // Specials.
  bool nan = std::isnan(c.c);
  bool pos_inf = std::isinf(c.c) && c.c > 0, neg_inf = std::isinf(c.c) && c.c < 0;
  for (int k = 0; k < 16; ++k) {
    const float a = c.a[k], b = c.b[k];
    if (std::isnan(a) || std::isnan(b)) nan = true;
    if ((std::isinf(a) && b == 0.0f) || (std::isinf(b) && a == 0.0f)) nan = true;
    if (std::isinf(a) || std::isinf(b)) {
      const bool neg = std::signbit(a) != std::signbit(b);
      (neg ? neg_inf : pos_inf) = true;
    }
  }
  if (nan || (pos_inf && neg_inf)) return 0x7FFFFFFFu;
  if (pos_inf) return 0x7F800000u;
  if (neg_inf) return 0xFF800000u;

  struct Term { bool neg; std::int64_t sig; int e; int frac; bool zero; int zero_e; };
  Term t[17];
  int n = 0;
  for (int k = 0; k < 16; ++k) {
    const float a = c.a[k], b = c.b[k];
    Term x{};
    x.neg = std::signbit(a) != std::signbit(b);
    x.frac = 2 * in_frac;
    if (a == 0.0f || b == 0.0f) {
      x.zero = true;
      // MMA-Sim HEAD: a zero operand has exponent -126.
      int ea = -126, eb = -126;
      std::int64_t s;
      if (a != 0.0f) split(a, in_frac, in_emin, s, ea);
      if (b != 0.0f) split(b, in_frac, in_emin, s, eb);
      x.zero_e = ea + eb;
    } else {
      std::int64_t sa, sb;
      int ea, eb;
      split(a, in_frac, in_emin, sa, ea);
      split(b, in_frac, in_emin, sb, eb);
      x.sig = sa * sb;
      x.e = ea + eb;
    }
    t[n++] = x;
  }
  Term ct{};
  ct.neg = std::signbit(c.c);
  ct.frac = 23;
  if (c.c == 0.0f) {
    ct.zero = true;
    ct.zero_e = -126;
  } else {
    split(c.c, 23, -126, ct.sig, ct.e);
  }
  t[n++] = ct;

  const int kNone = -100000;
  int emax = kNone;
  for (int i = 0; i < n; ++i) {
    if (!t[i].zero) emax = std::max(emax, t[i].e);
    else if (var == Variant::mmasim_head) emax = std::max(emax, t[i].zero_e);
    else if (var == Variant::km_zero_c && i == n - 1) emax = std::max(emax, t[i].zero_e);
  }
  if (var == Variant::km || var == Variant::km_zero_c) emax = std::max(emax, -133);
  if (emax == kNone) return 0u;
  i128 sum = 0;
  for (int i = 0; i < n; ++i) {
    if (t[i].zero) continue;
    const int shift = t[i].e - t[i].frac - emax + F;
    i128 v = t[i].sig;
    if (shift >= 0) v <<= shift;
    else v = (-shift >= 100) ? 0 : (v >> -shift);
    sum += t[i].neg ? -v : v;
  }
  if (sum == 0) return 0u;  // +0 (O4 as the models state it)
  const bool neg = sum < 0;
  using u128 = unsigned __int128;
  u128 mag = neg ? static_cast<u128>(-sum) : static_cast<u128>(sum);
  int msb = 0;
  for (u128 m = mag; m > 1; m >>= 1) ++msb;
  const int lead = msb + emax - F;  // exponent of the leading bit
  if (lead >= 128) return neg ? 0xFF800000u : 0x7F800000u;
  int lsb = lead - 23;
  if (lsb < -149) lsb = -149;
  const int drop = lsb - (emax - F);
  u128 mant = drop >= 0 ? (drop >= 127 ? 0 : mag >> drop) : mag << -drop;
  const float r = std::ldexp(static_cast<float>(static_cast<std::uint64_t>(mant)), lsb);
  return f2u(neg ? -r : r);
}

}  // namespace probes
