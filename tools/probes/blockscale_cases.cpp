// Inputs for the block-scaled probes (tools/probes/blockscale_probe.cu, tcgen05_probe.cu; docs/datapaths.md
// §8.3) on which the public models of one K = 64 NVFP4/MXFP4 instruction give different bits, generated from
// fp4sim's rows:
//   mmasim   `sm100-mxf4nvf4`: exact 16-element sub-block sums, scales applied exactly, one truncating
//            add of the sub-block terms and C with 35 fraction bits below E_max, RZ (MMA-Sim);
//   rz25     the same instruction with 25 fraction bits (the RTX 5090 probe's "25 bits, RZ");
//   ue5m3    the UE5M3 report's: the 64 scaled products summed exactly and rounded RNE to FP32 (one partial
//            per 64-product group), then add.rz.f32(C, partial).
// Each folder gets the cases (a, b: 64 hex FP32 tokens of E2M1 values; c: binary FP32; sa, sb: hex scale
// codes per block) and each model's D as d.<model>.txt, in the vendored measurement format. Cases are kept
// only when at least two models disagree, and the kinds of disagreement are balanced: mmasim != rz25,
// mmasim != ue5m3, rz25 != ue5m3.
//
// Build: g++ -O2 -std=c++20 -fopenmp -I include tools/probes/blockscale_cases.cpp build/libfp4sim_core.a -o blockscale_cases
// Run:   blockscale_cases <out dir> [cases per folder, default 3000]
#include <algorithm>
#include <array>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "measurement_text.hpp"

#include "fp4sim/core/datapath.hpp"

