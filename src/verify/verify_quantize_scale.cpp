// verify quantize: explaining a block scale that differs from the golden one, from what the golden
// quantizer reported using for that block (its amax, G, ideal scale, 4over6 candidates), and the
// hypotheses, the golden rule with one step changed, that give the user's code.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fp4sim/core/fp32.hpp"
#include "report.hpp"
#include "verify_quantize.hpp"

namespace fp4sim::explain {

namespace {

using report::code_text;
using report::hex_code;
using report::range_text;
using report::with_bits;

constexpr float kFltMax = std::numeric_limits<float>::max();

// A value rounded into the scale format under another rounding than the golden rule's (the hypotheses).
std::uint32_t round_scale(const Format& scale, double value, Rounding rounding) {
  return encode(scale, value, EncodeOptions{rounding, true}).code;
}

std::string_view pow2_rule_text(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::pow2_floor: return "OCP floor rule 2^(floor(log2 amax) - emax_elem), from amax's exponent field";
    case ScaleRule::pow2_ceil: return "ceil rule: the smallest 2^e with amax <= max_elem * 2^e";
    case ScaleRule::pow2_ceil_exponent:
      return "torchao CEIL rule: amax's exponent rounded up, minus emax_elem (amax <= 2^emax_elem * 2^e)";
    case ScaleRule::pow2_even:
      return "torchao EVEN rule: amax rounded to element precision, then floor (NaN where that overflows)";
    case ScaleRule::pow2_rceil: return "RCEIL rule (cuBLAS): RN(amax * RN(1/max_elem)) rounded up to a power of two";
    case ScaleRule::pow2_float_log2:
      return "microxcaling's rule: floor of the binary32-rounded log2(amax), minus emax_elem (one too high just below 2^k)";
    case ScaleRule::two_level: break;
  }
  return "";
}

// Where G came from, as the block used it: the tensor's amax, or its row's under AmaxScope::row.
std::string global_text(const Context& ctx, const BlockTrace& block, std::size_t row) {
  const QuantizedTensor& q = ctx.q;
  if (!q.tensor_scaled) return "G = 1 (no tensor scale)";
  const std::string made_from = q.row_amax.empty() ? "tensor amax " + float_text(block.global_amax)
                                                   : "row " + std::to_string(row) + "'s amax " +
                                                         float_text(block.global_amax) + ", one G per row";
  return "G = " + float_text(block.global.encode) + " (" + made_from + ", target " + float_text(q.target) + ")";
}

}  // namespace

