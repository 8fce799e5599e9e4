// The exact integer primitives the golden arithmetic is built from, one home each (SoftFloat's
// primitives.h): rounding up to a multiple, bit lengths, shift-right-jam, the exact sum of two signed values, the binade of a
// binary32, and the distance of two binary32 values in ulps.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace fp4sim {

using u128 = unsigned __int128;
using i128 = __int128;

// n rounded up to a multiple of m.
constexpr std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

// Bits needed to write x (0 for 0).
constexpr int bit_length(std::uint64_t x) { return x ? 64 - std::countl_zero(x) : 0; }
constexpr int bit_length(u128 x) {
  const auto hi = static_cast<std::uint64_t>(x >> 64);
  return hi ? 64 + bit_length(hi) : bit_length(static_cast<std::uint64_t>(x));
}

// SoftFloat's shiftRightJam on 128 bits: x >> dist with the bits shifted out ORed into the LSB.
constexpr u128 shift_right_jam(u128 x, int dist) {
  if (dist <= 0) return x;
  if (dist >= 128) return x != 0;
  return (x >> dist) | (((x << (128 - dist)) != 0) ? 1 : 0);
}

// (negative ? -1 : 1) * mag * 2^lsb.
struct SignedValue {
  bool negative = false;
  int lsb = 0;
  u128 mag = 0;
};

// x + y, exact when the two overlap within 120 bits; otherwise the smaller is folded into a sticky bit
// below a 120-bit window of the larger, which cannot change one later rounding to 64 bits or fewer: far
// apart, no cancellation reaches the folded bits (SoftFloat's addF32); close, nothing is folded.
constexpr SignedValue add_exact(SignedValue x, SignedValue y) {
  if (x.mag == 0) return y;
  if (y.mag == 0) return x;
  const int top = std::max(x.lsb + bit_length(x.mag), y.lsb + bit_length(y.mag));
  const int lsb = std::max(std::min(x.lsb, y.lsb), top - 120);
  const auto aligned = [lsb](const SignedValue& v) -> i128 {
    const u128 m = v.lsb >= lsb ? v.mag << (v.lsb - lsb) : shift_right_jam(v.mag, lsb - v.lsb);
    return v.negative ? -static_cast<i128>(m) : static_cast<i128>(m);
  };
  const i128 s = aligned(x) + aligned(y);
  return SignedValue{s < 0, lsb, static_cast<u128>(s < 0 ? -s : s)};
}

// e with 2^e <= |x| < 2^(e+1), for finite nonzero binary32 (subnormals included), from the bits.
constexpr int floor_log2(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x) & 0x7FFFFFFFu;
  const int field = static_cast<int>(bits >> 23);
  if (field != 0) return field - 127;
  return -127 - (std::countl_zero(bits) - 9);
}

// Signed distance in ulps from `from` to `to` on the ordered line of binary32 values (-0 and +0 both
// at 0); for finite values.
constexpr std::int64_t ulp_distance(float from, float to) {
  const auto ordered = [](float f) -> std::int64_t {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(f);
    return (b & 0x80000000u) ? -static_cast<std::int64_t>(b & 0x7FFFFFFFu) : static_cast<std::int64_t>(b);
  };
  return ordered(to) - ordered(from);
}

}  // namespace fp4sim
