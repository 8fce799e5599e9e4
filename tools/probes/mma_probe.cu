// Tensor-core probes for the H200 (docs/datapaths.md §7): probes 1-11 through mma.sync.m16n8k16 and
// wgmma.m64n8k16 (bf16 and f16 inputs, f32 accumulate; f16 accumulate for probe 4), and random
// single-instruction cases with wide exponent spreads, judged on the spot by a small parametric T-FDPA
// model (this file; three variants for the open points O3/O8) and dumped raw (D bits only: the inputs
// are regenerated from the seed by tools/probes/random_cases.hpp) for the golden model to judge.
//
// Build: nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/mma_probe.cu
// Run:   mma_probe <out_dir> <random_cases_per_instruction>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "probe_cuda.cuh"
#include "random_cases.hpp"

using probes::Case;
using probes::DeviceArray;
using probes::smem_desc;

// ---------------------------------------------------------------------------------------------------
// Device side. One instance: A [16 or 64][16] (row-major, 16-bit codes), B [8][16] ([n][k]), C [rows][8]
// f32, D [rows][8] f32 bits.

__device__ __forceinline__ std::uint32_t pack2(std::uint16_t lo, std::uint16_t hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

// Lane (g, t)'s A and B registers of one m16n8k16 instruction, from A [16, 16] and B [8, 16] row-major
// (the PTX ISA's fragment layout for .f16/.bf16).
__device__ void load_ab_fragments(const std::uint16_t* a, const std::uint16_t* b, int g, int t, std::uint32_t (&ar)[4],
                                  std::uint32_t (&br)[2]) {
  ar[0] = pack2(a[g * 16 + 2 * t], a[g * 16 + 2 * t + 1]);
  ar[1] = pack2(a[(g + 8) * 16 + 2 * t], a[(g + 8) * 16 + 2 * t + 1]);
  ar[2] = pack2(a[g * 16 + 2 * t + 8], a[g * 16 + 2 * t + 9]);
  ar[3] = pack2(a[(g + 8) * 16 + 2 * t + 8], a[(g + 8) * 16 + 2 * t + 9]);
  br[0] = pack2(b[g * 16 + 2 * t], b[g * 16 + 2 * t + 1]);
  br[1] = pack2(b[g * 16 + 2 * t + 8], b[g * 16 + 2 * t + 9]);
}

template <bool F16>
__global__ void mma_sync_kernel(const std::uint16_t* A, const std::uint16_t* B, const float* C, std::uint32_t* D,
                                int instances) {
  const int inst = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (inst >= instances) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const std::uint16_t* a = A + static_cast<std::size_t>(inst) * 256;
  const std::uint16_t* b = B + static_cast<std::size_t>(inst) * 128;
  const float* c = C + static_cast<std::size_t>(inst) * 128;
  std::uint32_t* d = D + static_cast<std::size_t>(inst) * 128;
  std::uint32_t ar[4], br[2];
  load_ab_fragments(a, b, g, t, ar, br);
  float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
  if constexpr (F16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]));
  }
  d[g * 8 + 2 * t] = __float_as_uint(acc[0]);
  d[g * 8 + 2 * t + 1] = __float_as_uint(acc[1]);
  d[(g + 8) * 8 + 2 * t] = __float_as_uint(acc[2]);
  d[(g + 8) * 8 + 2 * t + 1] = __float_as_uint(acc[3]);
}

