// `fp4sim gemm`: C = A·Bᵀ with both operands quantized along K under a recipe, accumulated by a
// datapath (docs/cli.md); `fp4sim gemm --list-datapaths` prints the datapath table.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/io/npy.hpp"
#include "recipe_options.hpp"

namespace fp4sim::cli {

namespace {

struct GemmCliOptions {
  RecipeOverrides recipe;
  bool list = false;
  bool json = false;
  std::string a, b, out;
  std::string gemm = "fprop";
  std::string datapath, inner;
  bool no_snap = false;
  std::string out_dtype = "f32";
  std::optional<float> amax_ref_a, amax_ref_b, target_a, target_b;
  std::string rbits_a, rbits_b;
  std::uint64_t seed = 0;
  bool reference = false;
  std::optional<int> frac_bits;
};

void list_datapaths(bool json) {
  const auto rows = datapath_presets();
  if (json) {
    std::printf("[\n");
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::printf("  %s%s\n", describe_parameters_json(rows[i]).c_str(), i + 1 < rows.size() ? "," : "");
    std::printf("]\n");
    return;
  }
  for (const Datapath& dp : rows) {
    std::printf("%s\n  %s\n  parameters: %s\n  source: %s\n", std::string(dp.name).c_str(),
                std::string(dp.summary).c_str(), describe_parameters(dp).c_str(), std::string(dp.source).c_str());
  }
}

// float32 values of a .npy (float64 accepted when every value is a binary32 value).
std::vector<float> read_operand(const std::string& path, npy::Array& array) {
  array = npy::read(path);
  if (array.shape.size() != 2) throw DataError(path + ": expected a 2-D array [rows, K]");
  return npy::as_float32(array, path);
}

std::vector<std::uint32_t> read_rbits(const std::string& path, const npy::Array& operand, int sr_bits) {
  const npy::Array r = npy::read(path);
  if (r.shape != operand.shape) throw DataError(path + ": shape differs from the operand's");
  if (r.dtype != npy::DType::u1) throw DataError(path + ": expected uint8 stochastic-rounding integers");
  std::vector<std::uint32_t> bits = npy::as_uint32(r, path);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i] >> sr_bits)
      throw DataError(path + ": value " + std::to_string(bits[i]) + " at index " + std::to_string(i) + " does not fit in " +
                      std::to_string(sr_bits) + " random bits");
  }
  return bits;
}

void run_gemm(const GemmCliOptions& o) {
  if (o.list) {
    list_datapaths(o.json);
    return;
  }
  if (o.recipe.recipe.empty()) throw UsageError("gemm: --recipe is required (or --list-datapaths)");
  if (o.a.empty() || o.b.empty()) throw UsageError("gemm: --a and --b are required");
  const Recipe recipe = o.recipe.resolve();
  const auto which = parse_gemm(o.gemm);
  if (!which) throw UsageError("--gemm: expected fprop, dgrad or wgrad, got '" + o.gemm + "'");
  // Validate the datapath names before reading any data.
  GemmRequest request;
  request.datapath = o.datapath;
  request.inner = o.inner;
  request.snap = !o.no_snap;
  request.bf16_output = o.out_dtype == "bf16";
  request.impl = o.reference ? GemmImpl::reference : GemmImpl::fast;
  const std::string dp_name = request.datapath.empty() ? recipe.default_datapath : request.datapath;
  if (!find_datapath(dp_name)) throw UsageError("--datapath: unknown datapath '" + dp_name + "' (known: " + datapath_names() + ")");
  if (!o.inner.empty() && !find_datapath(o.inner))
    throw UsageError("--inner: unknown datapath '" + o.inner + "' (known: " + datapath_names() + ")");
  if (o.no_snap && find_datapath(dp_name)->kind != DatapathKind::probe_matched)
    throw UsageError("--no-snap applies only to --datapath probe-matched");

  const GemmOperands ops = operands_for(recipe, *which);
  QuantizeRequest ra, rb;
  ra.spec = o.recipe.apply(ops.a);
  rb.spec = o.recipe.apply(ops.b);
  if (o.target_a) ra.spec.target = *o.target_a;
  if (o.target_b) rb.spec.target = *o.target_b;
  for (const auto& amax : {o.amax_ref_a, o.amax_ref_b}) {
    if (amax && !(*amax >= 0.0f && std::isfinite(*amax)))
      throw UsageError("--amax-ref-a/-b must be finite non-negative numbers");
  }
  ra.amax_ref = o.amax_ref_a;
  rb.amax_ref = o.amax_ref_b;
  ra.random.seed = rb.random.seed = o.seed;
  ra.random.stream = 0;  // operand A draws Philox stream 0, operand B stream 1
  rb.random.stream = 1;

  npy::Array arr_a, arr_b;
  const std::vector<float> a = read_operand(o.a, arr_a);
  const std::vector<float> b = read_operand(o.b, arr_b);
  if (arr_a.cols() != arr_b.cols())
    throw DataError("gemm: A " + o.a + " is [" + std::to_string(arr_a.rows()) + ", " + std::to_string(arr_a.cols()) +
                    "] and B " + o.b + " is [" + std::to_string(arr_b.rows()) + ", " + std::to_string(arr_b.cols()) +
                    "]: C = A·Bᵀ needs the same K (columns)");
  std::vector<std::uint32_t> bits_a, bits_b;
  if (!o.rbits_a.empty()) {
    if (!is_stochastic(ra.spec.rounding)) throw UsageError("--rbits-a: operand A is not stochastically rounded in this GEMM");
    bits_a = read_rbits(o.rbits_a, arr_a, recipe.sr_bits);
    ra.random.explicit_bits = bits_a;
  }
  if (!o.rbits_b.empty()) {
    if (!is_stochastic(rb.spec.rounding)) throw UsageError("--rbits-b: operand B is not stochastically rounded in this GEMM");
    bits_b = read_rbits(o.rbits_b, arr_b, recipe.sr_bits);
    rb.random.explicit_bits = bits_b;
  }

  const QuantizedTensor qa = quantize(recipe, ra, a, arr_a.rows(), arr_a.cols());
  const QuantizedTensor qb = quantize(recipe, rb, b, arr_b.rows(), arr_b.cols());
  GemmOptions options = resolve_gemm(recipe, qa, qb, request);
  Datapath modified;
  if (o.frac_bits) {
    // A what-if row: the datapath (or probe-matched's inner row) with another alignment width F.
    const bool inner = options.datapath->kind == DatapathKind::probe_matched;
    modified = inner ? *options.inner : *options.datapath;
    if (modified.kind != DatapathKind::tfdpa && modified.kind != DatapathKind::gst_fdpa)
      throw UsageError("--frac-bits applies to tensor-core datapaths (T-FDPA, GST-FDPA, or probe-matched's inner)");
    modified.fused.frac_bits = *o.frac_bits;
    const auto problems = validate(modified);
    if (!problems.empty()) throw UsageError("--frac-bits " + std::to_string(*o.frac_bits) + ": " + problems.front());
    (inner ? options.inner : options.datapath) = &modified;
  }
  const std::vector<float> c = gemm(qa, qb, options);
  if (!o.out.empty()) {
    npy::write(o.out, npy::DType::f4, {qa.rows, qb.rows}, c.data());
  } else {
    std::printf("C [%zu, %zu] = A·Bᵀ, recipe %s, gemm %s, datapath %s, alpha %.9g\n", qa.rows, qb.rows,
                recipe.name.c_str(), o.gemm.c_str(), std::string(options.datapath->name).c_str(),
                static_cast<double>(options.alpha));
  }
}

}  // namespace

