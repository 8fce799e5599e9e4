#include <cmath>
#include <cstdio>
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/core/json.hpp"
#include "fp4sim/core/codec.hpp"

namespace fp4sim::cli {

namespace {

struct FormatsOptions {
  bool json = false;
};

struct Limits {
  double max_finite, min_normal, min_subnormal;
};

Limits limits_of(const Format& f) {
  Limits l{};
  l.max_finite = decode_to_double(f, f.max_finite_code());
  const std::uint32_t min_normal_code =
      f.specials == Specials::pow2_nan ? 0u : std::uint32_t{1} << f.mantissa_bits;
  l.min_normal = decode_to_double(f, min_normal_code);
  l.min_subnormal = f.has_subnormals() ? decode_to_double(f, 1) : NAN;
  return l;
}

void run_formats(const FormatsOptions& options) {
  const auto presets = format_presets();
  if (options.json) {
    std::printf("[\n");
    for (std::size_t i = 0; i < presets.size(); ++i) {
      const Format& f = presets[i].format;
      const Limits l = limits_of(f);
      std::printf(
          "  {\"name\": \"%s\", \"bits\": %d, \"exponent_bits\": %d, \"mantissa_bits\": %d, \"bias\": %d, "
          "\"signed\": %s, \"subnormals\": %s, \"max_finite\": %s, \"min_normal\": %s, ",
          std::string(presets[i].name).c_str(), f.storage_bits(), f.exponent_bits, f.mantissa_bits, f.bias,
          f.is_signed ? "true" : "false", f.has_subnormals() ? "true" : "false", json::number(l.max_finite).c_str(),
          json::number(l.min_normal).c_str());
      if (f.has_subnormals()) {
        std::printf("\"min_subnormal\": %s, ", json::number(l.min_subnormal).c_str());
      } else {
        std::printf("\"min_subnormal\": null, \"min_subnormal_note\": \"no subnormals\", ");
      }
      std::printf("\"has_inf\": %s, \"has_nan\": %s, \"has_zero\": %s, \"specials\": \"%s\", \"source\": \"%s\"}%s\n",
                  f.has_inf() ? "true" : "false", f.has_nan() ? "true" : "false", f.has_zero() ? "true" : "false",
                  std::string(name_of(f.specials)).c_str(), std::string(presets[i].description).c_str(),
                  i + 1 < presets.size() ? "," : "");
    }
    std::printf("]\n");
    return;
  }
  std::printf("%-8s %4s %3s %3s %5s %6s %-12s %-14s %-14s %-14s %s\n", "name", "bits", "exp", "man", "bias",
              "signed", "specials", "max_finite", "min_normal", "min_subnormal", "source");
  for (const auto& preset : presets) {
    const Format& f = preset.format;
    const Limits l = limits_of(f);
    char sub[32] = "-";
    if (f.has_subnormals()) std::snprintf(sub, sizeof sub, "%.6g", l.min_subnormal);
    std::printf("%-8s %4d %3d %3d %5d %6s %-12s %-14.8g %-14.6g %-14s %s\n", std::string(preset.name).c_str(),
                f.storage_bits(), f.exponent_bits, f.mantissa_bits, f.bias, f.is_signed ? "yes" : "no",
                std::string(name_of(f.specials)).c_str(), l.max_finite, l.min_normal, sub,
                std::string(preset.description).c_str());
  }
}

}  // namespace

void setup_formats(CLI::App& app) {
  auto options = std::make_shared<FormatsOptions>();
  app.add_flag("--json", options->json, "print a JSON array of objects instead of a table");
  add_example(app, "fp4sim formats --json");
  app.callback([options] { run_formats(*options); });
}

}  // namespace fp4sim::cli
