// The `fp4sim._fp4sim` extension (nanobind): the library calls behind the Python module, taking NumPy
// arrays that python/fp4sim/__init__.py has already normalised (DLPack objects viewed without a copy,
// float32 C order). Float32 inputs are read in place (no copy); the GIL is released while the golden
// model runs. Library errors surface as fp4sim.UsageError / fp4sim.DataError (ValueError subclasses)
// carrying the library's message, the one the CLI prints after "fp4sim: error: ".
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4sim/core/arrays.hpp"
#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/convert_call.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/mma_call.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"
#include "fp4sim/verify/verify_call.hpp"
#include "operand.hpp"
#include "plans.hpp"
#include "stats_ops.hpp"
#if defined(FP4SIM_PYTHON_CUDA)
#include "cuda_ops.hpp"
#endif
#if defined(FP4SIM_PYTHON_ANALYSIS)
#include "analysis_ops.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using namespace fp4sim;

using FloatIn = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using DoubleIn = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using BytesIn = nb::ndarray<const std::uint8_t, nb::c_contig, nb::device::cpu>;
using WordsIn = nb::ndarray<const std::uint32_t, nb::c_contig, nb::device::cpu>;

template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& values, const std::vector<std::size_t>& shape) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(heap->data(), shape.size(), shape.data(), owner);
}

template <class A>
std::vector<std::size_t> shape_of(const A& a) {
  std::vector<std::size_t> s(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) s[i] = a.shape(i);
  return s;
}

// A 1-D (one row) or 2-D tensor, as docs/cli.md takes them.
template <class A>
std::pair<std::size_t, std::size_t> rows_cols(const A& a, const char* what) {
  if (a.ndim() == 1) return {1, a.shape(0)};
  if (a.ndim() == 2) return {a.shape(0), a.shape(1)};
  throw DataError(std::string(what) + ": expected a 1-D or 2-D array, got " + std::to_string(a.ndim()) + " dimensions");
}

template <class A>
std::span<const typename std::remove_const_t<typename A::Scalar>> span_of(const A& a) {
  return {a.data(), a.size()};
}

// Explicit random bits as fp4sim/__init__.py hands them: NumPy's dtype name and the values widened.
using RandomBitsIn = std::tuple<std::string, WordsIn>;

std::optional<RandomBitsArray> random_bits_array(const std::optional<RandomBitsIn>& in, const char* what) {
  if (!in) return std::nullopt;
  const auto& [dtype, values] = *in;
  return RandomBitsArray{what, dtype, shape_of(values), std::vector<std::uint32_t>(values.data(), values.data() + values.size())};
}

using python::gemm_call_from;
using python::overrides_from;

// A report or message that names arguments by key (fp4sim/core/error.hpp) with each spelled as the
// keyword that sets it (amax_ref_a, snap=False).
std::string in_python_terms(const std::string& keyed) { return front::render(keyed, front::Spelling::python); }

// ---------------------------------------------------------------------------------------------------

nb::list formats_list() {
  nb::list out;
  for (const auto& preset : format_presets()) {
    const Format& f = preset.format;
    nb::dict d;
    d["name"] = std::string(preset.name);
    d["bits"] = f.storage_bits();
    d["exponent_bits"] = f.exponent_bits;
    d["mantissa_bits"] = f.mantissa_bits;
    d["bias"] = f.bias;
    d["signed"] = f.is_signed;
    d["subnormals"] = f.has_subnormals();
    d["max_finite"] = decode_to_double(f, f.max_finite_code());
    const std::uint32_t min_normal_code = f.specials == Specials::pow2_nan ? 0u : std::uint32_t{1} << f.mantissa_bits;
    d["min_normal"] = decode_to_double(f, min_normal_code);
    d["min_subnormal"] = f.has_subnormals() ? nb::cast(decode_to_double(f, 1)) : nb::none();
    d["has_inf"] = f.has_inf();
    d["has_nan"] = f.has_nan();
    d["has_zero"] = f.has_zero();
    d["specials"] = std::string(name_of(f.specials));
    d["source"] = std::string(preset.description);
    out.append(d);
  }
  return out;
}

// The keywords of fp4sim.convert, each type-checked through its row of the argument table.
ConvertCall convert_call_from(const std::string& format, nb::handle rounding, nb::handle sr_bits, nb::handle seed,
                              nb::handle saturate, nb::handle specials, bool random_bits) {
  ConvertCall call;
  call.format = format;
  const auto rows = front::convert_arguments();
  const std::pair<const char*, nb::handle> keywords[] = {
      {"rounding", rounding}, {"sr_bits", sr_bits}, {"seed", seed}, {"saturate", saturate}, {"specials", specials}};
  for (const auto& [key, value] : keywords) python::set_keyword(rows, call, key, value);
  call.random_bits = random_bits;
  return call;
}

