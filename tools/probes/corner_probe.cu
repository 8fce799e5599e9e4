// Corner-case measurements for the Hopper rows (issue 25), written in the vendored vector format of
// tests/data/tensorcore_vectors (docs/datapaths.md §7.4): zero-result signs, subnormal fp16 accumulators,
// TF32 NaN payloads and low input bits, FP8 wgmma with C and with an f16 accumulator, e4m3 x e5m2.
// One case per instruction instance: the a vector in A row 0, the b vector in B column 0, C[0][0] = c,
// everything else 0; D[0][0] recorded. The cases are generated here, deterministically from kSeed.
//
// Build: nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/corner_probe.cu
// Run:   corner_probe <out_dir> [--dry-run]   (one folder per instruction: a.txt b.txt c.txt d.txt
//        families.tsv; --dry-run writes the cases with D = C, no GPU)
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include "probe_cuda.cuh"
#include "random_cases.hpp"

namespace {

using probes::DeviceArray;
using probes::f2u;
using probes::smem_desc;
using probes::SplitMix;
using probes::u2f;

// ---------------------------------------------------------------------------------------------------
// Element formats and the instructions measured. Every instruction's A row and B column are 32 bytes
// (k16 x 2 B, k8 x 4 B, k32 x 1 B), so one tile layout in 32-bit words serves them all.

enum class Fmt { bf16, f16, tf32, e4m3, e5m2 };

struct Op {
  const char* folder;
  bool wgmma;
  Fmt a, b;
  bool f16acc;
  int k;
};

constexpr Op kOps[] = {
    {"mma_sync_bf16_f32", false, Fmt::bf16, Fmt::bf16, false, 16},
    {"mma_sync_f16_f32", false, Fmt::f16, Fmt::f16, false, 16},
    {"mma_sync_f16_f16", false, Fmt::f16, Fmt::f16, true, 16},
    {"mma_sync_tf32_f32", false, Fmt::tf32, Fmt::tf32, false, 8},
    {"wgmma_bf16_f32", true, Fmt::bf16, Fmt::bf16, false, 16},
    {"wgmma_f16_f32", true, Fmt::f16, Fmt::f16, false, 16},
    {"wgmma_f16_f16", true, Fmt::f16, Fmt::f16, true, 16},
    {"wgmma_tf32_f32", true, Fmt::tf32, Fmt::tf32, false, 8},
    {"wgmma_e4m3_e4m3_f32", true, Fmt::e4m3, Fmt::e4m3, false, 32},
    {"wgmma_e4m3_e5m2_f32", true, Fmt::e4m3, Fmt::e5m2, false, 32},
    {"wgmma_e5m2_e4m3_f32", true, Fmt::e5m2, Fmt::e4m3, false, 32},
    {"wgmma_e5m2_e5m2_f32", true, Fmt::e5m2, Fmt::e5m2, false, 32},
    {"wgmma_e4m3_e4m3_f16", true, Fmt::e4m3, Fmt::e4m3, true, 32},
    {"wgmma_e4m3_e5m2_f16", true, Fmt::e4m3, Fmt::e5m2, true, 32},
    {"wgmma_e5m2_e5m2_f16", true, Fmt::e5m2, Fmt::e5m2, true, 32},
    {"wgmma_e5m2_e4m3_f16", true, Fmt::e5m2, Fmt::e4m3, true, 32},
};
constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);

// ---------------------------------------------------------------------------------------------------
// Device side. Per instance: A [rows][8 words], B [8][8 words] (row n = column n of B, K-contiguous),
// C and D [rows][8] (FP32 bits, or an fp16 code in the low half for an f16 accumulator).

__device__ __forceinline__ std::uint32_t pack2(std::uint32_t lo, std::uint32_t hi) { return (lo & 0xFFFFu) | (hi << 16); }

