#include "fp4sim/core/rounding.hpp"

#include <array>

namespace fp4sim {

namespace {
constexpr std::array kModes{
    NamedRounding{"rne", Rounding::rne, "round to nearest, ties to even"},
    NamedRounding{"rna", Rounding::rna, "round to nearest, ties away from zero"},
    NamedRounding{"rtz", Rounding::rtz, "round toward zero"},
    NamedRounding{"rup", Rounding::rup, "round toward +infinity"},
    NamedRounding{"rdown", Rounding::rdown, "round toward -infinity"},
    NamedRounding{"sr-fast", Rounding::sr_fast,
                  "stochastic: away iff delta + (2r+1)/2^(k+1) >= 1, exact (UE5M3 paper, gfloat StochasticFast)"},
    NamedRounding{"sr-fast-f32", Rounding::sr_fast_f32,
                  "stochastic: sr-fast with the sum as one binary32 RNE addition (UE5M3 paper's reference)"},
    NamedRounding{"sr-fastest", Rounding::sr_fastest,
                  "stochastic: away iff floor(2^k delta) + r >= 2^k (TransformerEngine, PTX cvt.rs, gfloat StochasticFastest)"},
};
}  // namespace

std::span<const NamedRounding> rounding_modes() { return kModes; }

std::optional<Rounding> parse_rounding(std::string_view name) {
  for (const auto& mode : kModes) {
    if (mode.name == name) return mode.rounding;
  }
  return std::nullopt;
}

std::string_view rounding_name(Rounding r) {
  for (const auto& mode : kModes) {
    if (mode.rounding == r) return mode.name;
  }
  return "?";
}

}  // namespace fp4sim