nb::object convert_py(const DoubleIn& x, const std::string& format, nb::handle rounding, nb::handle sr_bits,
                      nb::handle seed, const std::optional<RandomBitsIn>& rbits, nb::handle saturate,
                      nb::handle specials) {
  const ConvertCall call = convert_call_from(format, rounding, sr_bits, seed, saturate, specials, rbits.has_value());
  const ConvertCall::Resolved r = call.resolve();
  const std::optional<RandomBitsArray> bits = random_bits_array(rbits, "rbits");
  std::vector<std::uint32_t> codes;
  {
    nb::gil_scoped_release release;
    codes = fp4sim::convert(call, r, {"x", shape_of(x)}, span_of(x), bits ? &*bits : nullptr);
  }
  const auto shape = shape_of(x);
  const int width = code_bytes(r.format);
  if (width == 1) return nb::cast(to_numpy(std::vector<std::uint8_t>(codes.begin(), codes.end()), shape));
  if (width == 2) return nb::cast(to_numpy(std::vector<std::uint16_t>(codes.begin(), codes.end()), shape));
  return nb::cast(to_numpy(std::move(codes), shape));
}

// float32 in place through the fast encoder, the codes written straight into the array returned.
template <class Code>
nb::object convert_float32_as(const ConvertCall& call, const ConvertCall::Resolved& r, const FloatIn& x,
                              const RandomBitsArray* bits) {
  std::vector<Code> codes(x.size());
  const ArrayShape input{"x", shape_of(x)};
  {
    nb::gil_scoped_release release;
    fp4sim::convert(call, r, input, span_of(x), bits, std::span<Code>(codes));
  }
  return nb::cast(to_numpy(std::move(codes), input.shape));
}

nb::object convert_float32_py(const FloatIn& x, const std::string& format, nb::handle rounding, nb::handle sr_bits,
                              nb::handle seed, const std::optional<RandomBitsIn>& rbits, nb::handle saturate,
                              nb::handle specials) {
  const ConvertCall call = convert_call_from(format, rounding, sr_bits, seed, saturate, specials, rbits.has_value());
  const ConvertCall::Resolved r = call.resolve();
  const std::optional<RandomBitsArray> bits = random_bits_array(rbits, "rbits");
  const RandomBitsArray* b = bits ? &*bits : nullptr;
  switch (code_bytes(r.format)) {
    case 1: return convert_float32_as<std::uint8_t>(call, r, x, b);
    case 2: return convert_float32_as<std::uint16_t>(call, r, x, b);
    default: return convert_float32_as<std::uint32_t>(call, r, x, b);
  }
}

// Codes of any unsigned width, read in place; float32 out (every format's values are binary32 values).
template <class Code>
nb::ndarray<nb::numpy, float> decode_codes(const nb::ndarray<const Code, nb::c_contig, nb::device::cpu>& codes,
                                           const std::string& format_name_) {
  const Format format = format_argument(format_name_, "format");
  std::vector<float> out(codes.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (codes.data()[i] >= format.code_count()) {
      throw DataError("codes: element " + std::to_string(i) + " = " + std::to_string(codes.data()[i]) +
                      " is not a " + format_name_ + " code");
    }
    out[i] = decode_to_float(format, codes.data()[i]);
  }
  return to_numpy(std::move(out), shape_of(codes));
}

// x quantized under (recipe, request), with the caller's random bits when given.
QuantizedTensor quantize_array(const Recipe& recipe, QuantizeRequest request, const FloatIn& x,
                               const std::optional<RandomBitsIn>& rbits) {
  const auto [rows, cols] = rows_cols(x, "x");
  const auto bits = attach_random_bits(random_bits_array(rbits, "rbits"), shape_of(x), recipe.sr_bits, request);
  nb::gil_scoped_release release;
  return quantize(recipe, request, span_of(x), rows, cols);
}

// `role`: a role, or operand "<gemm>.a" / "<gemm>.b" of a GEMM (python/operand.hpp).
QuantizedTensor quantize_py(const FloatIn& x, const std::string& recipe_name, const nb::dict& overrides,
                            const std::string& role, nb::handle amax_ref, nb::handle seed,
                            const std::optional<RandomBitsIn>& rbits) {
  QuantizeCall call = python::quantize_call_from(recipe_name, overrides, role, amax_ref, seed);
  call.operand.random_bits = rbits.has_value();
  const python::ResolvedOperand r = python::resolve_operand(call, role);
  return quantize_array(r.recipe, r.request, x, rbits);
}

