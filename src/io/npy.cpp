#include "fp4sim/io/npy.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <regex>
#include <stdexcept>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/input_path.hpp"
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

namespace {

// One dimension of the header's shape tuple: decimal digits only (NumPy writes no sign, no spaces inside).
std::size_t parse_dimension(const std::filesystem::path& path, const std::string& text) {
  if (!text.empty() && text[0] == '-') fail(path, "negative dimension " + text + " in the header's shape");
  std::size_t d = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec == std::errc::result_out_of_range) fail(path, "dimension " + text + " in the header's shape is too large");
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    fail(path, "malformed shape in the header: '" + text + "' is not a dimension");
  }
  return d;
}

std::vector<std::size_t> parse_shape(const std::filesystem::path& path, const std::string& dims) {
  std::vector<std::size_t> shape;
  std::size_t begin = 0;
  while (begin <= dims.size()) {
    std::size_t comma = dims.find(',', begin);
    if (comma == std::string::npos) comma = dims.size();
    std::string item = dims.substr(begin, comma - begin);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    // "(3,)" and "(2, 3, )": a trailing comma leaves one empty item at the end
    if (!item.empty() || comma != dims.size()) shape.push_back(parse_dimension(path, item));
    begin = comma + 1;
  }
  return shape;
}

}  // namespace

Reader::Reader(const std::filesystem::path& path) : path_(path) {
  check_input_path(path);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  in_.open(path, std::ios::binary);
  std::ifstream& in = in_;
  if (!in) fail(path, std::string("cannot open for reading: ") + std::strerror(errno));
  note_input(path);
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
  const std::uint64_t preamble = (major == 1 ? 10 : 12);
  if (preamble + header_len > static_cast<std::uint64_t>(st.st_size)) {
    fail(path, "truncated header: its length is " + std::to_string(header_len) + " bytes, the file holds " +
                   std::to_string(st.st_size));
  }
  if (header_len > (1u << 20)) fail(path, "header length " + std::to_string(header_len) + " is implausible");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(path, "truncated header");

  // numpy reads the header as a Python dict literal: a key given twice takes its last value there, the
  // first here, so such a header is refused rather than read differently.
  for (const char* key : {"'descr'", "'fortran_order'", "'shape'"}) {
    const std::size_t first = header.find(key);
    if (first != std::string::npos && header.find(key, first + 1) != std::string::npos) {
      fail(path, std::string("header gives ") + key + " twice");
    }
  }
  // A structured dtype's descr is a list of fields, not a quoted type string.
  static const std::regex structured_re(R"('descr'\s*:\s*\[)");
  if (std::regex_search(header, structured_re)) {
    fail(path, "a structured dtype (named fields) is not supported: save a plain float32/float64 or uint8/16/32 array");
  }
  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex order_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, descr_re)) fail(path, "header has no 'descr'");
  const std::string descr = m[1];
  Array& a = header_;
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
  a.shape = parse_shape(path, m[1]);
  if (a.shape.empty() || a.shape.size() > 2) {
    fail(path, "array must be 1-D or 2-D, got " + std::to_string(a.shape.size()) + "-D");
  }
  // The size the header claims, checked against the file before anything is allocated.
  data_bytes_ = dtype_size(a.dtype);
  for (const std::size_t d : a.shape) {
    if (__builtin_mul_overflow(data_bytes_, std::uint64_t{d}, &data_bytes_)) {
      fail(path, "the header's shape overflows 64 bits");
    }
  }
  const std::uint64_t available = static_cast<std::uint64_t>(st.st_size) - preamble - header_len;
  if (data_bytes_ > available) {
    fail(path, "truncated data: the header's shape needs " + std::to_string(data_bytes_) + " bytes, the file holds " +
                   std::to_string(available));
  }
}

void Reader::read_into(std::span<std::uint8_t> data) {
  if (data.size() != data_bytes_) throw std::logic_error("npy::Reader::read_into: the buffer does not fit the data");
  if (!in_.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data.size()))) {
    fail(path_, "truncated data: expected " + std::to_string(data_bytes_) + " bytes");
  }
}

void Reader::read_all(std::vector<std::uint8_t>& bytes) {
  bytes.resize(data_bytes_);
  read_into(bytes);
}

Array read(const std::filesystem::path& path) {
  Reader in(path);
  Array a{in.dtype(), in.shape(), {}};
  in.read_all(a.bytes);
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
      std::uint32_t bits;
      std::memcpy(&bits, a.bytes.data() + 4 * i, 4);
      out[i] = widen_binary32(bits);  // a NaN keeps its pattern for a tf32 row (O10)
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
