// fp4sim verify quantize: the golden bytes pass under every preset, role, layout and nibble order;
// planted defects are counted and explained with hand-derived facts (ties, neighbours, the rule that
// reproduces the planted byte); the CLI maps the outcomes to the exit codes of docs/cli.md.
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
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim {
namespace {

struct Golden {
  QuantizedTensor q;
  std::vector<std::uint8_t> codes, scales;
  TheirQuantized theirs;
};

// The golden bytes as a kernel using `layout` and `nibbles` would store them.
Golden golden(const Recipe& recipe, const QuantizeRequest& request, const std::vector<float>& x, std::size_t rows,
              std::size_t cols, ScaleLayout layout = ScaleLayout::rowmajor, NibbleOrder nibbles = NibbleOrder::low_first) {
  Golden g;
  g.q = quantize(recipe, request, x, rows, cols);
  const ScaleGrid grid{rows, cols, g.q.block_rows, g.q.block_cols};
  g.codes = codes_to_order(g.q.codes, rows, cols, nibbles);
  g.scales = scales_to_layout(g.q.scales, grid, layout);
  g.theirs.layout = layout;
  g.theirs.nibbles = nibbles;
  g.theirs.codes_shape = codes_shape(nibbles, rows, cols);
  g.theirs.scales_shape = ScaleStorage::canonical_shape(layout, grid);
  return g;
}

QuantizeVerifyReport run(const Recipe& recipe, const QuantizeRequest& request, const std::vector<float>& x,
                         std::size_t rows, std::size_t cols, Golden& g, std::size_t max_explained = 10) {
  g.theirs.codes = g.codes;
  g.theirs.scales = g.scales;
  VerifyQuantizeRequest v;
  v.quantize = request;
  v.max_explained = max_explained;
  return verify_quantize(recipe, v, x, rows, cols, g.theirs);
}

// Normal values whose 32 x 32 tiles span seven binades, so that every block scale is live in every scale
// format (none underflows to zero) and a tile's rows share its magnitude, plus a zero block, a value that
// flushes to zero, an outlier and -0.
std::vector<float> random_tensor(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      x[r * cols + c] = normal(gen) * std::ldexp(1.0f, static_cast<int>((r / 32 + c / 32) % 7) - 3);
    }
  }
  if (cols >= 32) std::fill(x.begin() + 16, x.begin() + 32, 0.0f);  // row 0's second block
  if (x.size() > 100) {
    x[40] = 1e-30f;
    x[70] = 300.0f;
    x[99] = -0.0f;
  }
  return x;
}

// The fixture makes GoldenPasses able to fail: no block scale underflows and over half the codes are nonzero
// (an outlier that underflowed every block scale once left only zero codes, which every rule permutes).
void expect_live(const QuantizedTensor& q, const std::string& where) {
  std::size_t nonzero = 0;
  for (std::size_t r = 0; r < q.rows; ++r) {
    for (std::size_t c = 0; c < q.cols; ++c) nonzero += (q.code(r, c) & 0x7) != 0;
  }
  EXPECT_EQ(q.counts.scale_underflow, 0u) << where;
  EXPECT_GT(nonzero, q.rows * q.cols / 2) << where;
}

// Normal values with one tensor-wide magnitude (no block scale underflows), held in bfloat16 as
// activations are: their 8-bit significands put scaled values on e2m1's midpoints often enough for a
// one-ulp difference in the scaling to show.
std::vector<float> normal_tensor(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = decode_to_float(formats::bf16, encode(formats::bf16, normal(gen), EncodeOptions{}).code);
  return x;
}

bool contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string joined(const MismatchNote& n) {
  std::string s = n.summary;
  for (const auto& d : n.details) s += "\n" + d;
  return s;
}

