// `fp4sim quantize` (docs/cli.md): the flags of fp4sim::QuantizeCall, the input read, one quantize, the
// HDF5 file written.
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "fp4sim/io/hdf5.hpp"
#include "fp4sim/io/npy.hpp"
#include "arguments.hpp"

namespace fp4sim::cli {

namespace {

struct QuantizeOptions {
  QuantizeCall call;
  std::string rbits, in, out;
};

void run_quantize(const QuantizeOptions& o) {
  QuantizeCall call = o.call;
  call.operand.random_bits = !o.rbits.empty();
  QuantizeCall::Resolved r = call.resolve();
  const npy::Array input = npy::read(o.in);
  const std::vector<float> x = npy::as_float32(input, o.in);
  const auto random = attach_random_bits(random_bits_file(o.rbits), input.shape, r.recipe.sr_bits, r.request);
  const Recipe& recipe = r.recipe;
  const QuantizedTensor q = quantize(recipe, r.request, x, input.rows(), input.cols());
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
  file.write_attribute("rounding", name_of(q.spec.rounding));
  file.write_attribute("role", name_of(r.role));
  file.write_attribute("target", q.target);
  file.write_attribute("tensor_scale_policy", name_of(recipe.tensor_scale));
  file.write_attribute("scale_rule", name_of(recipe.scale_rule));
  file.write_attribute("rht", std::int64_t{q.spec.rht});
  file.write_attribute("seed", static_cast<std::int64_t>(call.seed));
  file.write_attribute("dequantize_order", name_of(q.dequantize_order));
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
  add_recipe_options(app, o->call.recipe);
  app.add_option("--role", o->call.role, "operand role: activation, weight or grad_output (as its first GEMM)")
      ->check(CLI::IsMember(name_strings<Role>()))
      ->default_val("activation");
  app.add_option("--amax-ref", o->call.operand.amax_ref,
                 "held (stale) tensor amax for periodic scaling; default: current amax");
  app.add_option("--seed", o->call.seed, "Philox seed for stochastic rounding bits (stream 0)")->default_val(0);
  app.add_option("--rbits", o->rbits, "explicit stochastic-rounding integers (.npy uint8, shape of --in)");
  app.add_option("--in", o->in, "input .npy (float32, or float64 holding binary32 values; 1-D or 2-D)")->required();
  app.add_option("--out", o->out, "output HDF5 (codes, scales, dequantized, attributes)")->required();
  app.callback([o] { run_quantize(*o); });
}

}  // namespace fp4sim::cli
