// AMD CDNA3 (MI300, gfx942) MFMA measurements, written in the vendored measurement format
// (tests/data/tensorcore_corners/README.md) for `fp4sim datapath identify` (docs/datapaths.md §1.6, §8.3):
// which of `cdna3-bf16`, `cdna3-xf32`, `cdna3-fp8` (MMA-Sim's CDNA3 model) or the other rows reproduce the
// hardware. The inputs come from a folder of cases (a, b, c as .txt): the H200 corner inputs (bf16, f16 with
// K = 16; tf32 registers with K = 8) or any folder in that format; this program only runs them.
// UNCOMPILED: no hipcc was at hand; written to the public CDNA3 ISA and LLVM's AMDGPU builtins, never built
// or run. Expect to fix a detail before it builds.
//
// Facts used (AMD "CDNA3 Instruction Set Architecture", §7 Matrix Arithmetic; LLVM AMDGPU builtins; the
// operand layouts of AMD's matrix-instruction calculator and the ROCm "Matrix Core Programming" notes):
// * one wavefront of 64 lanes per instruction; v_mfma_f32_16x16x16_f16 / _bf16 (builtins
//   __builtin_amdgcn_mfma_f32_16x16x16f16, __builtin_amdgcn_mfma_f32_16x16x16bf16_1k): lane l holds A[l % 16]
//   [4 * (l / 16) + i] and B[4 * (l / 16) + i][l % 16] for i < 4; v_mfma_f32_16x16x8_xf32 (2 per lane,
//   k = 2 * (l / 16) + i); v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8} (8 per lane in a 64-bit register,
//   k = 8 * (l / 16) + i, byte i); C and D: 4 floats per lane, D[4 * (l / 16) + i][l % 16].
// * fp8/bf8 on CDNA3 are the FNUZ encodings (bias 8 and 16, NaN at 0x80, no -0, no Inf).
// The probe is independent of the M/N mapping: every row of A holds the case's a, every column of B its b,
// every element of C its c, so all 256 outputs are the case's D (checked). The K mapping is checked first: a
// one-hot 1·1 at each k must give 1 (a mismatch aborts, no file written).
//
// Build: hipcc -O2 -std=c++17 --offload-arch=gfx942 tools/probes/mfma_probe.hip -o mfma_probe
// Run:   mfma_probe <cases folder> <out folder>; the name ends in _bf16_f32, _f16_f32, _tf32_f32 or
//        _<fp8|bf8>_<fp8|bf8>_f32 (folder tokens as `datapath identify` reads them); writes
//        <out folder>/<same name>/{a,b,c,d}.txt.
#include <hip/hip_runtime.h>

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

#define CHECK(x)                                                                           \
  do {                                                                                     \
    hipError_t e_ = (x);                                                                   \
    if (e_ != hipSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, hipGetErrorString(e_));      \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

namespace {

enum class Kind : int { f16, bf16, xf32, fp8_fp8, fp8_bf8, bf8_fp8, bf8_bf8 };

constexpr int kMaxK = 32;

// One case: the K elements of A's row and B's column as the instruction's element bits, C as FP32 bits.
struct Case {
  std::uint32_t a[kMaxK], b[kMaxK];
  std::uint32_t c;
};

typedef _Float16 half4 __attribute__((ext_vector_type(4)));
typedef short short4_t __attribute__((ext_vector_type(4)));
typedef float float2_t __attribute__((ext_vector_type(2)));
typedef float float4_t __attribute__((ext_vector_type(4)));

template <Kind K>
__global__ void run_cases(const Case* cases, std::uint32_t* d_out, std::uint32_t* disagree) {
  const Case& p = cases[blockIdx.x];
  const int lane = threadIdx.x, group = lane / 16;
  float4_t c;
  for (int i = 0; i < 4; ++i) c[i] = __builtin_bit_cast(float, p.c);
  float4_t d;
  if constexpr (K == Kind::f16 || K == Kind::bf16) {
    short4_t a, b;
    for (int i = 0; i < 4; ++i) a[i] = static_cast<short>(p.a[4 * group + i]), b[i] = static_cast<short>(p.b[4 * group + i]);
    if constexpr (K == Kind::f16)
      d = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(half4, a), __builtin_bit_cast(half4, b), c, 0, 0, 0);
    else
      d = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
  } else if constexpr (K == Kind::xf32) {
    float2_t a, b;
    for (int i = 0; i < 2; ++i) a[i] = __builtin_bit_cast(float, p.a[2 * group + i]), b[i] = __builtin_bit_cast(float, p.b[2 * group + i]);
    d = __builtin_amdgcn_mfma_f32_16x16x8_xf32(a, b, c, 0, 0, 0);
  } else {
    long a = 0, b = 0;
    for (int i = 0; i < 8; ++i) {
      a |= static_cast<long>(p.a[8 * group + i] & 0xFF) << (8 * i);
      b |= static_cast<long>(p.b[8 * group + i] & 0xFF) << (8 * i);
    }
    if constexpr (K == Kind::fp8_fp8) d = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a, b, c, 0, 0, 0);
    if constexpr (K == Kind::fp8_bf8) d = __builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8(a, b, c, 0, 0, 0);
    if constexpr (K == Kind::bf8_fp8) d = __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8(a, b, c, 0, 0, 0);
    if constexpr (K == Kind::bf8_bf8) d = __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8(a, b, c, 0, 0, 0);
  }
  const std::uint32_t first = __shfl(__builtin_bit_cast(std::uint32_t, d[0]), 0);
  for (int i = 0; i < 4; ++i)
    if (__builtin_bit_cast(std::uint32_t, d[i]) != first) atomicAdd(disagree, 1u);
  if (lane == 0) d_out[blockIdx.x] = first;
}

