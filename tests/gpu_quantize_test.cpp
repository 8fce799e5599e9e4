// The GPU block quantizer, dequantizer and GEMM paths (emu/) judged by the golden model on small cases.
// Without a usable CUDA device every test here GTEST_SKIPs (ctest reports skipped, never passed);
// `fp4sim crosscheck` is the large-scale version of the same comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <tuple>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/emu/gpu.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/element_convert.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"

namespace fp4sim {
namespace {

std::vector<float> values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 16) - 8);
  return x;
}

// The integer stochastic-rounding path of the quantize kernels (emu::f32_to_e2m1_sr, host code too) against
// the golden Float32Encoder: every 2039th binary32 up to Inf (all of them with FP4SIM_EXHAUSTIVE=1), both
// signs, k in 1..16, random k-bit integers plus 0 and 2^k - 1. Needs no device.
TEST(EmuHost, StochasticE2m1IntegerPathEqualsGolden) {
  const bool all = std::getenv("FP4SIM_EXHAUSTIVE") != nullptr;
  const std::uint32_t stride = all ? 1u : 2039u;
  std::mt19937_64 rng(5);
  std::uint64_t checked = 0, bad = 0;
  for (Rounding mode : {Rounding::sr_fastest, Rounding::sr_fast, Rounding::sr_fast_f32}) {
    for (int k : {1, 2, 3, 5, 8, 11, 16}) {
      if (all && k != 8 && k != 16 && k != 1) continue;
      const Float32Encoder golden(formats::e2m1, EncodeOptions{mode, true, k});
      const std::uint32_t top = (1u << k) - 1u;
      for (std::uint64_t abs = 0; abs <= 0x7F800000u; abs += stride) {
        for (std::uint32_t sign : {0u, 0x80000000u}) {
          const std::uint32_t bits = static_cast<std::uint32_t>(abs) | sign;
          for (std::uint32_t r : {0u, top, static_cast<std::uint32_t>(rng()) & top}) {
            std::uint32_t got = 0;
            if (mode == Rounding::sr_fastest) got = emu::f32_to_e2m1_sr<emu::Sr::fastest>(bits, r, k);
            if (mode == Rounding::sr_fast) got = emu::f32_to_e2m1_sr<emu::Sr::fast>(bits, r, k);
            if (mode == Rounding::sr_fast_f32) got = emu::f32_to_e2m1_sr<emu::Sr::fast_f32>(bits, r, k);
            const std::uint32_t want = golden(bits, r);
            if (got != want && bad++ < 5)
              ADD_FAILURE() << "mode " << static_cast<int>(mode) << " k " << k << " bits " << std::hex << bits << " r " << r
                            << ": " << got << " vs golden " << want;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(bad, 0u) << "of " << checked;
  std::printf("EmuHost: %llu (value, r, k, mode) cases checked\n", static_cast<unsigned long long>(checked));
}

// The quantize kernels' branch-free E2M1 RNE against the threshold form of fp4sim/emu/element_convert.hpp (itself judged against
// the golden encoder by tests/gpu_convert_test.cpp): every 61st binary32 plus every pattern within 2^16 of
// each E2M1 midpoint and value, both signs; all 2^32 with FP4SIM_EXHAUSTIVE=1 (run on 2026-11-30: 0 of 2^32).
TEST(EmuHost, E2m1RneFastEqualsThresholds) {
  const bool all = std::getenv("FP4SIM_EXHAUSTIVE") != nullptr;
  std::uint64_t bad = 0, checked = 0;
  auto check = [&](std::uint32_t bits) {
    const std::uint32_t got = emu::f32_to_e2m1_rne_fast(bits), want = emu::f32_to_e2m1<emu::Round::rne>(bits);
    if (got != want && bad++ < 5) ADD_FAILURE() << std::hex << bits << ": " << got << " vs " << want;
    ++checked;
  };
  const std::uint64_t stride = all ? 1 : 61;
  for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += stride) check(static_cast<std::uint32_t>(b));
  for (std::uint32_t center : {0x3E800000u, 0x3F000000u, 0x3F400000u, 0x3F800000u, 0x3FA00000u, 0x3FC00000u, 0x3FE00000u,
                               0x40000000u, 0x40200000u, 0x40400000u, 0x40600000u, 0x40800000u, 0x40A00000u,
                               0x40C00000u, 0x7F800000u, 0x00000000u + 0x10000u})
    for (std::uint32_t d = 0; d < 0x20000u; ++d)
      for (std::uint32_t sign : {0u, 0x80000000u}) check(((center - 0x10000u + d) & 0x7FFFFFFFu) | sign);
  EXPECT_EQ(bad, 0u) << "of " << checked;
}

TEST(Api, NoDeviceIsAStatus) {
  if (gpu::device_available()) GTEST_SKIP() << "a GPU is present";
  QuantizedTensor q;
  const auto r = *find_recipe("nvfp4");
  QuantizeRequest req;
  std::vector<float> x(32, 1.0f);
  EXPECT_EQ(gpu::quantize(r, req, x, 2, 16, q), gpu::Status::no_device);
}

TEST(Device, QuantizeEveryPresetAndSpec) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  for (const Recipe& r : recipe_presets()) {
    if (!cpu_only_settings(r).empty()) continue;  // the CPU model's variants: refused (next test)
    for (Gemm g : {Gemm::fprop, Gemm::dgrad, Gemm::wgrad}) {
      const GemmOperands ops = operands_for(r, g);
      for (const OperandSpec& s : {ops.a, ops.b}) {
        for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{64, 128}, {37, 97}, {33, 64}}) {
          const auto x = values(rows * cols, rows * 131 + cols);
          QuantizeRequest req;
          req.spec = s;
          req.random.seed = 42;
          const QuantizedTensor golden = quantize(r, req, x, rows, cols);
          QuantizedTensor got;
          ASSERT_EQ(gpu::quantize(r, req, x, rows, cols, got), gpu::Status::success);
          EXPECT_EQ(got.codes, golden.codes) << r.name << " " << name_of(g) << " " << rows << "x" << cols;
          EXPECT_EQ(got.scales, golden.scales) << r.name << " " << name_of(g);
          EXPECT_EQ(std::bit_cast<std::uint32_t>(got.global_encode_scale),
                    std::bit_cast<std::uint32_t>(golden.global_encode_scale));
          std::vector<float> dq(rows * cols);
          ASSERT_EQ(gpu::dequantize(golden, dq), gpu::Status::success);
          const auto ref = dequantize(golden);
          for (std::size_t i = 0; i < ref.size(); ++i)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(dq[i]), std::bit_cast<std::uint32_t>(ref[i])) << r.name << " " << i;
        }
      }
    }
  }
}

