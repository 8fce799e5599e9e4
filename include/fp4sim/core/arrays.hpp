// Arrays as the front ends hand them to the library's calls: the name that stands for them in messages
// (a .npy path, a Python keyword), their shape, and for explicit random bits the stored type and values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp4sim {

struct ArrayShape {
  std::string source;
  std::vector<std::size_t> shape;
};

std::string shape_text(const std::vector<std::size_t>& shape);  // "[2, 3]"
std::size_t element_count(const std::vector<std::size_t>& shape);
std::string position_text(const std::vector<std::size_t>& shape, std::size_t index);  // "[1, 2]" of a [.., 3] array

// Float64 input values, each of which must be a binary32 value (NaN passes): the recipes take binary32
// inputs (DataError naming `source` and the first element that is not).
std::vector<float> binary32_values(std::span<const double> values, const std::string& source);

// Explicit stochastic-rounding integers as a user gives them.
struct RandomBitsArray {
  std::string source;
  std::string dtype;                  // NumPy's name of the stored type: "uint8", "uint16", "float32", ...
  std::vector<std::size_t> shape;
  std::vector<std::uint32_t> values;  // widened (read only when the dtype is an allowed one)
};

// Which stored types explicit random bits may have (docs/cli.md): uint8 for the recipe calls (quantize,
// gemm, verify); uint8, uint16 or uint32 for `convert`, whose --sr-bits reaches 16.
enum class RandomBitsTypes : std::uint8_t { uint8, unsigned_up_to_32 };

// The values of `bits` once they pass the rule for an operand of `operand_shape`: an allowed type, the
// operand's shape, every value below 2^sr_bits (DataError naming bits.source otherwise).
std::vector<std::uint32_t> checked_random_bits(const RandomBitsArray& bits, const std::vector<std::size_t>& operand_shape,
                                               int sr_bits, RandomBitsTypes types = RandomBitsTypes::uint8);

}  // namespace fp4sim