using probe_text::as_float;
using probe_text::fail;
using probe_text::hex_words;
using probe_text::lines_of;

// FNUZ value of a code (e = 4: fp8, bias 8; e = 5: bf8, bias 16; 0x80 NaN).
float fnuz_value(int code, int e, int m) {
  if (code == 0x80) return NAN;
  const int bias = 1 << (e - 1), field = (code >> m) & ((1 << e) - 1), frac = code & ((1 << m) - 1);
  const float sign = code & 0x80 ? -1.0f : 1.0f;
  if (field == 0) return sign * std::ldexp(static_cast<float>(frac), 1 - bias - m);
  return sign * std::ldexp(1.0f + static_cast<float>(frac) / (1 << m), field - bias);
}

// The element bits of an FP32 token (exact; fail otherwise).
std::uint32_t encode(const std::string& fmt, std::uint32_t bits) {
  const float v = as_float(bits);
  if (fmt == "tf32") return bits;
  if (fmt == "bf16") {
    if (bits & 0xFFFF) fail("a token is not a bf16 value");
    return bits >> 16;
  }
  if (fmt == "f16") {
    const _Float16 h = static_cast<_Float16>(v);
    if (!std::isnan(v) && static_cast<float>(h) != v) fail("a token is not an f16 value");
    std::uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
  }
  const int e = fmt == "fp8" ? 4 : 5, m = fmt == "fp8" ? 3 : 2;
  if (std::isnan(v)) return 0x80;
  if (v == 0) return 0;  // FNUZ has no -0
  for (int c = 1; c < 256; ++c)
    if (fnuz_value(c, e, m) == v) return static_cast<std::uint32_t>(c);
  fail("a token is not an " + fmt + " value");
}

struct Instr {
  Kind kind;
  int k;
  std::string a_fmt, b_fmt;
};

Instr parse(const std::string& name) {
  std::vector<std::string> t;
  std::istringstream in(name);
  for (std::string part; std::getline(in, part, '_');) t.push_back(part);
  if (t.size() < 3 || t.back() != "f32") fail(name + ": expected <instruction>_<a>[_<b>]_f32");
  t.pop_back();
  const std::string b = t.back();
  t.pop_back();
  const std::string a = (t.back() == "fp8" || t.back() == "bf8") ? t.back() : b;
  if (a == "f16" && b == "f16") return {Kind::f16, 16, a, b};
  if (a == "bf16" && b == "bf16") return {Kind::bf16, 16, a, b};
  if (a == "tf32" && b == "tf32") return {Kind::xf32, 8, a, b};
  if (a == "fp8" && b == "fp8") return {Kind::fp8_fp8, 32, a, b};
  if (a == "fp8" && b == "bf8") return {Kind::fp8_bf8, 32, a, b};
  if (a == "bf8" && b == "fp8") return {Kind::bf8_fp8, 32, a, b};
  if (a == "bf8" && b == "bf8") return {Kind::bf8_bf8, 32, a, b};
  fail(name + ": not an instruction this probe runs");
}