// The same through a plan (fp4sim.torch's CPU operator): the plan's settings, the call's seed, held amax
// and bits.
QuantizedTensor plan_quantize_py(python::PlanHandle plan, const FloatIn& x, std::optional<float> amax_ref,
                                 std::uint64_t seed, const std::optional<RandomBitsIn>& rbits) {
  const python::QuantizePlan& p = python::quantize_plan_of(plan);
  return quantize_array(p.recipe, p.request_for(seed, amax_ref, rbits.has_value()), x, rbits);
}

// A quantized tensor from its bytes and tensor scalars as another implementation stored them (the CUDA
// ops of fp4sim.torch), with the settings of operand `plan`: what the golden GEMM and dequantize take.
// row_amax: a row-scaled operand's amax of each row (its scalars after the four), else empty.
QuantizedTensor plan_quantized_py(python::PlanHandle plan, const BytesIn& codes, const BytesIn& scales,
                                  std::size_t rows, std::size_t cols, float tensor_amax, float encode, float decode,
                                  const std::vector<float>& row_amax) {
  const python::QuantizePlan& p = python::quantize_plan_of(plan);
  const bool row_scaled = fp4sim::row_scaled(p.recipe, p.request.spec);
  if (row_amax.size() != (row_scaled ? rows : 0)) {
    throw DataError("quantized " + p.operand + ": " + std::to_string(row_amax.size()) + " row amaxes given, the " +
                    (row_scaled ? "row-scaled operand has " + std::to_string(rows) + " rows" : "operand takes none"));
  }
  QuantizedTensor q = blank_quantized(p.recipe, p.request, rows, cols);
  if (codes.size() != q.codes.size() || scales.size() != q.scales.size()) {
    throw DataError("quantized " + p.operand + ": " + std::to_string(codes.size()) + " code bytes and " +
                    std::to_string(scales.size()) + " scale bytes given, the [" + std::to_string(rows) + ", " +
                    std::to_string(cols) + "] operand has " + std::to_string(q.codes.size()) + " and " +
                    std::to_string(q.scales.size()));
  }
  std::copy(codes.data(), codes.data() + codes.size(), q.codes.begin());
  std::copy(scales.data(), scales.data() + scales.size(), q.scales.begin());
  q.tensor_amax = tensor_amax;
  q.tensor_scaled = p.blank.tensor_scaled;
  q.global_encode_scale = encode;
  q.global_decode_scale = decode;
  q.row_amax = row_amax;
  return q;
}

template <class T>
nb::ndarray<nb::numpy, const T> view(const std::vector<T>& v, std::size_t rows, std::size_t cols) {
  const std::size_t shape[2] = {rows, cols};
  return nb::ndarray<nb::numpy, const T>(v.data(), 2, shape, nb::handle());
}

nb::ndarray<nb::numpy, float> dequantize_py(const QuantizedTensor& q) {
  std::vector<float> out;
  {
    nb::gil_scoped_release release;
    out = dequantize(q);
  }
  return to_numpy(std::move(out), {q.rows, q.cols});
}

// A kernel's raw bytes dequantized: codes in a nibble order, scales in a layout, and the tensor scale as
// the kernel holds it (G, Gd or the amax: `kind`), under the recipe's settings for `role`.
nb::ndarray<nb::numpy, float> dequantize_raw_py(const BytesIn& codes, const BytesIn& scales, std::size_t rows,
                                                std::size_t cols, const std::string& recipe_name,
                                                const nb::dict& overrides, const std::string& role,
                                                const std::string& layout, const std::string& nibbles,
                                                std::optional<float> tensor_scale, const std::string& kind) {
  QuantizeCall call{overrides_from(recipe_name, overrides), role, 0, {}};
  const QuantizeCall::Resolved r = call.resolve();
  if (r.recipe.amax_scope == AmaxScope::row) {
    throw UsageError("amax_scope='row': a tensor built from bytes takes one tensor scale here, not one per row");
  }
  // The codes must hold rows x cols before anything of that size is allocated (shape= is a claim).
  const auto order = parse_name_or_throw<NibbleOrder>(nibbles, "nibbles");
  check_codes_shape(order, rows, cols, shape_of(codes));
  QuantizedTensor q = blank_quantized(r.recipe, r.request, rows, cols);
  q.codes = codes_from_order(span_of(codes), rows, cols, order);
  const ScaleGrid grid = scale_grid(rows, cols, q.block_rows, q.block_cols);
  q.scales = scales_from_layout(span_of(scales), shape_of(scales), grid, parse_name_or_throw<ScaleLayout>(layout, "layout"));
  const bool two_level = has_tensor_scale(r.recipe);
  if (two_level) {
    if (!tensor_scale) throw UsageError("tensor_scale: recipe '" + recipe_name + "' has a tensor scale: give its value");
    // a held amax is >= 0 and G, Gd are > 0; anything else dequantizes to negated or NaN values
    const bool amax = kind == "amax";
    if (!std::isfinite(*tensor_scale) || *tensor_scale < 0 || (!amax && *tensor_scale == 0)) {
      throw DataError("tensor_scale: " + std::string(amax ? "an amax is finite and >= 0" : "G and Gd are finite and > 0") +
                      ", got " + std::to_string(*tensor_scale));
    }
    q.tensor_scaled = true;
    const float element_max = decode_to_float(q.element, q.element.max_finite_code());
    if (kind == "amax") {
      q.tensor_amax = *tensor_scale;
      const GlobalScale g = global_scale(q.tensor_amax, q.target, element_max);
      q.global_encode_scale = g.encode;
      q.global_decode_scale = g.decode;
    } else if (kind == "encode" || kind == "decode") {
      if (q.dequantize_order == DequantizeOrder::te_kernel) {
        throw UsageError("tensor_scale_kind: the te-kernel dequantize order multiplies by the amax: give "
                         "tensor_scale_kind='amax'");
      }
      q.global_encode_scale = kind == "encode" ? *tensor_scale : 1.0f;
      q.global_decode_scale = kind == "encode" ? fp32::div_rn(1.0f, *tensor_scale) : *tensor_scale;
    } else {
      throw UsageError("tensor_scale_kind: expected encode, decode or amax, got '" + kind + "'");
    }
  } else if (tensor_scale) {
    throw UsageError("tensor_scale: recipe '" + recipe_name + "' has no tensor scale (tensor_scale=None)");
  }
  std::vector<float> out;
  {
    nb::gil_scoped_release release;
    out = dequantize(q);
  }
  return to_numpy(std::move(out), {rows, cols});
}