template <int OP>
__global__ void mma_sync_kernel(const std::uint32_t* A, const std::uint32_t* B, const std::uint32_t* C,
                                std::uint32_t* D, int instances) {
  const int inst = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (inst >= instances) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const std::uint32_t* a = A + static_cast<std::size_t>(inst) * 128;
  const std::uint32_t* b = B + static_cast<std::size_t>(inst) * 64;
  const std::uint32_t* c = C + static_cast<std::size_t>(inst) * 128;
  std::uint32_t* d = D + static_cast<std::size_t>(inst) * 128;
  // The PTX fragment layouts of m16n8k16 (.f16/.bf16) and m16n8k8 (.tf32) coincide in 32-bit words.
  const std::uint32_t a0 = a[g * 8 + t], a1 = a[(g + 8) * 8 + t], a2 = a[g * 8 + t + 4], a3 = a[(g + 8) * 8 + t + 4];
  const std::uint32_t b0 = b[g * 8 + t], b1 = b[g * 8 + t + 4];
  const int i0 = g * 8 + 2 * t, i1 = i0 + 1, i2 = (g + 8) * 8 + 2 * t, i3 = i2 + 1;
  if constexpr (kOps[OP].f16acc) {
    std::uint32_t c0 = pack2(c[i0], c[i1]), c1 = pack2(c[i2], c[i3]);
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
                 : "+r"(c0), "+r"(c1)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    d[i0] = c0 & 0xFFFFu; d[i1] = c0 >> 16; d[i2] = c1 & 0xFFFFu; d[i3] = c1 >> 16;
  } else {
    std::uint32_t r0 = c[i0], r1 = c[i1], r2 = c[i2], r3 = c[i3];
#define MMA_F32(SHAPE_TYPES)                                                                                 \
  asm volatile("mma.sync.aligned." SHAPE_TYPES " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n" \
               : "+r"(r0), "+r"(r1), "+r"(r2), "+r"(r3)                                                      \
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
    if constexpr (kOps[OP].a == Fmt::bf16) MMA_F32("m16n8k16.row.col.f32.bf16.bf16.f32");
    else if constexpr (kOps[OP].a == Fmt::f16) MMA_F32("m16n8k16.row.col.f32.f16.f16.f32");
    else MMA_F32("m16n8k8.row.col.f32.tf32.tf32.f32");
#undef MMA_F32
    d[i0] = r0; d[i1] = r1; d[i2] = r2; d[i3] = r3;
  }
}

template <int OP>
__global__ void wgmma_kernel(const std::uint32_t* A, const std::uint32_t* B, const std::uint32_t* C,
                             std::uint32_t* D, int instances, int swap_lbo_sbo) {
  __shared__ __align__(128) std::uint32_t sA[64 * 8];
  __shared__ __align__(128) std::uint32_t sB[8 * 8];
  const int inst = blockIdx.x;
  if (inst >= instances) return;
  const int tid = threadIdx.x;
  const std::uint32_t* a = A + static_cast<std::size_t>(inst) * 512;
  const std::uint32_t* b = B + static_cast<std::size_t>(inst) * 64;
  // Word w of row r: core matrix (r / 8, w / 4) at (r / 8) * 256 + (w / 4) * 128 bytes, row r % 8 of it.
  for (int i = tid; i < 64 * 8; i += 128) {
    const int r = i / 8, w = i % 8;
    sA[(r / 8) * 64 + (w / 4) * 32 + (r % 8) * 4 + (w % 4)] = a[i];
  }
  if (tid < 64) {
    const int r = tid / 8, w = tid % 8;
    sB[(w / 4) * 32 + r * 4 + (w % 4)] = b[tid];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int warp = tid / 32, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const std::uint32_t* c = C + static_cast<std::size_t>(inst) * 512;
  std::uint32_t* d = D + static_cast<std::size_t>(inst) * 512;
  const int row = warp * 16 + g;
  const int i0 = row * 8 + 2 * t, i1 = i0 + 1, i2 = (row + 8) * 8 + 2 * t, i3 = i2 + 1;
  const std::uint32_t lbo = swap_lbo_sbo ? 256 : 128, sbo = swap_lbo_sbo ? 128 : 256;
  const std::uint64_t da = smem_desc(sA, lbo, sbo), db = smem_desc(sB, lbo, sbo);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (kOps[OP].f16acc) {
    std::uint32_t c0 = pack2(c[i0], c[i1]), c1 = pack2(c[i2], c[i3]);
#define WG_F16(TYPES, TAIL)                                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." TYPES              \
               " {%0,%1}, %2, %3, p, 1, 1" TAIL ";\n}\n"                                                  \
               : "+r"(c0), "+r"(c1)                                                                      \
               : "l"(da), "l"(db))
    if constexpr (kOps[OP].a == Fmt::f16) WG_F16("m64n8k16.f16.f16.f16", ", 0, 0");
    else if constexpr (kOps[OP].a == Fmt::e4m3 && kOps[OP].b == Fmt::e4m3) WG_F16("m64n8k32.f16.e4m3.e4m3", "");
    else if constexpr (kOps[OP].a == Fmt::e4m3 && kOps[OP].b == Fmt::e5m2) WG_F16("m64n8k32.f16.e4m3.e5m2", "");
    else if constexpr (kOps[OP].a == Fmt::e5m2 && kOps[OP].b == Fmt::e4m3) WG_F16("m64n8k32.f16.e5m2.e4m3", "");
    else WG_F16("m64n8k32.f16.e5m2.e5m2", "");
#undef WG_F16
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    d[i0] = c0 & 0xFFFFu; d[i1] = c0 >> 16; d[i2] = c1 & 0xFFFFu; d[i3] = c1 >> 16;
  } else {
    std::uint32_t r0 = c[i0], r1 = c[i1], r2 = c[i2], r3 = c[i3];
#define WG_F32(TYPES, TAIL)                                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\nwgmma.mma_async.sync.aligned." TYPES              \
               " {%0,%1,%2,%3}, %4, %5, p, 1, 1" TAIL ";\n}\n"                                            \
               : "+r"(r0), "+r"(r1), "+r"(r2), "+r"(r3)                                                  \
               : "l"(da), "l"(db))
    constexpr Fmt fa = kOps[OP].a, fb = kOps[OP].b;
    if constexpr (fa == Fmt::bf16) WG_F32("m64n8k16.f32.bf16.bf16", ", 0, 0");
    else if constexpr (fa == Fmt::f16) WG_F32("m64n8k16.f32.f16.f16", ", 0, 0");
    else if constexpr (fa == Fmt::tf32) WG_F32("m64n8k8.f32.tf32.tf32", "");
    else if constexpr (fa == Fmt::e4m3 && fb == Fmt::e4m3) WG_F32("m64n8k32.f32.e4m3.e4m3", "");
    else if constexpr (fa == Fmt::e4m3 && fb == Fmt::e5m2) WG_F32("m64n8k32.f32.e4m3.e5m2", "");
    else if constexpr (fa == Fmt::e5m2 && fb == Fmt::e4m3) WG_F32("m64n8k32.f32.e5m2.e4m3", "");
    else WG_F32("m64n8k32.f32.e5m2.e5m2", "");
#undef WG_F32
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    d[i0] = r0; d[i1] = r1; d[i2] = r2; d[i3] = r3;
  }
}

