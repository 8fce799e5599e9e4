// verify quantize: the whole-tensor alternatives, the golden quantizer rerun with one rule changed or
// the user's bytes read another way, each counted against the user's bytes.
#include <algorithm>
#include <tuple>

#include "fp4sim/core/error.hpp"
#include "verify_quantize.hpp"

namespace fp4sim::explain {

std::string fit_text(const AlternativeFit& a) {
  if (a.exact()) return "that rule reproduces all of your codes and scales";
  return "that rule leaves " + std::to_string(a.mismatched_elements) + " of your codes" +
         (a.mismatched_scales == 0 ? "" : " and " + std::to_string(a.mismatched_scales) + " of your scales") +
         " different";
}

std::optional<std::uint64_t> scale_mismatches_under(ScaleLayout layout, const QuantizedTensor& q,
                                                    const TheirQuantized& theirs) {
  try {
    const ScaleGrid grid{q.rows, q.cols, q.block_rows, q.block_cols};
    const ScaleStorage s(layout, grid, theirs.scales_shape);
    std::uint64_t bad = 0;
    for (std::size_t r = 0; r < q.rows; ++r) {
      for (std::size_t j = 0; j < q.scale_cols; ++j) bad += theirs.scales[s.offset(r, j)] != q.scales[(r / q.block_rows) * q.scale_cols + j];
    }
    return bad;
  } catch (const DataError&) {
    return std::nullopt;
  }
}

std::optional<std::uint64_t> code_mismatches_under(NibbleOrder order, const QuantizedTensor& q,
                                                   const TheirQuantized& theirs) {
  try {
    check_codes_shape(order, q.rows, q.cols, theirs.codes_shape);
  } catch (const DataError&) {
    return std::nullopt;
  }
  std::uint64_t bad = 0;
  for (std::size_t r = 0; r < q.rows; ++r) {
    for (std::size_t c = 0; c < q.cols; ++c) bad += stored_code(theirs.codes, order, q.cols, r, c) != q.code(r, c);
  }
  return bad;
}

std::pair<std::uint64_t, std::uint64_t> differences(const QuantizedTensor& q, const TheirQuantized& theirs,
                                                    const ScaleStorage& storage) {
  std::uint64_t codes = 0, scales = 0;
  for (std::size_t r = 0; r < q.rows; ++r) {
    for (std::size_t c = 0; c < q.cols; ++c) {
      codes += stored_code(theirs.codes, theirs.nibbles, q.cols, r, c) != q.code(r, c);
    }
    for (std::size_t j = 0; j < q.scale_cols; ++j) {
      scales += theirs.scales[storage.offset(r, j)] != q.scales[(r / q.block_rows) * q.scale_cols + j];
    }
  }
  return {codes, scales};
}

std::vector<Alternative> alternatives(const Recipe& recipe, const QuantizeRequest& request, std::span<const float> input,
                                      std::size_t rows, std::size_t cols, const TheirQuantized& theirs,
                                      const ScaleStorage& storage, const QuantizedTensor& golden) {
  std::vector<Alternative> out;
  auto add = [&](std::string label, const Recipe& r, const QuantizeRequest& q) {
    // The quantizer runs before the label moves in: with the call inside the braces, GCC 12 sees the
    // label's cleanup on the quantizer's exception path and reports it as maybe uninitialized.
    QuantizedTensor rerun = quantize(r, q, input, rows, cols);
    Alternative a{{std::move(label)}, std::move(rerun)};
    std::tie(a.fit.mismatched_elements, a.fit.mismatched_scales) = differences(a.q, theirs, storage);
    out.push_back(std::move(a));
  };
  auto with = [&](auto change) {
    Recipe other = recipe;
    change(other);
    return other;
  };
  const bool two_level = has_tensor_scale(recipe);
  if (recipe.scale_rule == ScaleRule::two_level) {
    const std::pair<ElementScaling, const char*> scalings[] = {
        {ElementScaling::reciprocal, "the element scaling by the reciprocal multiplier RN(1 / RN(s * Gd))"},
        {ElementScaling::division,
         "the element scaling computed by division, y = RN(x / RN(s * Gd)), instead of multiplying by "
         "RN(1 / RN(s * Gd))"},
        {ElementScaling::bf16_coefficient,
         "the fast-math BF16 coefficient of TE's tuned kernel, y = RN(x * BF16(min(RN(G / s), BF16_MAX))), "
         "instead of RN(1 / RN(s * Gd))"}};
    for (const auto& [scaling, label] : scalings) {
      if (scaling != recipe.element_scaling) add(label, with([s = scaling](Recipe& r) { r.element_scaling = s; }), request);
    }
  }
  if (two_level) {
    // TE's 4over6 at this target and at its default E4M3 bound 256, or the single scale when the recipe has 4over6.
    for (BlockScaleChoice choice : {BlockScaleChoice::single, BlockScaleChoice::four_over_six_mae,
                                    BlockScaleChoice::four_over_six_mse}) {
      if (choice == recipe.block_choice) continue;
      const std::string name(name_of(choice));
      const Recipe other = with([&](Recipe& r) { r.block_choice = choice; });
      if (choice == BlockScaleChoice::single) {
        add("one scale per block, not " + std::string(name_of(recipe.block_choice)), other, request);
        continue;
      }
      add("TE's " + name + " adaptive block scaling (map-to-4 or map-to-6 per block, {block_choice} " + name + ")",
          other, request);
      if (request.spec.target != 256.0f) {
        QuantizeRequest at256 = request;
        at256.spec.target = 256.0f;
        add("TE's " + name + " adaptive block scaling with its E4M3 bound 256 ({block_choice} " + name +
                " {target} 256)", other, at256);
      }
    }
    if (recipe.block_choice != BlockScaleChoice::single) {
      const FourOverSixErrorDomain other_domain = recipe.four_over_six_error == FourOverSixErrorDomain::input
                                                      ? FourOverSixErrorDomain::fast_math
                                                      : FourOverSixErrorDomain::input;
      add("TE's 4over6 with its error measured in the " + std::string(name_of(other_domain)) +
              " domain ({four_over_six_error} " + std::string(name_of(other_domain)) + ")",
          with([other_domain](Recipe& r) { r.four_over_six_error = other_domain; }), request);
    }
    const SpecialConvention other_specials = recipe.element_specials == SpecialConvention::hardware
                                                 ? SpecialConvention::te_python
                                                 : SpecialConvention::hardware;
    add("elements encoding -0 and NaN as " +
            std::string(other_specials == SpecialConvention::te_python ? "TE's reference cast_to_fp4x2 (code 0)"
                                                                       : "the hardware does") +
            " ({element_specials} " + std::string(name_of(other_specials)) + ")",
        with([other_specials](Recipe& r) { r.element_specials = other_specials; }), request);
    const bool row_possible = !request.spec.two_d && !request.amax_ref && recipe.tensor_scale == TensorScalePolicy::current;
    if (recipe.amax_scope == AmaxScope::tensor && row_possible) {
      add("row-scaled NVFP4: one amax, G and Gd per row ({amax_scope} row)",
          with([](Recipe& r) { r.amax_scope = AmaxScope::row; }), request);
    } else if (recipe.amax_scope == AmaxScope::row) {
      add("one tensor amax ({amax_scope} tensor), not one per row", with([](Recipe& r) { r.amax_scope = AmaxScope::tensor; }),
          request);
    }
  }
  if (request.spec.rht) {
    RhtSigns reversed = recipe.rht_signs, plus{};
    std::reverse(reversed.begin(), reversed.end());
    plus.fill(1);
    const std::pair<RhtSigns, const char*> sign_vectors[] = {
        {kRhtSigns, "the RHT with TE's sign vector"},
        {plus, "the RHT without random signs (all +1)"},
        {reversed, "the RHT with the sign vector in reverse order"}};
    for (const auto& [signs, label] : sign_vectors) {
      if (signs == recipe.rht_signs) continue;
      add(std::string(label) + " ({rht_signs} " + rht_signs_text(signs) + ")",
          with([s = signs](Recipe& r) { r.rht_signs = s; }), request);
    }
    const RhtPrecision other_precision =
        recipe.rht_precision == RhtPrecision::bf16 ? RhtPrecision::float32 : RhtPrecision::bf16;
    add(std::string(other_precision == RhtPrecision::float32
                        ? "the RHT kept in binary32, as TE's reference on float32 input"
                        : "the RHT rounded to BF16, as TE's kernels") +
            " ({rht_precision} " + std::string(name_of(other_precision)) + ")",
        with([other_precision](Recipe& r) { r.rht_precision = other_precision; }), request);
    QuantizeRequest plain = request;
    plain.spec.rht = false;
    add("no RHT ({rht=false})", recipe, plain);
  } else if (cols % 16 == 0) {
    QuantizeRequest transformed = request;
    transformed.spec.rht = true;
    add("the RHT applied ({rht=true} {rht_signs} " + rht_signs_text(recipe.rht_signs) + ")", recipe, transformed);
  }
  const std::pair<Rounding, const char*> modes[] = {{Rounding::rne, "to nearest, ties to even (rne)"},
                                                    {Rounding::rna, "to nearest, ties away from zero (rna)"},
                                                    {Rounding::rtz, "toward zero (rtz)"},
                                                    {Rounding::rup, "toward +Inf (rup)"},
                                                    {Rounding::rdown, "toward -Inf (rdown)"}};
  for (const auto& [mode, label] : modes) {
    if (mode == request.spec.rounding) continue;
    QuantizeRequest other = request;
    other.spec.rounding = mode;
    add(std::string("y rounded ") + label, recipe, other);
  }
  // The user's bytes read another way: the golden codes and scales, compared with theirs reinterpreted.
  const auto [golden_codes, golden_scales] = differences(golden, theirs, storage);
  for (NibbleOrder order : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::unpacked}) {
    if (order == theirs.nibbles) continue;
    if (const auto bad = code_mismatches_under(order, golden, theirs)) {
      out.push_back({{"your codes stored in another nibble order ({nibbles} " + std::string(name_of(order)) + ")", *bad,
                      golden_scales},
                     {},
                     true});
    }
  }
  for (const auto& row : names(ScaleLayout{})) {
    if (row.value == theirs.layout) continue;
    if (const auto bad = scale_mismatches_under(row.value, golden, theirs)) {
      out.push_back({{"your scales stored in another layout ({layout} " + std::string(row.name) + ")", golden_codes,
                      *bad},
                     {},
                     true});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Alternative& a, const Alternative& b) {
    return std::pair(a.fit.mismatched_scales, a.fit.mismatched_elements) <
           std::pair(b.fit.mismatched_scales, b.fit.mismatched_elements);
  });
  return out;
}

}  // namespace fp4sim::explain
