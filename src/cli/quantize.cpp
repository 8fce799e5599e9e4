#include <cmath>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/hdf5.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/core/quantize.hpp"
#include "recipe_options.hpp"

namespace fp4sim::cli {

namespace {

struct QuantizeOptions {
  RecipeOverrides recipe;
  std::string role = "activation";
  std::optional<float> amax_ref;
  std::uint64_t seed = 0;
  std::string rbits, in, out;
};

std::string_view tensor_scale_name(TensorScalePolicy p) {
  switch (p) {
    case TensorScalePolicy::none: return "none";
    case TensorScalePolicy::current: return "current";
    case TensorScalePolicy::periodic: return "periodic";
  }
  return "?";
}

void run_quantize(const QuantizeOptions& o) {
  const Recipe recipe = o.recipe.resolve();
  const auto role = parse_role(o.role);
  if (!role) throw UsageError("--role: expected activation, weight or grad_output, got '" + o.role + "'");
  QuantizeRequest request;
  request.spec = o.recipe.apply(operand_for_role(recipe, *role));
  request.amax_ref = o.amax_ref;
  request.random.seed = o.seed;
  if (o.amax_ref && !(*o.amax_ref >= 0.0f && std::isfinite(*o.amax_ref))) {
    throw UsageError("--amax-ref must be a finite non-negative number");
  }

  const npy::Array input = npy::read(o.in);
  const std::vector<float> x = npy::as_float32(input, o.in);
  std::vector<std::uint32_t> random;
  if (!o.rbits.empty()) {
    if (!is_stochastic(request.spec.rounding)) throw UsageError("--rbits needs a stochastic rounding for this role");
    const npy::Array r = npy::read(o.rbits);
    if (r.shape != input.shape) throw DataError(o.rbits + ": shape differs from " + o.in);
    random = npy::as_uint32(r, o.rbits);
    for (std::size_t i = 0; i < random.size(); ++i) {
      if (random[i] >> recipe.sr_bits) {
        throw DataError(o.rbits + ": value " + std::to_string(random[i]) + " at index " + std::to_string(i) +
                        " does not fit in " + std::to_string(recipe.sr_bits) + " random bits");
      }
    }
    request.random.explicit_bits = random;
  }

  const QuantizedTensor q = quantize(recipe, request, x, input.rows(), input.cols());
  const std::vector<float> dequantized = dequantize(q);

  auto file = hdf5::File::create(o.out);
  file.write_dataset<std::uint8_t>("codes", {q.rows, q.code_cols()}, q.codes);
  file.write_dataset<std::uint8_t>("scales", {q.scale_rows, q.scale_cols}, q.scales);
  file.write_dataset<float>("dequantized", {q.rows, q.cols}, dequantized);
  file.write_attribute("recipe", recipe.name);
  file.write_attribute("source", recipe.source);
  file.write_attribute("element_format", format_name(recipe.element));
  file.write_attribute("scale_format", format_name(recipe.scale));
  file.write_attribute("block_rows", q.block_rows);
  file.write_attribute("block_cols", q.block_cols);
  file.write_attribute("rounding", rounding_name(q.spec.rounding));
  file.write_attribute("role", role_name(*role));
  file.write_attribute("target", q.target);
  file.write_attribute("tensor_scale_policy", tensor_scale_name(recipe.tensor_scale));
  file.write_attribute("scale_rule", scale_rule_name(recipe.scale_rule));
  file.write_attribute("rht", std::int64_t{q.spec.rht});
  file.write_attribute("seed", static_cast<std::int64_t>(o.seed));
  file.write_attribute("dequantize_order", dequantize_order_name(q.dequantize_order));
  file.write_attribute("tensor_amax", q.tensor_amax);
  file.write_attribute("global_encode_scale", q.global_encode_scale);
  file.write_attribute("global_decode_scale", q.global_decode_scale);
  file.write_attribute("scale_saturated", static_cast<std::int64_t>(q.counts.scale_saturated));
  file.write_attribute("scale_underflow", static_cast<std::int64_t>(q.counts.scale_underflow));
  file.write_attribute("saturated", static_cast<std::int64_t>(q.counts.saturated));
  file.commit();
}

}  // namespace

void setup_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  o->recipe.add_to(app);
  app.add_option("--role", o->role, "operand role: activation, weight or grad_output (as its first GEMM)")
      ->check(CLI::IsMember({"activation", "weight", "grad_output"}))
      ->default_val("activation");
  app.add_option("--amax-ref", o->amax_ref, "held (stale) tensor amax for periodic scaling; default: current amax");
  app.add_option("--seed", o->seed, "Philox seed for stochastic rounding bits (stream 0)")->default_val(0);
  app.add_option("--rbits", o->rbits, "explicit stochastic-rounding integers (.npy uint8/16/32, shape of --in)")
      ->check(CLI::ExistingFile);
  app.add_option("--in", o->in, "input .npy (float32, or float64 holding binary32 values; 1-D or 2-D)")->required();
  app.add_option("--out", o->out, "output HDF5 (codes, scales, dequantized, attributes)")->required();
  app.callback([o] { run_quantize(*o); });
}

}  // namespace fp4sim::cli
