// What the verify tests share: the golden bytes as a kernel would store them, a run of verify quantize on
// them, and the input tensors (live block scales, or bfloat16 normals).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim {

struct Golden {
  QuantizedTensor q;
  std::vector<std::uint8_t> codes, scales;
  TheirQuantized theirs;
};

// The golden bytes as a kernel using `layout` and `nibbles` would store them.
inline Golden golden(const Recipe& recipe, const QuantizeRequest& request, const std::vector<float>& x, std::size_t rows,
              std::size_t cols, ScaleLayout layout = ScaleLayout::rowmajor, NibbleOrder nibbles = NibbleOrder::low_first) {
  Golden g;
  g.q = quantize(recipe, request, x, rows, cols);
  const ScaleGrid grid{rows, cols, g.q.block_rows, g.q.block_cols};
  if (!g.q.packed()) nibbles = NibbleOrder::unpacked;  // 8-bit codes: a byte each, the one order they have
  g.codes = g.q.packed() ? codes_to_order(g.q.codes, rows, cols, nibbles) : g.q.codes;
  g.scales = scales_to_layout(g.q.scales, grid, layout);
  g.theirs.layout = layout;
  g.theirs.nibbles = nibbles;
  g.theirs.codes_shape = codes_shape(nibbles, rows, cols);
  g.theirs.scales_shape = ScaleStorage::canonical_shape(layout, grid);
  return g;
}

inline QuantizeVerifyReport run(const Recipe& recipe, const QuantizeRequest& request, const std::vector<float>& x,
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
inline std::vector<float> random_tensor(std::size_t rows, std::size_t cols, std::uint32_t seed) {
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
inline void expect_live(const QuantizedTensor& q, const std::string& where) {
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
inline std::vector<float> normal_tensor(std::size_t rows, std::size_t cols, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = decode_to_float(formats::bf16, encode(formats::bf16, normal(gen), EncodeOptions{}).code);
  return x;
}

inline bool contains(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

inline std::string joined(const MismatchNote& n) {
  std::string s = n.summary;
  for (const auto& d : n.details) s += "\n" + d;
  return s;
}

}  // namespace fp4sim
