#include "fp4sim/core/rounding.hpp"

namespace fp4sim {

namespace {
constexpr NameRow<Rounding> kModes[] = {
    {"rne", Rounding::rne, "round to nearest, ties to even"},
    {"rna", Rounding::rna, "round to nearest, ties away from zero"},
    {"rtz", Rounding::rtz, "round toward zero"},
    {"rup", Rounding::rup, "round toward +infinity"},
    {"rdown", Rounding::rdown, "round toward -infinity"},
    {"sr-fast", Rounding::sr_fast,
     "stochastic: away iff delta + (2r+1)/2^(k+1) >= 1, exact (UE5M3 paper, gfloat StochasticFast)"},
    {"sr-fast-f32", Rounding::sr_fast_f32,
     "stochastic: sr-fast with the sum as one binary32 RNE addition (UE5M3 paper's reference)"},
    {"sr-fastest", Rounding::sr_fastest,
     "stochastic: away iff floor(2^k delta) + r >= 2^k (TransformerEngine, PTX cvt.rs, gfloat StochasticFastest)"},
};
}  // namespace

std::span<const NameRow<Rounding>> names(Rounding) { return kModes; }

}  // namespace fp4sim
