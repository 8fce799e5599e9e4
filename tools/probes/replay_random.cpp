// Replays the random single-instruction tensor-core probe outputs (the D bits that tools/probes/mma_probe.cu
// dumps as random_{bf16,f16}_{mma,wgmma}.bin, the first 10^6 outputs per instruction) through the golden
// library's sm90-bf16 row (fp4sim::tfdpa_dot, src/core/datapath.cpp), regenerating the inputs from
// random_cases.hpp's seed. No GPU needed.
//
//   replay_random <dir with the .bin files>     prints cases and mismatches per instruction; exit 1 on any
#include <cstdio>
#include <string>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/format.hpp"
#include "random_cases.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: replay_random <dir>\n");
    return 2;
  }
  const std::string dir = argv[1];
  const fp4sim::Datapath* dp = fp4sim::find_datapath("sm90-bf16");
  if (dp == nullptr) return 2;
  long long all_bad = 0, all_cases = 0;
  struct Kind {
    const char* file;
    bool f16;
    int rows;
  };
  for (const Kind k : {Kind{"random_bf16_mma.bin", false, 16}, Kind{"random_bf16_wgmma.bin", false, 64},
                       Kind{"random_f16_mma.bin", true, 16}, Kind{"random_f16_wgmma.bin", true, 64}}) {
    std::FILE* f = std::fopen((dir + "/" + k.file).c_str(), "rb");
    if (f == nullptr) {
      std::printf("%-24s missing\n", k.file);
      continue;
    }
    std::vector<std::uint32_t> d(1000000);
    const std::size_t got = std::fread(d.data(), 4, d.size(), f);
    std::fclose(f);
    d.resize(got);
    // The generator is sequential: regenerate every instance the probe ran (it covered >= 10^6 outputs).
    const long long per_instance = static_cast<long long>(k.rows) * 8;
    const int instances = static_cast<int>((1000000 + per_instance - 1) / per_instance);
    std::vector<std::uint16_t> A(static_cast<std::size_t>(instances) * k.rows * 16), B(static_cast<std::size_t>(instances) * 128);
    std::vector<float> C(static_cast<std::size_t>(instances) * k.rows * 8);
    probes::fill_random(k.f16, k.rows, instances, A, B, C);
    const fp4sim::Format& in = k.f16 ? fp4sim::formats::fp16 : fp4sim::formats::bf16;
    long long bad = 0, km_bad = 0;
    long long shown = 0;
#pragma omp parallel for reduction(+ : bad, km_bad) schedule(static)
    for (long long idx = 0; idx < static_cast<long long>(d.size()); ++idx) {
      const long long inst = idx / per_instance, i = (idx / 8) % k.rows, j = idx % 8;
      std::uint32_t a[16], b[16];
      probes::Case c{};
      for (int kk = 0; kk < 16; ++kk) {
        a[kk] = A[(static_cast<std::size_t>(inst) * k.rows + i) * 16 + kk];
        b[kk] = B[(static_cast<std::size_t>(inst) * 8 + j) * 16 + kk];
        c.a[kk] = probes::from_code(static_cast<std::uint16_t>(a[kk]), k.f16);
        c.b[kk] = probes::from_code(static_cast<std::uint16_t>(b[kk]), k.f16);
      }
      c.c = C[(static_cast<std::size_t>(inst) * k.rows + i) * 8 + j];
      const std::uint32_t golden = fp4sim::tfdpa_dot(*dp, in, a, b, probes::f2u(c.c));
      const bool miss = golden != d[static_cast<std::size_t>(idx)];
      bad += miss;
      km_bad += probes::model(c, probes::Variant::km, k.f16) != d[static_cast<std::size_t>(idx)];
      if (miss) {
#pragma omp critical
        if (shown++ < 5)
          std::printf("  %s output %lld: hw %08x golden %08x\n", k.file, idx, d[static_cast<std::size_t>(idx)], golden);
      }
    }
    std::printf("%-24s %8zu outputs: %lld mismatches vs golden sm90-bf16 (probe's own K-M model: %lld)\n", k.file,
                d.size(), bad, km_bad);
    all_bad += bad;
    all_cases += static_cast<long long>(d.size());
  }
  std::printf("total: %lld outputs, %lld mismatches\n", all_cases, all_bad);
  return all_bad == 0 && all_cases > 0 ? 0 : 1;
}