// C = A·Bᵀ of float32 A and B, each quantized under its request (with the caller's bits when given).
nb::ndarray<nb::numpy, float> gemm_arrays(const Recipe& recipe, QuantizeRequest request_a, QuantizeRequest request_b,
                                          const GemmRequest& request, const FloatIn& a, const FloatIn& b,
                                          const std::optional<RandomBitsIn>& rbits_a,
                                          const std::optional<RandomBitsIn>& rbits_b) {
  check_gemm_shapes({"a", shape_of(a)}, {"b", shape_of(b)});
  const auto bits_a = attach_random_bits(random_bits_array(rbits_a, "rbits_a"), shape_of(a), recipe.sr_bits, request_a);
  const auto bits_b = attach_random_bits(random_bits_array(rbits_b, "rbits_b"), shape_of(b), recipe.sr_bits, request_b);
  std::vector<float> c;
  const std::size_t m = a.shape(0), n = b.shape(0), k = a.shape(1);
  {
    nb::gil_scoped_release release;
    const QuantizedTensor qa = quantize(recipe, request_a, span_of(a), m, k);
    const QuantizedTensor qb = quantize(recipe, request_b, span_of(b), n, k);
    c = gemm(recipe, qa, qb, request);
  }
  return to_numpy(std::move(c), {m, n});
}

nb::ndarray<nb::numpy, float> gemm_py(const FloatIn& a, const FloatIn& b, const std::string& recipe_name,
                                      const nb::dict& overrides, const nb::dict& args,
                                      const std::optional<RandomBitsIn>& rbits_a, const std::optional<RandomBitsIn>& rbits_b) {
  GemmCall call = gemm_call_from(recipe_name, overrides, args);
  call.a.random_bits = rbits_a.has_value();
  call.b.random_bits = rbits_b.has_value();
  const GemmCall::Resolved r = call.resolve();
  return gemm_arrays(r.recipe, r.a, r.b, r.request, a, b, rbits_a, rbits_b);
}

// The same through a GEMM plan (fp4sim.torch's CPU operator): the call's seed, held amaxes, bits and
// output rounding.
nb::ndarray<nb::numpy, float> plan_gemm_py(python::PlanHandle plan, const FloatIn& a, const FloatIn& b,
                                           std::uint64_t seed, std::optional<float> amax_a, std::optional<float> amax_b,
                                           const std::optional<RandomBitsIn>& rbits_a,
                                           const std::optional<RandomBitsIn>& rbits_b, bool bf16_out) {
  const python::GemmPlan& g = python::gemm_plan_of(plan);
  GemmRequest request = g.request;
  request.bf16_output = bf16_out;
  return gemm_arrays(g.recipe, python::quantize_plan_of(g.a).request_for(seed, amax_a, rbits_a.has_value()),
                     python::quantize_plan_of(g.b).request_for(seed, amax_b, rbits_b.has_value()), request, a, b,
                     rbits_a, rbits_b);
}

