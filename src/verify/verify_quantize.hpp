// verify quantize, internal to the verify layer: what every explanation reads (the golden bytes, the
// golden quantizer's report of what it used, the user's bytes) and the three kinds of explanation, one
// file each: a block scale (verify_quantize_scale.cpp), an element (verify_quantize_element.cpp) and the
// whole-tensor alternatives, the golden model with one rule changed (verify_quantize_alternatives.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/quantize_trace.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/core/scale_chooser.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim::explain {

// ---------------------------------------------------------------------------------------------------
// Where a magnitude sits among a format's values: the two codes around it and the side it is nearer
// (neighbours.cpp).

struct Bracket {
  enum class Where : std::uint8_t { exact, tie, nearer_lo, nearer_hi, above_max, nan } where = Where::exact;
  std::uint32_t lo = 0, hi = 0;  // magnitude codes (lo == hi when exact or saturated)
  double lo_value = 0.0, hi_value = 0.0;
  double delta = 0.0;            // (m - lo) / (hi - lo), the stochastic-rounding fraction
};

Bracket bracket(const Format& f, double magnitude);
// How `theirs` relates to `golden` among a format's codes ("rounded up", "2 codes below", ...).
std::string relation(const Format& f, std::uint32_t golden, std::uint32_t theirs, const Bracket& b);

// ---------------------------------------------------------------------------------------------------
// Whole-tensor alternatives (verify_quantize_alternatives.cpp)

// The golden model with one rule changed (q: its quantized tensor), or the user's bytes read another way
// (reread: q unused), and how far the user's bytes are from it.
struct Alternative {
  AlternativeFit fit;
  QuantizedTensor q;
  bool reread = false;
};

// "that rule reproduces all of your codes and scales", or what it leaves different.
std::string fit_text(const AlternativeFit& a);

// The element codes and stored scales of the user's that differ from q's (every stored copy of a scale).
std::pair<std::uint64_t, std::uint64_t> differences(const QuantizedTensor& q, const TheirQuantized& theirs,
                                                    const ScaleStorage& storage);
// Mismatching stored scales or codes when the user's bytes are read under another layout or nibble
// order; nullopt when their arrays cannot be read that way.
std::optional<std::uint64_t> scale_mismatches_under(ScaleLayout layout, const QuantizedTensor& q,
                                                    const TheirQuantized& theirs);
std::optional<std::uint64_t> code_mismatches_under(NibbleOrder order, const QuantizedTensor& q,
                                                   const TheirQuantized& theirs);

// The golden quantizer rerun with one rule changed, for each rule a kernel is known to get differently,
// and the user's bytes read under the other nibble orders and scale layouts, ordered by how many of the
// user's bytes each reproduces.
std::vector<Alternative> alternatives(const Recipe& recipe, const QuantizeRequest& request, std::span<const float> input,
                                      std::size_t rows, std::size_t cols, const TheirQuantized& theirs,
                                      const ScaleStorage& storage, const QuantizedTensor& golden);

// ---------------------------------------------------------------------------------------------------
// What an explanation reads

struct Context {
  const Recipe& recipe;
  const OperandSpec& spec;
  const QuantizedTensor& q;
  const QuantizeTrace& trace;    // what the golden quantizer used: x after any RHT, each block, each y
  std::span<const float> input;  // as given
  const RandomSource& random;
  const TheirQuantized& theirs;
  const ScaleStorage& storage;
  std::size_t cols;
  std::span<const Alternative> alternatives;  // best fit first; empty when the user's bytes are golden

  const BlockTrace& block_of(std::size_t r, std::size_t c) const {
    return trace.block(r / q.block_rows, c / q.block_cols);
  }

  // How a block is scaled under a stored code of the user's: the golden rule asked with the G and Gd
  // that block used.
  BlockScale scale_from_code(const BlockTrace& block, std::uint32_t code) const {
    return ScaleChooser(recipe, block.global).from_code(code);
  }

  // The golden scaling of one value under a block scale (multiplier, or divisor under division).
  static float scaled(float x, const BlockScale& scale) {
    float y = 0.0f;
    ScaleChooser::scale(std::span(&x, 1), scale, std::span(&y, 1));
    return y;
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
// One mismatch explained

// The note of one mismatch before its explanation: what differs, where (element (row, col) or block
// (block_row, block_col)) and the two codes.
inline MismatchNote mismatch_at(MismatchNote::Kind kind, std::size_t row, std::size_t col, std::uint32_t golden,
                                std::uint32_t theirs) {
  return {.kind = kind, .row = row, .col = col, .stored_row = 0, .golden = golden, .theirs = theirs,
          .summary = {}, .details = {}, .fields = {}};
}

// A block scale (sr, sc) whose copy stored for `stored_row` differs (verify_quantize_scale.cpp).
MismatchNote explain_scale(const Context& ctx, std::size_t sr, std::size_t sc, std::size_t stored_row,
                           std::uint32_t golden, std::uint32_t theirs);

struct ElementFacts {
  bool consistent_with_their_scale = false;
  bool swapped = false;
};

// An element code (verify_quantize_element.cpp); their_scale is the user's scale of its block.
MismatchNote explain_element(const Context& ctx, std::size_t r, std::size_t c, std::uint32_t golden,
                             std::uint32_t theirs, std::uint32_t their_scale, const ElementFacts& facts);

}  // namespace fp4sim::explain
