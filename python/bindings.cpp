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

#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../src/cli/recipe_options.hpp"
#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/verify/verify.hpp"

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

// Recipe overrides as keyword arguments: the CLI's flags with underscores (block=32, two_d=True, ...).
cli::RecipeOverrides overrides_from(const std::string& recipe, const nb::dict& d) {
  cli::RecipeOverrides o;
  o.recipe = recipe;
  for (auto [key, value] : d) {
    const std::string k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    if (k == "block") o.block = nb::cast<int>(value);
    else if (k == "two_d") o.two_d = nb::cast<bool>(value);
    else if (k == "scale_format") o.scale_format = nb::cast<std::string>(value);
    else if (k == "element_format") o.element_format = nb::cast<std::string>(value);
    else if (k == "target") o.target = nb::cast<float>(value);
    else if (k == "tensor_scale") o.tensor_scale = nb::cast<std::string>(value);
    else if (k == "scale_rule") o.scale_rule = nb::cast<std::string>(value);
    else if (k == "zero_scale") o.zero_scale = nb::cast<std::string>(value);
    else if (k == "dequantize_order") o.dequantize_order = nb::cast<std::string>(value);
    else if (k == "sr_bits") o.sr_bits = nb::cast<int>(value);
    else if (k == "rht") o.rht = nb::cast<bool>(value);
    else if (k == "rounding") {
      const std::string name = nb::cast<std::string>(value);
      const auto r = parse_rounding(name);
      if (!r) throw UsageError("--rounding: unknown rounding '" + name + "'");
      o.rounding = *r;
    } else {
      throw UsageError("unknown recipe override '" + k +
                       "' (known: block, two_d, scale_format, element_format, target, tensor_scale, scale_rule, "
                       "zero_scale, dequantize_order, rounding, sr_bits, rht)");
    }
  }
  if (o.sr_bits && (*o.sr_bits < 1 || *o.sr_bits > 16)) throw UsageError("--sr-bits: must be between 1 and 16");
  return o;
}

Role role_from(const std::string& name) {
  const auto r = parse_role(name);
  if (!r) throw UsageError("--role: expected activation, weight or grad_output, got '" + name + "'");
  return *r;
}

std::vector<std::uint32_t> checked_rbits(const std::optional<WordsIn>& rbits, std::size_t count, int sr_bits,
                                         const char* what) {
  if (!rbits) return {};
  if (rbits->size() != count) {
    throw DataError(std::string(what) + ": " + std::to_string(rbits->size()) + " values for a tensor of " +
                    std::to_string(count));
  }
  std::vector<std::uint32_t> bits(rbits->data(), rbits->data() + rbits->size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i] >> sr_bits) {
      throw DataError(std::string(what) + ": value " + std::to_string(bits[i]) + " at index " + std::to_string(i) +
                      " does not fit in " + std::to_string(sr_bits) + " random bits");
    }
  }
  return bits;
}

void check_amax(const std::optional<float>& amax, const char* flag) {
  if (amax && !(*amax >= 0.0f && std::isfinite(*amax))) {
    throw UsageError(std::string(flag) + " must be a finite non-negative number");
  }
}

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
    d["specials"] = std::string(specials_name(f.specials));
    d["source"] = std::string(preset.description);
    out.append(d);
  }
  return out;
}

Format format_arg(const std::string& name) {
  if (auto f = parse_format(name)) return *f;
  std::string known;
  for (const auto& preset : format_presets()) known += std::string(known.empty() ? "" : " ") + std::string(preset.name);
  throw UsageError("--format: unknown format '" + name + "' (known: " + known + ", or eXmY / ueXmY[bN][fn|fin])");
}

