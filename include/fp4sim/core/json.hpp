// The two leaves of every JSON fp4sim writes (the datapath table, verify reports, replay and sweep
// results): a string, quoted and escaped, and a number, as the shortest decimal that reads back as the
// same double.
#pragma once

#include <string>
#include <string_view>

namespace fp4sim::json {

std::string string(std::string_view text);  // "text" with ", \, control characters escaped
std::string number(double value);          // finite values only: the caller writes null for the others

}  // namespace fp4sim::json