MismatchNote explain_scale(const Context& ctx, std::size_t sr, std::size_t sc, std::size_t stored_row,
                           std::uint32_t golden, std::uint32_t theirs) {
  const Recipe& rc = ctx.recipe;
  const Format& sf = rc.scale;
  const QuantizedTensor& q = ctx.q;
  const BlockTrace& block = ctx.trace.block(sr, sc);
  const ScaleChooser m(rc, block.global);  // the golden rule with this block's G and Gd, for the hypotheses
  MismatchNote n = mismatch_at(MismatchNote::Kind::scale, sr, sc, golden, theirs);
  n.stored_row = stored_row;
  const std::size_t r0 = sr * q.block_rows, r1 = std::min(q.rows, r0 + q.block_rows);
  const std::size_t c0 = sc * q.block_cols, c1 = std::min(q.cols, c0 + q.block_cols);
  n.summary = "scale of block [" + std::to_string(sr) + ", " + std::to_string(sc) + "] (rows " + range_text(r0, r1) +
              ", cols " + range_text(c0, c1) + "): golden " + code_text(sf, golden) + ", yours " + code_text(sf, theirs);
  if (q.block_rows > 1 && !ctx.storage.one_copy_per_block()) {
    n.summary += " (the copy stored for row " + std::to_string(stored_row) + ")";
  }
  const auto [amax, nonfinite] = block.amax;
  const ScaleTrace& trace = block.trace;
  n.details.push_back("block amax = " + with_bits(amax) + (ctx.spec.rht ? " (after the RHT)" : "") +
                      (nonfinite ? "; the block holds a NaN or Inf" : ""));
  n.fields = {report::text("kind", "scale"), report::integer("block_row", sr), report::integer("block_col", sc),
              report::integer("stored_row", stored_row), report::integer("golden", golden), report::integer("theirs", theirs),
              report::number("golden_value", decode_to_double(sf, golden)), report::number("block_amax", amax),
              report::text("block_amax_bits", hex_bits(amax))};

  struct Hypothesis {
    std::string label;
    std::uint32_t code;
  };
  std::vector<Hypothesis> hypotheses;

  if (rc.scale_rule == ScaleRule::two_level) {
    const float ideal = trace.ideal;
    const Bracket b = bracket(sf, ideal);
    const std::string F = float_text(m.element_max());
    const std::string g_text = global_text(ctx, block, r0);
    std::string u = float_text(ideal);
    if (const auto& four = block.four_over_six) {
      // TE's 4over6: both candidates, their errors and the one kept; the bracket below is the kept one's.
      const std::string choice(name_of(rc.block_choice));
      n.details.push_back("4over6 (" + choice + "): map-to-6 u6 = min(RN(RN(amax / " + F + ") * G), FLT_MAX) = " +
                          with_bits(four->map6_trace.ideal) + ", code " + code_text(sf, four->map6.code) +
                          ", block error " + float_text(four->map6_error) + "; map-to-4 u4 = min(RN(u6 * 1.5), FLT_MAX) = " +
                          with_bits(four->map4_trace.ideal) + ", code " + code_text(sf, four->map4.code) +
                          ", block error " + float_text(four->map4_error) + "; with " + g_text);
      n.details.push_back(four->map4_chosen ? "map-to-4 is kept: its error is smaller"
                                            : "map-to-6 is kept: map-to-4's error is not smaller (a tie keeps map-to-6)");
      u = (four->map4_chosen ? "u4 = " : "u6 = ") + u;
      n.fields.push_back(report::integer("map4", four->map4.code));
      n.fields.push_back(report::integer("map6", four->map6.code));
      n.fields.push_back(report::number("map4_error", four->map4_error));
      n.fields.push_back(report::number("map6_error", four->map6_error));
      n.fields.push_back(report::text("kept", four->map4_chosen ? "map4" : "map6"));
      const BlockScale& other = four->map4_chosen ? four->map6 : four->map4;
      hypotheses.push_back({std::string("the other 4over6 candidate, ") + (four->map4_chosen ? "map-to-6" : "map-to-4") +
                                " (block error " + float_text(four->map4_chosen ? four->map6_error : four->map4_error) +
                                " against the kept one's " +
                                float_text(four->map4_chosen ? four->map4_error : four->map6_error) + ")",
                            other.code});
      hypotheses.push_back({"one scale per block, without 4over6: RNE of RN(amax * RN(G * RN(1/" + F + ")))",
                            m.choose(amax, nonfinite).code});
    } else if (m.recipe().scale_order != ScaleOrder::te) {
      const bool torchao = m.recipe().scale_order == ScaleOrder::torchao;
      n.details.push_back(std::string("ideal scale u = min(") +
                          (torchao ? "RN(RN(amax / " + F + ") / P)" : "RN(amax / RN(" + F + " * P))") +
                          ", FLT_MAX), raised to scale_min " + float_text(m.recipe().scale_min) + ", = " +
                          with_bits(ideal) + ", amax " + float_text(amax) + ", P = " +
                          float_text(m.global().per_tensor) + (torchao ? " (torchao's order)" : " (ModelOpt's order)"));
    } else {
      n.details.push_back("ideal scale u = min(RN(amax * RN(G * RN(1/" + F + "))), FLT_MAX) = RN(" + float_text(amax) +
                          " * " + float_text(m.block_multiplier()) + ") = " + with_bits(ideal) + ", with " + g_text);
    }
    const std::string s = format_name(sf);
    const std::uint32_t rne = trace.rounded_code;
    std::string why;
    switch (b.where) {
      case Bracket::Where::exact: why = "ideal scale " + u + " is exactly representable in " + s + ": " + hex_code(sf, rne); break;
      case Bracket::Where::tie:
        why = "ideal scale " + u + " is an exact " + s + " midpoint between " + code_text(sf, b.lo) + " and " +
              code_text(sf, b.hi) + "; RNE keeps the even code " + hex_code(sf, rne);
        break;
      case Bracket::Where::nearer_lo:
      case Bracket::Where::nearer_hi:
        why = "ideal scale " + u + " lies between " + code_text(sf, b.lo) + " and " + code_text(sf, b.hi) + ", nearer " +
              hex_code(sf, b.where == Bracket::Where::nearer_lo ? b.lo : b.hi) + "; RNE gives " + hex_code(sf, rne);
        break;
      case Bracket::Where::above_max:
        why = "ideal scale " + u + " exceeds the " + s + " maximum " + float_text(static_cast<float>(b.lo_value)) +
              "; saturating RNE gives the max code " + hex_code(sf, rne);
        break;
      case Bracket::Where::nan: why = "ideal scale is NaN"; break;
    }
    if (trace.repaired) {
      why += "; that is a zero scale, which this recipe replaces by 1.0 (code " + hex_code(sf, golden) + ")";
    } else if (decode_to_float(sf, rne) == 0.0f) {
      why += "; the zero scale is kept (elements are multiplied by FLT_MAX and encode to 0)";
    }
    why += "; yours is " + hex_code(sf, theirs) + " (" + relation(sf, golden, theirs, b) + ")";
    n.details.push_back(why);
    n.fields.push_back(report::number("ideal_scale", ideal));
    n.fields.push_back(report::text("ideal_scale_bits", hex_bits(ideal)));
    n.fields.push_back(report::text("ideal_position", b.where == Bracket::Where::exact       ? "exact"
                                                    : b.where == Bracket::Where::tie       ? "tie"
                                                    : b.where == Bracket::Where::above_max ? "above_max"
                                                    : b.where == Bracket::Where::nan       ? "nan"
                                                                                           : "between"));
    n.fields.push_back(report::boolean("tie", b.where == Bracket::Where::tie));
    n.fields.push_back(report::integer("lower_neighbour", b.lo));
    n.fields.push_back(report::integer("upper_neighbour", b.hi));
    n.fields.push_back(report::number("global_encode_scale", block.global.encode));
    n.fields.push_back(report::number("global_amax", block.global_amax));

    const float G = block.global.encode;
    const std::vector<Hypothesis> roundings = {
        {"the ideal scale rounded to nearest with ties away from zero (RNA)", m.repaired(round_scale(sf, ideal, Rounding::rna))},
        {"the ideal scale rounded toward zero (truncation)", m.repaired(round_scale(sf, ideal, Rounding::rtz))},
        {"the ideal scale rounded up", m.repaired(round_scale(sf, ideal, Rounding::rup))},
        {"the ideal scale computed as RN(RN(amax / " + F + ") * G), then RNE",
         m.repaired(round_scale(sf, fp32::min(fp32::mul_rn(fp32::div_rn(amax, m.element_max()), G), kFltMax), Rounding::rne))},
        {"the ideal scale computed as RN(RN(amax * G) / " + F + "), then RNE",
         m.repaired(round_scale(sf, fp32::min(fp32::div_rn(fp32::mul_rn(amax, G), m.element_max()), kFltMax), Rounding::rne))},
        {"the ideal scale amax * G / " + F + " computed in float64, then RNE",
         m.repaired(round_scale(sf, static_cast<double>(amax) * G / m.element_max(), Rounding::rne))},
        {"no tensor scale (G = 1): RNE of RN(amax * RN(1/" + F + "))",
         m.repaired(round_scale(sf, fp32::mul_rn(amax, fp32::div_rn(1.0f, m.element_max())), Rounding::rne))},
    };
    hypotheses.insert(hypotheses.end(), roundings.begin(), roundings.end());
    if (!q.row_amax.empty()) {
      const ScaleChooser tensor_rule(rc, GlobalScale{q.global_encode_scale, q.global_decode_scale});
      hypotheses.push_back({"the tensor's G = " + float_text(q.global_encode_scale) + " (tensor amax " +
                                float_text(q.tensor_amax) + ") instead of row " + std::to_string(r0) +
                                "'s (one G per tensor)",
                            tensor_rule.choose(amax, nonfinite).code});
    }
    if (trace.repaired) hypotheses.push_back({"a zero scale kept as 0 (TE NVFP4's rule) instead of 1.0", rne});
    if (!trace.repaired && decode_to_float(sf, rne) == 0.0f) {
      hypotheses.push_back({"a zero scale replaced by 1.0 (the UE5M3 paper's rule)", m.one_code()});
    }
  } else {
    const int shared = trace.shared_exponent;
    n.details.push_back(std::string("golden rule: ") + std::string(pow2_rule_text(rc.scale_rule)) +
                        "; unbiased scale exponent " + std::to_string(shared) + " before clamping to [" +
                        std::to_string(-sf.bias) + ", " + std::to_string(static_cast<int>(sf.max_finite_code()) - sf.bias) +
                        "], code " + hex_code(sf, golden) + "; yours is " + hex_code(sf, theirs) + " (" +
                        relation(sf, golden, theirs, Bracket{}) + ")");
    n.fields.push_back(report::integer("scale_exponent", shared));
    for (ScaleRule rule : {ScaleRule::pow2_floor, ScaleRule::pow2_ceil, ScaleRule::pow2_ceil_exponent, ScaleRule::pow2_even,
                           ScaleRule::pow2_rceil, ScaleRule::pow2_float_log2}) {
      if (rule != rc.scale_rule) {
        Recipe other = rc;
        other.scale_rule = rule;
        hypotheses.push_back({"the " + std::string(name_of(rule)) + " rule (" + std::string(pow2_rule_text(rule)) + ")",
                              ScaleChooser(other, m.global()).choose(amax, nonfinite).code});
      }
    }
  }
  std::string matched;
  for (const auto& h : hypotheses) {
    if (h.code == theirs && h.code != golden) {
      matched = h.label;
      break;
    }
  }
  n.details.push_back(matched.empty() ? "none of the modelled alternative rules gives yours"
                                      : "yours matches " + matched);
  n.fields.push_back(report::text("theirs_matches", matched));
  n.fields.push_back(report::text("explanation", report::joined(n.details)));
  return n;
}

}  // namespace fp4sim::explain
