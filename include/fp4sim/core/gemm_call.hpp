// The arguments of a GEMM call as the front ends receive them (`fp4sim gemm`, `fp4sim.gemm`), and the one
// place they are checked: the recipe, which GEMM of the layer, the datapath by name (looked up here,
// once), both operands' arguments; then the operand shapes once the data is read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/quantize_call.hpp"

namespace fp4sim {

struct GemmCall {
  RecipeOverrides recipe;
  std::string gemm = "fprop";     // fprop (A = x, B = w), dgrad (A = dy, B = wᵀ), wgrad (A = dyᵀ, B = xᵀ)
  std::string datapath, inner;    // datapath names ("": the recipe's, and probe-matched's own inner row)
  bool snap = true;               // false: --no-snap (probe-matched only)
  std::string out_dtype = "f32";  // f32, or bf16 (every output rounded RNE to BF16)
  bool reference = false;         // the plain scalar golden loop instead of the fast kernels
  std::optional<int> frac_bits;   // what-if alignment width F of the tensor-core row
  std::uint64_t seed = 0;         // Philox seed: operand A draws stream 0, B stream 1
  OperandArguments a, b;

  struct Resolved {
    Recipe recipe;
    Gemm gemm = Gemm::fprop;
    QuantizeRequest a, b;
    GemmRequest request;
  };
  // Everything that needs no data, checked (UsageError).
  Resolved resolve() const;
};

// A [M, K] and B [N, K] fit C = A·Bᵀ: both 2-D with the same K (DataError naming them otherwise).
void check_gemm_shapes(const ArrayShape& a, const ArrayShape& b);

}  // namespace fp4sim
