#include "fp4sim/core/format.hpp"

#include <array>
#include <charconv>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace {

constexpr std::array kPresets{
    NamedFormat{"e2m1", formats::e2m1, "OCP MX v1.0 FP4 E2M1: bias 1, subnormals, no Inf/NaN, max 6"},
    NamedFormat{"e2m3", formats::e2m3, "OCP MX v1.0 FP6 E2M3: bias 1, subnormals, no Inf/NaN, max 7.5"},
    NamedFormat{"e3m2", formats::e3m2, "OCP MX v1.0 FP6 E3M2: bias 3, subnormals, no Inf/NaN, max 28"},
    NamedFormat{"e4m3", formats::e4m3, "OCP OFP8 E4M3 (E4M3FN): bias 7, no Inf, NaN S.1111.111, max 448"},
    NamedFormat{"e5m2", formats::e5m2, "OCP OFP8 E5M2: IEEE-style Inf/NaN, bias 15, max 57344"},
    NamedFormat{"ue4m3", formats::ue4m3, "NVFP4 block scale: E4M3FN with sign bit 0, NaN 0x7F, max 448"},
    NamedFormat{"ue5m3", formats::ue5m3,
                "UE5M3 paper (arXiv:2609.02846) formats.py: bias 15, top exponent reserved, max 61440"},
    NamedFormat{"ue5m3fn", formats::ue5m3fn,
                "NVIDIA __nv_fp8_ue5m3 (CUDA 13.4 DP): no Inf, NaN only 0xFF, max 114688"},
    NamedFormat{"e8m0", formats::e8m0, "OCP MX v1.0 E8M0 scale: 2^-127..2^127, no zero, NaN 0xFF"},
    NamedFormat{"bf16", formats::bf16, "bfloat16"},
    NamedFormat{"fp16", formats::fp16, "IEEE 754 binary16"},
    NamedFormat{"fp32", formats::fp32, "IEEE 754 binary32"},
};

// The names other libraries give formats: ml_dtypes' and NumPy's dtypes, MLIR's builtin float types,
// PyTorch's dtypes (torch.float8_e4m3fn, also read with the "torch." prefix), and the ml_dtypes names
// without their float<N>_ prefix. Each means what it means there, so they are matched before
// descriptors: as a descriptor, "e2m1fn" would be e2m1 with NaN at the all-ones code (max 4), but in
// ml_dtypes and MLIR "fn" only says "no Inf" and float4_e2m1fn has no NaN (max 6). fp4sim's own spelling
// of such a descriptor states its bias ("e2m1b1fn"), as format_name() writes it.
struct EcosystemName {
  std::string_view name;
  Format format;
};
constexpr Format kE3m4{3, 4, 3, true, Specials::ieee};   // ml_dtypes float8_e3m4: IEEE-style, max 15.5
constexpr Format kE4m3Ieee{4, 3, 7, true, Specials::ieee};  // ml_dtypes float8_e4m3: IEEE-style, max 240
constexpr Format kTf32{8, 10, 127, true, Specials::ieee};
constexpr EcosystemName kEcosystemNames[] = {
    {"float4_e2m1fn", formats::e2m1},  {"f4E2M1FN", formats::e2m1},   {"e2m1fn", formats::e2m1},
    {"float6_e2m3fn", formats::e2m3},  {"f6E2M3FN", formats::e2m3},   {"e2m3fn", formats::e2m3},
    {"float6_e3m2fn", formats::e3m2},  {"f6E3M2FN", formats::e3m2},   {"e3m2fn", formats::e3m2},
    {"float8_e3m4", kE3m4},            {"f8E3M4", kE3m4},
    {"float8_e4m3", kE4m3Ieee},        {"f8E4M3", kE4m3Ieee},
    {"float8_e4m3fn", formats::e4m3},  {"f8E4M3FN", formats::e4m3},
    {"float8_e5m2", formats::e5m2},    {"f8E5M2", formats::e5m2},
    {"float8_e5m3fnu", formats::ue5m3fn}, {"e5m3fnu", formats::ue5m3fn},
    {"float8_e8m0fnu", formats::e8m0}, {"f8E8M0FNU", formats::e8m0},  {"e8m0fnu", formats::e8m0},
    {"bfloat16", formats::bf16},       {"float16", formats::fp16},    {"half", formats::fp16},
    {"f16", formats::fp16},            {"float32", formats::fp32},    {"f32", formats::fp32},
    {"float", formats::fp32},          {"tf32", kTf32},
};

// Names of formats fp4sim does not model, and why: each refusal says what to write instead.
struct RefusedName {
  std::string_view name;
  std::string_view why;
};
constexpr std::string_view kFnuz =
    "has no -0 and one NaN at the negative-zero code 0x80, with the bias one above the IEEE one: an encoding "
    "fp4sim does not model (its nearest are e4m3 = float8_e4m3fn and e5m2 = float8_e5m2)";
