// fp4sim verify quantize: the golden bytes pass under every preset, role, layout, nibble order and
// quantizing override, with the quantizer's report reproducing them; hints, tensor scales, stochastic
// rounding, errors and the JSON report; the CLI maps the outcomes to the exit codes of docs/cli.md.
// Planted defects and their explanations: verify_explain_test.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/io/npy.hpp"
#include "verify_fixtures.hpp"

namespace fp4sim {
namespace {

struct PresetRole {
  std::string recipe;
  Role role;
};

class GoldenPasses : public ::testing::TestWithParam<PresetRole> {};

// The recipe overrides that change how an operand is quantized (docs/cli.md), each where valid for the
// preset and the operand: --element-scaling, --block-choice, --amax-scope row, --rht with --rht-signs.
struct Variant {
  std::string label;
  Recipe recipe;
  OperandSpec spec;
};

std::vector<Variant> overrides_of(const Recipe& preset, const OperandSpec& spec, std::size_t cols) {
  std::vector<Variant> out;
  auto add = [&](std::string label, auto change) {
    Variant v{std::move(label), preset, spec};
    change(v.recipe, v.spec);
    if (validate(v.recipe).empty()) out.push_back(std::move(v));
  };
  if (preset.scale_rule == ScaleRule::two_level) {
    for (const auto& row : names(ElementScaling{})) {
      if (row.value == preset.element_scaling) continue;
      add("--element-scaling " + std::string(row.name), [s = row.value](Recipe& r, OperandSpec&) { r.element_scaling = s; });
    }
  }
  for (const auto& row : names(BlockScaleChoice{})) {
    if (row.value == preset.block_choice) continue;
    add("--block-choice " + std::string(row.name), [c = row.value](Recipe& r, OperandSpec&) { r.block_choice = c; });
  }
  if (!spec.two_d) {
    add("--amax-scope row", [](Recipe& r, OperandSpec& o) {
      r.amax_scope = AmaxScope::row;
      o.takes_row_amax = true;  // as `verify quantize --role` quantizes one tensor
    });
  }
  if (cols % 16 == 0) {
    RhtSigns plus{}, reversed = kRhtSigns;
    plus.fill(1);
    std::reverse(reversed.begin(), reversed.end());
    for (const RhtSigns& signs : {kRhtSigns, plus, reversed}) {
      add("--rht --rht-signs " + rht_signs_text(signs), [signs](Recipe& r, OperandSpec& o) {
        r.rht_signs = signs;
        o.rht = true;
      });
    }
    add("--rht --rht-precision float32", [](Recipe& r, OperandSpec& o) {
      r.rht_precision = RhtPrecision::float32;
      o.rht = true;
    });
  }
  return out;
}

TEST(GoldenPassesOverrides, EachOverrideAppliesToSomePreset) {
  std::vector<std::string> labels;
  for (const auto& p : recipe_presets()) {
    for (Role role : {Role::activation, Role::weight, Role::grad_output}) {
      for (const Variant& v : overrides_of(p, operand_for_role(p, role), 96)) labels.push_back(v.label);
    }
  }
  // --element-scaling reciprocal is every preset's own rule, run as given.
  for (const char* label : {"--element-scaling division", "--element-scaling bf16-coefficient",
                            "--block-choice single", "--block-choice 4over6-mae", "--block-choice 4over6-mse",
                            "--amax-scope row", "--rht --rht-signs ++++++++++++++++",
                            "--rht --rht-precision float32"}) {
    EXPECT_NE(std::find(labels.begin(), labels.end(), label), labels.end()) << label;
  }
}

TEST_P(GoldenPasses, UnderEveryLayoutNibbleOrderAndOverride) {
  const auto recipe = find_recipe(GetParam().recipe);
  ASSERT_TRUE(recipe);
  QuantizeRequest request;
  request.spec = operand_for_role(*recipe, GetParam().role);
  request.random.seed = 1234;
  for (const auto& [rows, cols] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 16}, {37, 101}, {130, 96}}) {
    const auto x = random_tensor(rows, cols, static_cast<std::uint32_t>(rows * cols));
    expect_live(golden(*recipe, request, x, rows, cols).q, GetParam().recipe + " " + std::to_string(rows) + "x" + std::to_string(cols));
    for (const Variant& v : overrides_of(*recipe, request.spec, cols)) {
      QuantizeRequest overridden = request;
      overridden.spec = v.spec;
      Golden g = golden(v.recipe, overridden, x, rows, cols);
      const std::string where = GetParam().recipe + " " + v.label + " " + std::to_string(rows) + "x" + std::to_string(cols);
      expect_live(g.q, where);
      const auto rep = run(v.recipe, overridden, x, rows, cols, g);
      EXPECT_TRUE(rep.bit_exact()) << where << "\n" << to_text(rep);
      EXPECT_EQ(rep.model_disagreements, 0u) << where;
    }
    for (auto layout : {ScaleLayout::rowmajor, ScaleLayout::te_rowrep, ScaleLayout::swizzled_128x4}) {
      for (auto nibbles : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::unpacked}) {
        Golden g = golden(*recipe, request, x, rows, cols, layout, nibbles);
        const auto rep = run(*recipe, request, x, rows, cols, g);
        EXPECT_TRUE(rep.bit_exact()) << GetParam().recipe << " " << rows << "x" << cols << " " << name_of(layout)
                                     << " " << name_of(nibbles) << "\n"
                                     << to_text(rep);
        EXPECT_EQ(rep.model_disagreements, 0u) << GetParam().recipe << " " << rows << "x" << cols;
        EXPECT_EQ(rep.blocks, g.q.scale_rows * g.q.scale_cols);
        EXPECT_TRUE(rep.explained.empty());
      }
    }
  }
}