// f16 inputs, f16 accumulator (C and D as f16; C given as f32 values exactly representable in f16).
__global__ void mma_sync_f16acc_kernel(const std::uint16_t* A, const std::uint16_t* B, const float* C,
                                       std::uint32_t* D, int instances) {
  const int inst = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (inst >= instances) return;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const std::uint16_t* a = A + static_cast<std::size_t>(inst) * 256;
  const std::uint16_t* b = B + static_cast<std::size_t>(inst) * 128;
  const float* c = C + static_cast<std::size_t>(inst) * 128;
  std::uint32_t* d = D + static_cast<std::size_t>(inst) * 128;
  std::uint32_t ar[4], br[2];
  load_ab_fragments(a, b, g, t, ar, br);
  std::uint32_t cr[2] = {pack2(__half_as_ushort(__float2half_rn(c[g * 8 + 2 * t])),
                               __half_as_ushort(__float2half_rn(c[g * 8 + 2 * t + 1]))),
                         pack2(__half_as_ushort(__float2half_rn(c[(g + 8) * 8 + 2 * t])),
                               __half_as_ushort(__float2half_rn(c[(g + 8) * 8 + 2 * t + 1])))};
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
      : "+r"(cr[0]), "+r"(cr[1])
      : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), "r"(ar[3]), "r"(br[0]), "r"(br[1]));
  auto widen = [](std::uint16_t h) { return __float_as_uint(__half2float(__ushort_as_half(h))); };
  d[g * 8 + 2 * t] = widen(cr[0] & 0xFFFF);
  d[g * 8 + 2 * t + 1] = widen(cr[0] >> 16);
  d[(g + 8) * 8 + 2 * t] = widen(cr[1] & 0xFFFF);
  d[(g + 8) * 8 + 2 * t + 1] = widen(cr[1] >> 16);
}

template <bool F16>
__global__ void wgmma_kernel(const std::uint16_t* A, const std::uint16_t* B, const float* C, std::uint32_t* D,
                             int instances, int swap_lbo_sbo) {
  __shared__ __align__(128) std::uint16_t sA[64 * 16];
  __shared__ __align__(128) std::uint16_t sB[8 * 16];
  const int inst = blockIdx.x;
  if (inst >= instances) return;
  const int tid = threadIdx.x;
  const std::uint16_t* a = A + static_cast<std::size_t>(inst) * 1024;
  const std::uint16_t* b = B + static_cast<std::size_t>(inst) * 128;
  // Core matrix (row group rg, k group kg) at rg*256 + kg*128 bytes; row r of it at r*16 bytes.
  for (int i = tid; i < 64 * 16; i += 128) {
    const int row = i / 16, k = i % 16;
    sA[(row / 8) * 128 + (k / 8) * 64 + (row % 8) * 8 + (k % 8)] = a[i];
  }
  for (int i = tid; i < 8 * 16; i += 128) {
    const int row = i / 16, k = i % 16;
    sB[(k / 8) * 64 + row * 8 + (k % 8)] = b[i];
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const int warp = tid / 32, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const float* c = C + static_cast<std::size_t>(inst) * 512;
  const int r0 = warp * 16 + g;
  float acc[4] = {c[r0 * 8 + 2 * t], c[r0 * 8 + 2 * t + 1], c[(r0 + 8) * 8 + 2 * t], c[(r0 + 8) * 8 + 2 * t + 1]};
  const std::uint32_t lbo = swap_lbo_sbo ? 256 : 128, sbo = swap_lbo_sbo ? 128 : 256;
  const std::uint64_t da = smem_desc(sA, lbo, sbo), db = smem_desc(sB, lbo, sbo);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  if constexpr (F16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "l"(da), "l"(db));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "l"(da), "l"(db));
  }
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  std::uint32_t* d = D + static_cast<std::size_t>(inst) * 512;
  d[r0 * 8 + 2 * t] = __float_as_uint(acc[0]);
  d[r0 * 8 + 2 * t + 1] = __float_as_uint(acc[1]);
  d[(r0 + 8) * 8 + 2 * t] = __float_as_uint(acc[2]);
  d[(r0 + 8) * 8 + 2 * t + 1] = __float_as_uint(acc[3]);
}

// ---------------------------------------------------------------------------------------------------
// Host: run a batch of cases (one dot product each: a[16], b[16], c) through one instruction kind.
// Cases are packed rows x 8 outputs per instance: output (i, j) uses A row i, B row j, C[i][j] — so each
// instance holds `rows` distinct a-vectors but only 8 b-vectors. For probes (independent cases) each case
// gets its own instance with the vector in row 0 / column 0 and zeros elsewhere.

