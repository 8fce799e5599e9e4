// Writing `fp4sim vectors`: the cases as .npy files and one manifest.json, all or nothing.
#include "fp4sim/analysis/vectors.hpp"

#include <algorithm>
#include <cmath>

#include <omp.h>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/io/output_file.hpp"
#include "fp4sim/stats/stats.hpp"
#include "vectors_internal.hpp"

namespace fp4sim::vectors {

namespace {

// A binary32 value as a JSON number (exact: the shortest decimal of the widened double) and its bit
// pattern; non-finite values are null and the bits say which.
void float_field(stats::JsonWriter& j, std::string_view key, float v) {
  j.field(key, static_cast<double>(v));
  j.field(std::string(key) + "_bits", hex_bits(v));
}

class Writer {
 public:
  explicit Writer(const OutputDirectory& dir) : dir_(dir) {}
  std::size_t files() const { return files_; }

  std::string f32(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<float>& v) {
    npy::write(dir_.file(name), npy::DType::f4, {rows, cols}, v.data());
    ++files_;
    return name;
  }
  std::string u8(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<std::uint8_t>& v) {
    npy::write(dir_.file(name), npy::DType::u1, {rows, cols}, v.data());
    ++files_;
    return name;
  }
  std::string rbits(const std::string& name, std::size_t rows, std::size_t cols, const std::vector<std::uint32_t>& v,
                    int bits) {
    if (bits <= 8) return u8(name, rows, cols, std::vector<std::uint8_t>(v.begin(), v.end()));
    const std::vector<std::uint16_t> wide(v.begin(), v.end());
    npy::write(dir_.file(name), npy::DType::u2, {rows, cols}, wide.data());
    ++files_;
    return name;
  }