std::vector<PresetRole> all_presets_and_roles() {
  std::vector<PresetRole> out;
  for (const auto& p : recipe_presets()) {
    for (Role role : {Role::activation, Role::weight, Role::grad_output}) out.push_back({std::string(p.name), role});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Presets, GoldenPasses, ::testing::ValuesIn(all_presets_and_roles()), [](const auto& info) {
  std::string name = info.param.recipe + "_" + std::string(name_of(info.param.role));
  for (auto& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
});

TEST(Hints, ScalesInAnotherLayoutAndCodesInAnotherNibbleOrder) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = random_tensor(128, 64, 5);  // rowmajor and swizzled scales are both [128, 4]
  Golden g = golden(recipe, request, x, 128, 64, ScaleLayout::swizzled_128x4, NibbleOrder::high_first);
  g.theirs.layout = ScaleLayout::rowmajor;
  g.theirs.nibbles = NibbleOrder::low_first;
  const auto rep = run(recipe, request, x, 128, 64, g, 3);
  EXPECT_GT(rep.mismatched_scales, 0u);
  EXPECT_EQ(rep.explained.size(), 3u);
  EXPECT_TRUE(contains(rep.hints, "your scales match the golden ones exactly when read as {layout} swizzled-128x4"));
  EXPECT_TRUE(contains(rep.hints, "your codes match the golden ones exactly when read as {nibbles} high-first"));
}

TEST(TensorScale, ComparedWithEncodeDecodeOrAmax) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = random_tensor(4, 64, 9);
  Golden g = golden(recipe, request, x, 4, 64);
  g.theirs.tensor_scale = g.q.global_decode_scale;
  auto rep = run(recipe, request, x, 4, 64, g);
  EXPECT_TRUE(rep.bit_exact());
  EXPECT_EQ(rep.tensor_scale_matched, "decode");
  g.theirs.tensor_scale_kind = TensorScaleKind::encode;
  rep = run(recipe, request, x, 4, 64, g);
  EXPECT_FALSE(rep.bit_exact());
  EXPECT_TRUE(rep.tensor_scale_mismatch);
  ASSERT_FALSE(rep.explained.empty());
  EXPECT_EQ(rep.explained[0].kind, MismatchNote::Kind::tensor_scale);
  g.theirs.tensor_scale_kind = TensorScaleKind::any;
  g.theirs.tensor_scale = std::nextafter(g.q.global_encode_scale, 0.0f);
  rep = run(recipe, request, x, 4, 64, g);
  EXPECT_TRUE(rep.tensor_scale_mismatch);
}

