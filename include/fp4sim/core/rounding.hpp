// Rounding modes and exception flags, named as in docs/cli.md and valued as in SoftFloat/TestFloat.
#pragma once

#include <cstdint>
#include <span>

#include "fp4sim/core/names.hpp"

namespace fp4sim {

enum class Rounding : std::uint8_t {
  rne,          // nearest, ties to even code
  rna,          // nearest, ties away from zero
  rtz,          // toward zero
  rup,          // toward +inf
  rdown,        // toward -inf
  sr_fast,      // away from zero iff delta + (2r+1)/2^(k+1) >= 1, evaluated exactly (UE5M3 paper's rule)
  sr_fast_f32,  // the same rule with delta + (2r+1)/2^(k+1) as one RNE binary32 addition, as the
                // paper's reference evaluates it (rounds up more often for tiny delta)
  sr_fastest,   // away from zero iff floor(2^k * delta) + r >= 2^k (TransformerEngine, PTX cvt.rs)
};

constexpr bool is_stochastic(Rounding r) {
  return r == Rounding::sr_fast || r == Rounding::sr_fast_f32 || r == Rounding::sr_fastest;
}

std::span<const NameRow<Rounding>> names(Rounding);

// Exception flags with SoftFloat's bit values, so TestFloat-style vectors print the same bytes.
namespace flag {
inline constexpr std::uint8_t inexact = 1;
inline constexpr std::uint8_t underflow = 2;
inline constexpr std::uint8_t overflow = 4;
inline constexpr std::uint8_t infinite = 8;
inline constexpr std::uint8_t invalid = 16;  // the format cannot hold the value: a data error
}  // namespace flag

}  // namespace fp4sim
