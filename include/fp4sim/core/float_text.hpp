// Values and codes as text for people: one rule for every report, error message and export.
#pragma once

#include <cstdint>
#include <string>

namespace fp4sim {

// Shortest decimal that reads back as the same binary32 ("0.09375", "6", "1.17549435e-38", "-0", "NaN",
// "+Inf"); integers below 2^24 print whole ("320", not "3.2e+02").
std::string float_text(float value);
// The binary32 encoding: "0x3dc00000".
std::string hex_bits(float value);
// A code in upper-case hex with at least `digits` digits: hex_code(0xA, 2) = "0x0A".
std::string hex_code(std::uint32_t code, int digits);

}  // namespace fp4sim
