// libFuzzer harness: the format-descriptor parser (fp4sim::parse_format: presets, eXmY / ueXmY[bN][fn|fin])
// on arbitrary text, with the properties every caller relies on:
//  - format_argument throws UsageError exactly when parse_format returns nothing;
//  - an accepted format's canonical name (format_name) parses back to the same format;
//  - every finite code of an accepted format decodes to a value that encodes back to that code.
// A property that fails, a crash or a sanitizer report is a finding (docs/fuzzing.md).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/format.hpp"

namespace {

// Codes checked per accepted format: all of them up to 8 bits, then evenly spaced ones.
constexpr std::uint64_t kCodes = 256;

void check_codes(const fp4sim::Format& format) {
  const std::uint64_t count = std::uint64_t{1} << format.bits();
  const std::uint64_t stride = count <= kCodes ? 1 : count / kCodes;
  const fp4sim::EncodeOptions exact{fp4sim::Rounding::rne, false};
  for (std::uint64_t c = 0; c < count; c += stride) {
    const auto code = static_cast<std::uint32_t>(c);
    const fp4sim::Decoded d = fp4sim::decode(format, code);
    if (d.cls != fp4sim::ValueClass::finite && d.cls != fp4sim::ValueClass::zero) continue;
    const double value = fp4sim::decode_to_double(format, code);
    if (!std::isfinite(value)) __builtin_trap();
    if (fp4sim::encode(format, value, exact).code != code) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<fp4sim::Format> format = fp4sim::parse_format(text);
  try {
    const fp4sim::Format named = fp4sim::format_argument(text, "--format");
    if (!format || named != *format) __builtin_trap();
  } catch (const fp4sim::UsageError&) {
    if (format) __builtin_trap();
  }
  if (!format) return 0;
  const std::optional<fp4sim::Format> again = fp4sim::parse_format(fp4sim::format_name(*format));
  if (!again || *again != *format) __builtin_trap();
  check_codes(*format);
  return 0;
}
