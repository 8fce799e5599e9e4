// Which datapath rows reproduce a file of measured tensor-core outputs (`fp4sim datapath identify`,
// docs/datapaths.md §8). A measurement is one instruction per line in the vendored format of
// tests/data/tensorcore_corners: the vector in A row 0 and B column 0, C[0][0], the measured D[0][0]; the
// block-scaled instructions add one scale code per block of A's row and B's column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/format.hpp"

namespace fp4sim {

// What a measurement folder's name says about its instruction (`<instruction>_<a>[_<b>]_<accumulator>`,
// e.g. `wgmma_e4m3_e5m2_f16`; block-scaled: `…_e2m1_<scale>_block<16|32>_f32`, e.g.
// `tcgen05_mxf4nvf4_e2m1_ue4m3_block16_f32`). Element tokens: bf16, f16, tf32 (the 32-bit register the
// instruction read, which the tf32 rows truncate), e4m3, e5m2, e3m2, e2m3, e2m1, and AMD CDNA3's fp8 and
// bf8 (FNUZ).
struct MeasuredInstruction {
  std::string a_input, b_input;        // the rows' input names: "bf16", "fp16", "fp32" (tf32 registers), ...
  bool f16_accumulator = false;        // `_f16` (D and C fp16, widened exactly to FP32 bits) or `_f32`
  std::optional<Format> scale_format;  // block-scaled only: ue4m3 or e8m0 (token `ue8m0`)
  int scale_block = 0;                 // elements per scale (16 or 32)
};
// DataError "<folder>: ..." naming what the name lacks.
MeasuredInstruction parse_instruction_name(std::string_view folder);

// The lines of one measurement: every token as read (FP32 bit patterns; scale codes as written).
struct Measurement {
  MeasuredInstruction instruction;
  std::vector<std::vector<std::uint32_t>> a, b;              // K tokens per line
  std::vector<std::vector<std::uint32_t>> scale_a, scale_b;  // K / scale_block codes per line (block-scaled)
  std::vector<std::uint32_t> c, d;
};

// How one row fares on a measurement.
struct RowFit {
  const Datapath* row = nullptr;
  std::size_t lines = 0;
  std::vector<std::size_t> differing;  // the lines (0-based) whose output the row does not reproduce
};

// Every row of the table that takes the measurement's formats (T-FDPA rows with both element formats
// among their inputs and the same accumulator; block-scaled rows with the scale format, a block-scaled
// T-FDPA row with its own scale block), in table order, each run on every line: T-FDPA rows as a chain of
// their groups over the line's K (tfdpa_dot), GST rows as one instruction per 64 elements from C (gst_dot). DataError when a token is not exact in its format or the lines of
// a, b, c, d (and the scales) disagree in count or length.
std::vector<RowFit> identify(const Measurement& measurement);

// The output of `row` for line `line` of the measurement (FP32 bits; an fp16 result widened exactly).
std::uint32_t predict(const Datapath& row, const Measurement& measurement, std::size_t line);

}  // namespace fp4sim
