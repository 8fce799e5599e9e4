// `fp4sim verify quantize|gemm` (CLI.md): the user's kernel output judged by the golden model.
//
// The tensor-scale flag: CLI.md gives `verify quantize` a `--tensor-scale V` (the user's FP32 tensor
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
#include "fp4sim/error.hpp"
#include "fp4sim/layout.hpp"
#include "fp4sim/npy.hpp"
#include "fp4sim/verify.hpp"
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

}  // namespace

void setup_verify(CLI::App& app) {
  app.require_subcommand(1);
  setup_verify_quantize(*app.add_subcommand("quantize", "compare your quantized codes and scales with the golden model"));
}

}  // namespace fp4sim::cli
