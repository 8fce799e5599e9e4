// Inputs for tcgen05_probe.cu's `kind::mxf8f6f4.block_scale` (docs/datapaths.md §1.5, §8.3) on which the
// candidate models of one K = 32 instruction (e4m3 x e4m3, one UE8M0 scale pair) give different bits,
// generated from fp4sim's rows:
//   fp4sim   `sm100-mxf8f6f4`: MMA-Sim's T-FDPA (G = 32, F = 25, RZ, scale exponents in every product's
//            exponent) with fp4sim's assumptions: E_max floor -133, zeros out of E_max, a negative sum that
//            rounds to zero is -0;
//   mmasim   the same instruction with MMA-Sim's own rules: no floor, a zero operand or C at exponent -126,
//            every zero result +0;
//   rnesum   the UE5M3 report's shape: the 32 scaled products summed exactly, rounded RNE to FP32, then
//            add.rz.f32(C, partial).
// The scales reach 2^-127 · 2^-127, so the scaled products run down to 2^-272, far below where the floor, the
// zero exponent and the sign of an underflow part ways. Cases are kept only when two models disagree, the
// three kinds of disagreement balanced. Each folder gets a, b (32 hex FP32 tokens of e4m3 values), c
// (binary FP32), sa, sb (one hex UE8M0 code each) and d.<model>.txt, in the vendored measurement format.
//
// Build: g++ -O2 -std=c++20 -fopenmp -I include tools/probes/mxf8f6f4_cases.cpp build/libfp4sim_core.a -o mxf8f6f4_cases
// Run:   mxf8f6f4_cases <out dir> [cases, default 3000]
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "measurement_text.hpp"

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"