int rows_of(const Op& op) { return op.wgmma ? 64 : 16; }

template <int OP>
void launch(const std::uint32_t* A, const std::uint32_t* B, const std::uint32_t* C, std::uint32_t* D, int n, int swap) {
  if constexpr (kOps[OP].wgmma) wgmma_kernel<OP><<<n, 128>>>(A, B, C, D, n, swap);
  else mma_sync_kernel<OP><<<(n + 7) / 8, 256>>>(A, B, C, D, n);
}

template <int... I>
void dispatch(int op, const std::uint32_t* A, const std::uint32_t* B, const std::uint32_t* C, std::uint32_t* D, int n,
              int swap, std::integer_sequence<int, I...>) {
  ((op == I ? launch<I>(A, B, C, D, n, swap) : void()), ...);
}

// Runs whole tiles: A [n][rows][8] words, B [n][8][8], C [n][rows][8]; returns D like C.
bool g_dry_run = false;  // --dry-run: no GPU; D = C, to check the case files before a device session

std::vector<std::uint32_t> run_tiles(int op, const std::vector<std::uint32_t>& A, const std::vector<std::uint32_t>& B,
                                     const std::vector<std::uint32_t>& C, int n, int swap) {
  if (g_dry_run) return C;
  const DeviceArray<std::uint32_t> dA(A), dB(B), dC(C), dD(C.size());
  dD.poison();
  dispatch(op, dA.get(), dB.get(), dC.get(), dD.get(), n, swap, std::make_integer_sequence<int, kNumOps>{});
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  return dD.to_host();
}

// ---------------------------------------------------------------------------------------------------
// Host: element codes. Values travel as FP32 bit patterns (the vector files' tokens).

int width_of(Fmt f) { return f == Fmt::tf32 ? 4 : (f == Fmt::e4m3 || f == Fmt::e5m2) ? 1 : 2; }

std::uint32_t half_to_f32_bits(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const int e = (h >> 10) & 31;
  const std::uint32_t m = h & 0x3FFu;
  if (e == 31) return sign | 0x7F800000u | (m << 13);  // Inf, NaN with its payload
  if (e == 0) return sign | f2u(std::ldexp(static_cast<float>(m), -24));
  return sign | (static_cast<std::uint32_t>(e - 15 + 127) << 23) | (m << 13);
}

std::uint32_t fp8_to_f32_bits(std::uint32_t c, Fmt f) {
  const bool e4 = f == Fmt::e4m3;
  const int mb = e4 ? 3 : 2, bias = e4 ? 7 : 15;
  const std::uint32_t sign = (c & 0x80u) << 24;
  const int e = static_cast<int>((c & 0x7Fu) >> mb);
  const int m = static_cast<int>(c & ((1u << mb) - 1));
  if (e4 && e == 15 && m == 7) return sign | 0x7FC00000u;
  if (!e4 && e == 31) return sign | 0x7F800000u | (m ? 0x400000u : 0u);
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), 1 - bias - mb) : std::ldexp(static_cast<float>(m | (1 << mb)), e - bias - mb);
  return sign | f2u(v);
}

// FP32 bits -> element code; false when the value is not exactly the format's.
bool to_code(std::uint32_t bits, Fmt f, std::uint32_t& code) {
  static const auto table = [] {
    std::array<std::unordered_map<std::uint32_t, std::uint32_t>, 3> t;  // f16, e4m3, e5m2
    for (std::uint32_t h = 0; h < 0x10000u; ++h) t[0].emplace(half_to_f32_bits(h), h);
    for (std::uint32_t c = 0; c < 256; ++c) {
      t[1].emplace(fp8_to_f32_bits(c, Fmt::e4m3), c);
      t[2].emplace(fp8_to_f32_bits(c, Fmt::e5m2), c);
    }
    return t;
  }();
  if (f == Fmt::tf32) {
    code = bits;  // the instruction reads all 32 bits
    return true;
  }
  if (f == Fmt::bf16) {
    code = bits >> 16;
    return (bits & 0xFFFFu) == 0;
  }
  const auto& t = table[f == Fmt::f16 ? 0 : f == Fmt::e4m3 ? 1 : 2];
  const auto it = t.find(bits);
  if (it == t.end()) return false;
  code = it->second;
  return true;
}