void setup_gemm(CLI::App& app) {
  auto o = std::make_shared<GemmCliOptions>();
  o->recipe.add_to(app);
  app.get_option("--recipe")->required(false);
  app.add_flag("--list-datapaths", o->list, "describe every datapath: parameters and source");
  app.add_flag("--json", o->json, "with --list-datapaths: a JSON array");
  app.add_option("--a", o->a, "operand A [M, K] (.npy float32)")->check(CLI::ExistingFile);
  app.add_option("--b", o->b, "operand B [N, K] (.npy float32); C = A·Bᵀ")->check(CLI::ExistingFile);
  app.add_option("--gemm", o->gemm, "which GEMM of a linear layer: fprop (A=x, B=w), dgrad (A=dy, B=wᵀ), wgrad (A=dyᵀ, B=xᵀ)")
      ->check(CLI::IsMember({"fprop", "dgrad", "wgrad"}))
      ->default_val("fprop");
  app.add_option("--datapath", o->datapath, "accumulation datapath (default: the recipe's); see --list-datapaths");
  app.add_option("--inner", o->inner, "probe-matched: the inner tensor-core datapath per 64-group (default sm90-bf16; "
                                      "sm100-f16 for Blackwell tcgen05)");
  app.add_flag("--no-snap", o->no_snap, "probe-matched: skip the RNE(C*1024)/1024 lattice snap");
  app.add_option("--out-dtype", o->out_dtype, "f32, or bf16 (RNE, as the training code casts next)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->default_val("f32");
  app.add_option("--amax-ref-a", o->amax_ref_a, "held tensor amax of operand A (periodic scaling)");
  app.add_option("--amax-ref-b", o->amax_ref_b, "held tensor amax of operand B");
  app.add_option("--target-a", o->target_a, "scale target T of operand A");
  app.add_option("--target-b", o->target_b, "scale target T of operand B");
  app.add_option("--rbits-a", o->rbits_a, "explicit stochastic-rounding integers for A (.npy uint8, shape of A)")
      ->check(CLI::ExistingFile);
  app.add_option("--rbits-b", o->rbits_b, "explicit stochastic-rounding integers for B (.npy uint8, shape of B)")
      ->check(CLI::ExistingFile);
  app.add_option("--seed", o->seed, "Philox seed of the stochastic-rounding bits (A: stream 0, B: stream 1)")->default_val(0);
  app.add_option("--frac-bits", o->frac_bits,
                 "what-if: replace the tensor-core row's alignment width F (e.g. ue5m3-native with F=35)");
  app.add_flag("--reference", o->reference, "run the plain scalar golden loop instead of the fast kernels (slow)");
  app.add_option("--out", o->out, "output C [M, N] (.npy float32)");
  app.callback([o] { run_gemm(*o); });
}

}  // namespace fp4sim::cli