namespace {

using namespace fp4sim;

struct Case {
  std::array<int, 64> a{}, b{};  // E2M1 codes
  std::vector<std::uint32_t> sa, sb;
  std::uint32_t c = 0;
};

constexpr double kE2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
double value(int code) { return (code & 8 ? -1 : 1) * kE2m1[code & 7]; }

std::vector<SubblockSum> sums(const Case& x, int block) {
  std::vector<SubblockSum> out;
  for (int s = 0; s < 64; s += 16) {
    SubblockSum ss;
    for (int k = s; k < s + 16; ++k) ss.sum += static_cast<std::int64_t>(value(x.a[k]) * 2) * static_cast<std::int64_t>(value(x.b[k]) * 2);
    ss.scale_a = x.sa[s / block];
    ss.scale_b = x.sb[s / block];
    out.push_back(ss);
  }
  return out;
}

std::uint32_t mmasim(const Case& x, const Format& sf, int block) {
  return gst_step(datapaths::sm100_mxf4nvf4, sf, 2, sums(x, block), x.c);
}

std::uint32_t rz25(const Case& x, const Format& sf, int block) {
  Datapath row = datapaths::sm100_mxf4nvf4;
  row.fused.frac_bits = 25;
  return gst_step(row, sf, 2, sums(x, block), x.c);
}

// RNE32 of the exact scaled sum (a 90-bit window holds every term of these cases exactly), then
// add.rz(C, partial): the exact sum of two binary32 values rounded toward zero.
std::uint32_t ue5m3_report(const Case& x, const Format& sf, int block) {
  Datapath exact = datapaths::sm100_mxf4nvf4;
  exact.fused.frac_bits = 90;
  exact.fused.out_rounding = OutputRounding::rne;
  const std::uint32_t partial = gst_step(exact, sf, 2, sums(x, block), 0);
  const Unpacked p = unpack_fp32(partial), c = unpack_fp32(x.c);
  if (p.cls == Unpacked::nan || c.cls == Unpacked::nan) return 0x7FFFFFFFu;
  FusedParams add = exact.fused;
  add.out_rounding = OutputRounding::rz;
  const Addend terms[] = {c_addend(add, p)};
  return fused_sum(add, terms, c_addend(add, c));
}

// Random scales around a centre, sub-blocks that cancel, a few large terms beside small ones, C near the
// sum or far from it: the corners where a 25-bit window, a 35-bit window and an RNE partial part ways.
Case draw(std::mt19937_64& rng, bool ue4m3, int block) {
  std::uniform_int_distribution<int> code(0, 15), coin(0, 9);
  Case x;
  for (int k = 0; k < 64; ++k) x.a[k] = code(rng), x.b[k] = code(rng);
  const int blocks = 64 / block;
  const int spread = ue4m3 ? 6 : 16;
  for (int j = 0; j < blocks; ++j) {
    if (ue4m3) {
      std::uniform_int_distribution<int> e(1, 14), m(0, 7);
      const int ea = std::min(14, std::max(1, 7 + static_cast<int>(rng() % (2 * spread + 1)) - spread));
      x.sa.push_back(static_cast<std::uint32_t>(ea << 3 | m(rng)));
      x.sb.push_back(static_cast<std::uint32_t>(e(rng) << 3 | m(rng)));
    } else {
      x.sa.push_back(static_cast<std::uint32_t>(127 + static_cast<int>(rng() % (2 * spread + 1)) - spread));
      x.sb.push_back(static_cast<std::uint32_t>(127 + static_cast<int>(rng() % (2 * spread + 1)) - spread));
    }
  }
  if (coin(rng) < 4) {  // sub-block 1 cancels sub-block 0 exactly
    for (int k = 0; k < 16; ++k) x.a[16 + k] = x.a[k] ^ 8, x.b[16 + k] = x.b[k];
    x.sa[16 / block] = x.sa[0];
    x.sb[16 / block] = x.sb[0];
  }
  const double sum_guess = std::ldexp(1.0, static_cast<int>(rng() % 20) - 5);
  const int c_kind = coin(rng);
  const float c = c_kind < 2 ? 0.0f
                  : c_kind < 6 ? static_cast<float>(sum_guess * (1 + std::ldexp(static_cast<double>(rng() % 4096), -12)))
                               : static_cast<float>(std::ldexp(1.0 + std::ldexp(static_cast<double>(rng() % 8388608), -23),
                                                                static_cast<int>(rng() % 60) - 30));
  std::uint32_t bits;
  std::memcpy(&bits, &c, 4);
  x.c = bits ^ (coin(rng) < 5 ? 0x80000000u : 0);
  return x;
}

void write_folder(const std::string& dir, const std::vector<Case>& cases, const Format& sf, int block) {
  mkdir(dir.c_str(), 0755);
  std::ofstream a(dir + "/a.txt"), b(dir + "/b.txt"), c(dir + "/c.txt"), sa(dir + "/sa.txt"), sb(dir + "/sb.txt"),
      dm(dir + "/d.mmasim.txt"), dr(dir + "/d.rz25.txt"), du(dir + "/d.ue5m3.txt");
  using probe_text::hex;
  const auto bin = probe_text::bits;
  for (const Case& x : cases) {
    for (int k = 0; k < 64; ++k) {
      const float va = static_cast<float>(value(x.a[k])), vb = static_cast<float>(value(x.b[k]));
      std::uint32_t wa, wb;
      std::memcpy(&wa, &va, 4);
      std::memcpy(&wb, &vb, 4);
      a << (k ? " " : "") << hex(wa, 8);
      b << (k ? " " : "") << hex(wb, 8);
    }
    a << '\n';
    b << '\n';
    for (std::size_t j = 0; j < x.sa.size(); ++j) {
      sa << (j ? " " : "") << hex(x.sa[j], 2);
      sb << (j ? " " : "") << hex(x.sb[j], 2);
    }
    sa << '\n';
    sb << '\n';
    c << bin(x.c) << '\n';
    dm << bin(mmasim(x, sf, block)) << '\n';
    dr << bin(rz25(x, sf, block)) << '\n';
    du << bin(ue5m3_report(x, sf, block)) << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: blockscale_cases <out dir> [cases per folder]\n");
    return 2;
  }
  const std::size_t want = argc == 3 ? std::stoul(argv[2]) : 3000;
  mkdir(argv[1], 0755);
  struct Mode {
    const char* folder;
    Format scale;
    int block;
  };
  // The third, UE8M0 per 16, is a tcgen05-only mode (tcgen05_probe.cu; mma.sync refuses it).
  const Mode modes[] = {{"mma-sync-m16n8k64_e2m1_ue4m3_block16_f32", formats::ue4m3, 16},
                        {"mma-sync-m16n8k64_e2m1_ue8m0_block32_f32", formats::e8m0, 32},
                        {"tcgen05-mxf4nvf4_e2m1_ue8m0_block16_f32", formats::e8m0, 16}};
  for (const Mode& mode : modes) {
    std::mt19937_64 rng(0xB10C5CA1Eull + static_cast<unsigned>(mode.block));
    std::vector<Case> cases;
    std::array<std::size_t, 3> kinds{};  // mmasim!=rz25, mmasim!=ue5m3, rz25!=ue5m3
    std::size_t tries = 0;
    while (cases.size() < want && tries++ < want * 2000) {
      const Case x = draw(rng, mode.scale == formats::ue4m3, mode.block);
      const std::uint32_t m = mmasim(x, mode.scale, mode.block), r = rz25(x, mode.scale, mode.block),
                          u = ue5m3_report(x, mode.scale, mode.block);
      const std::array<bool, 3> differ{m != r, m != u, r != u};
      bool useful = false;
      for (int i = 0; i < 3; ++i)
        if (differ[i] && kinds[i] < want / 2) useful = true;
      if (!useful) continue;
      for (int i = 0; i < 3; ++i) kinds[i] += differ[i];
      cases.push_back(x);
    }
    write_folder(std::string(argv[1]) + "/" + mode.folder, cases, mode.scale, mode.block);
    std::printf("%s: %zu cases (mmasim != rz25: %zu, mmasim != ue5m3: %zu, rz25 != ue5m3: %zu)\n", mode.folder,
                cases.size(), kinds[0], kinds[1], kinds[2]);
  }
  return 0;
}