// Packs K element codes into the row's 8 words (little-endian, element k at byte k * width).
void pack_row(const std::vector<std::uint32_t>& codes, Fmt f, std::uint32_t* words) {
  const int w = width_of(f);
  std::uint8_t bytes[32] = {};
  for (std::size_t k = 0; k < codes.size(); ++k)
    for (int i = 0; i < w; ++i) bytes[k * w + i] = static_cast<std::uint8_t>(codes[k] >> (8 * i));
  std::memcpy(words, bytes, 32);
}

// ---------------------------------------------------------------------------------------------------
// Cases.

struct Case {
  std::vector<std::uint32_t> a, b;  // FP32 bits, K each
  std::uint32_t c = 0;              // FP32 bits (fp16-exact for an f16 accumulator)
};

struct Family {
  std::string name;
  std::vector<Case> cases;
};

constexpr std::uint32_t kSeed = 0xC0C0A25u;

float p2(int e) { return std::ldexp(1.0f, e); }
std::uint32_t pb(int e, bool neg = false) { return f2u(neg ? -p2(e) : p2(e)); }

// A random value of format f with unbiased exponent in [lo, hi] (clamped to the format's normal range;
// below it a subnormal of the same scale), random sign and mantissa, as FP32 bits.
std::uint32_t random_value(SplitMix& r, Fmt f, int lo, int hi) {
  const bool neg = r.next() & 1;
  int mb, emin, emax;
  switch (f) {
    case Fmt::bf16: mb = 7; emin = -126; emax = 127; break;
    case Fmt::f16: mb = 10; emin = -14; emax = 15; break;
    case Fmt::tf32: mb = 10; emin = -126; emax = 127; break;
    case Fmt::e4m3: mb = 3; emin = -6; emax = 8; break;
    default: mb = 2; emin = -14; emax = 15; break;
  }
  int e = r.uniform(lo, hi);
  if (e > emax) e = emax;
  const int m = r.uniform(0, (1 << mb) - 1);
  float v;
  if (e < emin) {
    const int sub_lsb = emin - mb;  // subnormal quantum
    if (e < sub_lsb) e = sub_lsb;
    v = std::ldexp(static_cast<float>((m >> (emin - e)) | (1 << (mb - (emin - e)))), sub_lsb);
  } else {
    v = std::ldexp(static_cast<float>(m | (1 << mb)), e - mb);
  }
  if (f == Fmt::e4m3 && v > 448.0f) v = 448.0f;
  return f2u(neg ? -v : v);
}

// The fp16 code nearest below |v| is not needed: C values are built from fp16 codes directly.
std::uint32_t random_f16_c(SplitMix& r, int lo, int hi) { return random_value(r, Fmt::f16, lo, hi); }

Case zero_case(int k) {
  Case c;
  c.a.assign(k, 0u);
  c.b.assign(k, 0u);
  return c;
}

// Zero operands with random signs, C = +-0: the sign of an all-zero result.
void add_signed_zeros(std::vector<Case>& out, SplitMix& r, int k, int n) {
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    for (int j = 0; j < k; ++j) {
      c.a[j] = (r.next() & 1) ? 0x80000000u : 0u;
      c.b[j] = (r.next() & 3) == 0 ? f2u((r.next() & 1) ? -1.0f : 1.0f) : ((r.next() & 1) ? 0x80000000u : 0u);
    }
    c.c = (r.next() & 1) ? 0x80000000u : 0u;
    out.push_back(c);
  }
}

// An exact cancellation: products that sum to exactly -C (or to zero with C = +-0).
void add_exact_cancellation(std::vector<Case>& out, SplitMix& r, Fmt fa, Fmt fb, int k, int lo, int hi, int n) {
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    const int j0 = r.uniform(0, k - 1), j1 = (j0 + 1 + r.uniform(0, k - 2)) % k;
    c.a[j0] = random_value(r, fa, lo, hi);
    c.b[j0] = random_value(r, fb, lo, hi);
    c.a[j1] = c.a[j0] ^ 0x80000000u;  // the same product, negated
    c.b[j1] = c.b[j0];
    c.c = (r.next() & 1) ? 0x80000000u : 0u;
    out.push_back(c);
  }
}