// ------------------------------------------------------------------------------------------------

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
  if (!spec.two_d) add("--amax-scope row", [](Recipe& r, OperandSpec&) { r.amax_scope = AmaxScope::row; });
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
                            "--amax-scope row", "--rht --rht-signs ++++++++++++++++"}) {
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

// ------------------------------------------------------------------------------------------------
// Planted defects with hand-derived expectations.

// MXFP4, one block of 32 with amax 6: the OCP floor rule gives 2^(2 - 2) = 1 (code 127), so y = x.
// x = 2.5 is the E2M1 midpoint of 2 (0x4) and 3 (0x5); RNE keeps the even code 0x4.
TEST(Planted, ElementTieRoundedTheOtherWay) {
  const Recipe recipe = *find_recipe("mxfp4");
  std::vector<float> x(32, 0.5f);
  x[0] = 6.0f;
  x[5] = 2.5f;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  Golden g = golden(recipe, request, x, 1, 32);
  ASSERT_EQ(g.q.scales[0], 127);
  ASSERT_EQ(g.q.code(0, 5), 0x4);
  g.codes[2] = static_cast<std::uint8_t>((g.codes[2] & 0x0F) | (0x5 << 4));  // element 5: high nibble of byte 2
  const auto rep = run(recipe, request, x, 1, 32, g);
  EXPECT_FALSE(rep.bit_exact());
  EXPECT_EQ(rep.mismatched_elements, 1u);
  EXPECT_EQ(rep.mismatched_scales, 0u);
  EXPECT_EQ(rep.mismatched_blocks, 1u);
  ASSERT_EQ(rep.explained.size(), 1u);
  const MismatchNote& n = rep.explained[0];
  EXPECT_EQ(n.kind, MismatchNote::Kind::element);
  EXPECT_EQ(n.row, 0u);
  EXPECT_EQ(n.col, 5u);
  EXPECT_EQ(n.golden, 0x4u);
  EXPECT_EQ(n.theirs, 0x5u);
  const std::string text = joined(n);
  EXPECT_NE(text.find("y = 2.5 is an exact e2m1 midpoint between 0x4 (2) and 0x5 (3); RNE keeps the even code 0x4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the tie went to the odd code"), std::string::npos) << text;
  EXPECT_NE(text.find("yours matches y rounded to nearest, ties away from zero (rna)"), std::string::npos) << text;
}

TEST(Planted, SwappedNibbles) {
  const Recipe recipe = *find_recipe("mxfp4");
  std::vector<float> x(64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  Golden g = golden(recipe, request, x, 1, 64);
  // Byte 3 holds elements 6 (= 3, code 0x6... ) and 7: pick a byte whose nibbles differ.
  std::size_t byte = 0;
  while ((g.codes[byte] & 0xF) == (g.codes[byte] >> 4)) ++byte;
  g.codes[byte] = static_cast<std::uint8_t>((g.codes[byte] << 4) | (g.codes[byte] >> 4));
  const auto rep = run(recipe, request, x, 1, 64, g);
  EXPECT_EQ(rep.mismatched_elements, 2u);
  EXPECT_EQ(rep.swapped_nibble_pairs, 1u);
  ASSERT_EQ(rep.explained.size(), 2u);
  EXPECT_EQ(rep.explained[0].col, 2 * byte);
  EXPECT_EQ(rep.explained[1].col, 2 * byte + 1);
  EXPECT_NE(joined(rep.explained[0]).find("are exchanged"), std::string::npos) << joined(rep.explained[0]);
  EXPECT_TRUE(contains(rep.hints, "1 byte(s) hold their two element codes in the other nibble order"));
}

// NVFP4 without a tensor scale (G = 1): block amax 6.375 gives u = RN(6.375 * RN(1/6)) = 1.0625
// (6.375 * 0.16666667163 = 1.06250003, within half an ulp of 1.0625), the UE4M3 midpoint of 1.0 (0x38)
// and 1.125 (0x39); RNE keeps 0x38.
TEST(Planted, ScaleTieRoundedUp) {
  Recipe recipe = *find_recipe("nvfp4");
  recipe.tensor_scale = TensorScalePolicy::none;
  std::vector<float> x(16, 1.0f);
  x[3] = -6.375f;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  Golden g = golden(recipe, request, x, 1, 16);
  ASSERT_EQ(g.q.scales[0], 0x38);
  g.scales[0] = 0x39;
  const auto rep = run(recipe, request, x, 1, 16, g);
  EXPECT_EQ(rep.mismatched_scales, 1u);
  EXPECT_EQ(rep.mismatched_elements, 0u);
  ASSERT_GE(rep.explained.size(), 1u);
  const MismatchNote& n = rep.explained[0];
  EXPECT_EQ(n.kind, MismatchNote::Kind::scale);
  const std::string text = joined(n);
  EXPECT_NE(text.find("block amax = 6.375 (0x40cc0000)"), std::string::npos) << text;
  EXPECT_NE(text.find("ideal scale 1.0625 is an exact ue4m3 midpoint between 0x38 (1) and 0x39 (1.125); RNE keeps "
                      "the even code 0x38; yours is 0x39 (rounded away from zero: the tie went to the odd code)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("yours matches the ideal scale rounded to nearest with ties away from zero (RNA)"),
            std::string::npos)
      << text;
}

// The elements of a block whose scale differs are reproduced from the user's scale.
TEST(Planted, ElementMismatchesFollowingAScaleMismatch) {
  Recipe recipe = *find_recipe("nvfp4");
  recipe.tensor_scale = TensorScalePolicy::none;
  std::vector<float> x(16);
  for (std::size_t i = 0; i < 16; ++i) x[i] = 0.37f * static_cast<float>(i) - 2.0f;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  Golden g = golden(recipe, request, x, 1, 16);
  // Their kernel: the scale rounded up, the elements quantized with that scale.
  const std::uint8_t their_scale = static_cast<std::uint8_t>(g.q.scales[0] + 1);
  g.scales[0] = their_scale;
  const float s = decode_to_float(recipe.scale, their_scale);
  const float m = 1.0f / s;
  std::fill(g.codes.begin(), g.codes.end(), 0);
  for (std::size_t i = 0; i < 16; ++i) {
    const auto code = encode(recipe.element, x[i] * m, EncodeOptions{Rounding::rne, true}).code;
    g.codes[i / 2] |= static_cast<std::uint8_t>((i & 1) ? code << 4 : code);
  }
  const auto rep = run(recipe, request, x, 1, 16, g, 100);
  EXPECT_EQ(rep.mismatched_scales, 1u);
  EXPECT_GT(rep.mismatched_elements, 0u);
  EXPECT_EQ(rep.elements_consistent_with_their_scale, rep.mismatched_elements);
  EXPECT_TRUE(contains(rep.hints, "every element mismatch follows from your block scales"));
}

// MXFP4 block amax 7: floor gives 2^0 (code 127), ceil 2^1 (code 128, as 7 > 6 * 2^0).
TEST(Planted, Pow2ScaleFromAnotherRule) {
  const Recipe recipe = *find_recipe("mxfp4");
  std::vector<float> x(32, 1.0f);
  x[9] = 7.0f;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  Golden g = golden(recipe, request, x, 1, 32);
  ASSERT_EQ(g.q.scales[0], 127);
  g.scales[0] = 128;
  const auto rep = run(recipe, request, x, 1, 32, g);
  ASSERT_GE(rep.explained.size(), 1u);
  const std::string text = joined(rep.explained[0]);
  EXPECT_NE(text.find("yours matches the ceil rule"), std::string::npos) << text;
  EXPECT_NE(text.find("unbiased scale exponent 0"), std::string::npos) << text;
}

TEST(Planted, RowCopyOfATileScale) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::weight);
  ASSERT_TRUE(request.spec.two_d);
  const auto x = random_tensor(32, 48, 3);
  Golden g = golden(recipe, request, x, 32, 48, ScaleLayout::te_rowrep);
  g.scales[3 * 3 + 1] ^= 1;  // row 3's copy of tile [0, 1]
  const auto rep = run(recipe, request, x, 32, 48, g);
  EXPECT_EQ(rep.mismatched_scales, 1u);
  ASSERT_GE(rep.explained.size(), 1u);
  EXPECT_EQ(rep.explained[0].row, 0u);
  EXPECT_EQ(rep.explained[0].col, 1u);
  EXPECT_EQ(rep.explained[0].stored_row, 3u);
}

// A kernel that scales each element by dividing by RN(s * Gd) instead of multiplying by RN(1 / RN(s * Gd))
// (the defect TE PRs #2615/#2639 fixed), written out as such a kernel does it. Its codes differ where the
// two quotients, one ulp apart, straddle an e2m1 rounding boundary: there a rounding mode other than RNE
// (rtz, rna, rup or rdown) applied to the golden scaled value also gives the kernel's code, and verify
// blamed that rounding until the alternatives were ranked by how many of the user's bytes they reproduce.
TEST(Planted, ElementScalingByDivisionIsNamedNotRtz) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const std::size_t rows = 512, cols = 256;
  const auto x = normal_tensor(rows, cols, 15);
  Golden g = golden(recipe, request, x, rows, cols);
  ASSERT_EQ(g.q.counts.scale_underflow, 0u);  // no zero scale: the kernel divides in every block
  std::fill(g.codes.begin(), g.codes.end(), 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const float divisor = decode_to_float(recipe.scale, g.q.scale_code(r, c)) * g.q.global_decode_scale;
      const auto code = encode(recipe.element, x[r * cols + c] / divisor, EncodeOptions{Rounding::rne, true}).code;
      g.codes[r * (cols / 2) + c / 2] |= static_cast<std::uint8_t>((c & 1) ? code << 4 : code);
    }
  }
  const auto rep = run(recipe, request, x, rows, cols, g, 1000);
  EXPECT_EQ(rep.mismatched_scales, 0u);
  ASSERT_GT(rep.mismatched_elements, 0u);
  ASSERT_EQ(rep.explained.size(), rep.mismatched_elements);
  EXPECT_TRUE(contains(rep.hints, "your codes and scales match the golden model exactly with one rule changed: the "
                                  "element scaling computed by division, y = RN(x / RN(s * Gd))"));
  std::size_t a_rounding_would_fit = 0;
  for (const MismatchNote& n : rep.explained) {
    const std::string text = joined(n);
    EXPECT_NE(text.find("yours matches the element scaling computed by division, y = RN(x / RN(s * Gd)), instead "
                        "of multiplying by RN(1 / RN(s * Gd)) (that rule reproduces all of your codes and scales)"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("yours matches y rounded"), std::string::npos) << text;
    const auto field = std::find_if(n.fields.begin(), n.fields.end(), [](const JsonField& f) { return f.key == "theirs_matches"; });
    ASSERT_NE(field, n.fields.end());
    EXPECT_NE(field->value.find("the element scaling computed by division"), std::string::npos) << field->value;
    const float divisor = decode_to_float(recipe.scale, g.q.scale_code(n.row, n.col)) * g.q.global_decode_scale;
    const float y = x[n.row * cols + n.col] * (1.0f / divisor);
    bool fits = false;
    for (Rounding other : {Rounding::rna, Rounding::rtz, Rounding::rup, Rounding::rdown}) {
      fits |= encode(recipe.element, y, EncodeOptions{other, true}).code == n.theirs;
    }
    a_rounding_would_fit += fits;
  }
  EXPECT_EQ(a_rounding_would_fit, rep.mismatched_elements);  // what made the per-element reading blame a rounding
}