enum class Instr { mma_bf16, mma_f16, wgmma_bf16, wgmma_f16, mma_f16acc };
const char* instr_name(Instr i) {
  switch (i) {
    case Instr::mma_bf16: return "mma.sync.m16n8k16.f32.bf16";
    case Instr::mma_f16: return "mma.sync.m16n8k16.f32.f16";
    case Instr::wgmma_bf16: return "wgmma.m64n8k16.f32.bf16";
    case Instr::wgmma_f16: return "wgmma.m64n8k16.f32.f16";
    case Instr::mma_f16acc: return "mma.sync.m16n8k16.f16.f16";
  }
  return "?";
}
bool is_f16(Instr i) { return i == Instr::mma_f16 || i == Instr::wgmma_f16 || i == Instr::mma_f16acc; }
int rows_of(Instr i) { return (i == Instr::wgmma_bf16 || i == Instr::wgmma_f16) ? 64 : 16; }

int g_swap = 0;  // wgmma descriptor variant found by the layout self-check

// Runs instances given as full tiles.
std::vector<std::uint32_t> run_tiles(Instr ins, const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B,
                                     const std::vector<float>& C, int instances) {
  const int rows = rows_of(ins);
  const DeviceArray<std::uint16_t> dA(A), dB(B);
  const DeviceArray<float> dC(C);
  const DeviceArray<std::uint32_t> dD(static_cast<std::size_t>(instances) * rows * 8);
  dD.poison();
  const std::uint16_t *a = dA.get(), *b = dB.get();
  const float* c = dC.get();
  std::uint32_t* d = dD.get();
  const int warps_of_8 = (instances + 7) / 8;
  switch (ins) {
    case Instr::mma_bf16: mma_sync_kernel<false><<<warps_of_8, 256>>>(a, b, c, d, instances); break;
    case Instr::mma_f16: mma_sync_kernel<true><<<warps_of_8, 256>>>(a, b, c, d, instances); break;
    case Instr::mma_f16acc: mma_sync_f16acc_kernel<<<warps_of_8, 256>>>(a, b, c, d, instances); break;
    case Instr::wgmma_bf16: wgmma_kernel<false><<<instances, 128>>>(a, b, c, d, instances, g_swap); break;
    case Instr::wgmma_f16: wgmma_kernel<true><<<instances, 128>>>(a, b, c, d, instances, g_swap); break;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  return dD.to_host();
}

// One case per instance, in row 0 / column 0.
std::vector<std::uint32_t> run_cases(Instr ins, const std::vector<Case>& cases) {
  const int rows = rows_of(ins);
  const int n = static_cast<int>(cases.size());
  std::vector<std::uint16_t> A(static_cast<std::size_t>(n) * rows * 16, 0), B(static_cast<std::size_t>(n) * 128, 0);
  std::vector<float> C(static_cast<std::size_t>(n) * rows * 8, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 16; ++k) {
      A[static_cast<std::size_t>(i) * rows * 16 + k] = probes::to_code(cases[i].a[k], is_f16(ins));
      B[static_cast<std::size_t>(i) * 128 + k] = probes::to_code(cases[i].b[k], is_f16(ins));
    }
    C[static_cast<std::size_t>(i) * rows * 8] = cases[i].c;
  }
  const auto D = run_tiles(ins, A, B, C, n);
  std::vector<std::uint32_t> out(n);
  for (int i = 0; i < n; ++i) out[i] = D[static_cast<std::size_t>(i) * rows * 8];
  return out;
}

// ---------------------------------------------------------------------------------------------------

struct Probe {
  std::string id;
  std::string what;
  Case c;
};