// A few products of random signs whose sum lies near the output's smallest subnormal, C = +-0 or tiny:
// results that round or truncate to zero with either sign.
void add_underflow(std::vector<Case>& out, SplitMix& r, Fmt fa, Fmt fb, int k, int prod_lo, int prod_hi,
                   bool f16acc, int n) {
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    const int terms = r.uniform(1, 4);
    for (int t = 0; t < terms; ++t) {
      const int j = r.uniform(0, k - 1);
      const int e = r.uniform(prod_lo, prod_hi);  // product exponent, split between a and b
      const int ea = e / 2, eb = e - ea;
      c.a[j] = random_value(r, fa, ea, ea);
      c.b[j] = random_value(r, fb, eb, eb);
    }
    const int roll = r.uniform(0, 3);
    if (roll == 0) c.c = 0u;
    else if (roll == 1) c.c = 0x80000000u;
    else if (f16acc) c.c = half_to_f32_bits(static_cast<std::uint32_t>(r.uniform(1, 3)) | ((r.next() & 1) ? 0x8000u : 0u));
    else c.c = static_cast<std::uint32_t>(r.uniform(1, 3)) | ((r.next() & 1) ? 0x80000000u : 0u);
    out.push_back(c);
  }
}

// General random cases: inputs with exponents in [lo, hi], C random at the products' scale.
void add_random(std::vector<Case>& out, SplitMix& r, Fmt fa, Fmt fb, int k, int lo, int hi, bool f16acc, int n) {
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    for (int j = 0; j < k; ++j) {
      if (r.uniform(0, 9) == 0) continue;  // a zero
      c.a[j] = random_value(r, fa, lo, hi);
      c.b[j] = random_value(r, fb, lo, hi);
    }
    const int roll = r.uniform(0, 9);
    if (roll == 0) c.c = (r.next() & 1) ? 0x80000000u : 0u;
    else if (f16acc) c.c = random_f16_c(r, 2 * lo, 2 * hi + 4);
    else c.c = (f2u(std::ldexp(1.0f + static_cast<float>(r.uniform(0, (1 << 23) - 1)) * p2(-23), r.uniform(2 * lo, 2 * hi + 4)))) |
               ((r.next() & 1) ? 0x80000000u : 0u);
    out.push_back(c);
  }
}

// The smallest power of two of format f (its subnormal quantum).
int min_exponent(Fmt f) {
  switch (f) {
    case Fmt::bf16: return -133;
    case Fmt::f16: return -24;
    case Fmt::tf32: return -136;
    case Fmt::e4m3: return -9;
    default: return -16;
  }
}

// 2^e split over a and b as evenly as the formats allow (FP32 bits of a, b); e must be reachable.
void split_power(int e, Fmt fa, Fmt fb, bool neg, std::uint32_t& a, std::uint32_t& b) {
  int ea = e / 2;
  if (ea < min_exponent(fa)) ea = min_exponent(fa);
  int eb = e - ea;
  if (eb < min_exponent(fb)) {
    eb = min_exponent(fb);
    ea = e - eb;
  }
  a = pb(ea, neg);
  b = pb(eb);
}

// f16 accumulator: a subnormal C beside a product at the fp16 half quantum 2^-25 (or the formats'
// smallest) and a tiny product below the window: where C's alignment exponent (-14, or its leading
// bit) decides the rounding.
void add_subnormal_c(std::vector<Case>& out, SplitMix& r, Fmt fa, Fmt fb, int k, int n) {
  const int floor_e = min_exponent(fa) + min_exponent(fb);
  const int half = std::max(-25, floor_e);
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    c.c = half_to_f32_bits(static_cast<std::uint32_t>(r.uniform(1, 0x3FF)) | ((r.next() & 3) == 0 ? 0x8000u : 0u));
    const int j0 = r.uniform(0, k - 1), j1 = (j0 + 1 + r.uniform(0, k - 2)) % k;
    split_power(half, fa, fb, r.next() & 1, c.a[j0], c.b[j0]);
    const int tiny_hi = std::max(floor_e, std::min(-30, half - 2));
    split_power(r.uniform(floor_e, tiny_hi), fa, fb, r.next() & 1, c.a[j1], c.b[j1]);
    out.push_back(c);
  }
}

// f16 accumulator, C = +0, every addend below 2^-21: an odd multiple of the fp16 half quantum 2^-25 (a
// rounding tie) and a tiny product of either sign low enough that the E_max floor -21 cuts it and no
// floor keeps it (only fp16 inputs reach that low).
void add_floor_ties(std::vector<Case>& out, SplitMix& r, Fmt fa, Fmt fb, int k, int n) {
  const int floor_e = min_exponent(fa) + min_exponent(fb);
  if (fa != Fmt::f16 || fb != Fmt::f16) return;
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    const int j0 = r.uniform(0, k - 1), j1 = (j0 + 1 + r.uniform(0, k - 2)) % k;
    const bool neg = r.next() & 1;
    c.a[j0] = f2u((neg ? -1.0f : 1.0f) * static_cast<float>(2 * r.uniform(0, 3) + 1) * p2(-12));
    c.b[j0] = pb(-13);
    split_power(r.uniform(std::max(floor_e, -49), -45), fa, fb, (r.next() & 3) == 0 ? !neg : neg, c.a[j1], c.b[j1]);
    out.push_back(c);
  }
}

