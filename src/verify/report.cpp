#include "report.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/json.hpp"

namespace fp4sim {

namespace report {

std::string with_bits(float v) { return float_text(v) + " (" + hex_bits(v) + ")"; }

std::string hex_code(const Format& f, std::uint32_t code) { return fp4sim::hex_code(code, f.storage_bits() <= 4 ? 1 : 2); }

std::string code_text(const Format& f, std::uint32_t code) {
  if (decode(f, code).cls == ValueClass::invalid) return hex_code(f, code) + " (not a valid " + format_name(f) + " code)";
  return hex_code(f, code) + " (" + float_text(decode_to_float(f, code)) + ")";
}

std::string range_text(std::size_t lo, std::size_t hi) {
  return hi - lo <= 1 ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi - 1);
}

JsonField number(std::string key, double v) {
  if (!std::isfinite(v)) return {std::move(key), "null", std::isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf"};
  return {std::move(key), json::number(v), {}};
}
JsonField integer(std::string key, long long v) { return {std::move(key), std::to_string(v), {}}; }
JsonField text(std::string key, std::string_view v) { return {std::move(key), json::string(v), {}}; }
JsonField boolean(std::string key, bool v) { return {std::move(key), v ? "true" : "false", {}}; }

std::string fields_text(const std::vector<JsonField>& fields, const std::string& indent) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    out += (i ? ",\n" : "\n") + indent + json::string(fields[i].key) + ": " + fields[i].value;
    if (!fields[i].note.empty()) {
      out += ",\n" + indent + json::string(fields[i].key + "_note") + ": " + json::string(fields[i].note);
    }
  }
  return out;
}

std::string objects_text(const std::vector<std::vector<JsonField>>& objects) {
  std::string out = "[";
  for (std::size_t i = 0; i < objects.size(); ++i) {
    out += i ? ",\n    {" : "\n    {";
    out += fields_text(objects[i], "      ");
    out += "\n    }";
  }
  return out + (objects.empty() ? "]" : "\n  ]");
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += (all.empty() ? "" : "; ") + line;
  return all;
}

}  // namespace report

}  // namespace fp4sim