std::vector<std::uint32_t> run(const Instr& ins, const std::vector<Case>& cases) {
  const int n = static_cast<int>(cases.size());
  Case* dc;
  std::uint32_t *dd, *dis;
  CHECK(hipMalloc(&dc, sizeof(Case) * n));
  CHECK(hipMalloc(&dd, sizeof(std::uint32_t) * n));
  CHECK(hipMalloc(&dis, sizeof(std::uint32_t)));
  CHECK(hipMemcpy(dc, cases.data(), sizeof(Case) * n, hipMemcpyHostToDevice));
  CHECK(hipMemset(dis, 0, sizeof(std::uint32_t)));
  switch (ins.kind) {
    case Kind::f16: run_cases<Kind::f16><<<n, 64>>>(dc, dd, dis); break;
    case Kind::bf16: run_cases<Kind::bf16><<<n, 64>>>(dc, dd, dis); break;
    case Kind::xf32: run_cases<Kind::xf32><<<n, 64>>>(dc, dd, dis); break;
    case Kind::fp8_fp8: run_cases<Kind::fp8_fp8><<<n, 64>>>(dc, dd, dis); break;
    case Kind::fp8_bf8: run_cases<Kind::fp8_bf8><<<n, 64>>>(dc, dd, dis); break;
    case Kind::bf8_fp8: run_cases<Kind::bf8_fp8><<<n, 64>>>(dc, dd, dis); break;
    case Kind::bf8_bf8: run_cases<Kind::bf8_bf8><<<n, 64>>>(dc, dd, dis); break;
  }
  CHECK(hipGetLastError());
  std::vector<std::uint32_t> d(static_cast<std::size_t>(n));
  std::uint32_t disagree = 0;
  CHECK(hipMemcpy(d.data(), dd, sizeof(std::uint32_t) * n, hipMemcpyDeviceToHost));
  CHECK(hipMemcpy(&disagree, dis, sizeof disagree, hipMemcpyDeviceToHost));
  CHECK(hipFree(dc));
  CHECK(hipFree(dd));
  CHECK(hipFree(dis));
  if (disagree) fail("layout: outputs of one tile differ; no file written");
  return d;
}

Case make_case(const Instr& ins, const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b, std::uint32_t c) {
  Case x{};
  for (int k = 0; k < ins.k; ++k) x.a[k] = encode(ins.a_fmt, a[k]), x.b[k] = encode(ins.b_fmt, b[k]);
  x.c = c;
  return x;
}

void check_k_layout(const Instr& ins) {
  std::vector<Case> cases;
  for (int k = 0; k < ins.k; ++k) {
    std::vector<std::uint32_t> a(static_cast<std::size_t>(ins.k), 0), b(a);
    a[static_cast<std::size_t>(k)] = b[static_cast<std::size_t>(k)] = 0x3F800000u;
    cases.push_back(make_case(ins, a, b, 0));
  }
  const std::vector<std::uint32_t> d = run(ins, cases);
  for (int k = 0; k < ins.k; ++k)
    if (d[static_cast<std::size_t>(k)] != 0x3F800000u) fail("layout: one-hot k = " + std::to_string(k) + " did not give 1; no file written");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: mfma_probe <cases folder> <out folder>");
  std::string in = argv[1];
  while (in.size() > 1 && in.back() == '/') in.pop_back();
  const std::string name = in.substr(in.find_last_of('/') + 1);
  const Instr ins = parse(name);
  const auto a = lines_of(in + "/a.txt"), b = lines_of(in + "/b.txt"), c = lines_of(in + "/c.txt");
  if (b.size() != a.size() || c.size() != a.size()) fail(in + ": a, b, c must have the same number of lines");
  check_k_layout(ins);
  std::vector<Case> cases;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto av = hex_words(a[i]), bv = hex_words(b[i]);
    if (av.size() != static_cast<std::size_t>(ins.k) || bv.size() != av.size())
      fail(in + " line " + std::to_string(i + 1) + ": want " + std::to_string(ins.k) + " elements per operand");
    cases.push_back(make_case(ins, av, bv, static_cast<std::uint32_t>(std::stoul(c[i], nullptr, 2))));
  }
  const std::vector<std::uint32_t> d = run(ins, cases);
  const std::string out = std::string(argv[2]) + "/" + name;
  mkdir(argv[2], 0755);
  mkdir(out.c_str(), 0755);
  probe_text::write_measured(in, out, {"a", "b", "c"}, d);
  std::printf("%s: %zu cases measured (K layout checked, every tile consistent) -> %s\n", name.c_str(), a.size(), out.c_str());
  return 0;
}