// The witnesses of issue 25 (inputs and the H200's outputs as quoted there), where the formats hold them.
void add_witnesses(std::vector<Case>& out, const Op& op) {
  const int k = op.k;
  if (op.a == Fmt::bf16 || op.a == Fmt::tf32) {
    Case c = zero_case(k);  // -2^-150 underflows: H200 +0
    c.a[0] = pb(-75, true);
    c.b[0] = pb(-75);
    out.push_back(c);
  }
  if (op.a == Fmt::f16 && op.f16acc) {
    Case c = zero_case(k);  // f16 accumulator tie to zero: H200 0x0000
    c.a[0] = pb(-12, true);
    c.b[0] = pb(-13);
    out.push_back(c);
    c = zero_case(k);  // subnormal C at -14: H200 0x0002
    c.a[0] = pb(-12); c.b[0] = pb(-13);
    c.a[1] = pb(-20); c.b[1] = pb(-20);
    c.c = pb(-23);
    out.push_back(c);
    c = zero_case(k);  // E_max floor -21: H200 0x0101
    c.a[0] = pb(-8); c.b[0] = pb(-8);
    c.a[1] = pb(-12); c.b[1] = pb(-13);
    c.a[2] = pb(-20); c.b[2] = pb(-20);
    out.push_back(c);
  }
  Case z = zero_case(k);  // -0 * 1 + (-0): H200 +0
  z.a[0] = 0x80000000u;
  z.b[0] = f2u(1.0f);
  z.c = 0x80000000u;
  out.push_back(z);
}

// TF32: NaNs whose payload sits (partly) in the low 13 bits the instruction drops, in A, B and C.
void add_tf32_nans(std::vector<Case>& out, int k) {
  const std::uint32_t nans[] = {0x7F800001u, 0x7F800FFFu, 0x7F801FFFu, 0xFF800001u, 0xFF801FFFu, 0x7F802000u,
                                0x7F803FFFu, 0x7FC00000u, 0x7FC00001u, 0x7FBFFFFFu, 0x7FFFFFFFu, 0xFFC00000u};
  const std::uint32_t partners[] = {f2u(1.0f), f2u(-1.0f), 0u, 0x7F800000u, 0xFF800000u, f2u(0.5f)};
  for (std::uint32_t x : nans) {
    for (std::uint32_t y : partners) {
      Case c = zero_case(k);
      c.a[0] = x;
      c.b[0] = y;
      out.push_back(c);
      c = zero_case(k);
      c.a[2] = y;
      c.b[2] = x;
      c.a[1] = f2u(3.0f);
      c.b[1] = f2u(-2.0f);
      c.c = f2u(1.5f);
      out.push_back(c);
    }
    Case c = zero_case(k);  // beside an Inf of either sign
    c.a[0] = x; c.b[0] = f2u(1.0f); c.a[1] = 0xFF800000u; c.b[1] = f2u(1.0f);
    out.push_back(c);
    c.a[1] = 0x7F800000u;
    out.push_back(c);
    c = zero_case(k);  // in C (the accumulator is binary32: not truncated)
    c.a[0] = f2u(1.0f); c.b[0] = f2u(1.0f);
    c.c = x;
    out.push_back(c);
  }
}

// TF32: finite inputs whose low 13 bits are not zero (truncation or rounding on input).
void add_tf32_low_bits(std::vector<Case>& out, SplitMix& r, int k, int n) {
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    for (int j = 0; j < k; ++j) {
      c.a[j] = random_value(r, Fmt::tf32, -8, 8) | static_cast<std::uint32_t>(r.uniform(1, 0x1FFF));
      c.b[j] = random_value(r, Fmt::tf32, -8, 8) | static_cast<std::uint32_t>(r.uniform(0, 0x1FFF));
    }
    c.c = (r.next() & 1) ? random_value(r, Fmt::tf32, -10, 10) | static_cast<std::uint32_t>(r.uniform(0, 0x1FFF)) : 0u;
    out.push_back(c);
  }
}

// C alone (A = B = 0) over bit patterns that an e8m13 or fp16 accumulator would narrow.
void add_c_passthrough(std::vector<Case>& out, SplitMix& r, int k, bool f16acc, int n) {
  for (int i = 0; i < n; ++i) {
    Case c = zero_case(k);
    c.c = f16acc ? half_to_f32_bits(static_cast<std::uint32_t>(r.uniform(0, 0xFFFF)))
                 : static_cast<std::uint32_t>(r.next());
    if (f16acc && (c.c & 0x7F800000u) == 0x7F800000u && (c.c & 0x7FFFFFu)) c.c = f2u(1.0f);  // no NaN C here
    out.push_back(c);
  }
}

