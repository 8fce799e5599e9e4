// `fp4sim verify quantize|gemm` (docs/cli.md): the user's kernel output judged by the golden model.
//
// The tensor-scale flag: docs/cli.md gives `verify quantize` a `--tensor-scale V` (the user's FP32 tensor
// scale), while the recipe overrides shared with `quantize` use `--tensor-scale none|current|periodic:D`
// for the policy. Both meanings stay on the one flag, told apart by the value: a policy name is the
// override, a number (decimal or C99 hex float, e.g. 74.6666641 or 0x1.2aaaaap+6) is the user's value.
// The unambiguous spellings `--tensor-scale-value V` and `--tensor-scale-policy P` exist too; giving
// one meaning twice is a usage error.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/verify/verify.hpp"
#include "recipe_options.hpp"

namespace fp4sim::cli {

namespace {

struct VerifyQuantizeOptions {
  RecipeOverrides recipe;
  std::string role = "activation";
  std::optional<float> amax_ref;
  std::uint64_t seed = 0;
  std::string rbits, in, codes, scales;
  std::string tensor_scale_value, tensor_scale_policy, tensor_scale_kind = "any";
  std::string layout = "rowmajor", nibbles = "low-first";
  bool json = false;
  std::size_t max_explained = 10;
};

// A float flag value: the whole text must parse (strtof rounds a decimal to nearest even).
std::optional<float> parse_float(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

std::vector<std::uint8_t> read_bytes(const std::string& path, std::vector<std::size_t>* shape) {
  const npy::Array a = npy::read(path);
  if (a.dtype != npy::DType::u1) throw DataError(path + ": expected uint8 bytes, got " + npy::dtype_descr(a.dtype));
  *shape = a.shape;
  return a.bytes;
}

void run_verify_quantize(VerifyQuantizeOptions o) {
  // --tensor-scale: a policy name is the recipe override, a number the user's tensor scale value.
  if (!o.recipe.tensor_scale.empty()) {
    const std::string& t = o.recipe.tensor_scale;
    const bool policy = t == "none" || t == "current" || t.starts_with("periodic");
    if (!policy) {
      if (!parse_float(t)) {
        throw UsageError("--tensor-scale: expected none, current, periodic:D (the policy) or a number (your FP32 "
                         "tensor scale), got '" + t + "'");
      }
      if (!o.tensor_scale_value.empty()) throw UsageError("--tensor-scale V and --tensor-scale-value both give your tensor scale");
      o.tensor_scale_value = t;
      o.recipe.tensor_scale.clear();
    }
  }
  if (!o.tensor_scale_policy.empty()) {
    if (!o.recipe.tensor_scale.empty()) throw UsageError("--tensor-scale P and --tensor-scale-policy both set the policy");
    o.recipe.tensor_scale = o.tensor_scale_policy;
  }
  const Recipe recipe = o.recipe.resolve();
  const auto role = parse_role(o.role);
  if (!role) throw UsageError("--role: expected activation, weight or grad_output, got '" + o.role + "'");
  const auto layout = parse_layout(o.layout);
  if (!layout) throw UsageError("--layout: expected rowmajor, te-rowrep or swizzled-128x4, got '" + o.layout + "'");
  const auto nibbles = parse_nibble_order(o.nibbles);
  if (!nibbles) throw UsageError("--nibbles: expected low-first, high-first or unpacked, got '" + o.nibbles + "'");
  const auto kind = parse_tensor_scale_kind(o.tensor_scale_kind);
  if (!kind) throw UsageError("--tensor-scale-kind: expected any, encode, decode or amax, got '" + o.tensor_scale_kind + "'");
  if (o.amax_ref && !(*o.amax_ref >= 0.0f && std::isfinite(*o.amax_ref))) {
    throw UsageError("--amax-ref must be a finite non-negative number");
  }

  VerifyQuantizeRequest request;
  request.role = *role;
  request.quantize.spec = o.recipe.apply(operand_for_role(recipe, *role));
  request.quantize.amax_ref = o.amax_ref;
  request.quantize.random.seed = o.seed;
  request.max_explained = o.max_explained;

  TheirQuantized theirs;
  theirs.layout = *layout;
  theirs.nibbles = *nibbles;
  theirs.tensor_scale_kind = *kind;
  if (!o.tensor_scale_value.empty()) {
    const auto v = parse_float(o.tensor_scale_value);
    if (!v) throw UsageError("--tensor-scale-value: expected a number, got '" + o.tensor_scale_value + "'");
    theirs.tensor_scale = *v;
  }

  const npy::Array input = npy::read(o.in);
  const std::vector<float> x = npy::as_float32(input, o.in);
  std::vector<std::uint32_t> random;
  if (!o.rbits.empty()) {
    if (!is_stochastic(request.quantize.spec.rounding)) throw UsageError("--rbits needs a stochastic rounding for this role");
    const npy::Array r = npy::read(o.rbits);
    if (r.shape != input.shape) throw DataError(o.rbits + ": shape differs from " + o.in);
    random = npy::as_uint32(r, o.rbits);
    for (std::size_t i = 0; i < random.size(); ++i) {
      if (random[i] >> recipe.sr_bits) {
        throw DataError(o.rbits + ": value " + std::to_string(random[i]) + " at index " + std::to_string(i) +
                        " does not fit in " + std::to_string(recipe.sr_bits) + " random bits");
      }
    }
    request.quantize.random.explicit_bits = random;
  }
  const std::vector<std::uint8_t> codes = read_bytes(o.codes, &theirs.codes_shape);
  const std::vector<std::uint8_t> scales = read_bytes(o.scales, &theirs.scales_shape);
  theirs.codes = codes;
  theirs.scales = scales;

  QuantizeVerifyReport report;
  try {
    report = verify_quantize(recipe, request, x, input.rows(), input.cols(), theirs);
  } catch (const DataError& e) {
    // Name the file the shape came from.
    const std::string what = e.what();
    if (what.starts_with("codes:")) throw DataError(o.codes + ": " + what.substr(7));
    if (what.starts_with("scales:")) throw DataError(o.scales + ": " + what.substr(8));
    throw;
  }
  const std::string text = o.json ? to_json(report) : to_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (!report.bit_exact()) {
    throw Mismatch("verify quantize: " + std::to_string(report.mismatched_elements) + " element and " +
                   std::to_string(report.mismatched_scales) + " scale mismatch(es)" +
                   (report.tensor_scale_mismatch ? ", tensor scale differs" : "") + " (exit 4)");
  }
}

void setup_verify_quantize(CLI::App& app) {
  auto o = std::make_shared<VerifyQuantizeOptions>();
  o->recipe.add_to(app);
  app.get_option("--tensor-scale")
      ->description("a number: your FP32 tensor scale, compared with the golden one (see --tensor-scale-kind); "
                    "none, current or periodic:D: the tensor-scale policy override");
  app.add_option("--role", o->role, "operand role: activation, weight or grad_output (as its first GEMM)")
      ->check(CLI::IsMember({"activation", "weight", "grad_output"}))
      ->default_val("activation");
  app.add_option("--amax-ref", o->amax_ref, "held (stale) tensor amax for periodic scaling; default: current amax");
  app.add_option("--seed", o->seed, "Philox seed for stochastic rounding bits (stream 0)")->default_val(0);
  app.add_option("--rbits", o->rbits, "explicit stochastic-rounding integers (.npy uint8/16/32, shape of --in)")
      ->check(CLI::ExistingFile);
  app.add_option("--in", o->in, "input tensor .npy (float32, 1-D or 2-D)")->required();
  app.add_option("--codes", o->codes, "your packed E2M1 codes .npy (uint8 [rows, ceil(cols/2)]; see --nibbles)")
      ->required();
  app.add_option("--scales", o->scales, "your block-scale bytes .npy (uint8; see --layout)")->required();
  app.add_option("--tensor-scale-value", o->tensor_scale_value,
                 "your FP32 tensor scale (also accepted as --tensor-scale V when V is a number)");
  app.add_option("--tensor-scale-policy", o->tensor_scale_policy, "tensor scale policy override: none, current or periodic:D");
  app.add_option("--tensor-scale-kind", o->tensor_scale_kind,
                 "which golden value your tensor scale is: encode (G), decode (Gd = 1/G), amax, or any")
      ->check(CLI::IsMember({"any", "encode", "decode", "amax"}))
      ->default_val("any");
  app.add_option("--layout", o->layout, "how your scales are stored: rowmajor, te-rowrep or swizzled-128x4 (docs/layouts.md)")
      ->check(CLI::IsMember({"rowmajor", "te-rowrep", "swizzled-128x4"}))
      ->default_val("rowmajor");
  app.add_option("--nibbles", o->nibbles, "element 2j in the low nibble (low-first), the high nibble (high-first), or one code per byte (unpacked)")
      ->check(CLI::IsMember({"low-first", "high-first", "unpacked"}))
      ->default_val("low-first");
  app.add_flag("--json", o->json, "print one JSON object instead of text");
  app.add_option("--max-explained", o->max_explained, "explain at most N mismatches")->default_val(10);
  app.callback([o] { run_verify_quantize(*o); });
}

// ---------------------------------------------------------------------------------------------------
// verify gemm

struct VerifyGemmOptions {
  RecipeOverrides recipe;
  std::string a, b, c;
  std::string gemm = "fprop";
  std::string datapath, inner;
  bool no_snap = false;
  std::string out_dtype = "f32";
  std::optional<float> amax_ref_a, amax_ref_b, target_a, target_b;
  std::string rbits_a, rbits_b;
  std::uint64_t seed = 0;
  bool json = false;
  std::size_t worst = 3;
};

// float32 values of a 2-D .npy (float64 accepted when every value is a binary32 value).
std::vector<float> read_matrix(const std::string& path, npy::Array& array) {
  array = npy::read(path);
  if (array.shape.size() != 2) throw DataError(path + ": expected a 2-D array");
  return npy::as_float32(array, path);
}

std::vector<std::uint32_t> read_rbits(const std::string& path, const npy::Array& operand, int sr_bits) {
  const npy::Array r = npy::read(path);
  if (r.shape != operand.shape) throw DataError(path + ": shape differs from the operand's");
  std::vector<std::uint32_t> bits = npy::as_uint32(r, path);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i] >> sr_bits)
      throw DataError(path + ": value " + std::to_string(bits[i]) + " at index " + std::to_string(i) +
                      " does not fit in " + std::to_string(sr_bits) + " random bits");
  }
  return bits;
}