 private:
  const OutputDirectory& dir_;
  std::size_t files_ = 0;
};

// The quantize record of a case or of one GEMM operand: the spec, the scalars and the files.
void write_quantize(stats::JsonWriter& j, Writer& w, const Recipe& recipe, const QuantizeCase& c,
                    const std::string& x_file) {
  const QuantizedTensor& q = c.q;
  j.field("recipe", recipe.name);
  j.field("role", name_of(c.spec.role));
  j.field("two_d", c.spec.two_d);
  j.field("rounding", name_of(c.spec.rounding));
  j.field("block", recipe.block);
  j.field("block_rows", q.block_rows);
  j.field("block_cols", q.block_cols);
  j.key("amax_ref");
  if (c.amax_ref) {
    j.value(static_cast<double>(*c.amax_ref));
    j.field("amax_ref_bits", hex_bits(*c.amax_ref));
  } else {
    j.null();
  }
  j.field("rht", c.spec.rht);
  float_field(j, "target", q.target);
  j.key("shape")
      .begin_array()
      .value(static_cast<std::uint64_t>(c.rows))
      .value(static_cast<std::uint64_t>(c.cols))
      .end_array();
  j.key("scale_shape")
      .begin_array()
      .value(static_cast<std::uint64_t>(q.scale_rows))
      .value(static_cast<std::uint64_t>(q.scale_cols))
      .end_array();
  j.field("tensor_scaled", q.tensor_scaled);
  float_field(j, "tensor_amax", q.tensor_amax);
  float_field(j, "global_encode_scale", q.global_encode_scale);
  float_field(j, "global_decode_scale", q.global_decode_scale);
  j.key("philox");
  if (c.philox) {
    j.begin_object()
        .field("seed", c.philox->seed)
        .field("stream", c.philox->stream)
        .field("bits", c.philox->bits)
        .end_object();
  } else {
    j.null();
  }
  j.key("counts")
      .begin_object()
      .field("blocks", q.counts.blocks)
      .field("zero_blocks", q.counts.zero_blocks)
      .field("scale_saturated", q.counts.scale_saturated)
      .field("scale_underflow", q.counts.scale_underflow)
      .field("saturated", q.counts.saturated)
      .field("nan", q.counts.nan)
      .field("inf", q.counts.inf)
      .end_object();
  j.key("covers").begin_array();
  for (const auto& category : c.covers) j.value(category);
  j.end_array();

  std::vector<std::uint8_t> codes(c.rows * c.cols);
  for (std::size_t r = 0; r < c.rows; ++r) {
    for (std::size_t col = 0; col < c.cols; ++col) codes[r * c.cols + col] = q.code(r, col);
  }
  j.key("files").begin_object();
  j.field("x", x_file);
  j.field("codes", w.u8(c.name + ".codes.npy", c.rows, c.cols, codes));
  j.field("scales", w.u8(c.name + ".scales.npy", q.scale_rows, q.scale_cols, q.scales));
  j.field("dequantized", w.f32(c.name + ".dequantized.npy", c.rows, c.cols, c.dequantized));
  if (!c.rbits.empty()) j.field("rbits", w.rbits(c.name + ".rbits.npy", c.rows, c.cols, c.rbits, recipe.sr_bits));
  if (!c.transformed.empty()) j.field("transformed", w.f32(c.name + ".transformed.npy", c.rows, c.cols, c.transformed));
  if (!c.defined.empty()) j.field("defined", w.u8(c.name + ".defined.npy", c.rows, c.cols, c.defined));
  j.end_object();
}

constexpr const char* kConventions[][2] = {
    {"arrays", "NumPy .npy, little-endian, C order, always 2-D [rows, cols]"},
    {"x", "float32 input tensor as given to the quantizer (before any RHT); blocks run along the last dimension"},
    {"codes", "uint8, one unpacked element code per input element (low 4 bits; bit 3 is the sign), shape of x"},
    {"scales",
     "uint8 block scale codes, one per 1 x block_cols block or block_rows x block_cols tile, row-major "
     "[ceil(rows/block_rows), ceil(cols/block_cols)]"},
    {"rbits",
     "stochastic rounding only: the random integer (< 2^bits) each element was rounded with, shape of x; "
     "philox names the Philox4x32-10 key (seed, stream, element index = row-major index) that drew them, "
     "null when they were chosen outright"},
    {"dequantized", "float32 decoded value of every element, tensor scale included, in the recipe's dequantize order"},
    {"transformed", "rht only: float32 RHT(x), the tensor actually quantized"},
    {"defined",
     "uint8 1 where the recipe's source fixes the element code, 0 where it leaves it to the "
     "implementation; absent when every code is fixed"},
    {"amax_ref",
     "the held tensor amax the quantizer must use (bits in amax_ref_bits); null: the current amax of the "
     "tensor quantized (NaN-ignoring)"},
    {"scalars",
     "binary32 values are JSON numbers that parse to the exact value, with their bit patterns in *_bits; "
     "non-finite values are null there"},
    {"gemm",
     "C [M, N] = A·Bᵀ, float32; files.a = A [M, K] and files.b = B [N, K] as given to the quantizer (K last); "
     "operands.a / operands.b are their quantize records; files.c maps each datapath to its C, and "
     "alpha[datapath] is the epilogue multiplier it applied"},
};

}  // namespace

namespace {

// A case is a few KiB: OpenMP's threads only wait on one another there, and on a loaded machine the
// waiting made `vectors` 8x slower than one thread. The cases are made on one; the setting is restored.
class OneThread {
 public:
  OneThread() : threads_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(threads_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int threads_;
};

// The manifest and the files of the cases `generate_cases` hands over, all or nothing; `discriminated`
// names the rows of a discriminating set (empty for the conformance vectors).
std::size_t write_set(const Recipe& r, std::uint64_t seed, const std::filesystem::path& path,
                      const std::vector<const Datapath*>& discriminated,
                      const std::function<void(const std::function<void(Case&&)>&)>& generate_cases) {
  const OneThread one_thread;
  OutputDirectory dir(path);  // a non-empty directory is refused here, before any case is made
  Writer w(dir);
  OutputFile manifest(dir.file("manifest.json"));
  stats::JsonWriter j(manifest.stream(), true);
  j.begin_object();
  j.field("format", "fp4sim conformance vectors");
  j.field("version", 1);
  j.field("seed", seed);
  j.key("recipe")
      .begin_object()
      .field("name", r.name)
      .field("source", r.source)
      .field("element_format", format_name(r.element))
      .field("scale_format", format_name(r.scale))
      .field("block", r.block)
      .field("weight_two_d", r.weight_two_d)
      .field("scale_rule", name_of(r.scale_rule))
      .field("zero_scale", r.zero_scale == ZeroScale::one ? "one" : "keep")
      .field("tensor_scale", name_of(r.tensor_scale))
      .field("period", r.period)
      .field("element_rounding", name_of(r.element_rounding))
      .field("grad_rounding", name_of(r.grad_rounding))
      .field("sr_bits", r.sr_bits)
      .field("rht_wgrad", r.rht_wgrad)
      .field("dequantize_order", name_of(r.dequantize_order))
      .field("alpha_rule", name_of(r.alpha))
      .field("default_datapath", r.default_datapath->name);
  // a user-defined recipe's setting of every operand (each case's two_d and rht say what it used)
  if (r.operand_two_d) j.field("operand_two_d", *r.operand_two_d);
  if (r.operand_rht) j.field("operand_rht", *r.operand_rht);
  j.end_object();
  j.key("conventions").begin_object();
  for (const auto& [key, text] : kConventions) j.field(key, text);
  j.end_object();
  if (!discriminated.empty()) {
    j.key("discriminate").begin_array();
    for (const Datapath* dp : discriminated) j.value(dp->name);
    j.end_array();
  }
  j.key("categories").begin_array();
  for (const auto& category : edge_category_names()) j.value(category);
  j.end_array();
  j.key("cases").begin_array();
  // Each case is written as it is made and then dropped: the memory held does not grow with --cases.
  generate_cases([&](Case&& c) {
    j.begin_object();
    j.field("name", c.name());
    if (c.quantize) {
      j.field("kind", "quantize");
      write_quantize(j, w, r, *c.quantize,
                     w.f32(c.quantize->name + ".x.npy", c.quantize->rows, c.quantize->cols, c.quantize->x));
    } else {
      const GemmCase& g = *c.gemm;
      j.field("kind", "gemm");
      j.field("recipe", r.name);
      j.field("gemm", name_of(g.gemm));
      j.field("m", static_cast<std::uint64_t>(g.a.rows));
      j.field("n", static_cast<std::uint64_t>(g.b.rows));
      j.field("k", static_cast<std::uint64_t>(g.a.cols));
      const std::string a = w.f32(g.name + ".a.npy", g.a.rows, g.a.cols, g.a.x);
      const std::string b = w.f32(g.name + ".b.npy", g.b.rows, g.b.cols, g.b.x);
      j.key("alpha").begin_object();
      for (const GemmOutput& out : g.outputs) float_field(j, out.datapath, out.alpha);
      j.end_object();
      j.key("operands").begin_object();
      j.key("a").begin_object();
      write_quantize(j, w, r, g.a, a);
      j.end_object();
      j.key("b").begin_object();
      write_quantize(j, w, r, g.b, b);
      j.end_object();
      j.end_object();
      j.key("files").begin_object().field("a", a).field("b", b);
      j.key("c").begin_object();
      for (const GemmOutput& out : g.outputs) {
        j.field(out.datapath, w.f32(g.name + ".c." + out.datapath + ".npy", g.a.rows, g.b.rows, out.c));
      }
      j.end_object();
      j.end_object();
      if (!g.differences.empty()) {
        j.key("differing_outputs").begin_array();
        for (const RowDifference& d : g.differences) {
          j.begin_object().field("a", d.a).field("b", d.b);
          j.field("outputs", static_cast<std::uint64_t>(d.outputs)).end_object();
        }
        j.end_array();
      }
    }
    j.end_object();
  });
  j.end_array();
  j.end_object();
  manifest.stream() << '\n';
  manifest.commit();
  dir.commit();
  return w.files() + 1;
}

}  // namespace

std::size_t write(const Recipe& r, std::uint64_t seed, std::size_t cases, const std::filesystem::path& path) {
  detail::check_cases(r, cases);
  return write_set(r, seed, path, {}, [&](const std::function<void(Case&&)>& sink) { generate(r, seed, cases, sink); });
}

std::size_t write_discriminating(const Recipe& r, const std::vector<const Datapath*>& rows, std::uint64_t seed,
                                 std::size_t cases, const std::filesystem::path& path) {
  detail::check_discriminate(r, rows, cases);
  return write_set(r, seed, path, rows,
                   [&](const std::function<void(Case&&)>& sink) { discriminate(r, rows, seed, cases, sink); });
}

}  // namespace fp4sim::vectors