namespace {

using namespace fp4sim;

struct Case {
  std::vector<std::uint32_t> a = std::vector<std::uint32_t>(32), b = std::vector<std::uint32_t>(32);  // e4m3 codes
  std::uint32_t sa = 127, sb = 127, c = 0;
};

std::uint32_t run(const Datapath& row, const Case& x) {
  const std::uint32_t sa[] = {x.sa}, sb[] = {x.sb};
  return tfdpa_dot(row, formats::e4m3, x.a, formats::e4m3, x.b, BlockScales{formats::e8m0, sa, sb, 32}, x.c);
}

std::uint32_t fp4sim_row(const Case& x) { return run(datapaths::sm100_mxf8f6f4, x); }

std::uint32_t mmasim(const Case& x) {
  Datapath row = datapaths::sm100_mxf8f6f4;
  row.fused.e_floor = kNoExponent;
  row.fused.zero_exponent = -126;
  row.fused.zero_result = ZeroResult::positive;
  return run(row, x);
}

// RNE32 of the exact scaled sum (a 90-bit window below the largest product holds all of them: e4m3
// products span 2^-18 .. 2^17.8 around the common scale), then the exact C + partial rounded RZ.
std::uint32_t rnesum(const Case& x) {
  Datapath exact = datapaths::sm100_mxf8f6f4;
  exact.fused.frac_bits = 90;
  exact.fused.e_floor = kNoExponent;
  exact.fused.out_rounding = OutputRounding::rne;
  const std::uint32_t partial = run(exact, Case{x.a, x.b, x.sa, x.sb, 0});
  const Unpacked p = unpack_fp32(partial), c = unpack_fp32(x.c);
  if (p.cls == Unpacked::nan || c.cls == Unpacked::nan) return 0x7FFFFFFFu;
  if (p.cls == Unpacked::inf || c.cls == Unpacked::inf) return p.cls == Unpacked::inf ? partial : x.c;
  FusedParams add = exact.fused;
  add.out_rounding = OutputRounding::rz;
  const Addend terms[] = {c_addend(add, p)};
  return fused_sum(add, terms, c_addend(add, c));
}

// Scales over the whole UE8M0 range (often both tiny), products that cancel, a few zeros, C zero, tiny or
// near the sum, with either sign.
Case draw(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> code(0, 0x7E), coin(0, 9), zero(0, 3);
  Case x;
  for (int k = 0; k < 32; ++k) {
    x.a[k] = static_cast<std::uint32_t>(code(rng) | (coin(rng) < 5 ? 0x80 : 0));
    x.b[k] = static_cast<std::uint32_t>(code(rng));
    if (zero(rng) == 0) x.a[k] = 0;
  }
  if (coin(rng) < 4)  // the first half cancels the second exactly
    for (int k = 0; k < 16; ++k) x.a[16 + k] = x.a[k] ^ 0x80, x.b[16 + k] = x.b[k];
  const int where = coin(rng);
  std::uniform_int_distribution<int> any(0, 254), low(0, 20);
  x.sa = static_cast<std::uint32_t>(where < 6 ? low(rng) : any(rng));
  x.sb = static_cast<std::uint32_t>(where < 6 ? low(rng) : any(rng));
  const int c_kind = coin(rng);
  std::uniform_int_distribution<std::uint32_t> mant(0, 0x7FFFFF), sub(1, 0x7FFFFF);
  std::uint32_t c = 0;
  if (c_kind >= 3 && c_kind < 6) c = sub(rng);  // a subnormal C
  if (c_kind >= 6) {
    const double sum_guess = std::ldexp(1.0, static_cast<int>(x.sa) + static_cast<int>(x.sb) - 254);
    const float f = static_cast<float>(sum_guess * (1 + std::ldexp(static_cast<double>(mant(rng) & 0xFFF), -12)));
    c = std::bit_cast<std::uint32_t>(f);
  }
  x.c = c ^ (coin(rng) < 5 ? 0x80000000u : 0);
  return x;
}

void write_folder(const std::string& dir, const std::vector<Case>& cases) {
  mkdir(dir.c_str(), 0755);
  std::ofstream a(dir + "/a.txt"), b(dir + "/b.txt"), c(dir + "/c.txt"), sa(dir + "/sa.txt"), sb(dir + "/sb.txt"),
      df(dir + "/d.fp4sim.txt"), dm(dir + "/d.mmasim.txt"), dr(dir + "/d.rnesum.txt");
  using probe_text::hex;
  const auto bin = probe_text::bits;
  auto token = [](std::uint32_t code) { return std::bit_cast<std::uint32_t>(decode_to_float(formats::e4m3, code)); };
  for (const Case& x : cases) {
    for (int k = 0; k < 32; ++k) {
      a << (k ? " " : "") << hex(token(x.a[k]), 8);
      b << (k ? " " : "") << hex(token(x.b[k]), 8);
    }
    a << '\n';
    b << '\n';
    sa << hex(x.sa, 2) << '\n';
    sb << hex(x.sb, 2) << '\n';
    c << bin(x.c) << '\n';
    df << bin(fp4sim_row(x)) << '\n';
    dm << bin(mmasim(x)) << '\n';
    dr << bin(rnesum(x)) << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: mxf8f6f4_cases <out dir> [cases]\n");
    return 2;
  }
  const std::size_t want = argc == 3 ? std::stoul(argv[2]) : 3000;
  mkdir(argv[1], 0755);
  std::mt19937_64 rng(0x3F8F6F4ull);
  std::vector<Case> cases;
  std::array<std::size_t, 3> kinds{};  // fp4sim != mmasim, fp4sim != rnesum, mmasim != rnesum
  for (std::size_t tries = 0; cases.size() < want && tries < want * 2000; ++tries) {
    const Case x = draw(rng);
    const std::uint32_t f = fp4sim_row(x), m = mmasim(x), r = rnesum(x);
    const std::array<bool, 3> differ{f != m, f != r, m != r};
    bool useful = false;
    for (int i = 0; i < 3; ++i)
      if (differ[i] && kinds[i] < want / 2) useful = true;
    if (!useful) continue;
    for (int i = 0; i < 3; ++i) kinds[i] += differ[i];
    cases.push_back(x);
  }
  const std::string folder = "tcgen05-mxf8f6f4_e4m3_e4m3_ue8m0_block32_f32";
  write_folder(std::string(argv[1]) + "/" + folder, cases);
  std::printf("%s: %zu cases (fp4sim != mmasim: %zu, fp4sim != rnesum: %zu, mmasim != rnesum: %zu)\n", folder.c_str(),
              cases.size(), kinds[0], kinds[1], kinds[2]);
  return 0;
}
