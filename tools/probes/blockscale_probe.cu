// Block-scaled FP4 measurements on sm_120a (RTX Blackwell: `mma.sync … kind::mxf4nvf4.block_scale`), written
// in the vendored measurement format (tests/data/tensorcore_corners/README.md) for `fp4sim datapath identify`
// (docs/datapaths.md §8.3). The inputs come from a folder that tools/probes/blockscale_cases.cpp made from
// fp4sim's rows (cases on which the competing models give different bits); this program only runs them.
//
// PTX facts used (PTX ISA 8.7+, "Warp-level matrix multiply-accumulate with block scaling", mma.sync):
// * `mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3` (NVFP4:
//   one UE4M3 scale per 16 K) and `….kind::mxf4.block_scale.scale_vec::2X….ue8m0` (MXFP4: one UE8M0 scale per
//   32 K), operands d, a, b, c, scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b};
//   `.kind::mxf4nvf4` needs an explicit .scale_vec_size; sm_120a. (ptxas 13.0 refuses ue8m0 with
//   kind::mxf4nvf4 on mma.sync, so UE8M0 per 16 is a tcgen05-only mode, not probed here.)
// * A is 4 .b32 registers of 8 e2m1 each, B 2 registers (the m16n8k64 .u4/.s4 fragment layout): A register r
//   holds row groupID (r even) or groupID + 8 (r odd), columns k = tig*8 + j (r < 2) or 32 + tig*8 + j (r >= 2),
//   nibble j in bits 4j..4j+3; B register r holds k = 32r + tig*8 + j of column groupID. C and D: 4 f32.
// * scale-a-data / scale-b-data: 32-bit registers of scale bytes, the K blocks in byte order; byte-id and
//   thread-id pick which bytes of which lane of the quad serve which rows/columns.
// The probe is independent of the row/column and scale-lane mappings: every row of A holds the case's a,
// every column of B its b, every element of C its c, and every lane the same scale bytes, so every output is
// the case's D (checked: all 128 outputs must agree). The K mapping is checked before the cases run: a
// one-hot a and b at each k with scale 2^blk per block must give 4^blk (a mismatch aborts, no file written).
//
// Build: nvcc -O2 -std=c++17 -gencode=arch=compute_120a,code=sm_120a tools/probes/blockscale_probe.cu
// Run:   blockscale_probe <cases folder> <out folder>   (folder name ..._e2m1_ue4m3_block16_f32 or _e2m1_ue8m0_block32_f32;
//        writes <out folder>/<same name>/{a,b,c,sa,sb,d}.txt)
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

#include "measurement_text.hpp"

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));      \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace {

enum class Scale { ue4m3_4x, ue8m0_2x };

struct Case {
  std::uint32_t a[64], b[64];  // FP32 bits of e2m1 values
  std::uint32_t c;
  std::uint8_t sa[4], sb[4];   // one per block (4 for block16, 2 for block32)
};

// Packed inputs per case: A and B as 32 bytes of nibbles (element k in nibble k), scales in byte order.
struct Packed {
  std::uint32_t a[8], b[8];
  std::uint32_t scale_a, scale_b;
  float c;
};

template <Scale S>
__global__ void run_cases(const Packed* cases, std::uint32_t* d, std::uint32_t* disagree, int n) {
  const int idx = blockIdx.x;
  if (idx >= n) return;
  const Packed& p = cases[idx];
  const int lane = threadIdx.x, tig = lane % 4;
  // k = tig*8 + j is word tig of the packed row; k = 32 + tig*8 + j is word 4 + tig.
  const std::uint32_t lo_a = p.a[tig], hi_a = p.a[4 + tig], lo_b = p.b[tig], hi_b = p.b[4 + tig];
  float d0, d1, d2, d3;
  const float c = p.c;
  const std::uint32_t sa = p.scale_a, sb = p.scale_b;
  const std::uint16_t zero = 0;
  if constexpr (S == Scale::ue4m3_4x) {
    asm volatile(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13}, %14, {%16, %16}, %15, {%16, %16};\n"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(lo_a), "r"(lo_a), "r"(hi_a), "r"(hi_a), "r"(lo_b), "r"(hi_b), "f"(c), "f"(c), "f"(c), "f"(c),
          "r"(sa), "r"(sb), "h"(zero));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13}, %14, {%16, %16}, %15, {%16, %16};\n"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(lo_a), "r"(lo_a), "r"(hi_a), "r"(hi_a), "r"(lo_b), "r"(hi_b), "f"(c), "f"(c), "f"(c), "f"(c),
          "r"(sa), "r"(sb), "h"(zero));
  }
  const std::uint32_t first = __float_as_uint(d0);
  const bool same = __float_as_uint(d1) == first && __float_as_uint(d2) == first && __float_as_uint(d3) == first;
  const std::uint32_t lane0 = __shfl_sync(0xFFFFFFFFu, first, 0);
  if (!same || first != lane0) atomicAdd(disagree, 1u);
  if (lane == 0) d[idx] = first;
}

