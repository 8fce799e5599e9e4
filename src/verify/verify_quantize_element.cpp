// verify quantize: explaining an element code that differs from the golden one, from the y the golden
// quantizer reported for it and its block's scale (multiplier or divisor), with the causes that give
// the user's code: exchanged nibbles, the user's own block scale, a whole-tensor alternative.
#include <cmath>
#include <cstdio>

#include "report.hpp"
#include "verify_quantize.hpp"

namespace fp4sim::explain {

namespace {

using report::code_text;
using report::hex_code;
using report::with_bits;

// How the elements of a two-level block were scaled, as the recipe's ElementScaling says.
std::string scaling_text(const Recipe& rc, const BlockScale& s, const GlobalScale& global) {
  if (s.divisor != 0.0f) {
    return "divisor d = RN(s * Gd) = " + float_text(s.divisor) + " (Gd = " + float_text(global.decode) + ")";
  }
  if (rc.element_scaling == ElementScaling::bf16_coefficient) {
    return "multiplier m = BF16(min(RN(G / s), BF16_MAX)) = " + float_text(s.multiplier) + " (G = " +
           float_text(global.encode) + ")";
  }
  return "multiplier m = min(RN(1 / RN(s * Gd)), FLT_MAX) = " + float_text(s.multiplier) + " (Gd = " +
         float_text(global.decode) + ")";
}

}  // namespace

MismatchNote explain_element(const Context& ctx, std::size_t r, std::size_t c, std::uint32_t golden,
                             std::uint32_t theirs, std::uint32_t their_scale, const ElementFacts& facts) {
  const Recipe& rc = ctx.recipe;
  const Format& ef = rc.element;
  const Format& sf = rc.scale;
  const BlockTrace& block = ctx.block_of(r, c);
  const BlockScale& scale = block.scale;
  const bool two_level = rc.scale_rule == ScaleRule::two_level;
  MismatchNote n = mismatch_at(MismatchNote::Kind::element, r, c, golden, theirs);
  n.summary = "element [" + std::to_string(r) + ", " + std::to_string(c) + "]: golden " + code_text(ef, golden) +
              ", yours " + code_text(ef, theirs);
  const std::size_t index = r * ctx.cols + c;
  const float x = ctx.trace.x[index];
  n.details.push_back("x = " + with_bits(x) +
                      (ctx.spec.rht ? " after the RHT (input " + float_text(ctx.input[index]) + ")" : ""));
  const std::uint32_t scale_code = scale.code;
  const float y = ctx.trace.scaled[index];
  if (two_level) {
    n.details.push_back("block scale " + code_text(sf, scale_code) + ", " + scaling_text(rc, scale, block.global) +
                        "; scaled value y = " + (scale.divisor != 0.0f ? "RN(x / d)" : "RN(x * m)") + " = " + with_bits(y));
  } else if (std::isnan(scale.value)) {
    n.details.push_back("block scale " + hex_code(sf, scale_code) + " (NaN: the block holds a NaN or Inf), its elements "
                        "unscaled: y = x = " + with_bits(y));
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
          (ctx.random.explicit_bits.empty() ? "Philox seed " + std::to_string(ctx.random.seed) : std::string("{rbits}")) +
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
                     "'s golden code here and this one's there (nibble order: {nibbles})");
  }
  if (their_scale != scale_code) {
    const float their_y = Context::scaled(x, ctx.scale_from_code(block, their_scale));
    const std::uint32_t with_theirs = ctx.element_code(their_y, ctx.spec.rounding, rnd);
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
              report::number("multiplier", scale.multiplier),
              report::number("scaled", y),
              report::text("scaled_bits", hex_bits(y)),
              report::boolean("tie", b.where == Bracket::Where::tie),
              report::integer("lower_neighbour", b.lo | sign),
              report::integer("upper_neighbour", b.hi | sign),
              report::boolean("swapped_nibbles", facts.swapped),
              report::boolean("consistent_with_their_scale", facts.consistent_with_their_scale)};
  if (scale.divisor != 0.0f) n.fields.push_back(report::number("divisor", scale.divisor));
  if (is_stochastic(ctx.spec.rounding)) n.fields.push_back(report::integer("random", rnd));
  n.fields.push_back(report::text("theirs_matches", matched));
  n.fields.push_back(report::text("explanation", report::joined(n.details)));
  return n;
}

}  // namespace fp4sim::explain
