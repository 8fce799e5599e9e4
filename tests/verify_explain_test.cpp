// fp4sim verify quantize, planted defects: each is counted and explained with hand-derived facts (ties,
// neighbours, the 4over6 candidate kept, the row's G, the divisor) read from the quantizer's report, and
// the rule that reproduces the planted bytes is named, best whole-tensor fit first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/float_text.hpp"
#include "verify_fixtures.hpp"

namespace fp4sim {
namespace {

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
  EXPECT_NE(text.find("with G = 896 (row 1's amax 3, one G per row, target 448)"), std::string::npos) << text;
  EXPECT_NE(text.find("yours matches the tensor's G = 448 (tensor amax 6) instead of row 1's (one G per tensor)"),
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

// TE's reference conventions: a kernel whose 4over6 measures the fast-math error, and one that encodes an
// exact -0 as code 0 (cast_to_fp4x2), are each named by their override.
TEST(PlantedCause, TeReferenceConventions) {
  const Recipe recipe = *find_recipe("nvfp4-4over6");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  auto x = normal_tensor(64, 128, 23);
  for (std::size_t c = 0; c < 128; c += 3) x[7 * 128 + c] = -0.0f;
  Recipe kernel = recipe;
  kernel.element_specials = SpecialConvention::te_python;
  expect_named(recipe, request, x, 64, 128, golden(kernel, request, x, 64, 128), "({element_specials} te-python)");
  for (std::size_t i = 0; i < x.size(); i += 5) x[i] *= 0x1p100f;  // wide range: the error domains differ
  kernel = recipe;
  kernel.four_over_six_error = FourOverSixErrorDomain::fast_math;
  expect_named(recipe, request, x, 64, 128, golden(kernel, request, x, 64, 128), "({four_over_six_error} fast-math)");
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
  expect_named(recipe, request, x, 16, 64, planted, "another nibble order ({nibbles} high-first)");
}

TEST(PlantedCause, ScaleLayout) {
  const Recipe recipe = *find_recipe("nvfp4");
  QuantizeRequest request;
  request.spec = operand_for_role(recipe, Role::activation);
  const auto x = normal_tensor(128, 64, 24);  // rowmajor and swizzled scales are both [128, 4]
  Golden planted = golden(recipe, request, x, 128, 64, ScaleLayout::swizzled_128x4);
  planted.theirs.layout = ScaleLayout::rowmajor;
  expect_named(recipe, request, x, 128, 64, planted, "another layout ({layout} swizzled-128x4)");
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
  kernel.rht_signs = recipe.rht_signs;
  kernel.rht_precision = RhtPrecision::float32;  // TE's reference on a float32 tensor
  expect_named(recipe, request, x, 16, 64, golden(kernel, request, x, 16, 64),
               "the RHT kept in binary32, as TE's reference on float32 input ({rht_precision} float32)");
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

}  // namespace
}  // namespace fp4sim
