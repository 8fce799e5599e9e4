#include "fp4sim/io/npy.hpp"

#include <cstring>
#include <fstream>
#include <regex>

#include "fp4sim/core/error.hpp"
#include "fp4sim/io/output_file.hpp"

namespace fp4sim::npy {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw DataError(path.string() + ": " + what);
}

struct Descr {
  std::string text;
  DType dtype;
};
const Descr kDescrs[] = {{"<f4", DType::f4}, {"<f8", DType::f8}, {"|u1", DType::u1},
                         {"<u1", DType::u1}, {"<u2", DType::u2}, {"<u4", DType::u4}};

}  // namespace

std::string dtype_descr(DType dtype) {
  switch (dtype) {
    case DType::f4: return "<f4";
    case DType::f8: return "<f8";
    case DType::u1: return "|u1";
    case DType::u2: return "<u2";
    case DType::u4: return "<u4";
  }
  return "?";
}

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f4: return "float32";
    case DType::f8: return "float64";
    case DType::u1: return "uint8";
    case DType::u2: return "uint16";
    case DType::u4: return "uint32";
  }
  return "?";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f4: return 4;
    case DType::f8: return 8;
    case DType::u1: return 1;
    case DType::u2: return 2;
    case DType::u4: return 4;
  }
  return 0;
}

std::size_t Array::size() const {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

Array read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open for reading");
  char magic[8];
  if (!in.read(magic, 8)) fail(path, "truncated: shorter than the .npy magic string");
  if (std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (bad magic string)");
  const int major = static_cast<unsigned char>(magic[6]);
  if (major < 1 || major > 3) fail(path, "unsupported .npy format version " + std::to_string(major));
  std::uint32_t header_len = 0;
  if (major == 1) {
    unsigned char len[2];
    if (!in.read(reinterpret_cast<char*>(len), 2)) fail(path, "truncated header length");
    header_len = len[0] | (len[1] << 8);
  } else {
    unsigned char len[4];
    if (!in.read(reinterpret_cast<char*>(len), 4)) fail(path, "truncated header length");
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<std::uint32_t>(len[3]) << 24);
  }
  if (header_len > (1u << 20)) fail(path, "header length " + std::to_string(header_len) + " is implausible");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(path, "truncated header");

  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, descr_re)) fail(path, "header has no 'descr'");
  const std::string descr = m[1];
  Array a;
  bool known = false;
  for (const auto& d : kDescrs) {
    if (d.text == descr) {
      a.dtype = d.dtype;
      known = true;
    }
  }
  if (!known) {
    fail(path, "dtype '" + descr + "' is not supported (float32/float64 values, uint8/16/32 codes, little-endian)");
  }
  if (!std::regex_search(header, m, order_re)) fail(path, "header has no 'fortran_order'");
  if (m[1] == "True") fail(path, "fortran_order arrays are not supported: save with np.ascontiguousarray");
  if (!std::regex_search(header, m, shape_re)) fail(path, "header has no 'shape'");
  const std::string dims = m[1];
  static const std::regex dim_re(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), dim_re); it != std::sregex_iterator(); ++it) {
    a.shape.push_back(std::stoull(it->str()));
  }
  if (a.shape.empty() || a.shape.size() > 2) {
    fail(path, "array must be 1-D or 2-D, got " + std::to_string(a.shape.size()) + "-D");
  }
  const std::size_t n = a.size();
  if (n > (std::size_t{1} << 40)) fail(path, "array is implausibly large");
  a.bytes.resize(n * dtype_size(a.dtype));
  if (!in.read(reinterpret_cast<char*>(a.bytes.data()), static_cast<std::streamsize>(a.bytes.size()))) {
    fail(path, "truncated data: expected " + std::to_string(a.bytes.size()) + " bytes");
  }
  return a;
}

std::vector<float> as_float32(const Array& a, const std::filesystem::path& path) {
  if (a.dtype == DType::f8) return binary32_values(as_float64(a, path), path.string());
  if (a.dtype != DType::f4) fail(path, "expected float32 or float64 values, got " + dtype_descr(a.dtype));
  std::vector<float> out(a.size());
  // An empty array's data() may be null, and memcpy from null is undefined even for 0 bytes.
  if (!out.empty()) std::memcpy(out.data(), a.bytes.data(), a.bytes.size());
  return out;
}

std::vector<double> as_float64(const Array& a, const std::filesystem::path& path) {
  if (a.dtype != DType::f4 && a.dtype != DType::f8) fail(path, "expected float32 or float64 values, got " + dtype_descr(a.dtype));
  std::vector<double> out(a.size());
  if (a.dtype == DType::f8) {
    if (!out.empty()) std::memcpy(out.data(), a.bytes.data(), a.bytes.size());  // as in as_float32
  } else {
    for (std::size_t i = 0; i < out.size(); ++i) {
      float f;
      std::memcpy(&f, a.bytes.data() + 4 * i, 4);
      out[i] = f;
    }
  }
  return out;
}

std::vector<std::uint32_t> as_uint32(const Array& a, const std::filesystem::path& path) {
  std::vector<std::uint32_t> out(a.size());
  const std::size_t w = dtype_size(a.dtype);
  if (a.dtype == DType::f4 || a.dtype == DType::f8) fail(path, "expected unsigned integers, got " + dtype_descr(a.dtype));
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint32_t v = 0;
    std::memcpy(&v, a.bytes.data() + w * i, w);
    out[i] = v;
  }
  return out;
}

RandomBitsArray read_random_bits(const std::filesystem::path& path) {
  const Array a = read(path);
  RandomBitsArray bits{path.string(), dtype_name(a.dtype), a.shape, {}};
  if (a.dtype != DType::f4 && a.dtype != DType::f8) bits.values = as_uint32(a, path);
  return bits;
}

void write(const std::filesystem::path& path, DType dtype, const std::vector<std::size_t>& shape,
           const void* data) {
  std::string dims;
  std::size_t n = 1;
  for (auto d : shape) {
    dims += std::to_string(d) + ", ";
    n *= d;
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = "{'descr': '" + dtype_descr(dtype) + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  OutputFile out(path);
  std::string preamble = "\x93NUMPY";
  preamble += '\x01';
  preamble += '\x00';
  preamble += static_cast<char>(header.size() & 0xFF);
  preamble += static_cast<char>(header.size() >> 8);
  out.stream().write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  out.stream().write(header.data(), static_cast<std::streamsize>(header.size()));
  out.stream().write(static_cast<const char*>(data), static_cast<std::streamsize>(n * dtype_size(dtype)));
  out.commit();
}

}  // namespace fp4sim::npy