// Probe 2 of docs/datapaths.md §7 for any format: products +-p cancel, C = (1 + m) * 2^e swept down.
void add_alignment_sweep(std::vector<Case>& out, Fmt fa, Fmt fb, int k, int pa, int pbx, bool f16acc) {
  for (int e = pa + pbx + 1; e >= pa + pbx - 30; --e) {
    for (int m : {0, 1, 3}) {
      Case c = zero_case(k);
      c.a[0] = pb(pa); c.b[0] = pb(pbx);
      c.a[1] = pb(pa, true); c.b[1] = pb(pbx);
      const float cv = std::ldexp(1.0f + m * 0.25f, e);
      if (f16acc && (e < -24 || e > 15)) continue;
      if (f16acc && e < -14 && m != 0) continue;
      c.c = f2u(cv);
      out.push_back(c);
    }
  }
  (void)fa;
  (void)fb;
}

std::vector<Family> families_for(const Op& op) {
  SplitMix r(kSeed ^ (static_cast<std::uint64_t>(op.k) << 8) ^ (static_cast<std::uint64_t>(op.a) << 16) ^
             (static_cast<std::uint64_t>(op.b) << 20) ^ (op.f16acc ? 0x1000000u : 0u));
  std::vector<Family> fams;
  auto fam = [&](const char* name) -> std::vector<Case>& {
    fams.push_back({name, {}});
    return fams.back().cases;
  };
  add_witnesses(fam("witness"), op);
  add_signed_zeros(fam("signed-zeros"), r, op.k, 200);
  const bool fp8 = op.a == Fmt::e4m3 || op.a == Fmt::e5m2;
  const int lo = op.a == Fmt::e4m3 || op.b == Fmt::e4m3 ? -8 : fp8 ? -14 : op.a == Fmt::f16 ? -12 : -20;
  const int hi = op.f16acc ? 3 : fp8 ? 6 : 8;  // an f16 accumulator overflows above 65504
  add_exact_cancellation(fam("exact-cancellation"), r, op.a, op.b, op.k, lo, hi, 300);
  if (op.f16acc) {
    add_underflow(fam("underflow"), r, op.a, op.b, op.k, -30, -23, true, 1500);
    add_subnormal_c(fam("subnormal-c"), r, op.a, op.b, op.k, 1500);
    add_c_passthrough(fam("c-only"), r, op.k, true, 300);
  } else if (op.a == Fmt::bf16 || op.a == Fmt::tf32) {
    add_underflow(fam("underflow"), r, op.a, op.b, op.k, -160, -146, false, 1500);
  }
  if (op.a == Fmt::tf32) {
    add_tf32_nans(fam("nan-payload"), op.k);
    add_tf32_low_bits(fam("low-bits"), r, op.k, 500);
  }
  if (fp8) {
    if (!op.f16acc) add_c_passthrough(fam("c-only"), r, op.k, false, 300);
    add_alignment_sweep(fam("alignment"), op.a, op.b, op.k, 4, 4, op.f16acc);
  }
  add_random(fam("random"), r, op.a, op.b, op.k, lo, hi, op.f16acc, fp8 ? 1500 : 500);
  // Added for the second session (after the first run's families, which it repeats line for line).
  if (op.f16acc && op.a == Fmt::f16) add_floor_ties(fam("floor-ties"), r, op.a, op.b, op.k, 600);
  return fams;
}

// ---------------------------------------------------------------------------------------------------

std::string binary32(std::uint32_t v) {
  std::string s(32, '0');
  for (int i = 0; i < 32; ++i) s[i] = (v >> (31 - i)) & 1 ? '1' : '0';
  return s;
}

double value_of(std::uint32_t bits) { return static_cast<double>(u2f(bits)); }

// Small integers in every position: exact in every format and accumulator; both wgmma descriptor
// variants are tried, the first that reproduces the exact sums is used.
int layout_check(int op) {
  const Op& o = kOps[op];
  const int rows = rows_of(o);
  SplitMix r(99 + op);
  std::vector<std::uint32_t> av(rows * o.k), bv(8 * o.k), A(rows * 8), B(64), C(rows * 8);
  for (int i = 0; i < rows; ++i) {
    std::vector<std::uint32_t> codes(o.k);
    for (int j = 0; j < o.k; ++j) {
      av[i * o.k + j] = f2u(static_cast<float>(r.uniform(-3, 3)));
      to_code(av[i * o.k + j], o.a, codes[j]);
    }
    pack_row(codes, o.a, &A[i * 8]);
  }
  for (int i = 0; i < 8; ++i) {
    std::vector<std::uint32_t> codes(o.k);
    for (int j = 0; j < o.k; ++j) {
      bv[i * o.k + j] = f2u(static_cast<float>(r.uniform(-3, 3)));
      to_code(bv[i * o.k + j], o.b, codes[j]);
    }
    pack_row(codes, o.b, &B[i * 8]);
  }
  std::vector<double> cv(rows * 8);
  for (int i = 0; i < rows * 8; ++i) {
    cv[i] = r.uniform(-4, 4);
    const std::uint32_t bits = f2u(static_cast<float>(cv[i]));
    std::uint32_t h = 0;
    if (o.f16acc) to_code(bits, Fmt::f16, h);
    C[i] = o.f16acc ? h : bits;
  }
  for (int swap = 0; swap < (o.wgmma ? 2 : 1); ++swap) {
    const auto D = run_tiles(op, A, B, C, 1, swap);
    int bad = 0;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < 8; ++j) {
        double ref = cv[i * 8 + j];
        for (int kk = 0; kk < o.k; ++kk) ref += value_of(av[i * o.k + kk]) * value_of(bv[j * o.k + kk]);
        const std::uint32_t got = o.f16acc ? half_to_f32_bits(D[i * 8 + j]) : D[i * 8 + j];
        bad += value_of(got) != ref;
      }
    std::printf("%-22s layout check (swap=%d): %d / %d wrong\n", o.folder, swap, bad, rows * 8);
    if (bad == 0) return swap;
  }
  return -1;
}