// The settings of operand `role` of a recipe (python/operand.hpp), without data: what a caller needs to
// allocate the codes and scales and to choose how to scale the operand.
nb::dict operand_info_py(const std::string& recipe_name, const nb::dict& overrides, const std::string& role) {
  const QuantizeCall call = python::quantize_call_from(recipe_name, overrides, role, nb::none(), nb::none());
  const python::ResolvedOperand r = python::resolve_operand(call, role);
  return python::operand_info(r.recipe, r.request);
}

// C = A·Bᵀ of two quantized operands (plan_quantized of the GEMM plan's a and b) through the plan's datapath.
nb::ndarray<nb::numpy, float> plan_gemm_quantized_py(python::PlanHandle plan, const QuantizedTensor& qa,
                                                     const QuantizedTensor& qb, bool bf16_out) {
  const python::GemmPlan& g = python::gemm_plan_of(plan);
  GemmRequest request = g.request;
  request.bf16_output = bf16_out;
  std::vector<float> c;
  {
    nb::gil_scoped_release release;
    c = gemm(g.recipe, qa, qb, request);
  }
  return to_numpy(std::move(c), {qa.rows, qb.rows});
}

nb::ndarray<nb::numpy, float> mma_py(const DoubleIn& a, const DoubleIn& b, const std::optional<DoubleIn>& c,
                                     nb::handle datapath, nb::handle input_format, nb::handle a_format,
                                     nb::handle b_format) {
  MmaCall call;
  const std::pair<const char*, nb::handle> keywords[] = {
      {"datapath", datapath}, {"input_format", input_format}, {"a_format", a_format}, {"b_format", b_format}};
  for (const auto& [key, value] : keywords) python::set_keyword(front::mma_arguments(), call, key, value);
  const MmaCall::Resolved r = call.resolve();
  const std::optional<MmaOperand> c_operand =
      c ? std::optional<MmaOperand>(MmaOperand{{"C", shape_of(*c)}, span_of(*c)}) : std::nullopt;
  const MmaOperands x = mma_operands(call, r, {{"A", shape_of(a)}, span_of(a)}, {{"B", shape_of(b)}, span_of(b)},
                                     c_operand ? &*c_operand : nullptr);
  std::vector<std::uint32_t> d;
  {
    nb::gil_scoped_release release;
    d = mma(*r.row, r.a.format, x.a, r.b.format, x.b, x.c, x.m, x.n, x.k);
  }
  std::vector<float> out(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = std::bit_cast<float>(d[i]);
  return to_numpy(std::move(out), {x.m, x.n});
}

std::tuple<std::string, std::string, bool> verify_quantize_py(
    const FloatIn& x, const BytesIn& codes, const BytesIn& scales, const std::string& recipe_name, nb::dict overrides,
    const std::string& role, nb::handle layout, nb::handle nibbles, std::optional<float> tensor_scale,
    nb::handle kind, nb::handle amax_ref, nb::handle seed, const std::optional<RandomBitsIn>& rbits,
    nb::handle max_explained) {
  VerifyQuantizeCall call;
  call.quantize = python::quantize_call_from(recipe_name, overrides, role, amax_ref, seed);
  call.quantize.operand.random_bits = rbits.has_value();
  const std::pair<const char*, nb::handle> keywords[] = {
      {"layout", layout}, {"nibbles", nibbles}, {"tensor_scale_kind", kind}, {"max_explained", max_explained}};
  for (const auto& [key, value] : keywords) python::set_keyword(front::verify_quantize_arguments(), call, key, value);
  call.tensor_scale = tensor_scale;
  VerifyQuantizeCall::Resolved r = call.resolve();
  const auto bits = attach_random_bits(random_bits_array(rbits, "rbits"), shape_of(x), r.recipe.sr_bits,
                                       r.request.quantize);
  r.theirs.codes = span_of(codes);
  r.theirs.codes_shape = shape_of(codes);
  r.theirs.scales = span_of(scales);
  r.theirs.scales_shape = shape_of(scales);
  const auto [rows, cols] = rows_cols(x, "x");
  QuantizeVerifyReport rep;
  {
    nb::gil_scoped_release release;
    rep = verify_quantize(r.recipe, r.request, span_of(x), rows, cols, r.theirs);
  }
  return {in_python_terms(to_json(rep)), in_python_terms(to_text(rep)), rep.bit_exact()};
}

std::tuple<std::string, std::string, bool> verify_gemm_py(const FloatIn& a, const FloatIn& b, const FloatIn& c,
                                                          const std::string& recipe_name, const nb::dict& overrides,
                                                          const nb::dict& args, const std::optional<RandomBitsIn>& rbits_a,
                                                          const std::optional<RandomBitsIn>& rbits_b, nb::handle worst) {
  VerifyGemmCall call{gemm_call_from(recipe_name, overrides, args)};
  python::set_keyword(front::verify_gemm_arguments(), call, "worst", worst);
  call.gemm.a.random_bits = rbits_a.has_value();
  call.gemm.b.random_bits = rbits_b.has_value();
  VerifyGemmCall::Resolved r = call.resolve();
  check_gemm_shapes({"a", shape_of(a)}, {"b", shape_of(b)});
  const std::size_t m = a.shape(0), n = b.shape(0), k = a.shape(1);
  check_output_shape({"c", shape_of(c)}, m, n);
  const auto bits_a = attach_random_bits(random_bits_array(rbits_a, "rbits_a"), shape_of(a), r.recipe.sr_bits, r.request.a);
  const auto bits_b = attach_random_bits(random_bits_array(rbits_b, "rbits_b"), shape_of(b), r.recipe.sr_bits, r.request.b);
  GemmVerifyReport rep;
  {
    nb::gil_scoped_release release;
    rep = verify_gemm(r.recipe, r.request, span_of(a), span_of(b), m, n, k, span_of(c));
  }
  const bool ok = rep.auto_mode ? !rep.explained_by.empty() : rep.bit_exact();
  return {in_python_terms(to_json(rep)), in_python_terms(to_text(rep)), ok};
}

}  // namespace