void run_verify_gemm(const VerifyGemmOptions& o) {
  const Recipe recipe = o.recipe.resolve();
  const auto which = parse_gemm(o.gemm);
  if (!which) throw UsageError("--gemm: expected fprop, dgrad or wgrad, got '" + o.gemm + "'");
  VerifyGemmRequest request;
  request.gemm = *which;
  request.worst = o.worst;
  request.auto_datapath = o.datapath == "auto";
  request.datapath.datapath = request.auto_datapath ? "" : o.datapath;
  request.datapath.inner = o.inner;
  request.datapath.snap = !o.no_snap;
  request.datapath.bf16_output = o.out_dtype == "bf16";
  if (!request.auto_datapath) {
    const std::string dp = o.datapath.empty() ? recipe.default_datapath : o.datapath;
    if (!find_datapath(dp)) throw UsageError("--datapath: unknown datapath '" + dp + "' (known: auto " + datapath_names() + ")");
    if (o.no_snap && find_datapath(dp)->kind != DatapathKind::probe_matched)
      throw UsageError("--no-snap applies only to --datapath probe-matched");
  } else if (!o.inner.empty() || o.no_snap) {
    throw UsageError("--datapath auto tries every inner datapath and snap setting itself: drop --inner/--no-snap");
  }
  if (!o.inner.empty() && !find_datapath(o.inner))
    throw UsageError("--inner: unknown datapath '" + o.inner + "' (known: " + datapath_names() + ")");

  const GemmOperands ops = operands_for(recipe, *which);
  request.a.spec = o.recipe.apply(ops.a);
  request.b.spec = o.recipe.apply(ops.b);
  if (o.target_a) request.a.spec.target = *o.target_a;
  if (o.target_b) request.b.spec.target = *o.target_b;
  for (const auto& amax : {o.amax_ref_a, o.amax_ref_b}) {
    if (amax && !(*amax >= 0.0f && std::isfinite(*amax))) throw UsageError("--amax-ref-a/-b must be finite non-negative numbers");
  }
  request.a.amax_ref = o.amax_ref_a;
  request.b.amax_ref = o.amax_ref_b;
  request.a.random.seed = request.b.random.seed = o.seed;
  request.a.random.stream = 0;  // as `fp4sim gemm`: operand A draws Philox stream 0, B stream 1
  request.b.random.stream = 1;

  npy::Array arr_a, arr_b, arr_c;
  const std::vector<float> a = read_matrix(o.a, arr_a);
  const std::vector<float> b = read_matrix(o.b, arr_b);
  const std::vector<float> c = read_matrix(o.c, arr_c);
  if (arr_a.cols() != arr_b.cols())
    throw DataError("verify gemm: A " + o.a + " is " + shape_text(arr_a.shape) + " and B " + o.b + " is " +
                    shape_text(arr_b.shape) + ": C = A·Bᵀ needs the same K (columns)");
  if (arr_c.rows() != arr_a.rows() || arr_c.cols() != arr_b.rows())
    throw DataError(o.c + ": shape " + shape_text(arr_c.shape) + ", but C = A·Bᵀ is [" + std::to_string(arr_a.rows()) +
                    ", " + std::to_string(arr_b.rows()) + "]");
  std::vector<std::uint32_t> bits_a, bits_b;
  if (!o.rbits_a.empty()) {
    if (!is_stochastic(request.a.spec.rounding)) throw UsageError("--rbits-a: operand A is not stochastically rounded in this GEMM");
    bits_a = read_rbits(o.rbits_a, arr_a, recipe.sr_bits);
    request.a.random.explicit_bits = bits_a;
  }
  if (!o.rbits_b.empty()) {
    if (!is_stochastic(request.b.spec.rounding)) throw UsageError("--rbits-b: operand B is not stochastically rounded in this GEMM");
    bits_b = read_rbits(o.rbits_b, arr_b, recipe.sr_bits);
    request.b.random.explicit_bits = bits_b;
  }
  const GemmVerifyReport report =
      verify_gemm(recipe, request, a, b, arr_a.rows(), arr_b.rows(), arr_a.cols(), c);
  const std::string text = o.json ? to_json(report) : to_text(report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  const bool ok = report.auto_mode ? !report.explained_by.empty() : report.bit_exact();
  if (!ok) {
    throw Mismatch("verify gemm: " + std::to_string(report.mismatches) + " of " + std::to_string(report.outputs) +
                   " output(s) differ" + (report.auto_mode ? " under the closest datapath (no preset explains them)" : "") +
                   " (exit 4)");
  }
}

void setup_verify_gemm(CLI::App& app) {
  auto o = std::make_shared<VerifyGemmOptions>();
  o->recipe.add_to(app);
  app.add_option("--a", o->a, "operand A [M, K] (.npy float32)")->required()->check(CLI::ExistingFile);
  app.add_option("--b", o->b, "operand B [N, K] (.npy float32); C = A·Bᵀ")->required()->check(CLI::ExistingFile);
  app.add_option("--c", o->c, "your output C [M, N] (.npy float32)")->required()->check(CLI::ExistingFile);
  app.add_option("--gemm", o->gemm, "which GEMM of a linear layer: fprop, dgrad or wgrad (operand roles, as `gemm`)")
      ->check(CLI::IsMember({"fprop", "dgrad", "wgrad"}))
      ->default_val("fprop");
  app.add_option("--datapath", o->datapath,
                 "golden datapath (default: the recipe's), or auto: try every preset and report which explains yours");
  app.add_option("--inner", o->inner, "probe-matched: the inner tensor-core datapath per 64-group");
  app.add_flag("--no-snap", o->no_snap, "probe-matched: skip the RNE(C*1024)/1024 lattice snap");
  app.add_option("--out-dtype", o->out_dtype, "f32, or bf16 (your C was rounded RNE to BF16)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->default_val("f32");
  app.add_option("--amax-ref-a", o->amax_ref_a, "held tensor amax of operand A (periodic scaling)");
  app.add_option("--amax-ref-b", o->amax_ref_b, "held tensor amax of operand B");
  app.add_option("--target-a", o->target_a, "scale target T of operand A");
  app.add_option("--target-b", o->target_b, "scale target T of operand B");
  app.add_option("--rbits-a", o->rbits_a, "explicit stochastic-rounding integers for A (.npy, shape of A)")
      ->check(CLI::ExistingFile);
  app.add_option("--rbits-b", o->rbits_b, "explicit stochastic-rounding integers for B (.npy, shape of B)")
      ->check(CLI::ExistingFile);
  app.add_option("--seed", o->seed, "Philox seed of the stochastic-rounding bits (A: stream 0, B: stream 1)")->default_val(0);
  app.add_flag("--json", o->json, "print one JSON object instead of text");
  app.add_option("--worst", o->worst, "trace the N worst outputs through the datapath")->default_val(3);
  app.callback([o] { run_verify_gemm(*o); });
}

}  // namespace

void setup_verify(CLI::App& app) {
  app.require_subcommand(1);
  setup_verify_quantize(*app.add_subcommand("quantize", "compare your quantized codes and scales with the golden model"));
  setup_verify_gemm(*app.add_subcommand("gemm", "compare your GEMM output with a golden datapath (or find the one that explains it)"));
}

}  // namespace fp4sim::cli