// TE's tuned 1-D kernel with use_fast_math multiplies by a BF16 coefficient, BF16(min(G / s, BF16_MAX)),
// instead of RN(1 / RN(s * Gd)) (docs/semantics.md 1.4), written out as that kernel does it.
TEST(Planted, FastMathBf16CoefficientIsNamed) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const std::size_t rows = 128, cols = 256;
  const auto x = normal_tensor(rows, cols, 16);
  Golden g = golden(recipe, request, x, rows, cols);
  ASSERT_EQ(g.q.counts.scale_underflow, 0u);
  const float bf16_max = decode_to_float(formats::bf16, formats::bf16.max_finite_code());
  std::fill(g.codes.begin(), g.codes.end(), 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const float s = decode_to_float(recipe.scale, g.q.scale_code(r, c));
      const float coefficient = decode_to_float(
          formats::bf16, encode(formats::bf16, std::min(g.q.global_encode_scale / s, bf16_max), EncodeOptions{}).code);
      const auto code = encode(recipe.element, x[r * cols + c] * coefficient, EncodeOptions{Rounding::rne, true}).code;
      g.codes[r * (cols / 2) + c / 2] |= static_cast<std::uint8_t>((c & 1) ? code << 4 : code);
    }
  }
  const auto rep = run(recipe, request, x, rows, cols, g);
  EXPECT_EQ(rep.mismatched_scales, 0u);
  ASSERT_GT(rep.mismatched_elements, 0u);
  EXPECT_TRUE(contains(rep.hints, "your codes and scales match the golden model exactly with one rule changed: the "
                                  "fast-math BF16 coefficient of TE's tuned kernel"));
  for (const MismatchNote& n : rep.explained) {
    EXPECT_NE(joined(n).find("yours matches the fast-math BF16 coefficient"), std::string::npos) << joined(n);
  }
}

