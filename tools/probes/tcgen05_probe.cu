// tcgen05.mma measurements on sm_100a (B200/GB200), written in the vendored measurement format
// (tests/data/tensorcore_corners/README.md) for `fp4sim datapath identify` (docs/datapaths.md §8.3). The inputs
// come from a folder of cases (a, b, c and for block-scaled kinds sa, sb, as .txt): the H200 corner folders
// (the O9/O11/floor families on which the sm100 rows and the Hopper rows differ) or the block-scaled cases of
// tools/probes/blockscale_cases.cpp; this program only runs them. It has been compiled (nvcc 13.0,
// -gencode=arch=compute_100a,code=sm_100a), never run: no sm_100 GPU was at hand.
//
// PTX facts used (PTX ISA 9.x, §9.7.16 "TensorCore 5th Generation Family Instructions"):
// * tcgen05.alloc/dealloc.cta_group::1 (one warp; the address lands in shared memory), 128 columns;
// * tcgen05.mma.cta_group::1.kind::{f16,tf32,f8f6f4} [d], a-desc, b-desc, idesc, enable-input-d, and
//   tcgen05.mma.cta_group::1.kind::{mxf8f6f4,mxf4nvf4}.block_scale{.scale_vec::NX} [d], a-desc, b-desc, idesc,
//   [scale-A], [scale-B], enable-input-d; A and B from shared memory, K-major, no swizzle (core matrices of
//   8 rows x 16 bytes, 128 B each; LBO = the next core matrix along K, SBO = along M/N; bits 46-48 = 0b001);
// * the instruction descriptor (Tables 42-44): dtype bits 4-5 (F16 0, F32 1), atype 7-9, btype 10-12,
//   N >> 3 at 17-22, M >> 4 at 24-28 (f16/tf32/f8f6f4) or M >> 7 at 27-28 (block-scaled; scale type at bit 23:
//   UE8M0 1, UE4M3 0; scale-factor ids at 4-5 and 29-30, 0 here);
// * M = 128 with cta_group::1: row i of D is TMEM lane i, column j TMEM column j (Layout D); a 16-bit D sits in
//   the low half of its 32-bit word; scale factors of A and B in TMEM, replicated over all lane partitions.
// * FP6/FP4 operands of kind::f8f6f4 / mxf8f6f4 use a padded 8-bit container whose bit placement the PTX text
//   gives only as a figure: not probed (e4m3 and e5m2 only); kind::mxf4nvf4 takes packed e2m1 (element 2i in
//   the low nibble of byte i).
// The probe is independent of the M/N lane mapping: every row of A holds the case's a, every column of B its
// b, every element of C its c, every scale word the case's scales, so all 128 x 16 outputs are the case's D
// (checked). The K mapping (and the scale-byte to block mapping) is checked before the cases run: a one-hot a
// and b at each k, scales 2^blk on block blk, must give 4^blk (a mismatch aborts, no file written).
//
// Build: nvcc -O2 -std=c++17 -gencode=arch=compute_100a,code=sm_100a tools/probes/tcgen05_probe.cu
// Run:   tcgen05_probe <cases folder> <out folder>; the folder name says the instruction, as identify reads it:
//        …_{bf16,f16}_f32, …_f16_f16, …_tf32_f32, …_<e4m3|e5m2>_<e4m3|e5m2>_<f32|f16> (kind::f8f6f4),
//        …_<e4m3|e5m2>_<e4m3|e5m2>_ue8m0_block32_f32 (kind::mxf8f6f4), …_e2m1_<ue4m3|ue8m0>_block16_f32 and
//        …_e2m1_ue8m0_block32_f32 (kind::mxf4nvf4); writes <out folder>/<same name>/{a,b,c,[sa,sb,]d}.txt.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "probe_cuda.cuh"
#include "measurement_text.hpp"