nb::object convert(const DoubleIn& x, const std::string& format_name_, const std::string& rounding, int sr_bits,
                   std::uint64_t seed, const std::optional<WordsIn>& rbits, std::optional<bool> saturate,
                   const std::string& specials) {
  const Format format = format_arg(format_name_);
  EncodeOptions enc;
  const auto r = parse_rounding(rounding);
  if (!r) throw UsageError("--rounding: unknown rounding '" + rounding + "'");
  enc.rounding = *r;
  if (sr_bits < 1 || sr_bits > 16) throw UsageError("--sr-bits: must be between 1 and 16");
  enc.sr_bits = sr_bits;
  enc.saturate = saturate.value_or(default_saturate(format));
  if (specials != "hardware" && specials != "te-python") throw UsageError("--specials: expected hardware or te-python");
  enc.convention = specials == "te-python" ? SpecialConvention::te_python : SpecialConvention::hardware;
  const std::span<const double> values(x.data(), x.size());
  std::vector<std::uint32_t> random;
  if (is_stochastic(enc.rounding)) {
    if (rbits) {
      random = checked_rbits(rbits, values.size(), sr_bits, "rbits");
    } else {
      random.resize(values.size());
      for (std::size_t i = 0; i < random.size(); ++i) random[i] = random_bits(seed, 0, i, sr_bits);
    }
  } else if (rbits) {
    throw UsageError("--rbits needs a stochastic --rounding");
  }
  std::vector<std::uint32_t> codes(values.size());
  std::optional<std::size_t> bad;
  {
    nb::gil_scoped_release release;
    bad = encode_all(format, enc, values, random, codes);
  }
  if (bad) {
    const double v = values[*bad];
    const std::string why = std::isnan(v)                              ? "NaN and the format has no NaN (try saturate=True)"
                            : (std::signbit(v) && !format.is_signed)    ? "negative value in an unsigned format"
                            : format.has_zero() ? "out of range and saturate=False (the format has no Inf)"
                                                : "zero or out of range and saturate=False";
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", v);
    throw DataError("x: element " + std::to_string(*bad) + " = " + text + " cannot be represented in " +
                    format_name_ + ": " + why);
  }
  const auto shape = shape_of(x);
  const int width = format.storage_bits() <= 8 ? 1 : format.storage_bits() <= 16 ? 2 : 4;
  if (width == 1) return nb::cast(to_numpy(std::vector<std::uint8_t>(codes.begin(), codes.end()), shape));
  if (width == 2) return nb::cast(to_numpy(std::vector<std::uint16_t>(codes.begin(), codes.end()), shape));
  return nb::cast(to_numpy(std::move(codes), shape));
}

nb::ndarray<nb::numpy, double> decode_codes(const WordsIn& codes, const std::string& format_name_) {
  const Format format = format_arg(format_name_);
  std::vector<double> out(codes.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (codes.data()[i] >= format.code_count()) {
      throw DataError("codes: element " + std::to_string(i) + " = " + std::to_string(codes.data()[i]) +
                      " is not a " + format_name_ + " code");
    }
    out[i] = decode_to_double(format, codes.data()[i]);
  }
  return to_numpy(std::move(out), shape_of(codes));
}