// The same ranking keeps naming a rounding defect: a kernel that truncates every element is named rtz,
// not division (which reproduces only the few near-tie codes).
TEST(Planted, ElementsRoundedTowardZeroAreNamedRtz) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = normal_tensor(64, 64, 7);
  Golden g = golden(recipe, request, x, 64, 64);
  QuantizeRequest truncating = request;
  truncating.spec.rounding = Rounding::rtz;
  g.codes = golden(recipe, truncating, x, 64, 64).codes;
  const auto rep = run(recipe, request, x, 64, 64, g);
  ASSERT_GT(rep.mismatched_elements, 0u);
  EXPECT_TRUE(contains(rep.hints, "with one rule changed: y rounded toward zero (rtz)"));
  for (const MismatchNote& n : rep.explained) {
    EXPECT_NE(joined(n).find("yours matches y rounded toward zero (rtz) (that rule reproduces all"), std::string::npos)
        << joined(n);
  }
}

// ------------------------------------------------------------------------------------------------
// Explained from what the quantizer used: the 4over6 candidate it kept, the row's G, the divisor.

// nvfp4-4over6 (T = 256): tensor amax 6 gives G = RN(RN(6 * 256) / 6) = 256. Block 1 (amax 4): map-to-6
// u6 = RN(RN(4/6) * 256) = 170.67, between UE4M3 160 and 176, nearer 0x73 (176); map-to-4 u4 = RN(u6 * 1.5),
// a hair above 256, RNE 0x78 (256). Under 256, Gd = 2^-8 and m = 1: the block's 4, 2, 1, 3 keep their
// codes (error 0); under 176 they scale by 16/11 and miss: map-to-4 is kept. A kernel that kept map-to-6
// wrote 0x73.
TEST(Explained, FourOverSixNamesTheCandidateKept) {
  const Recipe recipe = *find_recipe("nvfp4-4over6");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  ASSERT_EQ(request.spec.target, 256.0f);
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  x[16] = 4.0f;
  x[17] = 2.0f;
  x[18] = -1.0f;
  x[19] = 3.0f;
  Golden g = golden(recipe, request, x, 1, 32);
  ASSERT_EQ(g.q.global_encode_scale, 256.0f);
  ASSERT_EQ(g.q.scales[1], 0x78);
  g.scales[1] = 0x73;
  const auto rep = run(recipe, request, x, 1, 32, g);
  EXPECT_EQ(rep.model_disagreements, 0u);
  EXPECT_EQ(rep.mismatched_scales, 1u);
  ASSERT_GE(rep.explained.size(), 1u);
  const MismatchNote& n = rep.explained[0];
  ASSERT_EQ(n.kind, MismatchNote::Kind::scale);
  const std::string text = joined(n);
  EXPECT_NE(text.find("block amax = 4 (0x40800000)"), std::string::npos) << text;
  EXPECT_NE(text.find("4over6 (4over6-mae): map-to-6 u6 = min(RN(RN(amax / 6) * G), FLT_MAX) = 170.66667"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("code 0x73 (176)"), std::string::npos) << text;
  EXPECT_NE(text.find("code 0x78 (256), block error 0; with G = 256 (tensor amax 6, target 256)"), std::string::npos) << text;
  EXPECT_NE(text.find("map-to-4 is kept: its error is smaller"), std::string::npos) << text;
  EXPECT_NE(text.find("ideal scale u4 = 256"), std::string::npos) << text;
  EXPECT_NE(text.find("yours matches the other 4over6 candidate, map-to-6 (block error "), std::string::npos) << text;
}

// Row-scaled NVFP4 (T = 448): row 0's amax 6 gives G = 448, row 1's amax 3 gives G = 896, and each block's
// amax is its row's, so both scales are 448 (0x7E). A kernel that used the tensor's G = 448 for row 1 wrote
// RNE(RN(3 * RN(448 * RN(1/6)))) = 224 (0x76).
TEST(Explained, RowScopeUsesTheRowsG) {
  Recipe recipe = *find_recipe("nvfp4-norht");
  recipe.amax_scope = AmaxScope::row;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  std::vector<float> x(32, 0.5f);
  x[4] = -6.0f;
  x[16 + 9] = 3.0f;
  Golden g = golden(recipe, request, x, 2, 16);
  ASSERT_EQ(g.q.scales[1], 0x7E);
  g.scales[1] = 0x76;
  const auto rep = run(recipe, request, x, 2, 16, g);
  EXPECT_EQ(rep.model_disagreements, 0u);
  ASSERT_GE(rep.explained.size(), 1u);
  const std::string text = joined(rep.explained[0]);
  EXPECT_NE(text.find("with G = 896 (row 1's amax 3, --amax-scope row, target 448)"), std::string::npos) << text;
  EXPECT_NE(text.find("yours matches the tensor's G = 448 (tensor amax 6) instead of row 1's (--amax-scope tensor)"),
            std::string::npos)
      << text;
}

// ElementScaling::division: y = RN(x / d), d = RN(s * Gd). A kernel whose scales are one code up, with its
// elements divided by its own d, is explained element by element from its scale: the golden rule asked for
// that code divides too (multiplying by RN(1/d) instead differs at near-ties, counted below).
TEST(Explained, DivisionUsesTheDivisor) {
  Recipe recipe = *find_recipe("nvfp4");
  recipe.element_scaling = ElementScaling::division;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const std::size_t rows = 512, cols = 256;
  const auto x = normal_tensor(rows, cols, 15);
  Golden g = golden(recipe, request, x, rows, cols);
  ASSERT_EQ(g.q.counts.scale_underflow, 0u);
  const float gd = g.q.global_decode_scale;
  for (std::uint8_t& s : g.scales) ++s;
  std::fill(g.codes.begin(), g.codes.end(), 0);
  std::size_t reciprocal_differs = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const float d = decode_to_float(recipe.scale, g.scales[r * (cols / 16) + c / 16]) * gd;
      const float xv = x[r * cols + c];
      const auto code = encode(recipe.element, xv / d, EncodeOptions{Rounding::rne, true}).code;
      reciprocal_differs += encode(recipe.element, xv * (1.0f / d), EncodeOptions{Rounding::rne, true}).code != code;
      g.codes[r * (cols / 2) + c / 2] |= static_cast<std::uint8_t>((c & 1) ? code << 4 : code);
    }
  }
  ASSERT_GT(reciprocal_differs, 0u);  // what a multiplier in place of the divisor would get wrong
  const auto rep = run(recipe, request, x, rows, cols, g, 1);
  EXPECT_EQ(rep.model_disagreements, 0u);
  EXPECT_EQ(rep.mismatched_scales, rep.blocks);
  ASSERT_GT(rep.mismatched_elements, 0u);
  EXPECT_EQ(rep.elements_consistent_with_their_scale, rep.mismatched_elements);

  // The golden bytes with one code changed: the explanation shows d and y = RN(x / d).
  Golden one = golden(recipe, request, x, rows, cols);
  one.codes[0] ^= 0x1;
  const auto single = run(recipe, request, x, rows, cols, one, 1);
  ASSERT_EQ(single.explained.size(), 1u);
  const MismatchNote& n = single.explained[0];
  const float d = decode_to_float(recipe.scale, one.q.scales[0]) * gd;
  const std::string text = joined(n);
  EXPECT_NE(text.find("divisor d = RN(s * Gd) = " + float_text(d) + " (Gd = " + float_text(gd) +
                      "); scaled value y = RN(x / d) = " + float_text(x[0] / d)),
            std::string::npos)
      << text;
  const auto field = std::find_if(n.fields.begin(), n.fields.end(), [](const JsonField& f) { return f.key == "divisor"; });
  EXPECT_NE(field, n.fields.end());
}