TEST(Stochastic, SeedAndExplicitBitsReproduceAndExplain) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::grad_output);
  ASSERT_EQ(request.spec.rounding, Rounding::sr_fastest);
  request.random.seed = 77;
  std::vector<float> x(8 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  Golden g = golden(recipe, request, x, 8, 64);
  auto rep = run(recipe, request, x, 8, 64, g);
  EXPECT_TRUE(rep.bit_exact()) << to_text(rep);
  // Another seed: the codes differ, and the explanation names the random integer.
  QuantizeRequest other = request;
  other.random.seed = 78;
  rep = run(recipe, other, x, 8, 64, g);
  EXPECT_GT(rep.mismatched_elements, 0u);
  ASSERT_FALSE(rep.explained.empty());
  EXPECT_NE(joined(rep.explained[0]).find("stochastic rounding sr-fastest with random integer r = "), std::string::npos)
      << joined(rep.explained[0]);
}

TEST(Errors, ShapesThatDoNotFitAreDataErrors) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = random_tensor(4, 64, 1);
  Golden g = golden(recipe, request, x, 4, 64);
  g.theirs.codes_shape = {4, 31};
  EXPECT_THROW(run(recipe, request, x, 4, 64, g), DataError);
  g = golden(recipe, request, x, 4, 64);
  g.theirs.scales_shape = {4, 5};
  EXPECT_THROW(run(recipe, request, x, 4, 64, g), DataError);
  Recipe wide = recipe;
  wide.element = formats::e2m3;
  g = golden(recipe, request, x, 4, 64);
  EXPECT_THROW(run(wide, request, x, 4, 64, g), UsageError);
}

TEST(Json, NoBareNonFiniteNumbersAndTheCountsAreThere) {
  const Recipe recipe = *find_recipe("mxfp4");
  std::vector<float> x(32, 1.0f);
  x[0] = std::numeric_limits<float>::quiet_NaN();  // NaN block: NaN scale, its elements go unscaled
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  Golden g = golden(recipe, request, x, 1, 32);
  g.codes[0] ^= 0x11;  // elements 0 (x = NaN) and 1
  const auto rep = run(recipe, request, x, 1, 32, g);
  const std::string json = to_json(rep);
  EXPECT_EQ(json.find("nan"), std::string::npos) << json;
  EXPECT_EQ(json.find("inf"), std::string::npos) << json;
  EXPECT_NE(json.find("\"x\": null,\n      \"x_note\": \"NaN\""), std::string::npos) << json;
  // The multiplier the golden rule applied in a NaN block: 1 (unscaled), as quantize() does.
  EXPECT_NE(json.find("\"multiplier\": 1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"mismatched_elements\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"bit_exact\": false"), std::string::npos) << json;
}

TEST(Text, FloatsPrintShortAndExact) {
  EXPECT_EQ(float_text(0.09375f), "0.09375");
  EXPECT_EQ(float_text(320.0f), "320");
  EXPECT_EQ(float_text(0.1f), "0.1");
  EXPECT_EQ(float_text(-0.0f), "-0");
  EXPECT_EQ(float_text(std::numeric_limits<float>::max()), "3.4028235e+38");
  EXPECT_EQ(hex_bits(1.0f), "0x3f800000");
}