// Every power-of-two scale rule (OCP floor, ceil, torchao's CEIL, EVEN and RCEIL) on blocks whose amax sits
// where the rules part: zero, binary32 subnormals (at and around 2^-127 * 6, where RCEIL's RN(amax / 6)
// crosses E8M0's smallest scale), 4, 5, 6 and 6 + 1 ulp times powers of two, half an E2M1 ulp below a
// binade (EVEN rounds up), the top of binary32 (EVEN's rounded amax overflows: the NaN block; RCEIL and
// ceil saturate), one block per row of 32, each with the amax at a different position and sign.
TEST(Device, PowerOfTwoScaleRulesAtTheirEdges) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  std::vector<float> amaxes{0.0f, 0x1p-149f, 0x1p-140f, 0x1.8p-130f, 0x1p-127f, 0x1.000002p-127f, 0x1.7ffffep-127f,
                            0x1.8p-125f, 0x1.800002p-125f, 0x1.7ffffep-125f, 0x1p-126f, FLT_MIN, 5.0f, 6.0f,
                            0x1.800002p+2f, 0x1.7ffffep+2f, 4.0f, 0x1.000002p+2f, 0x1.bffffep-1f, 0x1.cp-1f,
                            0x1.c00002p+0f, 0x1.bffffep+127f, 0x1.cp+127f, FLT_MAX, 0x1.8p+127f, 0x1.800002p+126f,
                            0x1p+127f, 0x1.8p+125f};
  for (int e = -140; e <= 127; e += 9) {
    for (float m : {1.0f, 1.25f, 1.5f, 0x1.000002p0f, 0x1.7ffffep0f, 0x1.fffffep0f}) amaxes.push_back(std::ldexp(m, e));
  }
  const std::size_t rows = amaxes.size(), cols = 64;
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const float fraction = static_cast<float>((c * 7 + r) % 13) / 13.0f;  // below the amax
      x[r * cols + c] = (c % 3 ? 1.0f : -1.0f) * amaxes[r] * fraction;
    }
    x[r * cols + (r % 32)] = (r % 2 ? -1.0f : 1.0f) * amaxes[r];             // first block's amax
    x[r * cols + 32 + (r * 5) % 32] = amaxes[(r + 1) % rows];               // second block's
  }
  for (ScaleRule rule : {ScaleRule::pow2_floor, ScaleRule::pow2_ceil, ScaleRule::pow2_ceil_exponent,
                         ScaleRule::pow2_even, ScaleRule::pow2_rceil}) {
    Recipe recipe = *find_recipe("mxfp4");
    recipe.scale_rule = rule;
    ASSERT_TRUE(cpu_only_settings(recipe).empty());
    QuantizeRequest req;
    req.spec = operands_for(recipe, Gemm::fprop).a;
    const QuantizedTensor golden = quantize(recipe, req, x, rows, cols);
    QuantizedTensor got;
    ASSERT_EQ(gpu::quantize(recipe, req, x, rows, cols, got), gpu::Status::success);
    for (std::size_t i = 0; i < golden.scales.size(); ++i) {
      EXPECT_EQ(got.scales[i], golden.scales[i]) << "rule " << static_cast<int>(rule) << " block " << i << " amax "
                                                 << std::hexfloat << amaxes[i / 2];
    }
    EXPECT_EQ(got.codes, golden.codes) << "rule " << static_cast<int>(rule);
  }
}

