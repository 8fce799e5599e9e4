// verify quantize --profile: bytes made by each preset are named by --profile auto first (alone, or in
// the tie group of the presets whose bytes are identical on that tensor), a planted defect is found in
// its block with its cause, and --profile NAME resolves to that stack's recipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/verify/verify_call.hpp"
#include "json_mini.hpp"
#include "verify_fixtures.hpp"

namespace fp4sim {
namespace {

VerifyQuantizeCall::Resolved resolve_profile(const std::string& profile, const std::string& role = "activation") {
  VerifyQuantizeCall call;
  call.profile = profile;
  call.quantize.role = role;
  call.quantize.seed = 7;
  return call.resolve();
}

// The user's bytes as a kernel following `recipe` stores them (rowmajor scales, codes low-first or a
// byte each).
Golden made_by(const std::string& preset, Role role, const std::vector<float>& x, std::size_t rows, std::size_t cols) {
  QuantizeCall call;
  call.recipe.recipe = preset;
  call.role = std::string(name_of(role));
  call.seed = 7;
  const QuantizeCall::Resolved r = call.resolve();
  return golden(r.recipe, r.request, x, rows, cols);
}

ProfileRanking rank(const VerifyQuantizeCall::Resolved& r, const std::vector<float>& x, std::size_t rows,
                    std::size_t cols, Golden& g) {
  g.theirs.codes = g.codes;
  g.theirs.scales = g.scales;
  return rank_profiles(r.profiles, r.request.role, 10, x, rows, cols, g.theirs);
}

bool names_first(const ProfileRanking& ranking, const std::string& preset) {
  const ProfileFit& best = ranking.fits.front();
  if (best.name == preset) return true;
  if (!best.tie_group) return false;
  const auto& group = ranking.ties[*best.tie_group];
  return std::find(group.begin(), group.end(), preset) != group.end();
}

TEST(ProfileAuto, EveryPresetsBytesNameThatPresetFirst) {
  const std::size_t rows = 32, cols = 64;
  const auto x = random_tensor(rows, cols, 11);
  for (Role role : {Role::activation, Role::weight, Role::grad_output}) {
    const auto resolved = resolve_profile("auto", std::string(name_of(role)));
    for (const Recipe& preset : recipe_presets()) {
      Golden g = made_by(preset.name, role, x, rows, cols);
      const ProfileRanking ranking = rank(resolved, x, rows, cols, g);
      const std::string where = preset.name + " " + std::string(name_of(role));
      EXPECT_TRUE(names_first(ranking, preset.name)) << where << "\n" << to_text(ranking);
      EXPECT_TRUE(ranking.bit_exact()) << where;
      EXPECT_EQ(ranking.fits.front().matching_blocks, ranking.fits.front().blocks) << where;
      EXPECT_EQ(ranking.fits.size(), stack_profiles().size()) << where;
    }
  }
}

// Without the RHT (activations) nvfp4 and nvfp4-norht make the same bytes: a tie, reported as one, and the
// ranking's order inside it is the table's.
TEST(ProfileAuto, IdenticalBytesAreATieGroup) {
  const auto x = random_tensor(32, 64, 5);
  Golden g = made_by("nvfp4-norht", Role::activation, x, 32, 64);
  const ProfileRanking ranking = rank(resolve_profile("auto"), x, 32, 64, g);
  ASSERT_TRUE(ranking.fits.front().tie_group);
  const auto& group = ranking.ties[*ranking.fits.front().tie_group];
  EXPECT_EQ(ranking.fits.front().name, "nvfp4");
  EXPECT_NE(std::find(group.begin(), group.end(), "nvfp4-norht"), group.end());
  EXPECT_EQ(std::find(group.begin(), group.end(), "nvfp4-4over6"), group.end());
  EXPECT_NE(to_text(ranking).find("(identical codes and scales on this tensor): nvfp4, nvfp4-norht"), std::string::npos)
      << to_text(ranking);
}

// MXFP4: random blocks around one of 32 with amax 6 (scale 2^0, so y = x) and x = 2.5, the E2M1 midpoint
// of 0x4 and 0x5, rounded to the odd code: the best profile is mxfp4, its one divergent element is (0, 5),
// and the cause is the tie (verify_explain_test.cpp's hand-derived facts, reached through --profile auto).
TEST(ProfileAuto, PlantedElementDefectIsFoundWithItsCause) {
  const std::size_t rows = 2, cols = 64;
  std::vector<float> x = random_tensor(rows, cols, 13);
  std::fill(x.begin(), x.begin() + 32, 0.5f);
  x[0] = 6.0f;
  x[5] = 2.5f;
  Golden g = made_by("mxfp4", Role::activation, x, rows, cols);
  ASSERT_EQ(g.q.code(0, 5), 0x4);
  g.codes[2] = static_cast<std::uint8_t>((g.codes[2] & 0x0F) | (0x5 << 4));  // element 5: high nibble of byte 2
  const ProfileRanking ranking = rank(resolve_profile("auto"), x, rows, cols, g);
  EXPECT_FALSE(ranking.bit_exact());
  EXPECT_EQ(ranking.fits.front().name, "mxfp4");
  EXPECT_EQ(ranking.fits.front().matching_blocks, 3u);
  EXPECT_EQ(ranking.fits.front().matching_elements, rows * cols - 1);
  ASSERT_FALSE(ranking.best.explained.empty());
  const MismatchNote& n = ranking.best.explained.front();
  EXPECT_EQ(n.kind, MismatchNote::Kind::element);
  EXPECT_EQ(n.row, 0u);
  EXPECT_EQ(n.col, 5u);
  EXPECT_NE(joined(n).find("the tie went to the odd code"), std::string::npos) << joined(n);
  EXPECT_NE(to_text(ranking).find("best: mxfp4"), std::string::npos) << to_text(ranking);
}

// TE 4over6 MSE: one block's scale one code off. The best profile still matches every other block, and the
// first divergent block is that one, explained as a scale mismatch with both 4over6 candidates.
TEST(ProfileAuto, PlantedScaleDefectIsFoundInItsBlock) {
  const std::size_t rows = 32, cols = 64;
  const auto x = random_tensor(rows, cols, 3);
  Golden g = made_by("nvfp4-4over6-mse", Role::activation, x, rows, cols);
  const std::size_t block = 5 * g.q.scale_cols + 2;  // row 5, block column 2
  g.scales[block] = static_cast<std::uint8_t>(g.scales[block] + 1);
  const ProfileRanking ranking = rank(resolve_profile("auto"), x, rows, cols, g);
  EXPECT_TRUE(names_first(ranking, "nvfp4-4over6-mse")) << to_text(ranking);
  EXPECT_EQ(ranking.fits.front().matching_blocks, ranking.fits.front().blocks - 1);
  ASSERT_FALSE(ranking.best.explained.empty());
  const MismatchNote& n = ranking.best.explained.front();
  EXPECT_EQ(n.kind, MismatchNote::Kind::scale);
  EXPECT_EQ(n.row, 5u);
  EXPECT_EQ(n.col, 2u);
  const auto kept = std::find_if(n.fields.begin(), n.fields.end(), [](const JsonField& f) { return f.key == "kept"; });
  EXPECT_NE(kept, n.fields.end()) << joined(n);
  EXPECT_NE(joined(n).find("is kept"), std::string::npos) << joined(n);
}

// MXFP8 codes are a byte each: an E5M2 kernel's bytes are named as such, the FP4 profiles cannot read them.
TEST(ProfileAuto, EightBitCodesAreReadAByteEach) {
  const auto x = random_tensor(32, 64, 9);
  Golden g = made_by("mxfp8-e5m2-rceil", Role::activation, x, 32, 64);
  ASSERT_EQ(g.codes.size(), 32u * 64u);
  const ProfileRanking ranking = rank(resolve_profile("auto"), x, 32, 64, g);
  EXPECT_TRUE(names_first(ranking, "mxfp8-e5m2-rceil")) << to_text(ranking);
  EXPECT_TRUE(ranking.bit_exact());
  EXPECT_EQ(ranking.best.element_format, "e5m2");
}

TEST(ProfileAuto, JsonListsEveryProfileAndTheBestReport) {
  const auto x = random_tensor(32, 64, 5);
  Golden g = made_by("mxfp4-rceil", Role::activation, x, 32, 64);
  const ProfileRanking ranking = rank(resolve_profile("auto"), x, 32, 64, g);
  const auto doc = jsonmini::parse(to_json(ranking));
  EXPECT_EQ(doc["profiles"].arr().size(), stack_profiles().size());
  EXPECT_TRUE(doc["bit_exact"].boolean());
  EXPECT_EQ(doc["best_report"]["recipe"].str(), doc["best"].str());
  EXPECT_EQ(doc["profiles"][0]["matching_blocks"].num(), doc["profiles"][0]["blocks"].num());
}

TEST(ProfileNamed, ResolvesToThatStacksRecipe) {
  const auto row = resolve_profile("nvfp4-row");
  EXPECT_EQ(row.recipe.amax_scope, AmaxScope::row);
  EXPECT_FALSE(row.request.quantize.spec.two_d);
  EXPECT_FALSE(row.auto_profile);
  const auto even = resolve_profile("mxfp8-e5m2-even");
  EXPECT_EQ(even.recipe.element, formats::e5m2);
  EXPECT_EQ(even.recipe.scale_rule, ScaleRule::pow2_even);
  const auto fast = resolve_profile("nvfp4-4over6-mse-fast-448");
  EXPECT_EQ(fast.recipe.four_over_six_error, FourOverSixErrorDomain::fast_math);
  EXPECT_EQ(fast.request.quantize.spec.target, 448.0f);
  // Every profile is a valid recipe for activations.
  for (const StackProfile& p : stack_profiles()) EXPECT_NO_THROW(resolve_profile(p.name)) << p.name;
}

TEST(ProfileNamed, UsageErrors) {
  EXPECT_THROW(resolve_profile("no-such-stack"), UsageError);
  VerifyQuantizeCall both;
  both.profile = "auto";
  both.quantize.recipe.recipe = "nvfp4";
  EXPECT_THROW(both.resolve(), UsageError);
  VerifyQuantizeCall neither;
  EXPECT_THROW(neither.resolve(), UsageError);
}

}  // namespace
}  // namespace fp4sim
