// fp4sim verify gemm: the golden GEMM output passes under each datapath, planted ulps are found, binned
// and traced, --datapath auto names the configuration that explains the outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim {
namespace {

struct GemmCase {
  std::string recipe, datapath;
  std::size_t m, n, k;
};

class VerifyGemm : public ::testing::TestWithParam<GemmCase> {};

std::vector<float> smooth(std::size_t n, float f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(f * static_cast<float>(i) + 0.3f) * (1.0f + static_cast<float>(i % 7));
  return v;
}

TEST_P(VerifyGemm, GoldenPassesPlantedUlpIsFoundAndTraced) {
  const GemmCase& gc = GetParam();
  const Recipe recipe = *find_recipe(gc.recipe);
  VerifyGemmRequest request;
  const GemmOperands ops = operands_for(recipe, Gemm::fprop);
  request.a.spec = ops.a;
  request.b.spec = ops.b;
  request.b.random.stream = 1;
  request.datapath.datapath = find_datapath(gc.datapath);
  const auto a = smooth(gc.m * gc.k, 0.37f), b = smooth(gc.n * gc.k, 0.11f);
  const QuantizedTensor qa = quantize(recipe, request.a, a, gc.m, gc.k);
  const QuantizedTensor qb = quantize(recipe, request.b, b, gc.n, gc.k);
  std::vector<float> c = gemm(recipe, qa, qb, request.datapath);

  auto rep = verify_gemm(recipe, request, a, b, gc.m, gc.n, gc.k, c);
  EXPECT_TRUE(rep.bit_exact()) << to_text(rep);
  EXPECT_EQ(rep.exact_matches, gc.m * gc.n);
  EXPECT_EQ(rep.datapath, gc.datapath);

  // One output one ulp toward +Inf, another three ulps down.
  std::size_t big = 0;
  for (std::size_t i = 0; i < c.size(); ++i) big = std::fabs(c[i]) > std::fabs(c[big]) ? i : big;
  const std::size_t other = (big + 1) % c.size();
  c[big] = std::nextafter(c[big], std::numeric_limits<float>::infinity());
  for (int s = 0; s < 3; ++s) c[other] = std::nextafter(c[other], -std::numeric_limits<float>::infinity());
  request.worst = 2;
  rep = verify_gemm(recipe, request, a, b, gc.m, gc.n, gc.k, c);
  EXPECT_EQ(rep.mismatches, 2u);
  EXPECT_EQ(rep.theirs_above, 1u);
  EXPECT_EQ(rep.theirs_below, 1u);
  EXPECT_EQ(rep.max_abs_ulps, 3);
  ASSERT_EQ(rep.histogram.size(), 2u);
  EXPECT_EQ(rep.histogram[0].first, "-3..-4");
  EXPECT_EQ(rep.histogram[1].first, "+1");
  ASSERT_EQ(rep.worst.size(), 2u);
  EXPECT_EQ(rep.worst[0].row * gc.n + rep.worst[0].col, other);
  EXPECT_EQ(rep.worst[0].ulps, -3);
  EXPECT_EQ(rep.worst[1].row * gc.n + rep.worst[1].col, big);
  for (const auto& w : rep.worst) {
    std::string all;
    for (const auto& d : w.details) all += d + "\n";
    EXPECT_EQ(all.find("internal:"), std::string::npos) << gc.datapath << ": the trace does not reproduce the golden output\n" << all;
    EXPECT_NE(all.find("alpha"), std::string::npos) << all;
    const bool fused = gc.datapath != "exact" && gc.datapath != "fp32-seq";
    if (fused) {
      EXPECT_NE(all.find("E_max"), std::string::npos) << all;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Datapaths, VerifyGemm,
                         ::testing::Values(GemmCase{"nvfp4", "exact", 5, 3, 48}, GemmCase{"nvfp4", "fp32-seq", 5, 3, 48},
                                           GemmCase{"nvfp4", "sm90-bf16", 5, 3, 48},
                                           GemmCase{"nvfp4", "sm100-mxf4nvf4", 4, 3, 128},
                                           GemmCase{"ue5m3", "probe-matched", 4, 3, 128},
                                           GemmCase{"ue5m3", "ue5m3-native", 4, 3, 128},
                                           GemmCase{"mxfp4", "sm90-f16acc", 3, 2, 64}),
                         [](const auto& info) {
                           std::string name = info.param.recipe + "_" + info.param.datapath;
                           for (auto& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(VerifyGemmAuto, NamesTheDatapathThatExplainsTheOutputs) {
  const Recipe recipe = *find_recipe("ue5m3");
  VerifyGemmRequest request;
  const GemmOperands ops = operands_for(recipe, Gemm::fprop);
  request.a.spec = ops.a;
  request.b.spec = ops.b;
  request.b.random.stream = 1;
  const std::size_t m = 6, n = 5, k = 256;
  const auto a = smooth(m * k, 0.71f), b = smooth(n * k, 0.29f);
  const QuantizedTensor qa = quantize(recipe, request.a, a, m, k);
  const QuantizedTensor qb = quantize(recipe, request.b, b, n, k);
  GemmRequest theirs_dp;
  theirs_dp.datapath = &datapaths::probe_matched;
  theirs_dp.inner = &datapaths::sm100_f16;
  theirs_dp.snap = false;
  const std::vector<float> c = gemm(recipe, qa, qb, theirs_dp);
  request.auto_datapath = true;
  const auto rep = verify_gemm(recipe, request, a, b, m, n, k, c);
  EXPECT_TRUE(rep.bit_exact()) << to_text(rep);
  EXPECT_TRUE(std::find(rep.explained_by.begin(), rep.explained_by.end(), "probe-matched (inner sm100-f16, no snap)") !=
              rep.explained_by.end())
      << to_text(rep);
  ASSERT_FALSE(rep.candidates.empty());
  EXPECT_EQ(rep.candidates.front().exact_matches, m * n);
  // Some rows cannot take UE5M3 scales at all; they are listed with the reason.
  bool some_error = false;
  for (const auto& cand : rep.candidates) some_error |= !cand.error.empty();
  EXPECT_TRUE(some_error);
}

TEST(VerifyGemmErrors, ShapeOfTheirOutput) {
  const Recipe recipe = *find_recipe("nvfp4");
  VerifyGemmRequest request;
  const auto a = smooth(4 * 32, 0.5f), b = smooth(3 * 32, 0.25f);
  std::vector<float> c(11);
  EXPECT_THROW(verify_gemm(recipe, request, a, b, 4, 3, 32, c), DataError);
}

TEST(Ulps, OrderedDistance) {
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulp_distance(0.0f, -0.0f), 0);
  EXPECT_EQ(ulp_distance(-std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::denorm_min()), 2);
  EXPECT_EQ(ulp_distance(2.0f, 1.0f), -(1 << 23));
}

}  // namespace
}  // namespace fp4sim