namespace {

enum class Kind : int { f16, tf32, f8f6f4, mxf8f6f4, mxf4nvf4_4x, mxf4nvf4_2x };

constexpr int kM = 128, kN = 16;   // one CTA of 128 threads, TMEM lane = row of D
constexpr int kRowBytes = 32;      // every kind's K of one instruction is 32 bytes of a K-major row
constexpr int kMaxInstr = 4;       // K up to four instructions per line (a chain from C)
constexpr int kSfaColumn = 32, kSfbColumn = 64, kTmemColumns = 128;

struct Instr {
  Kind kind;
  int k = 0;             // elements of one instruction
  int elem_bits = 0;     // 32 (tf32), 16, 8, 4
  std::uint32_t idesc = 0;
  bool f16_out = false;
  int block = 0, blocks = 0;  // block-scaled: elements per scale, scales per instruction
};

// One case as the device reads it: the bytes of one K-major row of A and of B, C, the scale words.
struct Packed {
  std::uint8_t a[kRowBytes * kMaxInstr], b[kRowBytes * kMaxInstr];
  std::uint32_t c;
  std::uint32_t sfa[kMaxInstr], sfb[kMaxInstr];  // the scale bytes of one instruction, block j in byte j
};

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// K-major, no swizzle: core matrix (8 rows x 16 B) of rows 8i.. and K bytes 16j.. at (i * kc + j) * 128.
__device__ __forceinline__ int smem_offset(int row, int kbyte, int kc) {
  return ((row / 8) * kc + kbyte / 16) * 128 + (row % 8) * 16 + kbyte % 16;
}

__device__ __forceinline__ std::uint64_t umma_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4);
  d |= static_cast<std::uint64_t>((lbo & 0x3FFFF) >> 4) << 16;
  d |= static_cast<std::uint64_t>((sbo & 0x3FFFF) >> 4) << 32;
  d |= std::uint64_t{1} << 46;  // fixed 0b001 (tcgen05), base offset 0, relative LBO, no swizzle
  return d;
}

template <Kind K>
__device__ __forceinline__ void issue(std::uint32_t d_tmem, std::uint64_t a, std::uint64_t b, std::uint32_t idesc,
                                      std::uint32_t sfa, std::uint32_t sfb) {
  const std::uint32_t accumulate = 1;  // C was stored in D first
  if constexpr (K == Kind::f16) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(accumulate));
  } else if constexpr (K == Kind::tf32) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::tf32 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(accumulate));
  } else if constexpr (K == Kind::f8f6f4) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}\n"
                 :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(accumulate));
  } else if constexpr (K == Kind::mxf8f6f4) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%0], %1, %2, %3, [%4], [%5], p;\n}\n"
                 :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(sfa), "r"(sfb), "r"(accumulate));
  } else if constexpr (K == Kind::mxf4nvf4_4x) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X [%0], %1, %2, %3, [%4], [%5], p;\n}\n"
                 :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(sfa), "r"(sfb), "r"(accumulate));
  } else {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::2X [%0], %1, %2, %3, [%4], [%5], p;\n}\n"
                 :: "r"(d_tmem), "l"(a), "l"(b), "r"(idesc), "r"(sfa), "r"(sfb), "r"(accumulate));
  }
}

__device__ __forceinline__ void fence_before() { asm volatile("tcgen05.fence::before_thread_sync;\n" ::: "memory"); }
__device__ __forceinline__ void fence_after() { asm volatile("tcgen05.fence::after_thread_sync;\n" ::: "memory"); }

