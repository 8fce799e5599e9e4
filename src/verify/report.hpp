// How the verify reports write values (internal to the verify layer): numbers and codes as text for
// people, and the JSON fields of a report, one rule for both verify quantize and verify gemm.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim::report {

std::string with_bits(float value);                        // "0.09375 (0x3dc00000)"
std::string code_text(const Format& f, std::uint32_t code);  // "0x7A (320)"
std::string hex_code(const Format& f, std::uint32_t code);   // "0x7A"
std::string range_text(std::size_t lo, std::size_t hi);      // "16..31", or "16" for one

// JSON fields: a number (null with a *_note when not finite), an integer, a string, a boolean.
JsonField number(std::string key, double value);
JsonField integer(std::string key, long long value);
JsonField text(std::string key, std::string_view value);
JsonField boolean(std::string key, bool value);

// The fields of one object, one a line at `indent`, each "<key>_note" after a field that has one.
std::string fields_text(const std::vector<JsonField>& fields, const std::string& indent);
// A JSON array of objects, each opened on a line of its own: "[" ... "]" (the last array of a report).
std::string objects_text(const std::vector<std::vector<JsonField>>& objects);
// "a; b; c": the lines of an explanation as one JSON string value.
std::string joined(const std::vector<std::string>& lines);

}  // namespace fp4sim::report
