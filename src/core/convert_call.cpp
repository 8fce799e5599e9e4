#include "fp4sim/core/convert_call.hpp"

#include <cmath>
#include <cstdio>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/random.hpp"

namespace fp4sim {

ConvertCall::Resolved ConvertCall::resolve() const {
  Resolved r;
  r.format = format_argument(format, "--format");
  r.options.rounding = parse_name_or_throw<Rounding>(rounding, "--rounding");
  if (sr_bits < 1 || sr_bits > 16) throw UsageError("--sr-bits: must be between 1 and 16");
  r.options.sr_bits = sr_bits;
  r.options.saturate = saturate.value_or(default_saturate(r.format));
  r.options.convention = parse_name_or_throw<SpecialConvention>(specials, "--specials");
  if (random_bits && !is_stochastic(r.options.rounding)) throw UsageError("--rbits needs a stochastic --rounding");
  return r;
}

std::vector<std::uint32_t> convert(const ConvertCall& call, const ConvertCall::Resolved& resolved,
                                   const ArrayShape& input, std::span<const double> values,
                                   const RandomBitsArray* bits) {
  std::vector<std::uint32_t> random;
  if (is_stochastic(resolved.options.rounding)) {
    if (bits) {
      random = checked_random_bits(*bits, input.shape, resolved.options.sr_bits, RandomBitsTypes::unsigned_up_to_32);
    } else {
      random.resize(values.size());
      fill_random_bits(call.seed, streams::single_tensor, 0, resolved.options.sr_bits, random);
    }
  }
  std::vector<std::uint32_t> codes(values.size());
  if (auto bad = encode_all(resolved.format, resolved.options, values, random, codes)) {
    const double v = values[*bad];
    const Format& f = resolved.format;
    const std::string why = std::isnan(v)                      ? "NaN and the format has no NaN (try --saturate)"
                            : (std::signbit(v) && !f.is_signed) ? "negative value in an unsigned format"
                            : f.has_zero() ? "out of range and --no-saturate (the format has no Inf)"
                                           : "zero or out of range and --no-saturate";
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", v);
    throw DataError(input.source + ": element " + position_text(input.shape, *bad) + " = " + text +
                    " cannot be represented in " + call.format + ": " + why);
  }
  return codes;
}

}  // namespace fp4sim