// One CTA per case: A [128 x K] and B [16 x K] (both K-major) filled with the case's row, C and the scales
// stored into TMEM, the chain of instructions issued by one thread, D read back and compared across the tile.
template <Kind K>
__global__ void run_cases(const Packed* cases, int instructions, std::uint32_t idesc, std::uint32_t* d_out,
                          std::uint32_t* disagree) {
  extern __shared__ __align__(1024) std::uint8_t smem[];
  __shared__ std::uint32_t tmem_base;
  __shared__ __align__(8) std::uint64_t mbar;
  const Packed& p = cases[blockIdx.x];
  const int tid = threadIdx.x, warp = tid / 32;
  const int row_bytes = kRowBytes * instructions, kc = row_bytes / 16;
  std::uint8_t* sa = smem;
  std::uint8_t* sb = smem + kM * row_bytes;
  for (int i = tid; i < kM * row_bytes; i += blockDim.x) sa[smem_offset(i / row_bytes, i % row_bytes, kc)] = p.a[i % row_bytes];
  for (int i = tid; i < kN * row_bytes; i += blockDim.x) sb[smem_offset(i / row_bytes, i % row_bytes, kc)] = p.b[i % row_bytes];
  if (warp == 0) {
    asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;\n"
                 :: "r"(smem_u32(&tmem_base)), "r"(kTmemColumns));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;\n");
  }
  if (tid == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"(smem_u32(&mbar)));
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the generic-proxy writes, seen by the MMA
  fence_before();
  __syncthreads();
  fence_after();
  const std::uint32_t tmem = tmem_base;
  const std::uint32_t lanes = tmem + (static_cast<std::uint32_t>(warp * 32) << 16);  // this warp's 32 lanes
  for (int col = 0; col < kN; ++col)
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};\n" :: "r"(lanes + col), "r"(p.c));
  for (int i = 0; i < instructions; ++i) {
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};\n" :: "r"(lanes + kSfaColumn + 4 * i), "r"(p.sfa[i]));
    asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};\n" :: "r"(lanes + kSfbColumn + 4 * i), "r"(p.sfb[i]));
  }
  asm volatile("tcgen05.wait::st.sync.aligned;\n" ::: "memory");
  fence_before();
  __syncthreads();
  fence_after();
  if (tid == 0) {
    for (int i = 0; i < instructions; ++i) {
      // instruction i reads K bytes 32i.., the core matrices 2i and 2i + 1 of each 8-row group
      const std::uint64_t da = umma_desc(smem_u32(sa) + 256 * i, 128, kc * 128);
      const std::uint64_t db = umma_desc(smem_u32(sb) + 256 * i, 128, kc * 128);
      issue<K>(tmem, da, db, idesc, tmem + kSfaColumn + 4 * i, tmem + kSfbColumn + 4 * i);
    }
    asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];\n"
                 :: "r"(smem_u32(&mbar)) : "memory");
  }
  asm volatile("{\n.reg .pred done;\nwait_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
               "@!done bra wait_%=;\n}\n" :: "r"(smem_u32(&mbar)) : "memory");
  fence_after();
  std::uint32_t out[kN];
  for (int col = 0; col < kN; ++col)
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%0}, [%1];\n" : "=r"(out[col]) : "r"(lanes + col));
  asm volatile("tcgen05.wait::ld.sync.aligned;\n" ::: "memory");
  __shared__ std::uint32_t first;
  if (tid == 0) first = out[0];
  __syncthreads();
  for (int col = 0; col < kN; ++col)
    if (out[col] != first) atomicAdd(disagree, 1u);
  if (tid == 0) d_out[blockIdx.x] = first;
  fence_before();
  __syncthreads();
  if (warp == 0) asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;\n" :: "r"(tmem), "r"(kTmemColumns));
}

// ---------------------------------------------------------------------------------------------------
// Host: the folder's tokens as element bytes, the run, the files.

using probe_text::as_float;
using probe_text::fail;
using probe_text::hex_words;
using probe_text::lines_of;

// The value of a code of an 8-bit or smaller IEEE-like format (e4m3: no Inf, NaN at S.1111.111; e2m1 finite).
float small_value(int code, int e, int m, bool fn) {
  const int bias = (1 << (e - 1)) - 1, field = (code >> m) & ((1 << e) - 1), frac = code & ((1 << m) - 1);
  const float sign = (code >> (e + m)) & 1 ? -1.0f : 1.0f;
  if (fn && e == 4 && field == 15 && frac == 7) return NAN;
  if (!fn && e == 5 && field == 31) return frac ? NAN : sign * INFINITY;
  if (field == 0) return sign * std::ldexp(static_cast<float>(frac), 1 - bias - m);
  return sign * std::ldexp(1.0f + static_cast<float>(frac) / (1 << m), field - bias);
}

// The code of `bits` in the element format (exact, NaN to the format's NaN with the token's sign).
std::uint32_t encode(const std::string& fmt, std::uint32_t bits) {
  const float v = as_float(bits);
  if (fmt == "tf32") return bits;
  if (fmt == "bf16") {
    if (bits & 0xFFFF) fail("token " + std::to_string(bits) + " is not a bf16 value");
    return bits >> 16;
  }
  if (fmt == "f16") {  // by fields: a normal keeps its top 10 fraction bits, a subnormal counts 2^-24
    const std::uint32_t sign = (bits >> 16) & 0x8000u, frac = bits & 0x7FFFFFu;
    const int e = static_cast<int>((bits >> 23) & 0xFF) - 127;
    if (std::isnan(v)) return sign | 0x7C00u | (frac >> 13) | 0x200u * !(frac >> 13);
    if (std::isinf(v)) return sign | 0x7C00u;
    if (v == 0) return sign;
    if (e >= -14 && e <= 15 && !(frac & 0x1FFFu)) return sign | static_cast<std::uint32_t>(e + 15) << 10 | frac >> 13;
    const float count = std::ldexp(std::fabs(v), 24);
    if (e < -14 && count == std::floor(count) && count < 1024) return sign | static_cast<std::uint32_t>(count);
    fail("token " + std::to_string(bits) + " is not an f16 value");
  }
  const int e = fmt == "e5m2" ? 5 : fmt == "e4m3" ? 4 : 2, m = fmt == "e5m2" ? 2 : fmt == "e4m3" ? 3 : 1;
  const int codes = 1 << (1 + e + m);
  if (std::isnan(v)) return (bits >> 31 ? codes / 2 : 0) | (codes / 2 - 1);
  for (int c = 0; c < codes; ++c)
    if (small_value(c, e, m, fmt != "e5m2") == v && std::signbit(small_value(c, e, m, fmt != "e5m2")) == std::signbit(v))
      return static_cast<std::uint32_t>(c);
  fail("token " + std::to_string(bits) + " is not an " + fmt + " value");
}

