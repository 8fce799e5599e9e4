// verify quantize: the user's codes and scales against the golden quantizer, every mismatch counted,
// the first few explained from the values the golden rule computed (ScaleChooser's trace), the
// alternative rules that would give the user's byte, and hints for whole-array causes (layouts, nibbles).
#include "fp4sim/verify/verify.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/scale_chooser.hpp"
#include "report.hpp"

namespace fp4sim {

namespace {

using report::code_text;
using report::hex_code;
using report::range_text;
using report::with_bits;

constexpr float kFltMax = std::numeric_limits<float>::max();

constexpr NameRow<TensorScaleKind> kKinds[] = {
    {"any", TensorScaleKind::any, "whichever of encode, decode or amax it equals"},
    {"encode", TensorScaleKind::encode, "the encode multiplier G"},
    {"decode", TensorScaleKind::decode, "the decode multiplier Gd = 1/G"},
    {"amax", TensorScaleKind::amax, "the tensor amax"}};

// ---------------------------------------------------------------------------------------------------
// Where a magnitude sits among a format's values: the two codes around it and the side it is nearer.

struct Bracket {
  enum class Where : std::uint8_t { exact, tie, nearer_lo, nearer_hi, above_max, nan } where = Where::exact;
  std::uint32_t lo = 0, hi = 0;  // magnitude codes (lo == hi when exact or saturated)
  double lo_value = 0.0, hi_value = 0.0;
  double delta = 0.0;            // (m - lo) / (hi - lo), the stochastic-rounding fraction
};

Bracket bracket(const Format& f, double magnitude) {
  Bracket b;
  if (std::isnan(magnitude)) {
    b.where = Bracket::Where::nan;
    return b;
  }
  b.lo = encode(f, magnitude, EncodeOptions{Rounding::rtz, true}).code;
  b.hi = encode(f, magnitude, EncodeOptions{Rounding::rup, true}).code;
  b.lo_value = decode_to_double(f, b.lo);
  b.hi_value = decode_to_double(f, b.hi);
  if (b.lo == b.hi) {
    b.where = magnitude > b.lo_value ? Bracket::Where::above_max : Bracket::Where::exact;
    return b;
  }
  const double mid = (b.lo_value + b.hi_value) / 2;  // exact: both have few significant bits
  b.delta = (magnitude - b.lo_value) / (b.hi_value - b.lo_value);
  b.where = magnitude == mid ? Bracket::Where::tie : magnitude < mid ? Bracket::Where::nearer_lo : Bracket::Where::nearer_hi;
  return b;
}

// How `theirs` relates to `golden` among a format's codes ("rounded up", "2 codes below", ...). Codes of
// the same sign compare by magnitude, which is monotone in the code for every format here.
std::string relation(const Format& f, std::uint32_t golden, std::uint32_t theirs, const Bracket& b) {
  const Decoded dt = decode(f, theirs);
  if (dt.cls == ValueClass::invalid) return "not a valid " + format_name(f) + " code";
  if (dt.cls == ValueClass::nan) return "a NaN code";
  const std::uint32_t sign = f.sign_mask();
  if ((golden & sign) != (theirs & sign) && (golden & ~sign) == (theirs & ~sign)) return "the sign differs";
  if ((golden & sign) != (theirs & sign)) return "of the other sign";
  const std::uint32_t gm = golden & ~sign, tm = theirs & ~sign;
  const bool tie = b.where == Bracket::Where::tie;
  if (b.lo != b.hi && ((gm == b.lo && tm == b.hi) || (gm == b.hi && tm == b.lo))) {
    const std::string dir = tm == b.hi ? "rounded away from zero" : "rounded toward zero";
    if (tie) return dir + ": the tie went to the " + std::string((tm & 1) ? "odd" : "even") + " code";
    if ((tm == b.hi) == (b.where == Bracket::Where::nearer_lo)) return dir + ", to the farther neighbour";
    return dir;
  }
  const long diff = static_cast<long>(tm) - static_cast<long>(gm);
  return std::to_string(std::labs(diff)) + (std::labs(diff) == 1 ? " code " : " codes ") +
         (diff > 0 ? "larger in magnitude" : "smaller in magnitude");
}

// A value rounded into the scale format under another rounding than the golden rule's (the hypotheses).
std::uint32_t round_scale(const Format& scale, double value, Rounding rounding) {
  return encode(scale, value, EncodeOptions{rounding, true}).code;
}

std::string_view pow2_rule_text(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::pow2_floor: return "OCP floor rule 2^(floor(log2 amax) - emax_elem), from amax's exponent field";
    case ScaleRule::pow2_ceil: return "ceil rule: the smallest 2^e with amax <= max_elem * 2^e";
    case ScaleRule::pow2_even: return "torchao EVEN rule: amax rounded to element precision, then floor";
    case ScaleRule::pow2_rceil: return "RCEIL rule (cuBLAS): RN(amax * RN(1/max_elem)) rounded up to a power of two";
    case ScaleRule::two_level: break;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------

// The golden model with one rule changed (q: its quantized tensor), or the user's bytes read another way
// (reread: q unused), and how far the user's bytes are from it.
struct Alternative {
  AlternativeFit fit;
  QuantizedTensor q;
  bool reread = false;
};

std::string fit_text(const AlternativeFit& a) {
  if (a.exact()) return "that rule reproduces all of your codes and scales";
  return "that rule leaves " + std::to_string(a.mismatched_elements) + " of your codes" +
         (a.mismatched_scales == 0 ? "" : " and " + std::to_string(a.mismatched_scales) + " of your scales") +
         " different";
}

struct Context {
  const Recipe& recipe;
  const OperandSpec& spec;
  const QuantizedTensor& q;
  const ScaleChooser& chooser;  // the golden rule, with the tensor's G and Gd
  std::span<const float> input;  // as given
  std::span<const float> x;      // as quantized (after the RHT when spec.rht)
  const RandomSource& random;
  const TheirQuantized& theirs;
  const ScaleStorage& storage;
  std::size_t cols;
  std::span<const Alternative> alternatives;  // best fit first; empty when the user's bytes are golden

  BlockAmax block(std::size_t sr, std::size_t sc) const {
    const std::size_t r0 = sr * q.block_rows, r1 = std::min(q.rows, r0 + q.block_rows);
    const std::size_t c0 = sc * q.block_cols, c1 = std::min(q.cols, c0 + q.block_cols);
    return block_amax(x, cols, r0, r1, c0, c1);
  }

  std::uint32_t random_for(std::size_t index) const {
    return is_stochastic(spec.rounding) ? random_integer(random, index, recipe.sr_bits) : 0;
  }

  std::uint32_t element_code(float y, Rounding rounding, std::uint32_t r) const {
    return encode(recipe.element, y, EncodeOptions{rounding, true, recipe.sr_bits}, r).code;
  }

  std::uint8_t their_code(std::size_t r, std::size_t c) const {
    return stored_code(theirs.codes, theirs.nibbles, cols, r, c);
  }
};

// ---------------------------------------------------------------------------------------------------
// Explaining a scale mismatch

MismatchNote explain_scale(const Context& ctx, std::size_t sr, std::size_t sc, std::size_t stored_row,
                           std::uint32_t golden, std::uint32_t theirs) {
  const Recipe& rc = ctx.recipe;
  const Format& sf = rc.scale;
  const ScaleChooser& m = ctx.chooser;
  const QuantizedTensor& q = ctx.q;
  MismatchNote n;
  n.kind = MismatchNote::Kind::scale;
  n.row = sr;
  n.col = sc;
  n.stored_row = stored_row;
  n.golden = golden;
  n.theirs = theirs;
  const std::size_t r0 = sr * q.block_rows, r1 = std::min(q.rows, r0 + q.block_rows);
  const std::size_t c0 = sc * q.block_cols, c1 = std::min(q.cols, c0 + q.block_cols);
  n.summary = "scale of block [" + std::to_string(sr) + ", " + std::to_string(sc) + "] (rows " + range_text(r0, r1) +
              ", cols " + range_text(c0, c1) + "): golden " + code_text(sf, golden) + ", yours " + code_text(sf, theirs);
  if (q.block_rows > 1 && !ctx.storage.one_copy_per_block()) {
    n.summary += " (the copy stored for row " + std::to_string(stored_row) + ")";
  }
  const auto [amax, nonfinite] = ctx.block(sr, sc);
  ScaleTrace trace;
  m.choose(amax, nonfinite, &trace);
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
    const std::string g_text = ctx.q.tensor_scaled ? "G = " + float_text(m.global().encode) + " (tensor amax " +
                                                         float_text(ctx.q.tensor_amax) + ", target " +
                                                         float_text(ctx.q.target) + ")"
                                                   : "G = 1 (no tensor scale)";
    n.details.push_back("ideal scale u = min(RN(amax * RN(G * RN(1/" + F + "))), FLT_MAX) = RN(" + float_text(amax) +
                        " * " + float_text(m.block_multiplier()) + ") = " + with_bits(ideal) + ", with " + g_text);
    const std::string s = format_name(sf);
    const std::string u = float_text(ideal);
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
    if (rne != golden) {
      why += rc.zero_scale == ZeroScale::one
                 ? "; that is a zero scale, which this recipe replaces by 1.0 (code " + hex_code(sf, golden) + ")"
                 : "";
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
    n.fields.push_back(report::number("global_encode_scale", m.global().encode));

    const float G = m.global().encode;
    hypotheses = {
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
    if (rne != golden) hypotheses.push_back({"a zero scale kept as 0 (TE NVFP4's rule) instead of 1.0", rne});
    if (rne == golden && decode_to_float(sf, rne) == 0.0f) {
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
    for (ScaleRule rule : {ScaleRule::pow2_floor, ScaleRule::pow2_ceil, ScaleRule::pow2_even, ScaleRule::pow2_rceil}) {
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

// ---------------------------------------------------------------------------------------------------
// Explaining an element mismatch

struct ElementFacts {
  bool consistent_with_their_scale = false;
  bool swapped = false;
};

MismatchNote explain_element(const Context& ctx, std::size_t r, std::size_t c, std::uint32_t golden,
                             std::uint32_t theirs, std::uint32_t their_scale, const ElementFacts& facts) {
  const Recipe& rc = ctx.recipe;
  const Format& ef = rc.element;
  const Format& sf = rc.scale;
  const ScaleChooser& m = ctx.chooser;
  const QuantizedTensor& q = ctx.q;
  const bool two_level = rc.scale_rule == ScaleRule::two_level;
  MismatchNote n;
  n.kind = MismatchNote::Kind::element;
  n.row = r;
  n.col = c;
  n.golden = golden;
  n.theirs = theirs;
  n.summary = "element [" + std::to_string(r) + ", " + std::to_string(c) + "]: golden " + code_text(ef, golden) +
              ", yours " + code_text(ef, theirs);
  const std::size_t index = r * ctx.cols + c;
  const float x = ctx.x[index];
  n.details.push_back("x = " + with_bits(x) +
                      (ctx.spec.rht ? " after the RHT (input " + float_text(ctx.input[index]) + ")" : ""));
  const std::uint32_t scale_code = q.scale_code(r, c);
  const float mult = m.multiplier(scale_code);
  const float y = fp32::mul_rn(x, mult);
  if (two_level) {
    n.details.push_back("block scale " + code_text(sf, scale_code) + ", multiplier m = min(RN(1 / RN(s * Gd)), FLT_MAX) = " +
                        float_text(mult) + " (Gd = " + float_text(m.global().decode) + "); scaled value y = RN(x * m) = " +
                        with_bits(y));
  } else {
    n.details.push_back("block scale " + hex_code(sf, scale_code) + " = 2^" +
                        std::to_string(static_cast<int>(scale_code) - sf.bias) + "; scaled value y = x * 2^" +
                        std::to_string(sf.bias - static_cast<int>(scale_code)) + " = " + with_bits(y));
  }
  const Bracket b = bracket(ef, std::fabs(static_cast<double>(y)));
  const std::uint32_t sign = std::signbit(y) ? ef.sign_mask() : 0u;
  const std::string e = format_name(ef);
  const std::string yt = float_text(y);
  const std::uint32_t rnd = ctx.random_for(index);
  std::string why;
  if (is_stochastic(ctx.spec.rounding) && b.lo != b.hi) {
    char delta[32];
    std::snprintf(delta, sizeof delta, "%.6g", b.delta);
    why = "y = " + yt + " lies between " + code_text(ef, b.lo | sign) + " and " + code_text(ef, b.hi | sign) +
          ", delta = " + delta + " of the way; stochastic rounding " + std::string(name_of(ctx.spec.rounding)) +
          " with random integer r = " + std::to_string(rnd) + " (" + std::to_string(rc.sr_bits) + " bits, " +
          (ctx.random.explicit_bits.empty() ? "Philox seed " + std::to_string(ctx.random.seed) : std::string("--rbits")) +
          ") rounds " + ((golden & ~ef.sign_mask()) == b.hi ? "away from zero" : "toward zero") + " to " +
          hex_code(ef, golden);
  } else {
    switch (b.where) {
      case Bracket::Where::exact: why = "y = " + yt + " is exactly representable in " + e + ": " + hex_code(ef, golden); break;
      case Bracket::Where::tie:
        why = "y = " + yt + " is an exact " + e + " midpoint between " + code_text(ef, b.lo | sign) + " and " +
              code_text(ef, b.hi | sign) + "; " +
              (ctx.spec.rounding == Rounding::rne ? "RNE keeps the even code " : "the rounding gives ") + hex_code(ef, golden);
        break;
      case Bracket::Where::nearer_lo:
      case Bracket::Where::nearer_hi:
        why = "y = " + yt + " lies between " + code_text(ef, b.lo | sign) + " and " + code_text(ef, b.hi | sign) +
              ", nearer " + hex_code(ef, (b.where == Bracket::Where::nearer_lo ? b.lo : b.hi) | sign) + "; " +
              (ctx.spec.rounding == Rounding::rne ? std::string("RNE") : std::string(name_of(ctx.spec.rounding))) +
              " gives " + hex_code(ef, golden);
        break;
      case Bracket::Where::above_max:
        why = "|y| = " + float_text(std::fabs(y)) + " exceeds the " + e + " maximum " +
              float_text(static_cast<float>(b.lo_value)) + ": saturates to " + hex_code(ef, golden);
        break;
      case Bracket::Where::nan: why = "y is NaN (a NaN in the block); the golden encoder gives " + hex_code(ef, golden); break;
    }
  }
  why += "; yours is " + hex_code(ef, theirs) + " (" + relation(ef, golden, theirs, b) + ")";
  n.details.push_back(why);

  std::vector<std::string> causes;
  std::string matched;  // the alternative rule that gives yours, for --json
  if (facts.swapped) {
    causes.push_back("the two nibbles of byte [" + std::to_string(r) + ", " + std::to_string(c / 2) +
                     "] are exchanged: yours holds element " + std::to_string(c ^ 1) +
                     "'s golden code here and this one's there (nibble order: --nibbles)");
  }
  if (their_scale != scale_code) {
    const float their_mult = m.multiplier(their_scale);
    const std::uint32_t with_theirs = ctx.element_code(fp32::mul_rn(x, their_mult), ctx.spec.rounding, rnd);
    if (facts.consistent_with_their_scale) {
      causes.push_back("with your block scale " + hex_code(sf, their_scale) + " the golden rounding gives " +
                       hex_code(ef, with_theirs) + " = yours: this follows from the block's scale mismatch");
    } else {
      causes.push_back("with your block scale " + hex_code(sf, their_scale) + " the golden rounding gives " +
                       hex_code(ef, with_theirs) + ", not yours either");
    }
  }
  if (!facts.swapped && !facts.consistent_with_their_scale) {
    // The alternative rules, best fit over the whole tensor first: a rule that reproduces every byte
    // of yours is named before one that happens to give this code (rtz gives the code of every
    // division-rounded near-tie, and thousands of codes of yours it does not).
    const Alternative* match = nullptr;
    for (const Alternative& a : ctx.alternatives) {
      if (!a.reread && a.q.code(r, c) == theirs) {
        match = &a;
        break;
      }
    }
    if (match) matched = match->fit.label;
    causes.push_back(match ? "yours matches " + match->fit.label + " (" + fit_text(match->fit) + ")"
                           : "none of the modelled alternative rules gives yours");
  }
  for (auto& cause : causes) n.details.push_back(std::move(cause));

  n.fields = {report::text("kind", "element"),
              report::integer("row", r),
              report::integer("col", c),
              report::integer("golden", golden),
              report::integer("theirs", theirs),
              report::number("golden_value", decode_to_double(ef, golden)),
              report::number("theirs_value", decode_to_double(ef, theirs)),
              report::number("x", x),
              report::text("x_bits", hex_bits(x)),
              report::integer("scale", scale_code),
              report::number("multiplier", mult),
              report::number("scaled", y),
              report::text("scaled_bits", hex_bits(y)),
              report::boolean("tie", b.where == Bracket::Where::tie),
              report::integer("lower_neighbour", b.lo | sign),
              report::integer("upper_neighbour", b.hi | sign),
              report::boolean("swapped_nibbles", facts.swapped),
              report::boolean("consistent_with_their_scale", facts.consistent_with_their_scale)};
  if (is_stochastic(ctx.spec.rounding)) n.fields.push_back(report::integer("random", rnd));
  n.fields.push_back(report::text("theirs_matches", matched));
  n.fields.push_back(report::text("explanation", report::joined(n.details)));
  return n;
}

// Mismatching stored scales when the user's scale bytes are read under `layout` (for hints).
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

// The element codes and stored scales of the user's that differ from q's (every stored copy of a scale).
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

// The golden quantizer rerun with one rule changed, for each rule a kernel is known to get differently,
// and the user's bytes read under the other nibble orders and scale layouts, ordered by how many of the
// user's bytes each reproduces.
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
      add("TE's " + name + " adaptive block scaling (map-to-4 or map-to-6 per block, --block-choice " + name + ")",
          other, request);
      if (request.spec.target != 256.0f) {
        QuantizeRequest at256 = request;
        at256.spec.target = 256.0f;
        add("TE's " + name + " adaptive block scaling with its E4M3 bound 256 (--block-choice " + name +
                " --target 256)", other, at256);
      }
    }
    const bool row_possible = !request.spec.two_d && !request.amax_ref && recipe.tensor_scale == TensorScalePolicy::current;
    if (recipe.amax_scope == AmaxScope::tensor && row_possible) {
      add("row-scaled NVFP4: one amax, G and Gd per row (--amax-scope row)",
          with([](Recipe& r) { r.amax_scope = AmaxScope::row; }), request);
    } else if (recipe.amax_scope == AmaxScope::row) {
      add("one tensor amax (--amax-scope tensor), not one per row", with([](Recipe& r) { r.amax_scope = AmaxScope::tensor; }),
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
      add(std::string(label) + " (--rht-signs " + rht_signs_text(signs) + ")",
          with([s = signs](Recipe& r) { r.rht_signs = s; }), request);
    }
    QuantizeRequest plain = request;
    plain.spec.rht = false;
    add("no RHT (--no-rht)", recipe, plain);
  } else if (cols % 16 == 0) {
    QuantizeRequest transformed = request;
    transformed.spec.rht = true;
    add("the RHT applied (--rht --rht-signs " + rht_signs_text(recipe.rht_signs) + ")", recipe, transformed);
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
      out.push_back({{"your codes stored in another nibble order (--nibbles " + std::string(name_of(order)) + ")", *bad,
                      golden_scales},
                     {},
                     true});
    }
  }
  for (const auto& row : names(ScaleLayout{})) {
    if (row.value == theirs.layout) continue;
    if (const auto bad = scale_mismatches_under(row.value, golden, theirs)) {
      out.push_back({{"your scales stored in another layout (--layout " + std::string(row.name) + ")", golden_codes,
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

}  // namespace

std::span<const NameRow<TensorScaleKind>> names(TensorScaleKind) { return kKinds; }

QuantizeVerifyReport verify_quantize(const Recipe& recipe, const VerifyQuantizeRequest& request,
                                     std::span<const float> input, std::size_t rows, std::size_t cols,
                                     const TheirQuantized& theirs) {
  if (recipe.element.storage_bits() != 4) {
    throw UsageError("verify quantize: packed codes need a 4-bit element format; " + format_name(recipe.element) +
                     " has " + std::to_string(recipe.element.bits()) + " bits");
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
  const QuantizedTensor q = quantize(recipe, request.quantize, input, rows, cols);
  const ScaleGrid grid{rows, cols, q.block_rows, q.block_cols};
  const ScaleStorage storage(theirs.layout, grid, theirs.scales_shape, theirs.scales_source);
  if (theirs.scales.size() != storage.size()) {
    throw DataError(theirs.scales_source + ": " + std::to_string(theirs.scales.size()) + " bytes, shape says " +
                    shape_text(theirs.scales_shape));
  }

  std::vector<float> transformed;
  std::span<const float> x = input;
  if (spec.rht) {
    transformed = random_hadamard_transform(input, rows, cols, recipe.rht_signs);
    x = transformed;
  }
  const ScaleChooser chooser(recipe, GlobalScale{q.global_encode_scale, q.global_decode_scale});
  const auto [golden_code_differences, golden_scale_differences] = differences(q, theirs, storage);
  const std::vector<Alternative> alts =
      golden_code_differences + golden_scale_differences == 0
          ? std::vector<Alternative>{}
          : alternatives(recipe, request.quantize, input, rows, cols, theirs, storage, q);
  const Context ctx{recipe, spec, q, chooser, input, x, request.quantize.random, theirs, storage, cols, alts};

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
      const float el_max = chooser.element_max();
      n.details.push_back("golden encode scale G = RN(RN(" + float_text(el_max) + " * T) / amax) = " +
                          with_bits(q.global_encode_scale) + "; decode scale Gd = RN(1/G) = " +
                          with_bits(q.global_decode_scale) + "; tensor amax = " + with_bits(q.tensor_amax) +
                          (request.quantize.amax_ref ? " (held, from --amax-ref)" : " (current)") + ", T = " +
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
      notes.push_back(std::move(n));
    }
  }

  const std::size_t sc_count = q.scale_cols;
  std::vector<std::pair<std::size_t, std::size_t>> block_bad;  // (r, c) of element mismatches in a block
  for (std::size_t sr = 0; sr < q.scale_rows; ++sr) {
    const std::size_t r0 = sr * q.block_rows, r1 = std::min(rows, r0 + q.block_rows);
    for (std::size_t sc = 0; sc < sc_count; ++sc) {
      const std::size_t c0 = sc * q.block_cols, c1 = std::min(cols, c0 + q.block_cols);
      const std::uint8_t golden_scale = q.scales[sr * sc_count + sc];
      {
        const auto [amax, nonfinite] = ctx.block(sr, sc);
        rep.model_disagreements += chooser.choose(amax, nonfinite).code != golden_scale;
      }
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
      const float their_mult = chooser.multiplier(their_scale);
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
              ctx.element_code(fp32::mul_rn(x[index], their_mult), spec.rounding, ctx.random_for(index));
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
        rep.hints.push_back("your scales match the golden ones exactly when read as --layout " +
                            std::string(name_of(other)));
      }
    }
  }
  if (rep.mismatched_elements > 0) {
    for (NibbleOrder other : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::unpacked}) {
      if (other == theirs.nibbles) continue;
      if (auto bad = code_mismatches_under(other, q, theirs); bad && *bad == 0) {
        rep.hints.push_back("your codes match the golden ones exactly when read as --nibbles " +
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
    rep.hints.push_back("internal: the explanations' scale model disagrees with the golden quantizer on " +
                        std::to_string(rep.model_disagreements) + " block(s); the counts are right, the explanations may not be");
  }
  if (rep.nonzero_padding_nibbles > 0) {
    rep.hints.push_back(std::to_string(rep.nonzero_padding_nibbles) +
                        " row(s) have a nonzero padding nibble after the last element (fp4sim writes 0; not counted as a mismatch)");
  }
  return rep;
}

}  // namespace fp4sim