// ------------------------------------------------------------------------------------------------
// The CLI: exit codes and the --tensor-scale number/policy split.

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("fp4sim_verify_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    const Recipe recipe = *find_recipe("nvfp4");
    QuantizeRequest request;
    request.spec = operand_for_role(recipe, Role::activation);
    x_ = random_tensor(4, 64, 17);
    g_ = golden(recipe, request, x_, 4, 64);
    npy::write(dir_ / "x.npy", npy::DType::f4, {4, 64}, x_.data());
    npy::write(dir_ / "codes.npy", npy::DType::u1, {4, 32}, g_.codes.data());
    npy::write(dir_ / "scales.npy", npy::DType::u1, {4, 4}, g_.scales.data());
    auto bad = g_.codes;
    bad[5] ^= 0x01;
    npy::write(dir_ / "bad.npy", npy::DType::u1, {4, 32}, bad.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  int fp4sim(const std::string& args, std::string* out = nullptr) {
    const auto log = dir_ / "out.txt";
    const std::string cmd = std::string(FP4SIM_BINARY) + " " + args + " > " + log.string() + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    if (out) *out = ss.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string p(const std::string& name) { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  std::vector<float> x_;
  Golden g_;
};

TEST_F(Cli, ExitCodes) {
  const std::string common = "verify quantize --recipe nvfp4 --in " + p("x.npy") + " --scales " + p("scales.npy");
  std::string out;
  EXPECT_EQ(fp4sim(common + " --codes " + p("codes.npy"), &out), 0) << out;
  EXPECT_NE(out.find("BIT-EXACT"), std::string::npos) << out;
  EXPECT_EQ(fp4sim(common + " --codes " + p("bad.npy"), &out), 4) << out;
  EXPECT_NE(out.find("NOT BIT-EXACT: 1 element and 0 scale mismatch(es)"), std::string::npos) << out;
  EXPECT_EQ(fp4sim(common + " --codes " + p("bad.npy") + " --json", &out), 4) << out;
  EXPECT_NE(out.find("\"mismatched_elements\": 1"), std::string::npos) << out;
  EXPECT_EQ(fp4sim(common + " --codes " + p("codes.npy") + " --layout diagonal", &out), 2) << out;
  EXPECT_EQ(fp4sim(common + " --codes " + p("codes.npy") + " --layout swizzled-128x4", &out), 3) << out;
  EXPECT_NE(out.find("does not fit layout swizzled-128x4"), std::string::npos) << out;
  EXPECT_EQ(fp4sim(common + " --codes " + p("scales.npy"), &out), 3) << out;
  EXPECT_NE(out.find(p("scales.npy") + ": shape [4, 4] does not hold low-first codes"), std::string::npos) << out;
}

TEST_F(Cli, TensorScaleTakesANumberOrAPolicy) {
  const std::string common = "verify quantize --recipe nvfp4 --in " + p("x.npy") + " --scales " + p("scales.npy") +
                             " --codes " + p("codes.npy");
  std::string out;
  char g[64];
  std::snprintf(g, sizeof g, "%a", static_cast<double>(g_.q.global_encode_scale));
  EXPECT_EQ(fp4sim(common + " --tensor-scale " + g, &out), 0) << out;
  EXPECT_NE(out.find("matches the golden encode value"), std::string::npos) << out;
  EXPECT_EQ(fp4sim(common + " --tensor-scale 1.5", &out), 4) << out;
  EXPECT_NE(out.find("tensor scale differs"), std::string::npos) << out;
  EXPECT_EQ(fp4sim(common + " --tensor-scale current", &out), 0) << out;  // the policy override
  EXPECT_EQ(fp4sim(common + " --tensor-scale none", &out), 4) << out;     // G = 1: other scales
  EXPECT_EQ(fp4sim(common + " --tensor-scale banana", &out), 2) << out;
  EXPECT_EQ(fp4sim(common + " --tensor-scale 2 --tensor-scale-value 3", &out), 2) << out;
}

}  // namespace
}  // namespace fp4sim