std::vector<Probe> probe_list() {
  std::vector<Probe> p;
  auto zero = [] { Case c{}; return c; };
  auto bits = [](std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; };
  // 1: C pass-through
  const std::uint32_t cs[] = {0x3F800001u, 0x00000001u, 0x807FFFFFu, 0x80000000u, 0x00000000u, 0x7F7FFFFFu,
                              0xFF7FFFFFu, 0x7FC00001u, 0xFFFFFFFFu, 0x7F800000u, 0xFF800000u, 0x12345678u};
  for (std::uint32_t u : cs) {
    Case c = zero();
    c.c = bits(u);
    char name[32];
    std::snprintf(name, sizeof name, "1 C=%08x", u);
    p.push_back({name, "A=B=0: D == C?", c});
  }
  // 2: alignment width (C = 2^e with products +-2^14 cancelling)
  for (int e = 14; e >= -20; e -= (e > -8 ? 2 : 1)) {
    Case c = zero();
    c.a[0] = 128.0f; c.a[1] = -128.0f; c.b[0] = 128.0f; c.b[1] = 128.0f;
    c.c = std::ldexp(1.0f, e);
    p.push_back({"2 C=2^" + std::to_string(e), "F: last surviving e", c});
  }
  for (int e = -8; e >= -14; --e) {  // small term as a 3rd product
    Case c = zero();
    c.a[0] = 128.0f; c.a[1] = -128.0f; c.b[0] = 128.0f; c.b[1] = 128.0f;
    c.a[2] = std::ldexp(1.0f, (e >= 0 ? e + 1 : e) / 2); c.b[2] = std::ldexp(1.0f, e - (e >= 0 ? e + 1 : e) / 2);
    p.push_back({"2p prod=2^" + std::to_string(e), "C joint vs product", c});
  }
  // 3: addend rounding with u = 2^-11
  const float u = std::ldexp(1.0f, -11);
  const float fr[] = {0.75f, -0.75f, 0.25f, 0.5f, -0.5f, 1.5f};
  for (float f : fr) {
    Case c = zero();
    c.a[0] = 128.0f; c.a[1] = -128.0f; c.b[0] = 128.0f; c.b[1] = 128.0f;
    c.c = f * u;
    p.push_back({"3 C=" + std::to_string(f) + "u", "trunc toward zero", c});
  }
  // 4: final rounding
  {
    Case c = zero();
    for (int k = 0; k < 4; ++k) { c.a[k] = 1.0f; c.b[k] = 1.0f; }
    c.c = 1.0f + std::ldexp(1.0f, -22) + std::ldexp(1.0f, -23);
    p.push_back({"4 +", "RZ: 5.0", c});
    for (int k = 0; k < 4; ++k) c.b[k] = -1.0f;
    c.c = -c.c;
    p.push_back({"4 -", "RZ: -5.0", c});
    Case h = zero();
    for (int k = 0; k < 4; ++k) { h.a[k] = 1.0f; h.b[k] = 1.0f; }
    h.c = 1.0f + std::ldexp(1.0f, -9) + std::ldexp(1.0f, -10);
    p.push_back({"4 f16acc", "f16 out RNE: 5+2^-8", h});
  }
  // 5: group size
  for (int j = 1; j < 16; ++j) {
    Case c = zero();
    c.c = 1.0f + std::ldexp(1.0f, -23);
    c.a[0] = 1.0f; c.b[0] = 1.0f;
    c.a[j] = std::ldexp(1.0f, -23); c.b[j] = 1.0f;
    p.push_back({"5 j=" + std::to_string(j), "G=16: 0x40000001", c});
  }
  // 6: summation tree: X = 2^7, y = 2^-9
  for (int i = 0; i < 16; ++i) {
    Case c = zero();
    for (int k = 0; k < 16; ++k) { c.a[k] = std::ldexp(1.0f, -9); c.b[k] = std::ldexp(1.0f, -9); }
    c.a[i] = 128.0f; c.b[i] = 128.0f;
    c.c = -16384.0f;
    p.push_back({"6 i=" + std::to_string(i), "fused: 0", c});
  }
  // 7: unnormalised products
  {
    Case c = zero();
    c.a[0] = 64.0f; c.a[1] = -64.0f; c.b[0] = 128.0f; c.b[1] = 128.0f; c.c = std::ldexp(1.0f, -12);
    p.push_back({"7 calib", "0x39800000", c});
    c.a[0] = 96.0f; c.a[1] = -96.0f; c.b[0] = 192.0f; c.b[1] = 192.0f;
    p.push_back({"7 test", "0x39800000 (unnormalised)", c});
    c.a[0] = 144.0f; c.a[1] = -144.0f; c.b[0] = 128.0f; c.b[1] = 128.0f;
    p.push_back({"7 control", "0", c});
  }
  // 8: per-addend truncation
  {
    Case c = zero();
    c.c = 1.0f; c.a[0] = -std::ldexp(1.0f, -26); c.b[0] = 1.0f;
    p.push_back({"8 -2^-26", "1.0 0x3F800000", c});
    c.a[0] = -std::ldexp(1.0f, -25);
    p.push_back({"8 -2^-25", "0x3F7FFFFF", c});
  }
  // 9: subnormals, window floor
  {
    Case c = zero();
    c.a[0] = std::ldexp(1.0f, -133); c.b[0] = 128.0f;
    p.push_back({"9a", "2^-126 0x00800000", c});
    c = zero(); c.a[0] = std::ldexp(1.0f, -126); c.b[0] = 0.5f;
    p.push_back({"9b", "2^-127 0x00400000", c});
    c = zero(); c.c = bits(0x00012345u);
    p.push_back({"9c", "C subnormal unchanged", c});
    c = zero();
    for (int k = 0; k < 8; ++k) { c.a[k] = std::ldexp(1.0f, -76); c.b[k] = std::ldexp(1.0f, -76); }
    p.push_back({"9d 8x2^-152", "MMA-Sim 0; K-M 0x00000001", c});
    c = zero();
    for (int k = 0; k < 4; ++k) { c.a[k] = std::ldexp(1.0f, -75); c.b[k] = std::ldexp(1.0f, -76); }
    p.push_back({"9d' 4x2^-151", "both 0x00000001", c});
    c = zero();
    for (int k = 0; k < 16; ++k) { c.a[k] = std::ldexp(1.0f, -80); c.b[k] = std::ldexp(1.0f, -80); }
    p.push_back({"9e 16x2^-160", "floor -133: 0", c});
    c = zero();
    for (int k = 0; k < 16; ++k) { c.a[k] = std::ldexp(1.0f, -77); c.b[k] = std::ldexp(1.0f, -77); }
    p.push_back({"9f 16x2^-154", "floor probe", c});
    c = zero();
    for (int k = 0; k < 16; ++k) { c.a[k] = std::ldexp(1.0f, -76); c.b[k] = std::ldexp(1.0f, -77); }
    p.push_back({"9g 16x2^-153", "floor probe", c});
  }
  // 10: specials and overflow
  {
    Case c = zero();
    c.a[0] = bits(0x7FC12345u); c.b[0] = 1.0f;
    p.push_back({"10 NaN payload", "0x7FFFFFFF", c});
    c = zero(); c.a[0] = INFINITY; c.b[0] = 1.0f; c.a[1] = -INFINITY; c.b[1] = 1.0f;
    p.push_back({"10 Inf-Inf", "0x7FFFFFFF", c});
    c = zero(); c.a[0] = 0.0f; c.b[0] = INFINITY;
    p.push_back({"10 0*Inf", "0x7FFFFFFF", c});
    c = zero(); c.a[0] = std::ldexp(1.0f, 127); c.b[0] = 1.0f; c.a[1] = std::ldexp(1.0f, 127); c.b[1] = 1.0f;
    p.push_back({"10 2^128", "+Inf (model) / FLT_MAX (RZ sat)", c});
    c = zero(); c.c = bits(0x7F7FFFFFu); c.a[0] = std::ldexp(1.0f, 127); c.b[0] = 1.0f;
    p.push_back({"10 FLT_MAX+2^127", "+Inf?", c});
    c = zero(); c.c = bits(0x7F7FFFFFu); c.a[0] = -std::ldexp(1.0f, 100); c.b[0] = 1.0f;
    p.push_back({"10 FLT_MAX-2^100", "0x7F7FFFFE?", c});
  }
  // 11: zeros in E_max
  {
    Case c = zero();
    c.a[0] = 1.0f; c.a[1] = -1.0f; c.a[2] = 0.0f; c.b[0] = 1.0f; c.b[1] = 1.0f; c.b[2] = std::ldexp(1.0f, 127);
    c.c = std::ldexp(1.0f, -25);
    p.push_back({"11", "MMA-Sim HEAD 0; K-M 0x33000000", c});
    c.b[2] = std::ldexp(1.0f, 100);
    p.push_back({"11' b=2^100", "same question", c});
    // zero C's exponent: C = +0 with tiny products only (floor)
    Case z = zero();
    z.a[0] = std::ldexp(1.0f, -100); z.b[0] = std::ldexp(1.0f, -40); z.a[1] = std::ldexp(1.0f, -120); z.b[1] = std::ldexp(1.0f, -45);
    p.push_back({"11z 2^-140+2^-165", "zero C exponent / floor", z});
    // O4: sign of exact zero
    Case s = zero(); s.c = -0.0f;
    p.push_back({"O4 C=-0", "+0 predicted", s});
    s = zero(); s.a[0] = 1.0f; s.b[0] = -1.0f; s.c = -0.0f;
    p.push_back({"O4 -1 + -0", "-1", s});
    s = zero(); s.a[0] = 1.0f; s.b[0] = -1.0f; s.c = 1.0f;
    p.push_back({"O4 -1 + 1", "+0", s});
    s = zero(); s.a[0] = -0.0f; s.b[0] = 1.0f; s.c = -0.0f;
    p.push_back({"O4 -0*1 + -0", "?", s});
  }
  return p;
}