// ------------------------------------------------------------------------------------------------
// Planted defects named as the top cause: the "kernel output" is the golden model with one rule changed
// (or the golden bytes stored another way); verify, run with the correct recipe, must rank that rule
// first, reproducing every byte, while the correct recipe's own bytes give no mismatch.

// The correct recipe's bytes are bit-exact; the planted ones are not, and the first alternative names
// the planted rule and reproduces all of them.
void expect_named(const Recipe& recipe, const QuantizeRequest& request, const std::vector<float>& x, std::size_t rows,
                  std::size_t cols, Golden planted, const std::string& label) {
  Golden correct = golden(recipe, request, x, rows, cols);
  EXPECT_TRUE(run(recipe, request, x, rows, cols, correct).bit_exact());
  const auto rep = run(recipe, request, x, rows, cols, planted, 2);
  ASSERT_FALSE(rep.bit_exact());
  ASSERT_FALSE(rep.alternatives.empty());
  EXPECT_NE(rep.alternatives.front().label.find(label), std::string::npos) << rep.alternatives.front().label;
  EXPECT_TRUE(rep.alternatives.front().exact()) << rep.alternatives.front().mismatched_elements << " elements, "
                                                << rep.alternatives.front().mismatched_scales << " scales";
  EXPECT_NE(to_text(rep).find("likeliest causes"), std::string::npos);
  EXPECT_NE(to_json(rep).find("\"alternatives\": ["), std::string::npos);
}

