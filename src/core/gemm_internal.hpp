// Internals of the GEMM shared by gemm.cpp, gemm_operands.cpp, gemm_reference.cpp and gemm_fast.cpp (not
// public).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/gemm.hpp"

namespace fp4sim::detail {

// A quantized operand unpacked into integers: element code -> n (value n * 2^-elem_frac), scale code ->
// Unpacked (value sig * 2^(exp - frac)).
struct OperandInfo {
  OperandInfo(const QuantizedTensor& tensor, bool scale_sign_ignored);
  const QuantizedTensor* q;
  std::size_t rows = 0, k = 0, block = 0, blocks = 0;
  int elem_frac = 0;
  bool elem_ok = true;
  std::array<std::int8_t, 16> elem_n{};
  std::array<Unpacked, 256> scale{};
  std::array<bool, 256> scale_invalid{};

  int n(std::size_t r, std::size_t c) const;
  std::uint8_t scale_code(std::size_t r, std::size_t kb) const;  // kb: block index along K
};

// The encoded operand q·s of every (scale code, element code) pair in a tensor-core input format.
struct EncodedTable {
  EncodedTable(const OperandInfo& op, const Format& input);
  std::array<bool, 256 * 16> ok{};
  std::array<Unpacked, 256 * 16> value{};
};

std::optional<Unpacked> encoded_value(const OperandInfo& op, const Format& input, int n, std::uint8_t scale_code);

// probe-matched's inner row (the options' own, or the row's default).
const Datapath& inner_of(const GemmOptions& options);
// The input format the encoded operands must fit: the T-FDPA row's (or the inner row's) first input.
Format encoded_input(const GemmOptions& options);

// The epilogue's alpha of output row i: GemmOptions::row_alpha[i] when given (A row-scaled), else alpha.
inline float alpha_of_row(const GemmOptions& options, std::size_t i) {
  return options.row_alpha.empty() ? options.alpha : options.row_alpha[i];
}

// RN32(acc * alpha), NaN -> the row's NaN.
std::uint32_t epilogue(const Datapath& dp, std::uint32_t acc, float alpha);
// RNE to BF16 (as float32 bits) when asked.
std::uint32_t output_cast(std::uint32_t bits, bool bf16);

// The plain scalar reference for one pair of operands.
struct ReferenceContext {
  ReferenceContext(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options);
  std::uint32_t element(std::size_t i, std::size_t j, GemmTrace* trace = nullptr) const;
  GemmOptions options;
  OperandInfo a, b;
  std::unique_ptr<EncodedTable> ta, tb;
};

// RN32(alpha * acc) for an exact binary64 acc, one rounding: by the binary64 product and its FMA error
// term (fast, used by the exact kernel) or by the integer product of the significands (golden).
std::uint32_t round_scaled_alpha(double acc, float alpha, std::uint32_t nan_bits, bool fast);

// The fast kernels: fill c and return true, or return false when this datapath/operand combination has
// no fast kernel (the caller then runs the reference in parallel).
bool gemm_fast(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options, std::span<float> c);

}  // namespace fp4sim::detail
