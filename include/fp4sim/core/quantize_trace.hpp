// What the golden quantizer used, block by block and element by element, reported when the caller asks
// (quantize(..., &trace)): the values quantize() computed while choosing each scale and code, not a
// second model of its rules. `verify quantize` explains a user's bytes from this report.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/scale_chooser.hpp"

namespace fp4sim {

// TE's 4over6 choice of one block (BlockScaleChoice::four_over_six_*; docs/semantics.md 1.12).
struct FourOverSixTrace {
  BlockScale map4, map6;              // the candidates, each after its zero-scale repair, with its element scaling
  ScaleTrace map4_trace, map6_trace;  // their ideal scales: RN(base * 1.5) and base = RN(RN(amax / F) * G)
  float map4_error = 0.0f, map6_error = 0.0f;  // the block's error under each (FourOverSixError::block_sum)
  bool map4_chosen = false;                    // map4_error < map6_error; a tie keeps map-to-6
};

// One block as the golden rule saw it.
struct BlockTrace {
  BlockAmax amax;                // the NaN-ignoring block amax (after the RHT) and whether it holds a NaN or Inf
  float global_amax = 0.0f;      // the amax G was made from: the tensor's (current or held), or under
                                 // AmaxScope::row the block's row's; 0 without a tensor scale
  GlobalScale global;            // G and Gd of this block (G = Gd = 1 without a tensor scale)
  BlockScale scale;              // the stored scale code, its value, and the multiplier or divisor (division)
  ScaleTrace trace;              // how that code was reached (the chosen candidate's under 4over6)
  std::optional<FourOverSixTrace> four_over_six;  // both candidates, when the recipe tries two
};

struct QuantizeTrace {
  std::size_t scale_cols = 0;
  std::vector<float> x;             // [rows, cols] the values quantized: the input, after the RHT under spec.rht
  std::vector<float> scaled;        // [rows, cols] y: each x scaled by its block's scale, before rounding
  std::vector<BlockTrace> blocks;   // [scale_rows, scale_cols]

  const BlockTrace& block(std::size_t block_row, std::size_t block_col) const {
    return blocks[block_row * scale_cols + block_col];
  }
};

}  // namespace fp4sim