// Random-bits contract v2 on the GPU: byte lanes (k <= 8: one Philox block per 16 elements), 16-bit lanes
// (k = 12, 16: one per 8) and the per-element fallback (ragged rows, whose threads do not start a block),
// under every SR mode, against the golden quantizer, which draws random_bits() per element.
TEST(Device, StochasticRoundingEveryLaneWidth) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  for (const char* name : {"nvfp4", "ue5m3", "ue5m3-b32"}) {
    for (int k : {3, 8, 12, 16}) {
      for (Rounding mode : {Rounding::sr_fastest, Rounding::sr_fast, Rounding::sr_fast_f32}) {
        Recipe r = *find_recipe(name);
        r.sr_bits = k;
        OperandSpec spec = operand_for_role(r, Role::grad_output);
        spec.rounding = mode;
        for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{64, 128}, {37, 97}, {9, 1000}, {33, 40}}) {
          const auto x = values(rows * cols, rows * 7 + cols + static_cast<std::size_t>(k));
          QuantizeRequest req;
          req.spec = spec;
          req.random.seed = 0x5EED + static_cast<std::uint64_t>(k);
          req.random.stream = 3;
          const QuantizedTensor golden = quantize(r, req, x, rows, cols);
          QuantizedTensor got;
          ASSERT_EQ(gpu::quantize(r, req, x, rows, cols, got), gpu::Status::success);
          EXPECT_EQ(got.codes, golden.codes) << name << " k " << k << " " << name_of(mode) << " " << rows << "x" << cols;
          EXPECT_EQ(got.scales, golden.scales) << name << " k " << k;
        }
      }
    }
  }
}

