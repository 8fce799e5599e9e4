// `fp4sim quantize` (docs/cli.md): the flags of fp4sim::QuantizeCall, the input read, one quantize, the
// outputs written: one HDF5 file (--out) and/or .npy arrays (--codes, --scales, --dequantized), the codes
// and scales stored as --nibbles and --layout say.
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "fp4sim/io/hdf5.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/io/output_file.hpp"
#include "arguments.hpp"

namespace fp4sim::cli {

namespace {

struct QuantizeOptions {
  QuantizeCall call;
  std::string rbits, in, out, codes, scales, dequantized;
  std::string layout = "rowmajor", nibbles = "low-first";
};

bool has_extension(const std::string& path, std::initializer_list<const char*> extensions) {
  const std::string ext = std::filesystem::path(path).extension().string();
  for (const char* e : extensions) {
    if (ext == e) return true;
  }
  return false;
}

// Each output holds what its name says, or the command stops before any work.
void check_output_names(const QuantizeOptions& o) {
  if (o.out.empty() && o.codes.empty() && o.scales.empty() && o.dequantized.empty()) {
    throw UsageError("quantize: name an output: --out Q.h5, or --codes/--scales/--dequantized .npy files");
  }
  if (!o.out.empty() && !has_extension(o.out, {".h5", ".hdf5"})) {
    throw UsageError("--out " + o.out +
                     ": --out writes one HDF5 file (.h5 or .hdf5) holding codes, scales and dequantized; "
                     "for .npy arrays use --codes, --scales and --dequantized");
  }
  const std::pair<const char*, const std::string*> arrays[] = {
      {"--codes", &o.codes}, {"--scales", &o.scales}, {"--dequantized", &o.dequantized}};
  for (const auto& [flag, path] : arrays) {
    if (!path->empty() && !has_extension(*path, {".npy"})) {
      throw UsageError(std::string(flag) + " " + *path + ": writes a NumPy array; name a .npy file");
    }
  }
}

void run_quantize(const QuantizeOptions& o) {
  check_output_names(o);
  const ScaleLayout layout = parse_name_or_throw<ScaleLayout>(o.layout, "--layout");
  QuantizeCall call = o.call;
  call.operand.random_bits = !o.rbits.empty();
  QuantizeCall::Resolved r = call.resolve();
  const NibbleOrder nibbles =
      stored_order(r.recipe.element, parse_name_or_throw<NibbleOrder>(o.nibbles, "--nibbles"));
  const npy::Array input = npy::read(o.in);
  const std::vector<float> x = npy::as_float32(input, o.in);
  const auto random = attach_random_bits(random_bits_file(o.rbits), input.shape, r.recipe.sr_bits, r.request);
  const Recipe& recipe = r.recipe;
  const QuantizedTensor q = quantize(recipe, r.request, x, input.rows(), input.cols());
  const std::vector<float> dequantized = dequantize(q);

  const ScaleGrid grid{q.rows, q.cols, q.block_rows, q.block_cols};
  const std::vector<std::uint8_t> codes = q.packed() ? codes_to_order(q.codes, q.rows, q.cols, nibbles) : q.codes;
  const std::vector<std::size_t> codes_dims = codes_shape(nibbles, q.rows, q.cols);
  const std::vector<std::uint8_t> scales = scales_to_layout(q.scales, grid, layout);
  const std::vector<std::size_t> scales_dims = ScaleStorage::canonical_shape(layout, grid);

  // Every output under its temporary name first; renamed into place together at the end.
  std::vector<std::unique_ptr<OutputPath>> outputs;
  auto output = [&outputs](const std::string& path) -> const std::filesystem::path& {
    outputs.push_back(std::make_unique<OutputPath>(path));
    return outputs.back()->temporary_path();
  };
  if (!o.codes.empty()) npy::write(output(o.codes), npy::DType::u1, codes_dims, codes.data());
  if (!o.scales.empty()) npy::write(output(o.scales), npy::DType::u1, scales_dims, scales.data());
  if (!o.dequantized.empty()) npy::write(output(o.dequantized), npy::DType::f4, {q.rows, q.cols}, dequantized.data());
  if (!o.out.empty()) {
    auto file = hdf5::File::create(output(o.out));
    const std::vector<hsize_t> codes_h5(codes_dims.begin(), codes_dims.end());
    const std::vector<hsize_t> scales_h5(scales_dims.begin(), scales_dims.end());
    file.write_dataset<std::uint8_t>("codes", codes_h5, codes);
    file.write_dataset<std::uint8_t>("scales", scales_h5, scales);
    file.write_dataset<float>("dequantized", {q.rows, q.cols}, dequantized);
    file.write_attribute("recipe", recipe.name);
    file.write_attribute("source", recipe.source);
    file.write_attribute("element_format", format_name(recipe.element));
    file.write_attribute("scale_format", format_name(recipe.scale));
    file.write_attribute("block_rows", q.block_rows);
    file.write_attribute("block_cols", q.block_cols);
    file.write_attribute("layout", name_of(layout));
    file.write_attribute("nibbles", name_of(nibbles));
    file.write_attribute("rounding", name_of(q.spec.rounding));
    file.write_attribute("role", name_of(r.role));
    file.write_attribute("target", q.target);
    file.write_attribute("tensor_scale_policy", name_of(recipe.tensor_scale));
    file.write_attribute("scale_rule", name_of(recipe.scale_rule));
    file.write_attribute("rht", std::int64_t{q.spec.rht});
    file.write_attribute("rht_signs", rht_signs_text(recipe.rht_signs));
    file.write_attribute("rht_precision", name_of(recipe.rht_precision));
    file.write_attribute("element_scaling", name_of(recipe.element_scaling));
    file.write_attribute("block_choice", name_of(recipe.block_choice));
    file.write_attribute("four_over_six_error", name_of(recipe.four_over_six_error));
    file.write_attribute("amax_scope", name_of(recipe.amax_scope));
    file.write_attribute("nan_amax", name_of(recipe.nan_amax));
    file.write_attribute("element_specials", name_of(recipe.element_specials));
    if (!q.row_amax.empty()) file.write_dataset<float>("row_amax", {q.rows}, q.row_amax);
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
  for (const auto& out : outputs) out->commit();
}

}  // namespace

void setup_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  add_recipe_options(app, o->call.recipe);
  add_arguments(app, front::quantize_arguments(), o->call);
  app.add_option("--rbits", o->rbits, "explicit stochastic-rounding integers (.npy uint8, shape of --in)");
  app.add_option("--in", o->in, "input .npy (float32, or float64 holding binary32 values; 1-D or 2-D)")->required();
  app.add_option("--out", o->out, "output HDF5 file, .h5 or .hdf5 (codes, scales, dequantized, attributes)")
      ->check(not_empty_path());
  app.add_option("--codes", o->codes, "output the element codes as .npy (uint8, stored as --nibbles says; 8-bit codes one a byte)");
  app.add_option("--scales", o->scales, "output the block-scale codes as .npy (uint8, stored as --layout says)");
  app.add_option("--dequantized", o->dequantized, "output the dequantized values as .npy (float32, the input's rows x cols)");
  names_of<ScaleLayout>(app.add_option("--layout", o->layout, "how the scales are stored (docs/layouts.md)"))
      ->capture_default_str();
  names_of<NibbleOrder>(app.add_option("--nibbles", o->nibbles, "how the codes are stored"))->capture_default_str();
  add_example(app, "fp4sim quantize --recipe nvfp4 --in x.npy --out q.h5");
  app.callback([o] { run_quantize(*o); });
}

}  // namespace fp4sim::cli