using probe_text::hex_words;
using probe_text::lines_of;

int e2m1_nibble(std::uint32_t bits) {
  float v;
  std::memcpy(&v, &bits, 4);
  static const float kValues[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int i = 0; i < 8; ++i)
    if (std::fabs(v) == kValues[i]) return i | (std::signbit(v) ? 8 : 0);
  std::fprintf(stderr, "0x%08x is not an e2m1 value\n", bits);
  std::exit(2);
}

Packed pack(const Case& c, int blocks) {
  Packed p{};
  for (int k = 0; k < 64; ++k) {
    p.a[k / 8] |= static_cast<std::uint32_t>(e2m1_nibble(c.a[k])) << (4 * (k % 8));
    p.b[k / 8] |= static_cast<std::uint32_t>(e2m1_nibble(c.b[k])) << (4 * (k % 8));
  }
  // 2X: two scale bytes, repeated in bytes 2 and 3 so that either byte pair a byte-id selects holds them.
  for (int i = 0; i < 4; ++i) {
    p.scale_a |= static_cast<std::uint32_t>(c.sa[i % blocks]) << (8 * i);
    p.scale_b |= static_cast<std::uint32_t>(c.sb[i % blocks]) << (8 * i);
  }
  std::memcpy(&p.c, &c.c, 4);
  return p;
}

