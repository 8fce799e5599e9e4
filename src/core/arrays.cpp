#include "fp4sim/core/arrays.hpp"

#include "fp4sim/core/error.hpp"

namespace fp4sim {

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::size_t element_count(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string position_text(const std::vector<std::size_t>& shape, std::size_t index) {
  std::string text(1, '[');  // appended, not "[" + ...: GCC 12 warns falsely (-Wrestrict) on literal + temporary
  if (shape.size() == 2) {
    text += std::to_string(index / shape[1]);
    text += ", ";
    text += std::to_string(index % shape[1]);
  } else {
    text += std::to_string(index);
  }
  return text += ']';
}

std::vector<float> binary32_values(std::span<const double> values, const std::string& source) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double d = values[i];
    out[i] = static_cast<float>(d);
    if (static_cast<double>(out[i]) != d && d == d) {
      throw DataError(source + ": element " + std::to_string(i) + " (" + std::to_string(d) +
                      ") is not a binary32 value: the recipes take binary32 inputs");
    }
  }
  return out;
}

std::vector<std::uint32_t> checked_random_bits(const RandomBitsArray& bits, const std::vector<std::size_t>& operand_shape,
                                               int sr_bits, RandomBitsTypes types) {
  const bool wide = bits.dtype == "uint16" || bits.dtype == "uint32";
  if (bits.dtype != "uint8" && !(wide && types == RandomBitsTypes::unsigned_up_to_32)) {
    throw DataError(bits.source + ": expected " +
                    (types == RandomBitsTypes::uint8 ? std::string("uint8") : std::string("uint8, uint16 or uint32")) +
                    " stochastic-rounding integers, got " + bits.dtype);
  }
  if (bits.shape != operand_shape) {
    throw DataError(bits.source + ": shape " + shape_text(bits.shape) + " differs from the operand's " +
                    shape_text(operand_shape));
  }
  for (std::size_t i = 0; i < bits.values.size(); ++i) {
    if (bits.values[i] >> sr_bits) {
      throw DataError(bits.source + ": element " + position_text(bits.shape, i) + " = " +
                      std::to_string(bits.values[i]) + " does not fit in " + std::to_string(sr_bits) + " random bits");
    }
  }
  return bits.values;
}

}  // namespace fp4sim