std::uint32_t widen_f16(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, field = (h >> 10) & 0x1F, frac = h & 0x3FF;
  if (field == 31) return sign | 0x7F800000u | frac << 13;
  float mag = field ? std::ldexp(1.0f + frac / 1024.0f, static_cast<int>(field) - 15) : std::ldexp(static_cast<float>(frac), -24);
  std::uint32_t bits;
  std::memcpy(&bits, &mag, 4);
  return sign | bits;
}

int type_code(const std::string& fmt) {
  if (fmt == "bf16") return 1;
  if (fmt == "f16" || fmt == "e4m3") return 0;
  if (fmt == "tf32") return 2;
  if (fmt == "e5m2") return 1;
  return -1;
}

// The instruction a folder name says (`…_<a>[_<b>][_<scale>_block<N>]_<acc>`), with its descriptor.
Instr parse(const std::string& name, std::string& a_fmt, std::string& b_fmt) {
  std::vector<std::string> t;
  for (std::size_t pos = 0, end; pos != std::string::npos; pos = end == std::string::npos ? end : end + 1) {
    end = name.find('_', pos);
    t.push_back(name.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
  }
  Instr ins{};
  if (t.size() < 3) fail(name + ": expected <instruction>_<a>[_<b>][_<scale>_block<N>]_<f32|f16>");
  ins.f16_out = t.back() == "f16";
  if (!ins.f16_out && t.back() != "f32") fail(name + ": the name must end in _f32 or _f16");
  t.pop_back();
  std::string scale;
  if (t.back().rfind("block", 0) == 0) {
    ins.block = std::stoi(t.back().substr(5));
    t.pop_back();
    scale = t.back();
    t.pop_back();
  }
  b_fmt = t.back();
  t.pop_back();
  a_fmt = type_code(t.back()) >= 0 || t.back() == "e2m1" ? t.back() : b_fmt;
  const std::uint32_t n_bits = (kN >> 3) << 17, f32_out = ins.f16_out ? 0u : 1u << 4;
  const std::uint32_t ab = static_cast<std::uint32_t>(type_code(a_fmt)) << 7 | static_cast<std::uint32_t>(type_code(b_fmt)) << 10;
  if (scale.empty() && (a_fmt == "bf16" || a_fmt == "f16") && (b_fmt == "bf16" || b_fmt == "f16")) {
    ins = {Kind::f16, 16, 16, f32_out | ab | n_bits | (kM >> 4) << 24, ins.f16_out};
  } else if (scale.empty() && a_fmt == "tf32" && b_fmt == "tf32" && !ins.f16_out) {
    ins = {Kind::tf32, 8, 32, f32_out | ab | n_bits | (kM >> 4) << 24, false};
  } else if (scale.empty() && type_code(a_fmt) >= 0 && a_fmt[0] == 'e' && b_fmt[0] == 'e' && type_code(b_fmt) >= 0) {
    ins = {Kind::f8f6f4, 32, 8, f32_out | ab | n_bits | (kM >> 4) << 24, ins.f16_out};
  } else if (scale == "ue8m0" && ins.block == 32 && a_fmt[0] == 'e' && a_fmt != "e2m1" && !ins.f16_out) {
    ins = {Kind::mxf8f6f4, 32, 8, ab | n_bits | 1u << 23 | (kM >> 7) << 27, false, 32, 1};
  } else if (a_fmt == "e2m1" && b_fmt == "e2m1" && !ins.f16_out && (scale == "ue4m3" || scale == "ue8m0") &&
             (ins.block == 16 || (ins.block == 32 && scale == "ue8m0"))) {
    const std::uint32_t e2m1 = 1u << 7 | 1u << 10, ue8m0 = scale == "ue8m0" ? 1u << 23 : 0u;
    ins = {ins.block == 16 ? Kind::mxf4nvf4_4x : Kind::mxf4nvf4_2x, 64, 4, e2m1 | n_bits | ue8m0 | (kM >> 7) << 27, false,
           ins.block, 64 / ins.block};
  } else {
    fail(name + ": not a tcgen05 instruction this probe runs (FP6/FP4 operands of kind::f8f6f4 are not probed)");
  }
  return ins;
}

// A case's row bytes: element k of `fmt` at bit k * elem_bits of the row (e2m1: element 2i low nibble).
void pack_row(const Instr& ins, const std::string& fmt, const std::vector<std::uint32_t>& tokens, std::uint8_t* row) {
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const std::uint32_t code = encode(fmt, tokens[k]);
    if (ins.elem_bits == 4) {
      row[k / 2] |= static_cast<std::uint8_t>(code << (4 * (k % 2)));
      continue;
    }
    const std::size_t bytes = static_cast<std::size_t>(ins.elem_bits / 8);
    for (std::size_t byte = 0; byte < bytes; ++byte) row[k * bytes + byte] = static_cast<std::uint8_t>(code >> (8 * byte));
  }
}