std::vector<std::uint32_t> run(Scale s, const std::vector<Packed>& cases) {
  const int n = static_cast<int>(cases.size());
  Packed* dc;
  std::uint32_t *dd, *dis;
  CHECK(cudaMalloc(&dc, sizeof(Packed) * n));
  CHECK(cudaMalloc(&dd, sizeof(std::uint32_t) * n));
  CHECK(cudaMalloc(&dis, sizeof(std::uint32_t)));
  CHECK(cudaMemcpy(dc, cases.data(), sizeof(Packed) * n, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dis, 0, sizeof(std::uint32_t)));
  if (s == Scale::ue4m3_4x) run_cases<Scale::ue4m3_4x><<<n, 32>>>(dc, dd, dis, n);
  if (s == Scale::ue8m0_2x) run_cases<Scale::ue8m0_2x><<<n, 32>>>(dc, dd, dis, n);
  CHECK(cudaGetLastError());
  std::vector<std::uint32_t> d(n);
  std::uint32_t disagree = 0;
  CHECK(cudaMemcpy(d.data(), dd, sizeof(std::uint32_t) * n, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&disagree, dis, sizeof disagree, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(dc));
  CHECK(cudaFree(dd));
  CHECK(cudaFree(dis));
  if (disagree) {
    std::fprintf(stderr, "layout: %u lanes saw outputs that differ inside one tile; no file written\n", disagree);
    std::exit(1);
  }
  return d;
}

// One-hot a and b at each k, scale 2^blk on block blk (both operands): D must be 4^blk.
void check_k_layout(Scale s, int block) {
  const int blocks = 64 / block;
  std::vector<Packed> cases;
  for (int k = 0; k < 64; ++k) {
    Case c{};
    for (int i = 0; i < 64; ++i) c.a[i] = c.b[i] = 0;
    c.a[k] = c.b[k] = 0x3F800000u;
    c.c = 0;
    for (int j = 0; j < blocks; ++j)
      c.sa[j] = c.sb[j] = static_cast<std::uint8_t>(s == Scale::ue4m3_4x ? (7 + j) << 3 : 127 + j);
    cases.push_back(pack(c, blocks));
  }
  const std::vector<std::uint32_t> d = run(s, cases);
  for (int k = 0; k < 64; ++k) {
    const float want = std::ldexp(1.0f, 2 * (k / block));
    float got;
    std::memcpy(&got, &d[k], 4);
    if (got != want) {
      std::fprintf(stderr, "layout: one-hot k = %d gave %g, want %g; no file written\n", k, got, want);
      std::exit(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: blockscale_probe <cases folder> <out folder>\n");
    return 2;
  }
  std::string in = argv[1];
  while (in.size() > 1 && in.back() == '/') in.pop_back();
  const std::string name = in.substr(in.find_last_of('/') + 1);
  Scale s;
  int block;
  if (name.find("_ue4m3_block16_f32") != std::string::npos) {
    s = Scale::ue4m3_4x, block = 16;
  } else if (name.find("_ue8m0_block32_f32") != std::string::npos) {
    s = Scale::ue8m0_2x, block = 32;
  } else {
    std::fprintf(stderr, "%s: the name must end in _ue4m3_block16_f32 or _ue8m0_block32_f32\n",
                 name.c_str());
    return 2;
  }
  const int blocks = 64 / block;
  const auto a = lines_of(in + "/a.txt"), b = lines_of(in + "/b.txt"), c = lines_of(in + "/c.txt"),
             sa = lines_of(in + "/sa.txt"), sb = lines_of(in + "/sb.txt");
  const std::size_t n = a.size();
  if (b.size() != n || c.size() != n || sa.size() != n || sb.size() != n) {
    std::fprintf(stderr, "%s: a, b, c, sa, sb must have the same number of lines\n", in.c_str());
    return 2;
  }
  check_k_layout(s, block);
  std::vector<Packed> cases;
  for (std::size_t i = 0; i < n; ++i) {
    Case x{};
    const auto av = hex_words(a[i]), bv = hex_words(b[i]), sav = hex_words(sa[i]), sbv = hex_words(sb[i]);
    if (av.size() != 64 || bv.size() != 64 || sav.size() != static_cast<std::size_t>(blocks) ||
        sbv.size() != static_cast<std::size_t>(blocks)) {
      std::fprintf(stderr, "%s line %zu: want 64 elements and %d scales per operand\n", in.c_str(), i + 1, blocks);
      return 2;
    }
    std::copy(av.begin(), av.end(), x.a);
    std::copy(bv.begin(), bv.end(), x.b);
    for (int j = 0; j < blocks; ++j) x.sa[j] = static_cast<std::uint8_t>(sav[j]), x.sb[j] = static_cast<std::uint8_t>(sbv[j]);
    x.c = static_cast<std::uint32_t>(std::stoul(c[i], nullptr, 2));
    cases.push_back(pack(x, blocks));
  }
  const std::vector<std::uint32_t> d = run(s, cases);
  const std::string out = std::string(argv[2]) + "/" + name;
  mkdir(argv[2], 0755);
  mkdir(out.c_str(), 0755);
  probe_text::write_measured(in, out, {"a", "b", "c", "sa", "sb"}, d);
  std::printf("%s: %zu cases measured (K layout checked, every tile consistent) -> %s\n", name.c_str(), n, out.c_str());
  return 0;
}