constexpr RefusedName kRefusedNames[] = {
    {"float8_e4m3fnuz", kFnuz},       {"f8E4M3FNUZ", kFnuz},    {"e4m3fnuz", kFnuz},
    {"float8_e5m2fnuz", kFnuz},       {"f8E5M2FNUZ", kFnuz},    {"e5m2fnuz", kFnuz},
    {"float8_e4m3b11fnuz", kFnuz},    {"f8E4M3B11FNUZ", kFnuz}, {"e4m3b11fnuz", kFnuz},
    {"float4_e2m1fn_x2",
     "is PyTorch's two e2m1 codes in one byte; fp4sim writes one code per byte: name the element format, "
     "float4_e2m1fn or e2m1"},
};

constexpr NameRow<Specials> kSpecials[] = {{"ieee", Specials::ieee},
                                            {"fn", Specials::fn},
                                            {"finite", Specials::finite},
                                            {"pow2_nan", Specials::pow2_nan},
                                            {"reserved_top", Specials::reserved_top}};

bool parse_int(std::string_view& text, int& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end == text.data()) return false;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return true;
}

bool consume(std::string_view& text, std::string_view prefix) {
  if (!text.starts_with(prefix)) return false;
  text.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::span<const NamedFormat> format_presets() { return kPresets; }

std::optional<Format> parse_format(std::string_view text) {
  for (const auto& preset : kPresets) {
    if (preset.name == text) return preset.format;
  }
  std::string_view ecosystem = text;
  consume(ecosystem, "torch.");
  for (const auto& alias : kEcosystemNames) {
    if (alias.name == ecosystem) return alias.format;
  }
  Format f;
  f.is_signed = !consume(text, "u");
  int e = 0, m = 0;
  if (!consume(text, "e") || !parse_int(text, e) || !consume(text, "m") || !parse_int(text, m)) {
    return std::nullopt;
  }
  if (e < 1 || e > 8 || m < 0 || m > 23 || (f.is_signed ? 1 : 0) + e + m > 32) return std::nullopt;
  f.exponent_bits = e;
  f.mantissa_bits = m;
  f.bias = (1 << (e - 1)) - 1;
  f.specials = (!f.is_signed && m == 0) ? Specials::pow2_nan : Specials::ieee;
  if (consume(text, "b")) {
    int bias = 0;
    if (!parse_int(text, bias) || bias < -64 || bias > 127) return std::nullopt;
    f.bias = bias;
  }
  if (consume(text, "fn")) {
    f.specials = Specials::fn;
  } else if (consume(text, "fin")) {
    f.specials = Specials::finite;
  }
  if (!text.empty()) return std::nullopt;
  if (f.specials == Specials::ieee && e < 2) return std::nullopt;  // no room for a finite binade
  if (f.specials == Specials::pow2_nan && m != 0) return std::nullopt;
  return f;
}

namespace {

// "eXmY" / "ueXmY" with "b<bias>" when the bias is not the default or `state_bias`, then "fn" / "fin".
std::string descriptor(const Format& format, bool state_bias) {
  std::string name = format.is_signed ? "e" : "ue";
  name += std::to_string(format.exponent_bits) + "m" + std::to_string(format.mantissa_bits);
  if (state_bias || format.bias != (1 << (format.exponent_bits - 1)) - 1) (name += 'b') += std::to_string(format.bias);
  if (format.specials == Specials::fn) name += "fn";
  if (format.specials == Specials::finite) name += "fin";
  return name;
}

}  // namespace

std::string format_name(const Format& format) {
  for (const auto& preset : kPresets) {
    if (preset.format == format) return std::string(preset.name);
  }
  // A descriptor spelled like a preset of other specials ("e4m3" with Inf, "e8m0" signed) would parse as
  // that preset: such a name states its bias, which no preset name does.
  const std::string name = descriptor(format, false);
  return parse_format(name) == format ? name : descriptor(format, true);
}

std::span<const NameRow<Specials>> names(Specials) { return kSpecials; }

Format format_argument(std::string_view text, std::string_view what) {
  if (auto f = parse_format(text)) return *f;
  const std::string quoted = std::string(what) + ": '" + std::string(text) + "' ";
  std::string_view name = text;
  consume(name, "torch.");
  for (const auto& refused : kRefusedNames) {
    if (refused.name == name) throw UsageError(quoted + std::string(refused.why));
  }
  // "e1m2": one exponent bit leaves no binade for IEEE's Inf and NaN beside the finite numbers.
  std::string_view rest = text;
  int e = 0, m = 0;
  if (consume(rest, "e") && parse_int(rest, e) && e == 1 && consume(rest, "m") && parse_int(rest, m) &&
      rest.empty() && parse_format(std::string(text) + "fin")) {
    throw UsageError(quoted + "has a 1-bit exponent, which leaves no room for Inf and NaN beside the finite "
                     "numbers: write '" + std::string(text) + "fin' (every code finite) or '" +
                     std::string(text) + "fn' (NaN at the all-ones code)");
  }
  std::string known;
  for (const auto& preset : kPresets) known += std::string(known.empty() ? "" : " ") + std::string(preset.name);
  throw UsageError(std::string(what) + ": unknown format '" + std::string(text) + "' (known: " + known +
                   ", ml_dtypes/MLIR/PyTorch names such as float4_e2m1fn, f8E4M3FN, float8_e8m0fnu, or "
                   "eXmY / ueXmY[bN][fn|fin])");
}

}  // namespace fp4sim
