#include "fp4sim/core/float_text.hpp"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace fp4sim {

std::string float_text(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (v == std::trunc(v) && std::fabs(v) < 16777216.0f) {
    std::snprintf(buf, sizeof buf, "%.0f", static_cast<double>(v));
    return std::signbit(v) && v == 0.0f ? "-0" : buf;
  }
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return buf;
}

std::string hex_bits(float v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", std::bit_cast<std::uint32_t>(v));
  return buf;
}

std::string hex_code(std::uint32_t code, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*X", digits, code);
  return buf;
}

}  // namespace fp4sim
