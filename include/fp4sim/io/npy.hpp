// NumPy .npy files (format versions 1.0-3.0, little-endian, C order), as docs/cli.md's arrays in and out.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "fp4sim/core/arrays.hpp"

namespace fp4sim::npy {

enum class DType : std::uint8_t { f4, f8, u1, u2, u4 };

std::string dtype_descr(DType dtype);  // "<f4", "|u1", ...
std::string dtype_name(DType dtype);   // NumPy's name: "float32", "uint8", ...
std::size_t dtype_size(DType dtype);

// A 1-D or 2-D array; a 1-D array is one row.
struct Array {
  DType dtype = DType::f4;
  std::vector<std::size_t> shape;  // as stored in the file (1 or 2 dimensions)
  std::vector<std::uint8_t> bytes;

  std::size_t size() const;
  std::size_t rows() const { return shape.size() == 2 ? shape[0] : 1; }
  std::size_t cols() const { return shape.empty() ? 0 : shape.back(); }
};

// Throws DataError naming the file for anything but a readable 1-D/2-D little-endian C-order array
// (UsageError for a path that is not a regular file: check_input_path).
Array read(const std::filesystem::path& path);

// The same file opened and its header checked, the data then read into memory the caller owns (a
// std::vector<float> for float32 data, so that nothing is read twice).
class Reader {
 public:
  // DataError as read(), UsageError for a path that is not a regular file (check_input_path). The
  // file's size is checked against the header's shape here, before anything is allocated for the data.
  explicit Reader(const std::filesystem::path& path);
  DType dtype() const { return header_.dtype; }
  const std::vector<std::size_t>& shape() const { return header_.shape; }
  std::size_t size() const { return header_.size(); }
  void read_into(std::span<std::uint8_t> data);  // exactly size() * dtype_size(dtype()) bytes, once
  void read_all(std::vector<std::uint8_t>& bytes);  // the data, into `bytes` resized to fit

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  Array header_;  // dtype and shape; no bytes
  std::uint64_t data_bytes_ = 0;
};

// float32, or float64 whose every value is a binary32 value (else DataError naming the element).
std::vector<float> as_float32(const Array& a, const std::filesystem::path& path);
std::vector<double> as_float64(const Array& a, const std::filesystem::path& path);    // f4 or f8, exact
std::vector<std::uint32_t> as_uint32(const Array& a, const std::filesystem::path& path);  // u1/u2/u4

// Explicit stochastic-rounding integers from a .npy file, as the calls check them (any stored type; the
// values are read when it is an unsigned integer type).
RandomBitsArray read_random_bits(const std::filesystem::path& path);

// Writes through a temporary file renamed on success, so a failure leaves no partial output.
void write(const std::filesystem::path& path, DType dtype, const std::vector<std::size_t>& shape,
           const void* data);

}  // namespace fp4sim::npy