int main(int argc, char** argv) {
  const std::string out_dir = argc > 1 ? argv[1] : ".";
  const long long n_random = argc > 2 ? std::atoll(argv[2]) : 1000000;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s sm_%d%d, %d SMs\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

  // wgmma layout self-check: small integers, exact in any datapath; try both descriptor variants.
  {
    std::vector<Case> cs;
    for (int i = 0; i < 4; ++i) {
      Case c{};
      for (int k = 0; k < 16; ++k) { c.a[k] = static_cast<float>((k * 3 + i) % 7 - 3); c.b[k] = static_cast<float>((k * 5 + 2 * i) % 5 - 2); }
      c.c = static_cast<float>(i);
      cs.push_back(c);
    }
    // Full-tile check: random small integers in every position.
    const int rows = 64;
    std::vector<std::uint16_t> A(rows * 16), B(128);
    std::vector<float> C(rows * 8);
    probes::SplitMix rng(99);
    std::vector<float> af(rows * 16), bf(128);
    for (int i = 0; i < rows * 16; ++i) { af[i] = static_cast<float>(static_cast<int>(rng.next() % 9) - 4); A[i] = probes::to_code(af[i], false); }
    for (int i = 0; i < 128; ++i) { bf[i] = static_cast<float>(static_cast<int>(rng.next() % 9) - 4); B[i] = probes::to_code(bf[i], false); }
    for (int i = 0; i < rows * 8; ++i) C[i] = static_cast<float>(static_cast<int>(rng.next() % 9) - 4);
    for (int swap = 0; swap < 2; ++swap) {
      g_swap = swap;
      const auto D = run_tiles(Instr::wgmma_bf16, A, B, C, 1);
      int bad = 0;
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < 8; ++j) {
          float ref = C[i * 8 + j];
          for (int k = 0; k < 16; ++k) ref += af[i * 16 + k] * bf[j * 16 + k];
          float got;
          std::memcpy(&got, &D[i * 8 + j], 4);
          bad += got != ref;
        }
      std::printf("wgmma layout check (swap=%d): %d / 512 wrong\n", swap, bad);
      if (bad == 0) break;
      if (swap == 1) std::printf("WARNING: wgmma layout check failed for both descriptor variants\n");
    }
    // mma.sync full-tile check
    std::vector<std::uint16_t> A16(256);
    std::vector<float> C16(128);
    for (int i = 0; i < 256; ++i) A16[i] = A[i];
    for (int i = 0; i < 128; ++i) C16[i] = C[i];
    const auto D = run_tiles(Instr::mma_bf16, A16, B, C16, 1);
    int bad = 0;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float ref = C16[i * 8 + j];
        for (int k = 0; k < 16; ++k) ref += af[i * 16 + k] * bf[j * 16 + k];
        float got;
        std::memcpy(&got, &D[i * 8 + j], 4);
        bad += got != ref;
      }
    std::printf("mma.sync layout check: %d / 128 wrong\n", bad);
  }

  // ---- probes ----
  const auto plist = probe_list();
  std::vector<Case> cases;
  for (const auto& p : plist) cases.push_back(p.c);
  const Instr kinds[] = {Instr::mma_bf16, Instr::wgmma_bf16, Instr::mma_f16, Instr::wgmma_f16, Instr::mma_f16acc};
  std::vector<std::vector<std::uint32_t>> results;
  for (Instr k : kinds) results.push_back(run_cases(k, cases));
  std::string path = out_dir + "/probes.tsv";
  FILE* f = std::fopen(path.c_str(), "w");
  std::printf("\n%-22s %-34s %-10s %-10s | %-10s %-10s %-10s %-10s %-10s\n", "probe", "expectation", "KM-model",
              "MMASim", "mma-bf16", "wgmma-bf16", "mma-f16", "wgmma-f16", "f16acc");
  if (f) std::fprintf(f, "probe\texpectation\tmodel_km\tmodel_mmasim\tmma_bf16\twgmma_bf16\tmma_f16\twgmma_f16\tmma_f16acc\tf16_representable\n");
  for (std::size_t i = 0; i < plist.size(); ++i) {
    const std::uint32_t km = probes::model(plist[i].c, probes::Variant::km, false);
    const std::uint32_t ms = probes::model(plist[i].c, probes::Variant::mmasim_head, false);
    const bool f16ok = probes::representable_f16(plist[i].c);
    std::printf("%-22s %-34s %08x   %08x   | %08x   %08x   %08x%s  %08x%s  %08x%s\n", plist[i].id.c_str(),
                plist[i].what.c_str(), km, ms, results[0][i], results[1][i], results[2][i], f16ok ? " " : "*",
                results[3][i], f16ok ? " " : "*", results[4][i], f16ok ? " " : "*");
    if (f)
      std::fprintf(f, "%s\t%s\t%08x\t%08x\t%08x\t%08x\t%08x\t%08x\t%08x\t%d\n", plist[i].id.c_str(),
                   plist[i].what.c_str(), km, ms, results[0][i], results[1][i], results[2][i], results[3][i],
                   results[4][i], f16ok ? 1 : 0);
  }
  if (f) std::fclose(f);
  std::printf("(* = inputs not exactly representable in fp16: f16 columns not meaningful)\n");

  // ---- random single-instruction cases ----
  const Instr rkinds[] = {Instr::mma_bf16, Instr::wgmma_bf16, Instr::mma_f16, Instr::wgmma_f16};
  std::printf("\nrandom cases: %lld per instruction (seed %llu)\n", n_random,
              static_cast<unsigned long long>(probes::kSeed));
  std::printf("%-28s %10s %12s %12s %12s %12s\n", "instruction", "cases", "KM(-133)", "MMASim-HEAD", "nofloor",
              "KM+C0=-126");
  for (Instr k : rkinds) {
    const bool f16 = is_f16(k);
    const int rows = rows_of(k);
    const long long per_instance = static_cast<long long>(rows) * 8;
    const int instances = static_cast<int>((n_random + per_instance - 1) / per_instance);
    std::vector<std::uint16_t> A(static_cast<std::size_t>(instances) * rows * 16), B(static_cast<std::size_t>(instances) * 128);
    std::vector<float> C(static_cast<std::size_t>(instances) * rows * 8);
    probes::fill_random(f16, rows, instances, A, B, C);
    const auto D = run_tiles(k, A, B, C, instances);
    long long mism[4] = {0, 0, 0, 0};
    long long total = 0;
    std::vector<long long> first_bad;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int inst = 0; inst < instances; ++inst) {
      long long local[4] = {0, 0, 0, 0};
      for (int i = 0; i < rows; ++i)
        for (int j = 0; j < 8; ++j) {
          Case c{};
          for (int kk = 0; kk < 16; ++kk) {
            c.a[kk] = probes::from_code(A[(static_cast<std::size_t>(inst) * rows + i) * 16 + kk], f16);
            c.b[kk] = probes::from_code(B[(static_cast<std::size_t>(inst) * 8 + j) * 16 + kk], f16);
          }
          c.c = C[(static_cast<std::size_t>(inst) * rows + i) * 8 + j];
          const std::uint32_t d = D[(static_cast<std::size_t>(inst) * rows + i) * 8 + j];
          local[0] += probes::model(c, probes::Variant::km, f16) != d;
          local[1] += probes::model(c, probes::Variant::mmasim_head, f16) != d;
          local[2] += probes::model(c, probes::Variant::no_floor, f16) != d;
          local[3] += probes::model(c, probes::Variant::km_zero_c, f16) != d;
          ++total;
        }
#pragma omp critical
      for (int v = 0; v < 4; ++v) mism[v] += local[v];
    }
    std::printf("%-28s %10lld %12lld %12lld %12lld %12lld\n", instr_name(k), total, mism[0], mism[1], mism[2], mism[3]);
    // Print a few KM mismatches in full.
    int shown = 0;
    for (int inst = 0; inst < instances && shown < 5; ++inst)
      for (int i = 0; i < rows && shown < 5; ++i)
        for (int j = 0; j < 8 && shown < 5; ++j) {
          Case c{};
          for (int kk = 0; kk < 16; ++kk) {
            c.a[kk] = probes::from_code(A[(static_cast<std::size_t>(inst) * rows + i) * 16 + kk], f16);
            c.b[kk] = probes::from_code(B[(static_cast<std::size_t>(inst) * 8 + j) * 16 + kk], f16);
          }
          c.c = C[(static_cast<std::size_t>(inst) * rows + i) * 8 + j];
          const std::uint32_t d = D[(static_cast<std::size_t>(inst) * rows + i) * 8 + j];
          const std::uint32_t m = probes::model(c, probes::Variant::km, f16);
          if (m != d) {
            ++shown;
            std::printf("  KM mismatch: hw %08x model %08x mmasim %08x | C %08x a,b:", d, m,
                        probes::model(c, probes::Variant::mmasim_head, f16), probes::f2u(c.c));
            for (int kk = 0; kk < 16; ++kk)
              if (c.a[kk] != 0.0f && c.b[kk] != 0.0f) std::printf(" %a*%a", c.a[kk], c.b[kk]);
            std::printf("\n");
          }
        }
    const std::string dump = out_dir + "/random_" + std::string(f16 ? "f16" : "bf16") +
                             (rows == 64 ? "_wgmma" : "_mma") + ".bin";
    if (FILE* g = std::fopen(dump.c_str(), "wb")) {
      const long long count = std::min<long long>(static_cast<long long>(D.size()), 1000000);
      std::fwrite(D.data(), 4, static_cast<std::size_t>(count), g);
      std::fclose(g);
    }
  }
  return 0;
}
