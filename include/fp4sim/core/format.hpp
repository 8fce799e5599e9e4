// A number format as data, in the manner of CPFloat's optstruct and CUTLASS's FpBitRepresentation:
// a handful of fields decide every bit, and every mask, limit and special code is derived from them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fp4sim/core/host_device.hpp"

namespace fp4sim {

// How a format spends codes on values that are not finite numbers.
enum class Specials : std::uint8_t {
  ieee,          // top exponent field: Inf (mantissa 0) and NaN (mantissa != 0): e5m2, fp16, bf16, fp32
  fn,            // no Inf; NaN only at the all-ones magnitude: e4m3, ue4m3, ue5m3fn
  finite,        // every code is a finite number: e2m1, e2m3, e3m2
  pow2_nan,      // no mantissa, no zero, exponent field 0 is a normal number, NaN at all ones: e8m0
  reserved_top,  // top exponent field reserved (never produced, a data error to decode), no Inf or NaN:
                 // the UE5M3 paper's ue5m3, max finite 1.875 * 2^15 = 61,440
};

struct Format {
  int exponent_bits = 0;
  int mantissa_bits = 0;
  int bias = 0;
  bool is_signed = true;
  Specials specials = Specials::ieee;

  friend constexpr bool operator==(const Format&, const Format&) = default;

  // Value bits (sign + exponent + mantissa); ue4m3 has 7 and lives in a byte whose top bit is 0.
  constexpr int bits() const { return (is_signed ? 1 : 0) + exponent_bits + mantissa_bits; }
  // Bits of the container one code is stored in: 4, 6, 8, 16 or 32 (codes files use 8, 16 or 32).
  constexpr int storage_bits() const {
    const int b = bits();
    return b <= 4 ? 4 : b <= 6 ? 6 : b <= 8 ? 8 : b <= 16 ? 16 : 32;
  }
  constexpr std::uint32_t magnitude_mask() const {
    return (std::uint32_t{1} << (exponent_bits + mantissa_bits)) - 1;
  }
  constexpr std::uint32_t sign_mask() const {
    return is_signed ? std::uint32_t{1} << (exponent_bits + mantissa_bits) : 0;
  }
  constexpr std::uint64_t code_count() const { return std::uint64_t{1} << bits(); }

  constexpr bool has_inf() const { return specials == Specials::ieee; }
  constexpr bool has_nan() const {
    return specials == Specials::ieee || specials == Specials::fn || specials == Specials::pow2_nan;
  }
  constexpr bool has_zero() const { return specials != Specials::pow2_nan; }
  constexpr bool has_subnormals() const { return specials != Specials::pow2_nan && mantissa_bits > 0; }
  // Exponent of the smallest normal number; pow2_nan formats use exponent field 0 as a normal.
  constexpr int min_normal_exponent() const {
    return specials == Specials::pow2_nan ? -bias : 1 - bias;
  }

  constexpr std::uint32_t max_finite_code() const {
    const std::uint32_t top_field = (std::uint32_t{1} << exponent_bits) - 1;
    switch (specials) {
      case Specials::ieee:
      case Specials::reserved_top: return (top_field << mantissa_bits) - 1;
      case Specials::fn:
      case Specials::pow2_nan: return magnitude_mask() - 1;
      case Specials::finite: return magnitude_mask();
    }
    return 0;
  }
  // Canonical NaN: the all-ones positive magnitude (0x7F for e4m3/e5m2, 0x7FFF for fp16/bf16,
  // 0xFF for e8m0), what NVIDIA's binary32 conversions give for a NaN input. (A NaN from overflow keeps
  // the input's sign: docs/semantics.md §0.2.)
  constexpr std::uint32_t nan_code() const { return magnitude_mask(); }
  constexpr std::uint32_t inf_code() const {
    return ((std::uint32_t{1} << exponent_bits) - 1) << mantissa_bits;
  }
  // Exponent field of the largest finite code, unbiased: the largest finite value is
  // max_finite_significand * 2^(max_exponent - mantissa_bits).
  constexpr int max_exponent() const {
    return static_cast<int>(max_finite_code() >> mantissa_bits) - bias;
  }
};

namespace formats {
inline constexpr Format e2m1{2, 1, 1, true, Specials::finite};
inline constexpr Format e2m3{2, 3, 1, true, Specials::finite};
inline constexpr Format e3m2{3, 2, 3, true, Specials::finite};
inline constexpr Format e4m3{4, 3, 7, true, Specials::fn};
inline constexpr Format e5m2{5, 2, 15, true, Specials::ieee};
inline constexpr Format ue4m3{4, 3, 7, false, Specials::fn};
inline constexpr Format ue5m3{5, 3, 15, false, Specials::reserved_top};
inline constexpr Format ue5m3fn{5, 3, 15, false, Specials::fn};
inline constexpr Format e8m0{8, 0, 127, false, Specials::pow2_nan};
inline constexpr Format bf16{8, 7, 127, true, Specials::ieee};
inline constexpr Format fp16{5, 10, 15, true, Specials::ieee};
inline constexpr Format fp32{8, 23, 127, true, Specials::ieee};
}  // namespace formats

struct NamedFormat {
  std::string_view name;
  Format format;
  std::string_view description;  // where the definition comes from
};

// The preset table: the CLI, `formats`, the tests and the recipes all read this one list.
std::span<const NamedFormat> format_presets();

// Parses a preset name or an "eXmY" / "ueXmY" descriptor with optional suffixes:
// "b<N>" overrides the bias (default 2^(X-1)-1), "fn" (NaN at all ones, no Inf) or "fin" (all codes
// finite) choose the special values (default: IEEE Inf/NaN; Y = 0 unsigned gives the e8m0 policy).
// Returns nullopt for anything else.
std::optional<Format> parse_format(std::string_view text);

// The preset name when the format equals a preset, else the canonical descriptor.
std::string format_name(const Format& format);

std::string_view specials_name(Specials specials);

}  // namespace fp4sim
