// verify quantize: the user's codes and scales against the golden quantizer, every mismatch counted,
// the first few explained from what the golden quantizer reported using (QuantizeTrace), the
// alternative rules that would give the user's byte, and hints for whole-array causes (layouts, nibbles).
#include "fp4sim/verify/verify.hpp"

#include <algorithm>
#include <array>
#include <bit>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/quantize_trace.hpp"
#include "report.hpp"
#include "verify_quantize.hpp"

namespace fp4sim {

namespace {

using namespace explain;
using report::with_bits;

constexpr NameRow<TensorScaleKind> kKinds[] = {
    {"any", TensorScaleKind::any, "whichever of encode, decode or amax it equals"},
    {"encode", TensorScaleKind::encode, "the encode multiplier G"},
    {"decode", TensorScaleKind::decode, "the decode multiplier Gd = 1/G"},
    {"amax", TensorScaleKind::amax, "the tensor amax"}};

// The user's FP32 tensor scale, equal to no golden value: G, Gd and the amax, and the common departures.
MismatchNote explain_tensor_scale(const Recipe& recipe, const QuantizedTensor& q, const TheirQuantized& theirs,
                                  bool held_amax) {
  const float v = *theirs.tensor_scale;
  MismatchNote n;
  n.kind = MismatchNote::Kind::tensor_scale;
  n.golden = std::bit_cast<std::uint32_t>(theirs.tensor_scale_kind == TensorScaleKind::decode ? q.global_decode_scale
                                          : theirs.tensor_scale_kind == TensorScaleKind::amax ? q.tensor_amax
                                                                                               : q.global_encode_scale);
  n.theirs = std::bit_cast<std::uint32_t>(v);
  n.summary = "tensor scale: yours " + with_bits(v) + " equals no golden value" +
              (theirs.tensor_scale_kind == TensorScaleKind::any
                   ? std::string()
                   : " (compared with the " + std::string(name_of(theirs.tensor_scale_kind)) + " value)");
  const float el_max = decode_to_float(recipe.element, recipe.element.max_finite_code());
  n.details.push_back("golden encode scale G = RN(RN(" + float_text(el_max) + " * T) / amax) = " +
                      with_bits(q.global_encode_scale) + "; decode scale Gd = RN(1/G) = " +
                      with_bits(q.global_decode_scale) + "; tensor amax = " + with_bits(q.tensor_amax) +
                      (held_amax ? " (held, from {amax_ref})" : " (current)") + ", T = " +
                      float_text(q.target));
  if (!q.tensor_scaled) n.details.push_back("this recipe has no tensor scale: G = Gd = 1");
  // Common departures: true division for Gd, or G from the unrounded product.
  const float div_gd = fp32::div_rn(1.0f, q.global_encode_scale);
  const float g_from_division = q.tensor_amax != 0.0f ? fp32::div_rn(fp32::mul_rn(el_max, q.target), q.tensor_amax) : 1.0f;
  const float inv_amax = q.tensor_amax != 0.0f ? fp32::mul_rn(fp32::mul_rn(el_max, q.target), fp32::div_rn(1.0f, q.tensor_amax)) : 1.0f;
  if (v == inv_amax && inv_amax != g_from_division) {
    n.details.push_back("yours matches G computed as RN(RN(F * T) * RN(1/amax)) (reciprocal instead of division)");
  } else if (v == fp32::div_rn(q.tensor_amax, fp32::mul_rn(el_max, q.target))) {
    n.details.push_back("yours matches amax / (F * T) computed by division, which differs from RN(1/G) in the last bit");
  } else if (div_gd != q.global_decode_scale) {
    n.details.push_back("none of the modelled alternatives gives yours");
  }
  n.fields = {report::text("kind", "tensor_scale"), report::number("theirs", v), report::text("theirs_bits", hex_bits(v)),
              report::number("golden_encode", q.global_encode_scale), report::number("golden_decode", q.global_decode_scale),
              report::number("tensor_amax", q.tensor_amax)};
  return n;
}

}  // namespace

std::span<const NameRow<TensorScaleKind>> names(TensorScaleKind) { return kKinds; }

QuantizeVerifyReport verify_quantize(const Recipe& recipe, const VerifyQuantizeRequest& request,
                                     std::span<const float> input, std::size_t rows, std::size_t cols,
                                     const TheirQuantized& theirs) {
  if (recipe.element.storage_bits() > 4 && theirs.nibbles != NibbleOrder::unpacked) {
    throw UsageError("verify quantize: " + format_name(recipe.element) + " codes take a byte each: {nibbles} unpacked");
  }
  if (input.size() != rows * cols) {
    throw DataError("verify quantize: tensor holds " + std::to_string(input.size()) + " values, shape says " +
                    std::to_string(rows * cols));
  }
  check_codes_shape(theirs.nibbles, rows, cols, theirs.codes_shape, theirs.codes_source);
  if (theirs.codes.size() != element_count(theirs.codes_shape)) {
    throw DataError(theirs.codes_source + ": " + std::to_string(theirs.codes.size()) + " bytes, shape says " +
                    shape_text(theirs.codes_shape));
  }
  const OperandSpec& spec = request.quantize.spec;
  QuantizeTrace trace;
  const QuantizedTensor q = quantize(recipe, request.quantize, input, rows, cols, &trace);
  const ScaleGrid grid{rows, cols, q.block_rows, q.block_cols};
  const ScaleStorage storage(theirs.layout, grid, theirs.scales_shape, theirs.scales_source);
  if (theirs.scales.size() != storage.size()) {
    throw DataError(theirs.scales_source + ": " + std::to_string(theirs.scales.size()) + " bytes, shape says " +
                    shape_text(theirs.scales_shape));
  }

  const auto [golden_code_differences, golden_scale_differences] = differences(q, theirs, storage);
  const std::vector<Alternative> alts =
      golden_code_differences + golden_scale_differences == 0
          ? std::vector<Alternative>{}
          : alternatives(recipe, request.quantize, input, rows, cols, theirs, storage, q);
  const Context ctx{recipe, spec, q, trace, input, request.quantize.random, theirs, storage, cols, alts};
  const Float32Encoder to_element(recipe.element, EncodeOptions{spec.rounding, true, recipe.sr_bits});

  QuantizeVerifyReport rep;
  rep.recipe = recipe.name;
  rep.role = std::string(name_of(request.role));
  rep.element_format = format_name(recipe.element);
  rep.scale_format = format_name(recipe.scale);
  rep.rounding = std::string(name_of(spec.rounding));
  rep.scale_rule = std::string(name_of(recipe.scale_rule));
  rep.rows = rows;
  rep.cols = cols;
  rep.block_rows = q.block_rows;
  rep.block_cols = q.block_cols;
  rep.layout = theirs.layout;
  rep.nibbles = theirs.nibbles;
  rep.rht = spec.rht;
  rep.elements = rows * cols;
  rep.blocks = q.scale_rows * q.scale_cols;
  rep.tensor_scaled = q.tensor_scaled;
  rep.tensor_amax = q.tensor_amax;
  rep.global_encode = q.global_encode_scale;
  rep.global_decode = q.global_decode_scale;
  rep.tensor_scale_kind = theirs.tensor_scale_kind;

  std::vector<MismatchNote>& notes = rep.explained;
  const std::size_t budget = request.max_explained;

  if (theirs.tensor_scale) {
    const float v = *theirs.tensor_scale;
    rep.tensor_scale_given = v;
    const std::array<std::pair<TensorScaleKind, float>, 3> golden{
        {{TensorScaleKind::encode, q.global_encode_scale},
         {TensorScaleKind::decode, q.global_decode_scale},
         {TensorScaleKind::amax, q.tensor_amax}}};
    for (const auto& [kind, value] : golden) {
      if ((theirs.tensor_scale_kind == TensorScaleKind::any || theirs.tensor_scale_kind == kind) &&
          std::bit_cast<std::uint32_t>(value) == std::bit_cast<std::uint32_t>(v)) {
        rep.tensor_scale_matched = std::string(name_of(kind));
        break;
      }
    }
    rep.tensor_scale_mismatch = rep.tensor_scale_matched.empty();
    if (rep.tensor_scale_mismatch && notes.size() < budget) {
      notes.push_back(explain_tensor_scale(recipe, q, theirs, request.quantize.amax_ref.has_value()));
    }
  }

  const std::size_t sc_count = q.scale_cols;
  std::vector<std::pair<std::size_t, std::size_t>> block_bad;  // (r, c) of element mismatches in a block
  for (std::size_t sr = 0; sr < q.scale_rows; ++sr) {
    const std::size_t r0 = sr * q.block_rows, r1 = std::min(rows, r0 + q.block_rows);
    for (std::size_t sc = 0; sc < sc_count; ++sc) {
      const std::size_t c0 = sc * q.block_cols, c1 = std::min(cols, c0 + q.block_cols);
      const std::uint8_t golden_scale = q.scales[sr * sc_count + sc];
      const BlockTrace& traced = trace.block(sr, sc);
      // The explanations read the trace: it must reproduce the golden bytes it describes.
      bool reproduced = traced.scale.code == golden_scale;
      for (std::size_t r = r0; r < r1; ++r) {
        for (std::size_t c = c0; c < c1; ++c) {
          const std::size_t index = r * cols + c;
          reproduced &= to_element(std::bit_cast<std::uint32_t>(trace.scaled[index]), ctx.random_for(index)) == q.code(r, c);
        }
      }
      rep.model_disagreements += !reproduced;
      bool scale_bad = false;
      std::size_t bad_row = r0;
      std::uint8_t their_scale = golden_scale;
      const std::size_t check_end = storage.one_copy_per_block() ? r0 + 1 : r1;
      for (std::size_t r = r0; r < check_end; ++r) {
        const std::uint8_t v = theirs.scales[storage.offset(r, sc)];
        if (v != golden_scale) {
          scale_bad = true;
          bad_row = r;
          their_scale = v;
          break;
        }
      }
      block_bad.clear();
      for (std::size_t r = r0; r < r1; ++r) {
        for (std::size_t c = c0; c < c1; ++c) {
          if (q.code(r, c) != ctx.their_code(r, c)) block_bad.emplace_back(r, c);
        }
      }
      if (!scale_bad && block_bad.empty()) continue;
      ++rep.mismatched_blocks;
      if (scale_bad) {
        ++rep.mismatched_scales;
        if (notes.size() < budget) notes.push_back(explain_scale(ctx, sr, sc, bad_row, golden_scale, their_scale));
      }
      rep.mismatched_elements += block_bad.size();
      const BlockScale their_scaling = ctx.scale_from_code(traced, their_scale);
      for (const auto& [r, c] : block_bad) {
        const std::uint32_t golden = q.code(r, c), mine = ctx.their_code(r, c);
        ElementFacts facts;
        const std::size_t partner = c ^ 1;
        if (partner < cols && theirs.nibbles != NibbleOrder::unpacked) {
          facts.swapped = mine == q.code(r, partner) && ctx.their_code(r, partner) == golden;
          if (facts.swapped && (c & 1) == 0) ++rep.swapped_nibble_pairs;
        }
        if (scale_bad) {
          const std::size_t index = r * cols + c;
          const std::uint32_t with_theirs =
              ctx.element_code(Context::scaled(trace.x[index], their_scaling), spec.rounding, ctx.random_for(index));
          facts.consistent_with_their_scale = with_theirs == mine;
          rep.elements_consistent_with_their_scale += facts.consistent_with_their_scale;
        }
        if (notes.size() < budget) notes.push_back(explain_element(ctx, r, c, golden, mine, their_scale, facts));
      }
    }
  }
  if (cols % 2 == 1 && theirs.nibbles != NibbleOrder::unpacked) {
    const std::size_t cc = (cols + 1) / 2;
    for (std::size_t r = 0; r < rows; ++r) {
      const std::uint8_t byte = theirs.codes[r * cc + cc - 1];
      rep.nonzero_padding_nibbles += (theirs.nibbles == NibbleOrder::low_first ? byte >> 4 : byte & 0xF) != 0;
    }
  }

  // Hints: a whole-array explanation beats a thousand element ones.
  for (const Alternative& a : alts) rep.alternatives.push_back(a.fit);
  rep.as_given = {"the recipe as given", golden_code_differences, golden_scale_differences};
  if (!alts.empty() && alts.front().fit.exact()) {
    rep.hints.push_back("your codes and scales match the golden model exactly with one rule changed: " +
                        alts.front().fit.label);
  }
  if (rep.mismatched_scales > 0) {
    for (ScaleLayout other : {ScaleLayout::rowmajor, ScaleLayout::te_rowrep, ScaleLayout::swizzled_128x4}) {
      if (other == theirs.layout) continue;
      if (auto bad = scale_mismatches_under(other, q, theirs); bad && *bad == 0) {
        rep.hints.push_back("your scales match the golden ones exactly when read as {layout} " +
                            std::string(name_of(other)));
      }
    }
  }
  if (rep.mismatched_elements > 0) {
    for (NibbleOrder other : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::unpacked}) {
      if (other == theirs.nibbles) continue;
      if (auto bad = code_mismatches_under(other, q, theirs); bad && *bad == 0) {
        rep.hints.push_back("your codes match the golden ones exactly when read as {nibbles} " +
                            std::string(name_of(other)));
      }
    }
    if (rep.swapped_nibble_pairs > 0) {
      rep.hints.push_back(std::to_string(rep.swapped_nibble_pairs) +
                          " byte(s) hold their two element codes in the other nibble order");
    }
    if (rep.mismatched_scales > 0 && rep.elements_consistent_with_their_scale == rep.mismatched_elements) {
      rep.hints.push_back("every element mismatch follows from your block scales: fix the scale rule first");
    }
  }
  if (rep.model_disagreements > 0) {
    rep.hints.push_back("internal: the golden quantizer's report does not reproduce its own bytes in " +
                        std::to_string(rep.model_disagreements) + " block(s); the counts are right, the explanations may not be");
  }
  if (rep.nonzero_padding_nibbles > 0) {
    rep.hints.push_back(std::to_string(rep.nonzero_padding_nibbles) +
                        " row(s) have a nonzero padding nibble after the last element (fp4sim writes 0; not counted as a mismatch)");
  }
  return rep;
}

}  // namespace fp4sim

