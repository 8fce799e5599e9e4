// The arguments of an element-wise conversion (`fp4sim convert`, `fp4sim.convert`) as the front ends
// receive them, and the one place they are checked; then the conversion of an array, with the error
// that names the first value the format cannot hold.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4sim/core/arrays.hpp"
#include "fp4sim/core/codec.hpp"

namespace fp4sim {

struct ConvertCall {
  std::string format;              // a preset name or an eXmY / ueXmY descriptor
  std::string rounding = "rne";
  int sr_bits = 8;                 // k, 1..16
  std::uint64_t seed = 0;          // Philox seed of the stochastic-rounding bits (stream 0)
  std::optional<bool> saturate;    // default: the format's (default_saturate)
  std::string specials = "hardware";
  bool random_bits = false;        // explicit random bits will be given: the rounding must be stochastic

  struct Resolved {
    Format format;
    EncodeOptions options;
  };
  Resolved resolve() const;  // UsageError
};

// The codes of `values` (shape `input.shape`, named input.source in messages) under a resolved call;
// stochastic roundings take `bits` (uint8/16/32, checked) or Philox(seed, stream 0). DataError naming
// the first element the format cannot hold.
std::vector<std::uint32_t> convert(const ConvertCall& call, const ConvertCall::Resolved& resolved,
                                   const ArrayShape& input, std::span<const double> values,
                                   const RandomBitsArray* bits);

// Bytes one code is stored in: 1 for formats of up to 8 bits, 2 up to 16, 4 for fp32.
int code_bytes(const Format& format);

// The same conversion of binary32 values through the fast encoder (Float32Encoder, equal to the golden
// path on every binary32 input), written straight into `codes` (values.size() codes of code_bytes(format)
// bytes: Code is uint8_t, uint16_t or uint32_t): no intermediate array but the stochastic-rounding bits.
// The same checks and the same DataError as above.
template <class Code>
void convert(const ConvertCall& call, const ConvertCall::Resolved& resolved, const ArrayShape& input,
             std::span<const float> values, const RandomBitsArray* bits, std::span<Code> codes);

}  // namespace fp4sim
