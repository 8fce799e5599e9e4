// Where a value sits among a format's codes, and how another code relates to it: the vocabulary of
// every explanation of verify quantize.
#include <cmath>
#include <cstdlib>

#include "verify_quantize.hpp"

namespace fp4sim::explain {

Bracket bracket(const Format& f, double magnitude) {
  Bracket b;
  if (std::isnan(magnitude)) {
    b.where = Bracket::Where::nan;
    return b;
  }
  b.lo = encode(f, magnitude, EncodeOptions{Rounding::rtz, true}).code;
  b.hi = encode(f, magnitude, EncodeOptions{Rounding::rup, true}).code;
  b.lo_value = decode_to_double(f, b.lo);
  b.hi_value = decode_to_double(f, b.hi);
  if (b.lo == b.hi) {
    b.where = magnitude > b.lo_value ? Bracket::Where::above_max : Bracket::Where::exact;
    return b;
  }
  const double mid = (b.lo_value + b.hi_value) / 2;  // exact: both have few significant bits
  b.delta = (magnitude - b.lo_value) / (b.hi_value - b.lo_value);
  b.where = magnitude == mid ? Bracket::Where::tie : magnitude < mid ? Bracket::Where::nearer_lo : Bracket::Where::nearer_hi;
  return b;
}

// How `theirs` relates to `golden` among a format's codes ("rounded up", "2 codes below", ...). Codes of
// the same sign compare by magnitude, which is monotone in the code for every format here.
std::string relation(const Format& f, std::uint32_t golden, std::uint32_t theirs, const Bracket& b) {
  const Decoded dt = decode(f, theirs);
  if (dt.cls == ValueClass::invalid) return "not a valid " + format_name(f) + " code";
  if (dt.cls == ValueClass::nan) return "a NaN code";
  const std::uint32_t sign = f.sign_mask();
  if ((golden & sign) != (theirs & sign) && (golden & ~sign) == (theirs & ~sign)) return "the sign differs";
  if ((golden & sign) != (theirs & sign)) return "of the other sign";
  const std::uint32_t gm = golden & ~sign, tm = theirs & ~sign;
  const bool tie = b.where == Bracket::Where::tie;
  if (b.lo != b.hi && ((gm == b.lo && tm == b.hi) || (gm == b.hi && tm == b.lo))) {
    const std::string dir = tm == b.hi ? "rounded away from zero" : "rounded toward zero";
    if (tie) return dir + ": the tie went to the " + std::string((tm & 1) ? "odd" : "even") + " code";
    if ((tm == b.hi) == (b.where == Bracket::Where::nearer_lo)) return dir + ", to the farther neighbour";
    return dir;
  }
  const long diff = static_cast<long>(tm) - static_cast<long>(gm);
  return std::to_string(std::labs(diff)) + (std::labs(diff) == 1 ? " code " : " codes ") +
         (diff > 0 ? "larger in magnitude" : "smaller in magnitude");
}

}  // namespace fp4sim::explain