NB_MODULE(_fp4sim, m) {
  m.doc() = "fp4sim: bit-exact emulator of FP4 (E2M1) block-scaled formats, recipes and GEMM datapaths";
  m.attr("__version__") = FP4SIM_VERSION;  // project()'s VERSION (CMakeLists.txt), as `fp4sim --version` prints it
  // The library's errors as fp4sim.UsageError / fp4sim.DataError, their message in Python's terms.
  // (the module holds the two types for as long as the translator can run)
  static PyObject* usage_error = nb::exception<fp4sim::UsageError>(m, "UsageError", PyExc_ValueError).ptr();
  static PyObject* data_error = nb::exception<fp4sim::DataError>(m, "DataError", PyExc_ValueError).ptr();
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const fp4sim::UsageError& e) {
      PyErr_SetString(usage_error, in_python_terms(e.keyed()).c_str());
    } catch (const fp4sim::DataError& e) {
      PyErr_SetString(data_error, in_python_terms(e.keyed()).c_str());
    }
  });

  m.def("formats", &formats_list, "Every known number format (the fields of `fp4sim formats --json`).");
  m.def(
      "canonical_format",
      [](const std::string& text, const std::string& what) { return format_name(format_argument(text, what)); },
      "text"_a, "what"_a,
      "fp4sim's name of the format a preset, descriptor or ml_dtypes/MLIR/PyTorch name means (the parser of "
      "format argument of convert); UsageError, saying why, for anything else.");
  m.def("recipes", [] {
    std::vector<std::string> names;
    for (const Recipe& preset : recipe_presets()) names.push_back(preset.name);
    return names;
  });
  m.def("datapaths", [] {
    std::vector<std::string> names;
    for (const Datapath* d : datapath_presets()) names.emplace_back(d->name);
    return names;
  });
  m.def(
      "gpu_kernels",
      [] {
        nb::list rows;
        for (const gpu::GemmKernel& k : gpu::gemm_kernels()) {
          nb::dict row;
          row["name"] = std::string(k.name);
          row["datapath"] = std::string(k.golden->name);
          row["k_multiple"] = k.k_multiple;
          row["workspace_k_align"] = k.workspace_k_align;
          rows.append(row);
        }
        return rows;
      },
      "The GEMM kernels of the GPU build (the table of fp4sim/emu/gemm_kernels.hpp, present in every build): "
      "name, the golden datapath it equals, the K multiple it needs, and the K alignment of its two BF16 "
      "workspaces (0: none).");
  m.def(
      "_binary32",
      [](const DoubleIn& x, const std::string& what) {
        std::vector<std::size_t> shape(x.ndim());
        for (std::size_t d = 0; d < shape.size(); ++d) shape[d] = x.shape(d);
        return to_numpy(binary32_values({x.data(), x.size()}, what), shape);
      },
      "x"_a.noconvert(), "what"_a, "float64 values as float32, each a binary32 value (the CLI's rule for .npy inputs).");
  m.def(
      "_bfloat16_bits",
      [](const nb::ndarray<nb::ro, nb::device::cpu>& x, nb::handle owner) -> nb::object {
        constexpr nb::dlpack::dtype bfloat16{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
        if (x.dtype() != bfloat16) return nb::none();
        std::vector<std::size_t> shape(x.ndim());
        std::vector<std::int64_t> strides(x.ndim());
        for (std::size_t d = 0; d < shape.size(); ++d) {
          shape[d] = x.shape(d);
          strides[d] = x.stride(d);
        }
        return nb::cast(nb::ndarray<nb::numpy, const std::uint16_t>(x.data(), shape.size(), shape.data(), owner,
                                                                    strides.data()));
      },
      "x"_a.noconvert(), "owner"_a,
      "The bits of a bfloat16 CPU tensor given through DLPack (NumPy's from_dlpack has no bfloat16) as a uint16 "
      "view of the same memory, kept alive by `owner`; None for any other dtype.");
  m.def("_address", [](const FloatIn& x) { return reinterpret_cast<std::uintptr_t>(x.data()); }, "x"_a.noconvert(),
        "The address the extension reads a float32 array from (tests prove zero-copy with it).");

  m.def("convert", &convert_float32_py, "x"_a.noconvert(), "format"_a, "rounding"_a, "sr_bits"_a, "seed"_a,
        "rbits"_a.none(), "saturate"_a.none(), "specials"_a);
  m.def("convert", &convert_py, "x"_a.noconvert(), "format"_a, "rounding"_a, "sr_bits"_a, "seed"_a, "rbits"_a.none(),
        "saturate"_a.none(), "specials"_a);
  m.def("decode", &decode_codes<std::uint8_t>, "codes"_a.noconvert(), "format"_a);
  m.def("decode", &decode_codes<std::uint16_t>, "codes"_a.noconvert(), "format"_a);
  m.def("decode", &decode_codes<std::uint32_t>, "codes"_a.noconvert(), "format"_a);

  nb::class_<QuantizedTensor>(m, "QuantizedTensor")
      .def_ro("rows", &QuantizedTensor::rows)
      .def_ro("cols", &QuantizedTensor::cols)
      .def_ro("scale_rows", &QuantizedTensor::scale_rows)
      .def_ro("scale_cols", &QuantizedTensor::scale_cols)
      .def_ro("block_rows", &QuantizedTensor::block_rows)
      .def_ro("block_cols", &QuantizedTensor::block_cols)
      .def_ro("recipe", &QuantizedTensor::recipe)
      .def_ro("tensor_amax", &QuantizedTensor::tensor_amax)
      .def_ro("tensor_scaled", &QuantizedTensor::tensor_scaled)
      .def_ro("global_encode_scale", &QuantizedTensor::global_encode_scale)
      .def_ro("global_decode_scale", &QuantizedTensor::global_decode_scale)
      .def_ro("row_amax", &QuantizedTensor::row_amax)
      .def_ro("target", &QuantizedTensor::target)
      .def_ro("seed", &QuantizedTensor::seed)
      .def_prop_ro("element_format", [](const QuantizedTensor& q) { return format_name(q.element); })
      .def_prop_ro("scale_format", [](const QuantizedTensor& q) { return format_name(q.scale); })
      .def_prop_ro("rounding", [](const QuantizedTensor& q) { return std::string(name_of(q.spec.rounding)); })
      .def_prop_ro("rht", [](const QuantizedTensor& q) { return q.spec.rht; })
      .def_prop_ro("dequantize_order", [](const QuantizedTensor& q) { return std::string(name_of(q.dequantize_order)); })
      .def_prop_ro(
          "codes", [](const QuantizedTensor& q) { return view(q.codes, q.rows, q.code_cols()); },
          nb::rv_policy::reference_internal, "packed codes [rows, ceil(cols/2)], element 2j in the low nibble (read-only view)")
      .def_prop_ro(
          "scales", [](const QuantizedTensor& q) { return view(q.scales, q.scale_rows, q.scale_cols); },
          nb::rv_policy::reference_internal, "block-scale codes, row-major over the block grid (read-only view)")
      .def_prop_ro("counts", [](const QuantizedTensor& q) {
        nb::dict d;
        d["elements"] = q.counts.elements;
        d["nonzero"] = q.counts.nonzero;
        d["nan"] = q.counts.nan;
        d["inf"] = q.counts.inf;
        d["blocks"] = q.counts.blocks;
        d["zero_blocks"] = q.counts.zero_blocks;
        d["scale_saturated"] = q.counts.scale_saturated;
        d["scale_saturated_rounding"] = q.counts.scale_saturated_rounding;
        d["scale_underflow"] = q.counts.scale_underflow;
        d["scale_repaired"] = q.counts.scale_repaired;
        d["saturated"] = q.counts.saturated;
        return d;
      });

  m.def("quantize", &quantize_py, "x"_a.noconvert(), "recipe"_a, "overrides"_a, "role"_a, "amax_ref"_a.none(), "seed"_a,
        "rbits"_a.none());
  m.def("dequantize", &dequantize_py, "q"_a);
  m.def("operand_info", &operand_info_py, "recipe"_a, "overrides"_a, "role"_a);
  m.def("dequantize_raw", &dequantize_raw_py, "codes"_a.noconvert(), "scales"_a.noconvert(), "rows"_a, "cols"_a,
        "recipe"_a, "overrides"_a, "role"_a, "layout"_a, "nibbles"_a, "tensor_scale"_a.none(), "tensor_scale_kind"_a);

  m.def("gemm", &gemm_py, "a"_a.noconvert(), "b"_a.noconvert(), "recipe"_a, "overrides"_a, "args"_a,
        "rbits_a"_a.none(), "rbits_b"_a.none());

  // The same calls through plans (python/plans.hpp): what fp4sim.torch's CPU operators run.
  python::register_plans(m);
  m.def("plan_quantize", &plan_quantize_py, "plan"_a, "x"_a.noconvert(), "amax_ref"_a.none(), "seed"_a,
        "rbits"_a.none());
  m.def("plan_quantized", &plan_quantized_py, "plan"_a, "codes"_a.noconvert(), "scales"_a.noconvert(), "rows"_a,
        "cols"_a, "tensor_amax"_a, "encode"_a, "decode"_a, "row_amax"_a = std::vector<float>{});
  m.def("plan_gemm_quantized", &plan_gemm_quantized_py, "plan"_a, "a"_a, "b"_a, "bf16_out"_a);
  m.def("plan_gemm", &plan_gemm_py, "plan"_a, "a"_a.noconvert(), "b"_a.noconvert(), "seed"_a, "amax_ref_a"_a.none(),
        "amax_ref_b"_a.none(), "rbits_a"_a.none(), "rbits_b"_a.none(), "bf16_out"_a);
#if defined(FP4SIM_PYTHON_CUDA)
  python::register_cuda_ops(m);
#endif
  python::register_stats_ops(m);
#if defined(FP4SIM_PYTHON_ANALYSIS)
  python::register_analysis_ops(m);
#endif
  m.def("mma", &mma_py, "a"_a.noconvert(), "b"_a.noconvert(), "c"_a.none(), "datapath"_a.none(),
        "input_format"_a.none(), "a_format"_a.none(), "b_format"_a.none());
  m.def("verify_quantize", &verify_quantize_py, "x"_a.noconvert(), "codes"_a.noconvert(), "scales"_a.noconvert(),
        "recipe"_a, "overrides"_a, "role"_a, "layout"_a, "nibbles"_a, "tensor_scale"_a.none(), "tensor_scale_kind"_a,
        "amax_ref"_a.none(), "seed"_a, "rbits"_a.none(), "max_explained"_a);
  m.def("verify_gemm", &verify_gemm_py, "a"_a.noconvert(), "b"_a.noconvert(), "c"_a.noconvert(), "recipe"_a,
        "overrides"_a, "args"_a, "rbits_a"_a.none(), "rbits_b"_a.none(), "worst"_a);

  m.def(
      "scales_to_layout",
      [](const BytesIn& scales, std::size_t rows, std::size_t cols, int block_rows, int block_cols, const std::string& layout) {
        const ScaleGrid g = scale_grid(rows, cols, block_rows, block_cols);
        const auto l = parse_name_or_throw<ScaleLayout>(layout, "{layout}");
        return to_numpy(scales_to_layout(span_of(scales), g, l), ScaleStorage::canonical_shape(l, g));
      },
      "scales"_a.noconvert(), "rows"_a, "cols"_a, "block_rows"_a, "block_cols"_a, "layout"_a);
  m.def(
      "scales_from_layout",
      [](const BytesIn& stored, std::size_t rows, std::size_t cols, int block_rows, int block_cols, const std::string& layout) {
        const ScaleGrid g = scale_grid(rows, cols, block_rows, block_cols);
        return to_numpy(scales_from_layout(span_of(stored), shape_of(stored), g,
                                           parse_name_or_throw<ScaleLayout>(layout, "{layout}")),
                        {g.scale_rows(), g.scale_cols()});
      },
      "stored"_a.noconvert(), "rows"_a, "cols"_a, "block_rows"_a, "block_cols"_a, "layout"_a);
  m.def(
      "codes_to_order",
      [](const BytesIn& codes, std::size_t rows, std::size_t cols, const std::string& nibbles) {
        const auto order = parse_name_or_throw<NibbleOrder>(nibbles, "{nibbles}");
        return to_numpy(codes_to_order(span_of(codes), rows, cols, order), codes_shape(order, rows, cols));
      },
      "codes"_a.noconvert(), "rows"_a, "cols"_a, "nibbles"_a);
  m.def(
      "codes_from_order",
      [](const BytesIn& stored, std::size_t rows, std::size_t cols, const std::string& nibbles) {
        return to_numpy(codes_from_order(span_of(stored), rows, cols, parse_name_or_throw<NibbleOrder>(nibbles, "{nibbles}")),
                        codes_shape(NibbleOrder::low_first, rows, cols));
      },
      "stored"_a.noconvert(), "rows"_a, "cols"_a, "nibbles"_a);
}