TEST(PlantedCause, FourOverSix) {
  const Recipe recipe = *find_recipe("nvfp4-norht");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = normal_tensor(64, 128, 21);
  for (BlockScaleChoice choice : {BlockScaleChoice::four_over_six_mae, BlockScaleChoice::four_over_six_mse}) {
    Recipe kernel = recipe;
    kernel.block_choice = choice;
    expect_named(recipe, request, x, 64, 128, golden(kernel, request, x, 64, 128),
                 "TE's " + std::string(name_of(choice)) + " adaptive block scaling (map-to-4");
    QuantizeRequest at256 = request;  // TE's default E4M3 bound
    at256.spec.target = 256.0f;
    expect_named(recipe, request, x, 64, 128, golden(kernel, at256, x, 64, 128),
                 "TE's " + std::string(name_of(choice)) + " adaptive block scaling with its E4M3 bound 256");
  }
}

TEST(PlantedCause, RowScaledAmax) {
  const Recipe recipe = *find_recipe("nvfp4-norht");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  auto x = normal_tensor(32, 64, 22);
  for (std::size_t c = 0; c < 64; ++c) x[5 * 64 + c] *= 1e-3f;  // rows of other magnitudes
  Recipe kernel = recipe;
  kernel.amax_scope = AmaxScope::row;
  expect_named(recipe, request, x, 32, 64, golden(kernel, request, x, 32, 64), "row-scaled NVFP4");
}