QuantizedTensor quantize_py(const FloatIn& x, const std::string& recipe_name, const nb::dict& overrides,
                            const std::string& role, std::optional<float> amax_ref, std::uint64_t seed,
                            const std::optional<WordsIn>& rbits) {
  const cli::RecipeOverrides o = overrides_from(recipe_name, overrides);
  const Recipe recipe = o.resolve();
  QuantizeRequest request;
  request.spec = o.apply(operand_for_role(recipe, role_from(role)));
  check_amax(amax_ref, "--amax-ref");
  request.amax_ref = amax_ref;
  request.random.seed = seed;
  const auto [rows, cols] = rows_cols(x, "x");
  if (rbits && !is_stochastic(request.spec.rounding)) throw UsageError("--rbits needs a stochastic rounding for this role");
  const std::vector<std::uint32_t> bits = checked_rbits(rbits, x.size(), recipe.sr_bits, "rbits");
  request.random.explicit_bits = bits;
  nb::gil_scoped_release release;
  return quantize(recipe, request, span_of(x), rows, cols);
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

struct GemmArgs {
  std::string gemm = "fprop", datapath, inner, out_dtype = "f32";
  bool snap = true;
  std::optional<float> amax_ref_a, amax_ref_b, target_a, target_b;
  std::uint64_t seed = 0;
};

// The operands' quantize requests of one GEMM, as `fp4sim gemm` forms them.
void operand_requests(const Recipe& recipe, const cli::RecipeOverrides& o, const GemmArgs& g, Gemm which,
                      QuantizeRequest& ra, QuantizeRequest& rb) {
  const GemmOperands ops = operands_for(recipe, which);
  ra.spec = o.apply(ops.a);
  rb.spec = o.apply(ops.b);
  if (g.target_a) ra.spec.target = *g.target_a;
  if (g.target_b) rb.spec.target = *g.target_b;
  check_amax(g.amax_ref_a, "--amax-ref-a/-b");
  check_amax(g.amax_ref_b, "--amax-ref-a/-b");
  ra.amax_ref = g.amax_ref_a;
  rb.amax_ref = g.amax_ref_b;
  ra.random.seed = rb.random.seed = g.seed;
  ra.random.stream = 0;
  rb.random.stream = 1;
}

// gemm=, datapath=, inner=, snap=, out_dtype=, amax_ref_a/b=, target_a/b=, seed= (None: the default).
GemmArgs gemm_args_from(const nb::dict& d) {
  GemmArgs g;
  for (auto [key, value] : d) {
    const std::string k = nb::cast<std::string>(key);
    if (value.is_none()) continue;
    if (k == "gemm") g.gemm = nb::cast<std::string>(value);
    else if (k == "datapath") g.datapath = nb::cast<std::string>(value);
    else if (k == "inner") g.inner = nb::cast<std::string>(value);
    else if (k == "out_dtype") g.out_dtype = nb::cast<std::string>(value);
    else if (k == "snap") g.snap = nb::cast<bool>(value);
    else if (k == "amax_ref_a") g.amax_ref_a = nb::cast<float>(value);
    else if (k == "amax_ref_b") g.amax_ref_b = nb::cast<float>(value);
    else if (k == "target_a") g.target_a = nb::cast<float>(value);
    else if (k == "target_b") g.target_b = nb::cast<float>(value);
    else if (k == "seed") g.seed = nb::cast<std::uint64_t>(value);
    else throw UsageError("unknown GEMM option '" + k + "'");
  }
  return g;
}

Gemm gemm_from(const std::string& name) {
  const auto g = parse_gemm(name);
  if (!g) throw UsageError("--gemm: expected fprop, dgrad or wgrad, got '" + name + "'");
  return *g;
}

void check_out_dtype(const std::string& d) {
  if (d != "f32" && d != "bf16") throw UsageError("--out-dtype: expected f32 or bf16, got '" + d + "'");
}

nb::ndarray<nb::numpy, float> gemm_py(const FloatIn& a, const FloatIn& b, const std::string& recipe_name,
                                      const nb::dict& overrides, const nb::dict& args, const std::optional<WordsIn>& rbits_a,
                                      const std::optional<WordsIn>& rbits_b) {
  const GemmArgs g = gemm_args_from(args);
  const cli::RecipeOverrides o = overrides_from(recipe_name, overrides);
  const Recipe recipe = o.resolve();
  check_out_dtype(g.out_dtype);
  QuantizeRequest ra, rb;
  operand_requests(recipe, o, g, gemm_from(g.gemm), ra, rb);
  if (a.ndim() != 2 || b.ndim() != 2) throw DataError("gemm: A and B must be 2-D arrays [rows, K]");
  if (a.shape(1) != b.shape(1))
    throw DataError("gemm: A is [" + std::to_string(a.shape(0)) + ", " + std::to_string(a.shape(1)) + "] and B is [" +
                    std::to_string(b.shape(0)) + ", " + std::to_string(b.shape(1)) + "]: C = A·Bᵀ needs the same K (columns)");
  if (rbits_a && !is_stochastic(ra.spec.rounding)) throw UsageError("--rbits-a: operand A is not stochastically rounded in this GEMM");
  if (rbits_b && !is_stochastic(rb.spec.rounding)) throw UsageError("--rbits-b: operand B is not stochastically rounded in this GEMM");
  const auto bits_a = checked_rbits(rbits_a, a.size(), recipe.sr_bits, "rbits_a");
  const auto bits_b = checked_rbits(rbits_b, b.size(), recipe.sr_bits, "rbits_b");
  ra.random.explicit_bits = bits_a;
  rb.random.explicit_bits = bits_b;
  GemmRequest request;
  request.datapath = g.datapath;
  request.inner = g.inner;
  request.snap = g.snap;
  request.bf16_output = g.out_dtype == "bf16";
  std::vector<float> c;
  const std::size_t m = a.shape(0), n = b.shape(0), k = a.shape(1);
  {
    nb::gil_scoped_release release;
    const QuantizedTensor qa = quantize(recipe, ra, span_of(a), m, k);
    const QuantizedTensor qb = quantize(recipe, rb, span_of(b), n, k);
    c = gemm(recipe, qa, qb, request);
  }
  return to_numpy(std::move(c), {m, n});
}

nb::ndarray<nb::numpy, float> mma_py(const DoubleIn& a, const DoubleIn& b, const std::optional<DoubleIn>& c,
                                     const std::string& datapath, const std::string& input_format_name) {
  const Datapath* dp = find_datapath(datapath);
  if (!dp) throw UsageError("--datapath: unknown datapath '" + datapath + "' (known: " + datapath_names() + ")");
  if (dp->kind != DatapathKind::tfdpa) {
    throw UsageError("--datapath " + datapath + " is a block-scaled GEMM datapath; mma takes a tensor-core row "
                     "(block-scaled instructions are `fp4sim gemm --datapath sm100-mxf4nvf4`)");
  }
  std::string accepted;
  for (const auto& in : dp->inputs) accepted += (accepted.empty() ? "" : ", ") + std::string(in.format);
  const auto spec = find_input(*dp, input_format_name);
  if (!spec) throw UsageError("--input-format " + input_format_name + ": " + datapath + " takes " + accepted);
  const Format input = *input_format(input_format_name);
  if (a.ndim() != 2 || b.ndim() != 2) throw DataError("mma: A and B must be 2-D arrays");
  const std::size_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
  if (b.shape(0) != k)
    throw DataError("mma: A is [" + std::to_string(m) + ", " + std::to_string(k) + "] but B is [" +
                    std::to_string(b.shape(0)) + ", " + std::to_string(n) + "]: B must be [K, N]");
  if (k == 0 || k % static_cast<std::size_t>(spec->instruction_k) != 0)
    throw DataError("mma: K = " + std::to_string(k) + " is not a multiple of the instruction's K = " +
                    std::to_string(spec->instruction_k) + " for " + input_format_name + " on " + datapath);
  auto position = [](std::size_t i, std::size_t cols) {
    return "[" + std::to_string(i / cols) + ", " + std::to_string(i % cols) + "]";
  };
  const InputCodes ca = input_codes(input, span_of(a));
  if (ca.first_unrepresentable)
    throw DataError("A: element " + position(*ca.first_unrepresentable, k) + " is not exactly representable in " + input_format_name);
  const InputCodes cb = input_codes(input, span_of(b));
  if (cb.first_unrepresentable)
    throw DataError("B: element " + position(*cb.first_unrepresentable, n) + " is not exactly representable in " + input_format_name);
  std::vector<std::uint32_t> c_bits;
  if (c) {
    if (c->ndim() != 2 || c->shape(0) != m || c->shape(1) != n)
      throw DataError("C: C must be [" + std::to_string(m) + ", " + std::to_string(n) + "]");
    const Format acc = dp->fused.out == formats::fp16 ? formats::fp16 : formats::fp32;
    for (std::size_t i = 0; i < c->size(); ++i) {
      const double v = c->data()[i];
      const auto f = static_cast<float>(v);
      if (static_cast<double>(f) != v && !std::isnan(v)) throw DataError("C: element " + position(i, n) + " is not a binary32 value");
      if (acc == formats::fp16 && !std::isnan(v)) {
        const Encoded h = encode(formats::fp16, v, EncodeOptions{Rounding::rne, false});
        if (h.flags & (flag::inexact | flag::overflow))
          throw DataError("C: element " + position(i, n) + " is not fp16-representable (" + datapath + " accumulates in fp16)");
      }
      c_bits.push_back(std::bit_cast<std::uint32_t>(f));
    }
  }
  std::vector<std::uint32_t> d;
  {
    nb::gil_scoped_release release;
    d = mma(*dp, input, ca.codes, cb.codes, c_bits, m, n, k);
  }
  std::vector<float> out(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) out[i] = std::bit_cast<float>(d[i]);
  return to_numpy(std::move(out), {m, n});
}

std::tuple<std::string, std::string, bool> verify_quantize_py(
    const FloatIn& x, const BytesIn& codes, const BytesIn& scales, const std::string& recipe_name, nb::dict overrides,
    const std::string& role, const std::string& layout, const std::string& nibbles, std::optional<float> tensor_scale,
    const std::string& kind, std::optional<float> amax_ref, std::uint64_t seed, const std::optional<WordsIn>& rbits,
    std::size_t max_explained) {
  const cli::RecipeOverrides o = overrides_from(recipe_name, overrides);
  const Recipe recipe = o.resolve();
  const Role r = role_from(role);
  const auto l = parse_layout(layout);
  if (!l) throw UsageError("--layout: expected rowmajor, te-rowrep or swizzled-128x4, got '" + layout + "'");
  const auto nib = parse_nibble_order(nibbles);
  if (!nib) throw UsageError("--nibbles: expected low-first, high-first or unpacked, got '" + nibbles + "'");
  const auto k = parse_tensor_scale_kind(kind);
  if (!k) throw UsageError("--tensor-scale-kind: expected any, encode, decode or amax, got '" + kind + "'");
  check_amax(amax_ref, "--amax-ref");
  VerifyQuantizeRequest request;
  request.role = r;
  request.quantize.spec = o.apply(operand_for_role(recipe, r));
  request.quantize.amax_ref = amax_ref;
  request.quantize.random.seed = seed;
  request.max_explained = max_explained;
  if (rbits && !is_stochastic(request.quantize.spec.rounding)) throw UsageError("--rbits needs a stochastic rounding for this role");
  const auto bits = checked_rbits(rbits, x.size(), recipe.sr_bits, "rbits");
  request.quantize.random.explicit_bits = bits;
  TheirQuantized theirs;
  theirs.codes = span_of(codes);
  theirs.codes_shape = shape_of(codes);
  theirs.scales = span_of(scales);
  theirs.scales_shape = shape_of(scales);
  theirs.layout = *l;
  theirs.nibbles = *nib;
  theirs.tensor_scale = tensor_scale;
  theirs.tensor_scale_kind = *k;
  const auto [rows, cols] = rows_cols(x, "x");
  QuantizeVerifyReport rep;
  {
    nb::gil_scoped_release release;
    rep = verify_quantize(recipe, request, span_of(x), rows, cols, theirs);
  }
  return {to_json(rep), to_text(rep), rep.bit_exact()};
}

std::tuple<std::string, std::string, bool> verify_gemm_py(const FloatIn& a, const FloatIn& b, const FloatIn& c,
                                                          const std::string& recipe_name, const nb::dict& overrides,
                                                          const nb::dict& args, const std::optional<WordsIn>& rbits_a,
                                                          const std::optional<WordsIn>& rbits_b, std::size_t worst) {
  const GemmArgs g = gemm_args_from(args);
  const cli::RecipeOverrides o = overrides_from(recipe_name, overrides);
  const Recipe recipe = o.resolve();
  check_out_dtype(g.out_dtype);
  VerifyGemmRequest request;
  request.gemm = gemm_from(g.gemm);
  operand_requests(recipe, o, g, request.gemm, request.a, request.b);
  request.worst = worst;
  request.auto_datapath = g.datapath == "auto";
  request.datapath.datapath = request.auto_datapath ? "" : g.datapath;
  request.datapath.inner = g.inner;
  request.datapath.snap = g.snap;
  request.datapath.bf16_output = g.out_dtype == "bf16";
  if (a.ndim() != 2 || b.ndim() != 2) throw DataError("verify gemm: A and B must be 2-D arrays [rows, K]");
  if (a.shape(1) != b.shape(1)) throw DataError("verify gemm: A and B differ in K (columns)");
  const std::size_t m = a.shape(0), n = b.shape(0), k = a.shape(1);
  if (c.ndim() != 2 || c.shape(0) != m || c.shape(1) != n)
    throw DataError("c: shape " + shape_text(shape_of(c)) + ", but C = A·Bᵀ is [" + std::to_string(m) + ", " +
                    std::to_string(n) + "]");
  if (rbits_a && !is_stochastic(request.a.spec.rounding)) throw UsageError("--rbits-a: operand A is not stochastically rounded in this GEMM");
  if (rbits_b && !is_stochastic(request.b.spec.rounding)) throw UsageError("--rbits-b: operand B is not stochastically rounded in this GEMM");
  const auto bits_a = checked_rbits(rbits_a, a.size(), recipe.sr_bits, "rbits_a");
  const auto bits_b = checked_rbits(rbits_b, b.size(), recipe.sr_bits, "rbits_b");
  request.a.random.explicit_bits = bits_a;
  request.b.random.explicit_bits = bits_b;
  GemmVerifyReport rep;
  {
    nb::gil_scoped_release release;
    rep = verify_gemm(recipe, request, span_of(a), span_of(b), m, n, k, span_of(c));
  }
  const bool ok = rep.auto_mode ? !rep.explained_by.empty() : rep.bit_exact();
  return {to_json(rep), to_text(rep), ok};
}

ScaleGrid grid_of(std::size_t rows, std::size_t cols, int block_rows, int block_cols) {
  if (block_rows < 1 || block_cols < 1) throw UsageError("block_rows and block_cols must be positive");
  return ScaleGrid{rows, cols, block_rows, block_cols};
}

ScaleLayout layout_arg(const std::string& layout) {
  const auto l = parse_layout(layout);
  if (!l) throw UsageError("--layout: expected rowmajor, te-rowrep or swizzled-128x4, got '" + layout + "'");
  return *l;
}

NibbleOrder nibbles_arg(const std::string& nibbles) {
  const auto n = parse_nibble_order(nibbles);
  if (!n) throw UsageError("--nibbles: expected low-first, high-first or unpacked, got '" + nibbles + "'");
  return *n;
}

}  // namespace

