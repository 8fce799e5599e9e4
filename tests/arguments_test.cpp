// The argument tables of the front ends (fp4sim/front/arguments.hpp) and the keyed errors of the calls
// (fp4sim/core/error.hpp): each key spelled as the CLI and Python spell it, written out here by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "fp4sim/core/error.hpp"
#include "fp4sim/front/analysis_arguments.hpp"
#include "fp4sim/front/arguments.hpp"
#include "fp4sim/front/recipe_spec.hpp"

namespace fp4sim {
namespace {

using front::Spelling;

TEST(Render, SpellsKeysAsFlagsAndKeywords) {
  const std::string keyed = "{amax_ref_a} must be finite; {snap=false} needs {datapath} probe-matched";
  EXPECT_EQ(front::render(keyed, Spelling::cli), "--amax-ref-a must be finite; --no-snap needs --datapath probe-matched");
  EXPECT_EQ(front::render(keyed, Spelling::python), "amax_ref_a must be finite; snap=False needs datapath probe-matched");
  EXPECT_EQ(front::render("{two_d=false} {two_d=true} {rht=false} {saturate=true}", Spelling::cli),
            "--one-d --two-d --no-rht --saturate");
  EXPECT_EQ(front::render("{two_d=false} {rht=true}", Spelling::python), "two_d=False rht=True");
}

TEST(Render, LeavesOtherBracesAlone) {
  for (const std::string text : {"{\"a\": 1}", "{Key}", "{a-b}", "{x=maybe}", "{}", "{", "}{", "a {b",
                                 "layers\\.[0-9]{2}\\.=bf16", "{1,3}"}) {
    EXPECT_EQ(front::render(text, Spelling::cli), text);
    EXPECT_EQ(front::render(text, Spelling::python), text);
  }
}

TEST(Render, FindsKeysInsideOtherBraces) {
  const std::string json = "{\"hints\": [\"read as {layout} swizzled-128x4\"], \"x\": {\"y\": 1}}";
  EXPECT_EQ(front::render(json, Spelling::cli), "{\"hints\": [\"read as --layout swizzled-128x4\"], \"x\": {\"y\": 1}}");
  EXPECT_EQ(front::render("{{snap=false}}", Spelling::python), "{snap=False}");
}

TEST(KeyedError, WhatShowsBareKeysAndKeyedKeepsTheMarks) {
  const UsageError e("{sr_bits}: must be between 1 and 16 ({snap=false})");
  EXPECT_STREQ(e.what(), "sr_bits: must be between 1 and 16 (snap=false)");
  EXPECT_EQ(e.keyed(), "{sr_bits}: must be between 1 and 16 ({snap=false})");
}

TEST(KeyedError, CallsNameTheirArgumentsByKey) {
  RecipeOverrides o;
  o.recipe = "nvfp4";
  o.sr_bits = 17;
  try {
    o.resolve();
    FAIL() << "sr_bits 17 accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(e.keyed(), "{sr_bits}: must be between 1 and 16");
  }
  GemmCall g;
  g.recipe.recipe = "nvfp4";
  g.b.amax_ref = -1.0f;
  try {
    g.resolve();
    FAIL() << "a negative held amax accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(front::render(e.keyed(), Spelling::cli), "--amax-ref-b must be a finite non-negative number");
  }
}

// Each key once per call (the recipe's rows with the call's own), in lower-case words joined by '_'.
template <class Call>
void expect_distinct_keys(std::set<std::string> keys, std::span<const front::Argument<Call>> rows) {
  for (const auto& row : rows) {
    EXPECT_TRUE(keys.insert(std::string(row.key)).second) << row.key;
    EXPECT_EQ(row.key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string_view::npos) << row.key;
    EXPECT_NE(row.set, nullptr) << row.key;
    EXPECT_FALSE(row.help.empty()) << row.key;
  }
}

TEST(ArgumentTables, KeysAreDistinctPerCall) {
  std::set<std::string> recipe;
  for (const auto& row : front::recipe_arguments()) recipe.insert(std::string(row.key));
  EXPECT_EQ(recipe.size(), front::recipe_arguments().size());
  expect_distinct_keys(recipe, front::quantize_arguments());
  expect_distinct_keys(recipe, front::gemm_arguments());
  expect_distinct_keys({}, front::convert_arguments());
  expect_distinct_keys({}, front::replay_arguments());
  expect_distinct_keys({}, front::sweep_arguments());
}

TEST(ArgumentTables, RowsCarryTheirValueIntoTheCall) {
  RecipeOverrides o;
  for (const auto& row : front::recipe_arguments()) {
    if (row.key == "block") row.set(o, std::int64_t{32});
    if (row.key == "two_d") row.set(o, true);
    if (row.key == "target") row.set(o, 1e300);  // beyond binary32: +Inf, for resolve() to refuse
    if (row.key == "rounding") row.set(o, std::string("sr"));
  }
  EXPECT_EQ(o.block, 32);
  EXPECT_EQ(o.two_d, true);
  ASSERT_TRUE(o.target.has_value());
  EXPECT_TRUE(std::isinf(*o.target));
  EXPECT_EQ(o.rounding, "sr");
}

// A recipe spec through the override rows, checked against the same overrides set one by one.
TEST(RecipeSpec, IsThePresetWithTheOverridesItNames) {
  const RecipeOverrides spec = front::recipe_spec(" mxfp4 : scale_rule = rceil , block=16,two_d=true,target=6 ");
  RecipeOverrides by_hand;
  by_hand.recipe = "mxfp4";
  by_hand.scale_rule = "rceil";
  by_hand.block = 16;
  by_hand.two_d = true;
  by_hand.target = 6.0f;
  by_hand.name = "mxfp4:scale_rule=rceil,block=16,two_d=true,target=6";
  EXPECT_EQ(spec, by_hand);
  const Recipe r = spec.resolve();
  EXPECT_EQ(r.name, by_hand.name);
  EXPECT_EQ(r.scale_rule, ScaleRule::pow2_rceil);
  EXPECT_TRUE(operands_for(r, Gemm::fprop).a.two_d);  // every operand, as --two-d
  RecipeOverrides preset;
  preset.recipe = "nvfp4";
  EXPECT_EQ(front::recipe_spec("nvfp4"), preset);
  const auto list = front::recipe_spec_list("nvfp4,mxfp4:block=16,sr_bits=4,ue5m3");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].name, "mxfp4:block=16,sr_bits=4");
  try {
    front::recipe_spec("mxfp4:sr_bits=17");
    FAIL() << "sr_bits 17 accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(front::render(e.keyed(), Spelling::cli), "--recipe 'mxfp4:sr_bits=17': sr_bits=17: must be between 1 and 16");
  }
}

}  // namespace
}  // namespace fp4sim