std::uint32_t scale_word(const Instr& ins, const std::vector<std::uint32_t>& scales, int instruction) {
  std::uint32_t w = 0;
  for (int byte = 0; byte < 4; ++byte)  // block j in byte j; a one-scale instruction fills every byte (any id)
    w |= (scales[static_cast<std::size_t>(instruction * ins.blocks + byte % ins.blocks)] & 0xFF) << (8 * byte);
  return w;
}

std::vector<std::uint32_t> run(const Instr& ins, const std::vector<Packed>& cases, int instructions) {
  const int n = static_cast<int>(cases.size());
  probes::DeviceArray<Packed> dc(cases);
  probes::DeviceArray<std::uint32_t> dd(static_cast<std::size_t>(n)), dis(std::vector<std::uint32_t>{0});
  dd.poison();
  const std::size_t smem = static_cast<std::size_t>((kM + kN) * kRowBytes * instructions) + 1024;
  auto launch = [&](auto kernel) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    kernel<<<n, kM, smem>>>(dc.get(), instructions, ins.idesc, dd.get(), dis.get());
  };
  switch (ins.kind) {
    case Kind::f16: launch(run_cases<Kind::f16>); break;
    case Kind::tf32: launch(run_cases<Kind::tf32>); break;
    case Kind::f8f6f4: launch(run_cases<Kind::f8f6f4>); break;
    case Kind::mxf8f6f4: launch(run_cases<Kind::mxf8f6f4>); break;
    case Kind::mxf4nvf4_4x: launch(run_cases<Kind::mxf4nvf4_4x>); break;
    case Kind::mxf4nvf4_2x: launch(run_cases<Kind::mxf4nvf4_2x>); break;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  if (dis.to_host()[0]) fail("layout: outputs of one tile differ; no file written");
  return dd.to_host();
}

Packed make_case(const Instr& ins, const std::string& a_fmt, const std::string& b_fmt, const std::vector<std::uint32_t>& a,
                 const std::vector<std::uint32_t>& b, std::uint32_t c, const std::vector<std::uint32_t>& sa,
                 const std::vector<std::uint32_t>& sb, int instructions) {
  Packed p{};
  pack_row(ins, a_fmt, a, p.a);
  pack_row(ins, b_fmt, b, p.b);
  p.c = ins.f16_out ? encode("f16", c) : c;
  for (int i = 0; ins.blocks && i < instructions; ++i) p.sfa[i] = scale_word(ins, sa, i), p.sfb[i] = scale_word(ins, sb, i);
  return p;
}