// The probe-matched path (the wgmma kernel where the build has sm_90a code, else mma.sync) against the golden
// probe-matched datapath: tiles cut by M and N (128 x 192 blocks), several k groups, snap on and off.
TEST(Device, ProbeMatchedGemmEqualsGolden) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  const Recipe r = *find_recipe("ue5m3");
  for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{40, 24, 256}, {200, 300, 512}, {130, 193, 64},
                         {257, 385, 1024}}) {
    QuantizeRequest ra, rb;
    ra.spec = operands_for(r, Gemm::fprop).a;
    rb.spec = operands_for(r, Gemm::fprop).b;
    const auto qa = quantize(r, ra, values(m * k, m + k), m, k);
    const auto qb = quantize(r, rb, values(n * k, n + k + 1), n, k);
    for (bool snap : {true, false}) {
      GemmOptions go;
      go.datapath = find_datapath("probe-matched");
      ASSERT_NE(go.datapath, nullptr);
      go.snap = snap;
      go.alpha = 0.75f;
      const auto ref = gemm(qa, qb, go);
      std::vector<float> c(m * n);
      gpu::GemmOptions o;
      o.path = gpu::GemmPath::probe_matched;
      o.alpha = go.alpha;
      o.snap = snap;
      ASSERT_EQ(gpu::gemm(qa, qb, o, c), gpu::Status::success);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < c.size(); ++i)
        bad += std::bit_cast<std::uint32_t>(c[i]) != std::bit_cast<std::uint32_t>(ref[i]);
      EXPECT_EQ(bad, 0u) << m << "x" << n << "x" << k << " snap " << snap;
    }
  }
}

TEST(Device, Bf16TcGemmEqualsSm90Bf16Chain) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  const Recipe r = *find_recipe("ue5m3");
  const std::size_t m = 40, n = 24, k = 256;
  QuantizeRequest ra, rb;
  ra.spec = operands_for(r, Gemm::fprop).a;
  rb.spec = operands_for(r, Gemm::fprop).b;
  const auto qa = quantize(r, ra, values(m * k, 1), m, k);
  const auto qb = quantize(r, rb, values(n * k, 2), n, k);
  GemmOptions go;
  go.datapath = find_datapath("sm90-bf16");
  ASSERT_NE(go.datapath, nullptr);
  go.alpha = 1.0f;
  const auto ref = gemm(qa, qb, go);
  std::vector<float> c(m * n);
  gpu::GemmOptions o;
  o.path = gpu::GemmPath::bf16_tc;
  o.alpha = 1.0f;
  ASSERT_EQ(gpu::gemm(qa, qb, o, c), gpu::Status::success);
  for (std::size_t i = 0; i < c.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(c[i]), std::bit_cast<std::uint32_t>(ref[i])) << i;
}

// The kernel table (fp4sim/emu/gemm_kernels.hpp): each row's K rule and groups are its golden row's, and the
// golden options of exactly that row map to it; another datapath, another inner row or a what-if F has no
// kernel. Needs no device.
TEST(KernelTable, EachRowIsItsGoldenDatapath) {
  const Recipe r = *find_recipe("ue5m3");
  for (const gpu::GemmKernel& k : gpu::gemm_kernels()) {
    EXPECT_EQ(&gpu::gemm_kernel(k.path), &k);
    EXPECT_EQ(gpu::find_gemm_kernel(k.name), &k);
    EXPECT_EQ(k.group_k, k.golden->group_k) << k.name;
    EXPECT_EQ(k.k_multiple, std::max(1, k.golden->group_k)) << k.name;
    GemmRequest request;
    request.datapath = k.golden;
    EXPECT_EQ(gpu::gemm_kernel_for(gemm_options(r, request)), &k) << k.name;
  }
  GemmRequest other;
  other.datapath = &datapaths::fp32_seq;
  EXPECT_EQ(gpu::gemm_kernel_for(gemm_options(r, other)), nullptr);
  GemmRequest inner;
  inner.datapath = &datapaths::probe_matched;
  inner.inner = &datapaths::sm80;
  EXPECT_EQ(gpu::gemm_kernel_for(gemm_options(r, inner)), nullptr);
  GemmRequest what_if;
  what_if.datapath = &datapaths::sm90_bf16;
  what_if.frac_bits = 24;
  EXPECT_EQ(gpu::gemm_kernel_for(gemm_options(r, what_if)), nullptr);
}