void write_set(const std::string& out_dir, int op, int swap) {
  const Op& o = kOps[op];
  const auto fams = families_for(o);
  std::vector<const Case*> cases;
  for (const auto& f : fams)
    for (const auto& c : f.cases) cases.push_back(&c);
  const int n = static_cast<int>(cases.size());
  const int rows = rows_of(o);
  std::vector<std::uint32_t> A(static_cast<std::size_t>(n) * rows * 8, 0), B(static_cast<std::size_t>(n) * 64, 0),
      C(static_cast<std::size_t>(n) * rows * 8, 0);
  for (int i = 0; i < n; ++i) {
    std::vector<std::uint32_t> ca(o.k), cb(o.k);
    for (int j = 0; j < o.k; ++j) {
      if (!to_code(cases[i]->a[j], o.a, ca[j]) || !to_code(cases[i]->b[j], o.b, cb[j])) {
        std::fprintf(stderr, "%s case %d: element %d not exact in its format\n", o.folder, i, j);
        std::exit(1);
      }
    }
    pack_row(ca, o.a, &A[static_cast<std::size_t>(i) * rows * 8]);
    pack_row(cb, o.b, &B[static_cast<std::size_t>(i) * 64]);
    std::uint32_t c = cases[i]->c;
    if (o.f16acc && !to_code(c, Fmt::f16, c)) {
      std::fprintf(stderr, "%s case %d: C not fp16\n", o.folder, i);
      std::exit(1);
    }
    C[static_cast<std::size_t>(i) * rows * 8] = c;
  }
  const auto D = run_tiles(op, A, B, C, n, swap);
  const std::string dir = out_dir + "/" + o.folder;
  mkdir(dir.c_str(), 0755);
  FILE* fa = std::fopen((dir + "/a.txt").c_str(), "w");
  FILE* fb = std::fopen((dir + "/b.txt").c_str(), "w");
  FILE* fc = std::fopen((dir + "/c.txt").c_str(), "w");
  FILE* fd = std::fopen((dir + "/d.txt").c_str(), "w");
  FILE* ff = std::fopen((dir + "/families.tsv").c_str(), "w");
  if (!fa || !fb || !fc || !fd || !ff) {
    std::fprintf(stderr, "cannot write under %s\n", dir.c_str());
    std::exit(1);
  }
  for (int i = 0; i < n; ++i) {
    for (std::uint32_t w : cases[i]->a) std::fprintf(fa, "%08x ", w);
    for (std::uint32_t w : cases[i]->b) std::fprintf(fb, "%08x ", w);
    std::fprintf(fa, "\n");
    std::fprintf(fb, "\n");
    std::fprintf(fc, "%s\n", binary32(cases[i]->c).c_str());
    const std::uint32_t d = D[static_cast<std::size_t>(i) * rows * 8];
    std::fprintf(fd, "%s\n", binary32(o.f16acc ? half_to_f32_bits(d) : d).c_str());
  }
  std::fprintf(ff, "family\tfirst_line\tlines\n");
  int line = 0;
  for (const auto& f : fams) {
    std::fprintf(ff, "%s\t%d\t%zu\n", f.name.c_str(), line, f.cases.size());
    line += static_cast<int>(f.cases.size());
  }
  for (FILE* f : {fa, fb, fc, fd, ff}) std::fclose(f);
  int negzero = 0;
  for (int i = 0; i < n; ++i) negzero += D[static_cast<std::size_t>(i) * rows * 8] == (o.f16acc ? 0x8000u : 0x80000000u);
  std::printf("%-22s %6d cases written, %d results are -0\n", o.folder, n, negzero);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  g_dry_run = argc > 2 && std::string(argv[2]) == "--dry-run";
  if (!g_dry_run) {
    cudaDeviceProp prop{};
    CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    cudaDriverGetVersion(&driver);
    std::printf("device: %s sm_%d%d, driver API %d\n", prop.name, prop.major, prop.minor, driver);
  }
  int failed = 0;
  for (int op = 0; op < kNumOps; ++op) {
    const int swap = g_dry_run ? 0 : layout_check(op);
    if (swap < 0) {
      std::printf("%s: layout check failed, not measured\n", kOps[op].folder);
      ++failed;
      continue;
    }
    write_set(out_dir, op, swap);
  }
  return failed ? 1 : 0;
}