NB_MODULE(_fp4sim, m) {
  m.doc() = "fp4sim: bit-exact emulator of FP4 (E2M1) block-scaled formats, recipes and GEMM datapaths";
  nb::exception<fp4sim::UsageError>(m, "UsageError", PyExc_ValueError);
  nb::exception<fp4sim::DataError>(m, "DataError", PyExc_ValueError);

  m.def("formats", &formats_list, "Every known number format (the fields of `fp4sim formats --json`).");
  m.def("recipes", [] {
    std::vector<std::string> names;
    for (const auto& p : recipe_presets()) names.emplace_back(p.name);
    return names;
  });
  m.def("datapaths", [] {
    std::vector<std::string> names;
    for (const auto& d : datapath_presets()) names.emplace_back(d.name);
    return names;
  });
  m.def("_address", [](const FloatIn& x) { return reinterpret_cast<std::uintptr_t>(x.data()); }, "x"_a.noconvert(),
        "The address the extension reads a float32 array from (tests prove zero-copy with it).");

  m.def("convert", &convert, "x"_a.noconvert(), "format"_a, "rounding"_a, "sr_bits"_a, "seed"_a, "rbits"_a.none(),
        "saturate"_a.none(), "specials"_a);
  m.def("decode", &decode_codes, "codes"_a.noconvert(), "format"_a);

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
      .def_ro("target", &QuantizedTensor::target)
      .def_ro("seed", &QuantizedTensor::seed)
      .def_prop_ro("element_format", [](const QuantizedTensor& q) { return format_name(q.element); })
      .def_prop_ro("scale_format", [](const QuantizedTensor& q) { return format_name(q.scale); })
      .def_prop_ro("rounding", [](const QuantizedTensor& q) { return std::string(rounding_name(q.spec.rounding)); })
      .def_prop_ro("rht", [](const QuantizedTensor& q) { return q.spec.rht; })
      .def_prop_ro("dequantize_order", [](const QuantizedTensor& q) { return std::string(dequantize_order_name(q.dequantize_order)); })
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
        d["scale_underflow"] = q.counts.scale_underflow;
        d["saturated"] = q.counts.saturated;
        return d;
      });

  m.def("quantize", &quantize_py, "x"_a.noconvert(), "recipe"_a, "overrides"_a, "role"_a, "amax_ref"_a.none(), "seed"_a,
        "rbits"_a.none());
  m.def("dequantize", &dequantize_py, "q"_a);

  m.def("gemm", &gemm_py, "a"_a.noconvert(), "b"_a.noconvert(), "recipe"_a, "overrides"_a, "args"_a,
        "rbits_a"_a.none(), "rbits_b"_a.none());
  m.def("mma", &mma_py, "a"_a.noconvert(), "b"_a.noconvert(), "c"_a.none(), "datapath"_a, "input_format"_a);
  m.def("verify_quantize", &verify_quantize_py, "x"_a.noconvert(), "codes"_a.noconvert(), "scales"_a.noconvert(),
        "recipe"_a, "overrides"_a, "role"_a, "layout"_a, "nibbles"_a, "tensor_scale"_a.none(), "tensor_scale_kind"_a,
        "amax_ref"_a.none(), "seed"_a, "rbits"_a.none(), "max_explained"_a);
  m.def("verify_gemm", &verify_gemm_py, "a"_a.noconvert(), "b"_a.noconvert(), "c"_a.noconvert(), "recipe"_a,
        "overrides"_a, "args"_a, "rbits_a"_a.none(), "rbits_b"_a.none(), "worst"_a);

  m.def(
      "scales_to_layout",
      [](const BytesIn& scales, std::size_t rows, std::size_t cols, int block_rows, int block_cols, const std::string& layout) {
        const ScaleGrid g = grid_of(rows, cols, block_rows, block_cols);
        const ScaleLayout l = layout_arg(layout);
        return to_numpy(scales_to_layout(span_of(scales), g, l), ScaleStorage::canonical_shape(l, g));
      },
      "scales"_a.noconvert(), "rows"_a, "cols"_a, "block_rows"_a, "block_cols"_a, "layout"_a);
  m.def(
      "scales_from_layout",
      [](const BytesIn& stored, std::size_t rows, std::size_t cols, int block_rows, int block_cols, const std::string& layout) {
        const ScaleGrid g = grid_of(rows, cols, block_rows, block_cols);
        return to_numpy(scales_from_layout(span_of(stored), shape_of(stored), g, layout_arg(layout)),
                        {g.scale_rows(), g.scale_cols()});
      },
      "stored"_a.noconvert(), "rows"_a, "cols"_a, "block_rows"_a, "block_cols"_a, "layout"_a);
  m.def(
      "codes_to_order",
      [](const BytesIn& codes, std::size_t rows, std::size_t cols, const std::string& nibbles) {
        const NibbleOrder order = nibbles_arg(nibbles);
        return to_numpy(codes_to_order(span_of(codes), rows, cols, order), codes_shape(order, rows, cols));
      },
      "codes"_a.noconvert(), "rows"_a, "cols"_a, "nibbles"_a);
  m.def(
      "codes_from_order",
      [](const BytesIn& stored, std::size_t rows, std::size_t cols, const std::string& nibbles) {
        return to_numpy(codes_from_order(span_of(stored), rows, cols, nibbles_arg(nibbles)),
                        codes_shape(NibbleOrder::low_first, rows, cols));
      },
      "stored"_a.noconvert(), "rows"_a, "cols"_a, "nibbles"_a);
}