// The settings only the CPU model implements (cpu_only_settings), and the combinations of 4over6 and
// row-scaled amax the kernels do not take, are refused by the plan before any device is looked for, rather
// than quantized without them (so this test runs on any machine).
TEST(Plan, RefusesWhatOnlyTheCpuModelImplements) {
  const Recipe nvfp4 = *find_recipe("nvfp4");
  const Recipe four_over_six = *find_recipe("nvfp4-4over6");
  auto with = [](Recipe r, auto change) {
    change(r);
    return r;
  };
  struct Refusal {
    Recipe recipe;
    OperandSpec spec;
    bool held_amax;
    gpu::Status status;
  };
  const OperandSpec activation = operands_for(nvfp4, Gemm::fprop).a;
  const OperandSpec weight_2d = operands_for(nvfp4, Gemm::fprop).b;
  OperandSpec stochastic = activation;
  stochastic.rounding = Rounding::sr_fast;
  OperandSpec row_scaled_2d = weight_2d;  // a 2-D tensor quantized on its own (quantize --role weight) row-scaled
  row_scaled_2d.takes_row_amax = true;
  const Refusal refusals[] = {
      {with(nvfp4, [](Recipe& r) { r.element_scaling = ElementScaling::division; }), activation, false,
       gpu::Status::unsupported_options},
      {with(nvfp4, [](Recipe& r) { r.nan_amax = NanAmax::propagate; }), activation, false,
       gpu::Status::unsupported_options},
      {with(nvfp4, [](Recipe& r) { r.element_specials = SpecialConvention::te_python; }), activation, false,
       gpu::Status::unsupported_options},
      {with(nvfp4, [](Recipe& r) { r.element = formats::e2m3; }), activation, false, gpu::Status::unsupported_format},
      {with(nvfp4, [](Recipe& r) { r.block = 64; }), activation, false, gpu::Status::unsupported_options},
      {four_over_six, stochastic, false, gpu::Status::unsupported_options},  // 4over6 rounds to nearest only
      {with(nvfp4, [](Recipe& r) { r.amax_scope = AmaxScope::row; }), row_scaled_2d, false,
       gpu::Status::unsupported_options},
      {with(nvfp4, [](Recipe& r) { r.amax_scope = AmaxScope::row; }), activation, true, gpu::Status::invalid_argument},
  };
  ASSERT_TRUE(weight_2d.two_d);
  for (const Refusal& refusal : refusals) {
    QuantizeRequest req;
    req.spec = refusal.spec;
    if (refusal.held_amax) req.amax_ref = 3.0f;
    QuantizedTensor q;
    EXPECT_EQ(gpu::quantize(refusal.recipe, req, values(32 * 32, 3), 32, 32, q), refusal.status)
        << refusal.recipe.name << " " << name_of(refusal.spec.rounding) << (refusal.spec.two_d ? " 2-D" : " 1-D");
  }
  EXPECT_EQ(cpu_only_settings(with(nvfp4, [](Recipe& r) { r.element = formats::e2m3; })),
            std::vector<std::string_view>{"element_format"});
  // What the kernels now serve is no longer listed as CPU-only.
  EXPECT_TRUE(cpu_only_settings(four_over_six).empty());
  EXPECT_TRUE(cpu_only_settings(with(four_over_six, [](Recipe& r) {
                r.block_choice = BlockScaleChoice::four_over_six_mse;
                r.four_over_six_error = FourOverSixErrorDomain::fast_math;
                r.amax_scope = AmaxScope::row;
              })).empty());
}

}  // namespace
}  // namespace fp4sim
