// The arguments of a raw tensor-core multiply-accumulate (`fp4sim mma`, `fp4sim.mma`) as the front ends
// receive them, and the one place they are checked: the row and the input formats by name, then the
// operand values (each exact in its input format; C a binary32 value, fp16 for an f16-accumulate row) and,
// for a block-scaled row, the scale codes of A and B.
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
  std::string datapath;      // a T-FDPA or GST-FDPA row
  std::string input_format;  // one of the row's input names (bf16, fp16, tf32, fp32, e4m3, ...) for A and B
  std::string a_format, b_format;  // A's and B's own input names (wgmma e4m3 x e5m2); empty: input_format
  std::string scale_format;  // block-scaled rows: the scale codes' format; empty: the row's first

  struct Resolved {
    const Datapath* row = nullptr;
    InputSpec a, b;               // same instruction K
    std::optional<Format> scale;  // block-scaled rows only
  };
  Resolved resolve() const;  // UsageError
};

// An operand array: its name and shape, and its values.
struct MmaOperand {
  ArrayShape array;
  std::span<const double> values;
};

// A block-scaled row's scale codes: A's [M, K / block] and B's [K / block, N], one byte each (a UE4M3
// code's sign bit is ignored where the row says so; UE8M0 0xFF and UE4M3 0x7F are NaN scales).
struct MmaScaleOperand {
  ArrayShape array;
  std::span<const std::uint32_t> codes;
};

// The codes of A [M, K] and B [K, N] and the FP32 bits of C [M, N] (empty without C), checked (DataError
// naming the array and element); for a block-scaled row the scale codes and the block K / (A's scale
// columns): 32 on a block-scaled T-FDPA row (its instruction K), 16, 32 or 64 on a GST-FDPA row.
struct MmaOperands {
  std::vector<std::uint32_t> a, b, c;
  std::size_t m = 0, n = 0, k = 0;
  std::vector<std::uint32_t> scale_a, scale_b;
  std::size_t block = 0;
};
// `scale_a`/`scale_b`: both or neither; a block-scaled row needs them, any other row refuses them (UsageError).
MmaOperands mma_operands(const MmaCall& call, const MmaCall::Resolved& resolved, const MmaOperand& a,
                         const MmaOperand& b, const MmaOperand* c, const MmaScaleOperand* scale_a = nullptr,
                         const MmaScaleOperand* scale_b = nullptr);

// D [M, N] as FP32 bits: the row's chain of instructions per output (fp4sim::mma).
std::vector<std::uint32_t> run_mma(const MmaCall::Resolved& resolved, const MmaOperands& operands);

}  // namespace fp4sim
