#include "fp4sim/core/convert_call.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/random.hpp"

namespace fp4sim {

ConvertCall::Resolved ConvertCall::resolve() const {
  Resolved r;
  r.format = format_argument(format, "{format}");
  r.options.rounding = parse_name_or_throw<Rounding>(rounding, "{rounding}");
  if (sr_bits < 1 || sr_bits > 16) throw UsageError("{sr_bits}: must be between 1 and 16");
  r.options.sr_bits = sr_bits;
  r.options.saturate = saturate.value_or(default_saturate(r.format));
  r.options.convention = parse_name_or_throw<SpecialConvention>(specials, "{specials}");
  if (random_bits && !is_stochastic(r.options.rounding)) throw UsageError("{rbits} needs a stochastic {rounding}");
  return r;
}

namespace {

std::vector<std::uint32_t> random_integers(const ConvertCall& call, const ConvertCall::Resolved& resolved,
                                           const ArrayShape& input, std::size_t n, const RandomBitsArray* bits) {
  std::vector<std::uint32_t> random;
  if (is_stochastic(resolved.options.rounding)) {
    if (bits) {
      random = checked_random_bits(*bits, input.shape, resolved.options.sr_bits, RandomBitsTypes::unsigned_up_to_32);
    } else {
      random.resize(n);
      fill_random_bits(call.seed, streams::single_tensor, 0, resolved.options.sr_bits, random);
    }
  }
  return random;
}

[[noreturn]] void throw_unrepresentable(const ConvertCall& call, const ConvertCall::Resolved& resolved,
                                        const ArrayShape& input, std::size_t index, double v) {
  const Format& f = resolved.format;
  const std::string why = std::isnan(v)                      ? "NaN and the format has no NaN (try {saturate=true})"
                          : (std::signbit(v) && !f.is_signed) ? "negative value in an unsigned format"
                          : f.has_zero() ? "out of range and {saturate=false} (the format has no Inf)"
                                         : "zero or out of range and {saturate=false}";
  char text[64];
  std::snprintf(text, sizeof text, "%.17g", v);
  throw DataError(input.source + ": element " + position_text(input.shape, index) + " = " + text +
                  " cannot be represented in " + call.format + ": " + why);
}

}  // namespace

std::vector<std::uint32_t> convert(const ConvertCall& call, const ConvertCall::Resolved& resolved,
                                   const ArrayShape& input, std::span<const double> values,
                                   const RandomBitsArray* bits) {
  const std::vector<std::uint32_t> random = random_integers(call, resolved, input, values.size(), bits);
  std::vector<std::uint32_t> codes(values.size());
  if (auto bad = encode_all(resolved.format, resolved.options, values, random, codes)) {
    throw_unrepresentable(call, resolved, input, *bad, values[*bad]);
  }
  return codes;
}

int code_bytes(const Format& format) { return format.storage_bits() <= 8 ? 1 : format.storage_bits() <= 16 ? 2 : 4; }

template <class Code>
void convert(const ConvertCall& call, const ConvertCall::Resolved& resolved, const ArrayShape& input,
             std::span<const float> values, const RandomBitsArray* bits, std::span<Code> codes) {
  const Format& f = resolved.format;
  const EncodeOptions& o = resolved.options;
  if (static_cast<int>(sizeof(Code)) != code_bytes(f) || codes.size() != values.size()) {
    throw std::logic_error("convert: the code buffer does not fit the format and the input");
  }
  const std::vector<std::uint32_t> random = random_integers(call, resolved, input, values.size(), bits);
  Float32Encoder(f, o).encode_array(values, codes, random);
  // Only unsigned formats and conversions without saturation have inputs with no code (EncodeOptions'
  // rule). Such an input leaves one of the codes below; those elements, and only those, go through the
  // golden encoder, whose flags say whether the input had a code.
  if (f.is_signed && o.saturate) return;
  const std::uint32_t max_finite = f.max_finite_code();
  const auto suspect = [&](std::uint32_t c) {
    return c == 0 || (c & ~f.sign_mask()) == max_finite || (f.has_nan() && (c & ~f.sign_mask()) == f.nan_code());
  };
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!suspect(codes[i])) continue;
    const Encoded e = encode(f, values[i], o, random.empty() ? 0u : random[i]);
    if (e.flags & flag::invalid) throw_unrepresentable(call, resolved, input, i, values[i]);
  }
}

template void convert(const ConvertCall&, const ConvertCall::Resolved&, const ArrayShape&, std::span<const float>,
                      const RandomBitsArray*, std::span<std::uint8_t>);
template void convert(const ConvertCall&, const ConvertCall::Resolved&, const ArrayShape&, std::span<const float>,
                      const RandomBitsArray*, std::span<std::uint16_t>);
template void convert(const ConvertCall&, const ConvertCall::Resolved&, const ArrayShape&, std::span<const float>,
                      const RandomBitsArray*, std::span<std::uint32_t>);

}  // namespace fp4sim