// One-hot a and b (1.0) at each k, scale 2^blk on block blk of both operands: D must be 4^blk (1 unscaled).
void check_k_layout(const Instr& ins, const std::string& a_fmt, const std::string& b_fmt) {
  const int blocks = ins.blocks ? ins.blocks : 1;
  std::vector<Packed> cases;
  std::vector<std::uint32_t> s(static_cast<std::size_t>(blocks));
  const bool ue4m3 = ins.blocks && !((ins.idesc >> 23) & 1);
  for (int j = 0; j < blocks; ++j) s[static_cast<std::size_t>(j)] = ue4m3 ? static_cast<std::uint32_t>((7 + j) << 3) : 127u + j;
  for (int k = 0; k < ins.k; ++k) {
    std::vector<std::uint32_t> a(static_cast<std::size_t>(ins.k), 0), b(static_cast<std::size_t>(ins.k), 0);
    a[static_cast<std::size_t>(k)] = b[static_cast<std::size_t>(k)] = 0x3F800000u;
    cases.push_back(make_case(ins, a_fmt, b_fmt, a, b, 0, s, s, 1));
  }
  const std::vector<std::uint32_t> d = run(ins, cases, 1);
  for (int k = 0; k < ins.k; ++k) {
    const float want = ins.blocks ? std::ldexp(1.0f, 2 * (k / ins.block)) : 1.0f;
    const std::uint32_t got = ins.f16_out ? widen_f16(d[static_cast<std::size_t>(k)] & 0xFFFF) : d[static_cast<std::size_t>(k)];
    if (as_float(got) != want)
      fail("layout: one-hot k = " + std::to_string(k) + " gave " + std::to_string(as_float(got)) + ", want " +
           std::to_string(want) + "; no file written");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: tcgen05_probe <cases folder> <out folder>");
  std::string in = argv[1];
  while (in.size() > 1 && in.back() == '/') in.pop_back();
  const std::string name = in.substr(in.find_last_of('/') + 1);
  std::string a_fmt, b_fmt;
  const Instr ins = parse(name, a_fmt, b_fmt);
  const auto a = lines_of(in + "/a.txt"), b = lines_of(in + "/b.txt"), c = lines_of(in + "/c.txt");
  std::vector<std::string> sa, sb;
  if (ins.blocks) sa = lines_of(in + "/sa.txt"), sb = lines_of(in + "/sb.txt");
  const std::size_t n = a.size();
  if (b.size() != n || c.size() != n || (ins.blocks && (sa.size() != n || sb.size() != n)))
    fail(in + ": the files must have the same number of lines");
  check_k_layout(ins, a_fmt, b_fmt);
  // Lines grouped by K (a whole number of instructions each), one launch per group.
  std::vector<std::uint32_t> d(n);
  for (int instructions = 1; instructions <= kMaxInstr; ++instructions) {
    std::vector<Packed> cases;
    std::vector<std::size_t> which;
    for (std::size_t i = 0; i < n; ++i) {
      const auto av = hex_words(a[i]), bv = hex_words(b[i]);
      if (av.size() != bv.size() || av.empty() || av.size() % static_cast<std::size_t>(ins.k) ||
          av.size() > static_cast<std::size_t>(ins.k * kMaxInstr))
        fail(in + " line " + std::to_string(i + 1) + ": a and b must hold 1 to 4 instructions of K = " + std::to_string(ins.k));
      if (av.size() != static_cast<std::size_t>(ins.k * instructions)) continue;
      const std::vector<std::uint32_t> sav = ins.blocks ? hex_words(sa[i]) : std::vector<std::uint32_t>{},
                                       sbv = ins.blocks ? hex_words(sb[i]) : std::vector<std::uint32_t>{};
      if (ins.blocks && (sav.size() != static_cast<std::size_t>(ins.blocks * instructions) || sbv.size() != sav.size()))
        fail(in + " line " + std::to_string(i + 1) + ": want one scale per " + std::to_string(ins.block) + " elements");
      cases.push_back(make_case(ins, a_fmt, b_fmt, av, bv, static_cast<std::uint32_t>(std::stoul(c[i], nullptr, 2)), sav, sbv,
                                instructions));
      which.push_back(i);
    }
    if (cases.empty()) continue;
    const std::vector<std::uint32_t> got = run(ins, cases, instructions);
    for (std::size_t j = 0; j < which.size(); ++j) d[which[j]] = ins.f16_out ? widen_f16(got[j] & 0xFFFF) : got[j];
  }
  const std::string out = std::string(argv[2]) + "/" + name;
  mkdir(argv[2], 0755);
  mkdir(out.c_str(), 0755);
  std::vector<std::string> files = {"a", "b", "c"};
  if (ins.blocks) files.insert(files.end(), {"sa", "sb"});
  probe_text::write_measured(in, out, files, d);
  std::printf("%s: %zu cases measured (K layout checked, every tile consistent) -> %s\n", name.c_str(), n, out.c_str());
  return 0;
}
