// The arguments of a raw tensor-core multiply-accumulate (`fp4sim mma`, `fp4sim.mma`) as the front ends
// receive them, and the one place they are checked: the row and the input formats by name, then the
// operand values (each exact in its input format; C a binary32 value, fp16 for an f16-accumulate row).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4sim/core/arrays.hpp"
#include "fp4sim/core/datapath.hpp"

namespace fp4sim {

struct MmaCall {
  std::string datapath;      // a T-FDPA row
  std::string input_format;  // one of the row's input names (bf16, fp16, tf32, fp32, e4m3, ...) for A and B
  std::string a_format, b_format;  // A's and B's own input names (wgmma e4m3 x e5m2); empty: input_format

  struct Resolved {
    const Datapath* row = nullptr;
    InputSpec a, b;  // same instruction K
  };
  Resolved resolve() const;  // UsageError
};

// An operand array: its name and shape, and its values.
struct MmaOperand {
  ArrayShape array;
  std::span<const double> values;
};

// The codes of A [M, K] and B [K, N] and the FP32 bits of C [M, N] (empty without C), checked (DataError
// naming the array and element).
struct MmaOperands {
  std::vector<std::uint32_t> a, b, c;
  std::size_t m = 0, n = 0, k = 0;
};
MmaOperands mma_operands(const MmaCall& call, const MmaCall::Resolved& resolved, const MmaOperand& a,
                         const MmaOperand& b, const MmaOperand* c);

}  // namespace fp4sim