TEST(PlantedCause, NibbleOrder) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = normal_tensor(16, 64, 23);
  Golden planted = golden(recipe, request, x, 16, 64, ScaleLayout::rowmajor, NibbleOrder::high_first);
  planted.theirs.nibbles = NibbleOrder::low_first;  // a kernel that packs element 2j in the high nibble
  expect_named(recipe, request, x, 16, 64, planted, "another nibble order (--nibbles high-first)");
}

TEST(PlantedCause, ScaleLayout) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = normal_tensor(128, 64, 24);  // rowmajor and swizzled scales are both [128, 4]
  Golden planted = golden(recipe, request, x, 128, 64, ScaleLayout::swizzled_128x4);
  planted.theirs.layout = ScaleLayout::rowmajor;
  expect_named(recipe, request, x, 128, 64, planted, "another layout (--layout swizzled-128x4)");
}

TEST(PlantedCause, HadamardSignVector) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  request.spec.rht = true;
  const auto x = normal_tensor(16, 64, 25);
  Recipe kernel = recipe;
  kernel.rht_signs.fill(1);  // a kernel without the random sign mask
  expect_named(recipe, request, x, 16, 64, golden(kernel, request, x, 16, 64), "without random signs (all +1)");
  kernel.rht_signs = recipe.rht_signs;
  std::reverse(kernel.rht_signs.begin(), kernel.rht_signs.end());
  expect_named(recipe, request, x, 16, 64, golden(kernel, request, x, 16, 64), "sign vector in reverse order");
  // A user-chosen vector is the golden rule when verify is given it (--rht-signs), and TE's is then the
  // alternative that names a kernel still using TE's.
  Recipe chosen = recipe;
  chosen.rht_signs = *parse_rht_signs("-+-+++--+-+---++");
  expect_named(chosen, request, x, 16, 64, golden(recipe, request, x, 16, 64), "the RHT with TE's sign vector");
}

TEST(PlantedCause, ElementScalingWhenTheRecipeHasTheOtherRule) {
  // The ranking is symmetric: a recipe that says division names a kernel that multiplies.
  Recipe recipe = *find_recipe("nvfp4");
  recipe.element_scaling = ElementScaling::division;
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = normal_tensor(256, 256, 15);
  expect_named(recipe, request, x, 256, 256, golden(*find_recipe("nvfp4"), request, x, 256, 256),
               "the element scaling by the reciprocal multiplier");
}

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
  EXPECT_TRUE(contains(rep.hints, "your scales match the golden ones exactly when read as --layout swizzled-128x4"));
  EXPECT_TRUE(contains(rep.hints, "your codes match the golden ones exactly when read as --nibbles high-first"));
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
// verify gemm

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
