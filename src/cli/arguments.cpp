#include "arguments.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "fp4sim/core/names.hpp"
#include "fp4sim/io/npy.hpp"

namespace fp4sim::cli {

CLI::Option* add_recipe_option(CLI::App& app, std::string& recipe) {
  std::vector<std::string> presets;
  for (const Recipe& preset : recipe_presets()) presets.push_back(preset.name);
  CLI::Validator member = CLI::IsMember(presets);
  member.description("");
  return app.add_option("--recipe", recipe, recipe_help())->check(member)->type_name("NAME");
}

namespace {
// A recipe override's text is "" when not given (RecipeOverrides): an empty value must not pass as "not
// given", the preset's value taken silently.
const CLI::Validator kNotEmpty(
    [](const std::string& text) { return text.empty() ? std::string("an empty value names nothing") : std::string(); },
    "");
}  // namespace

void add_recipe_options(CLI::App& app, RecipeOverrides& o) {
  add_recipe_option(app, o.recipe)->required();
  app.add_option("--block", o.block, "block size B along the reduction dimension");
  auto* two = app.add_flag_function("--two-d", [&o](std::int64_t) { o.two_d = true; }, "B x B tiles");
  app.add_flag_function("--one-d", [&o](std::int64_t) { o.two_d = false; }, "1 x B blocks")->excludes(two);
  app.add_option("--scale-format", o.scale_format,
                 "block scale format: ue5m3, ue4m3, ue5m3fn, e8m0, ... or ueXmY (fp4sim formats lists them)")
      ->check(kNotEmpty)
      ->type_name("FORMAT");
  app.add_option("--element-format", o.element_format,
                 "element format: e2m1, e2m3, e3m2, ... or eXmY (fp4sim formats lists them)")
      ->check(kNotEmpty)
      ->type_name("FORMAT");
  app.add_option("--target", o.target, "scale target T");
  app.add_option("--tensor-scale", o.tensor_scale,
                 "tensor scale policy: none, current or periodic:D:" + name_help<TensorScalePolicy>())
      ->check(kNotEmpty)
      ->type_name("POLICY");
  names_of<ScaleRule>(app.add_option("--scale-rule", o.scale_rule, "how a block's scale is chosen from its amax"));
  names_of<ZeroScale>(app.add_option("--zero-scale", o.zero_scale, "a block scale that rounds to zero"));
  names_of<ElementScaling>(app.add_option("--element-scaling", o.element_scaling,
                                          "how a two-level block's elements are scaled before rounding"));
  names_of<BlockScaleChoice>(app.add_option("--block-choice", o.block_choice,
                                            "scale candidates per two-level block (TE 4over6 tries two)"));
  names_of<AmaxScope>(app.add_option("--amax-scope", o.amax_scope, "what the tensor scale's amax is taken over"));
  names_of<DequantizeOrder>(app.add_option("--dequantize-order", o.dequantize_order,
                                           "order of the multiplications that reconstruct a value"));
  names_of<Rounding>(app.add_option("--rounding", o.rounding, "element rounding of this operand"));
  app.add_option("--sr-bits", o.sr_bits, "random bits per element for stochastic rounding")->check(CLI::Range(1, 16));
  auto* on = app.add_flag_function("--rht", [&o](std::int64_t) { o.rht = true; }, "apply the 16-point RHT");
  app.add_flag_function("--no-rht", [&o](std::int64_t) { o.rht = false; }, "no RHT")->excludes(on);
  app.add_option("--rht-signs", o.rht_signs,
                 "the RHT's 16 signs as + and - (default TE's " + rht_signs_text(kRhtSigns) + "; CPU model only)")
      ->check(kNotEmpty)
      ->type_name("SIGNS");
}

void add_gemm_options(CLI::App& app, GemmCall& c, std::string& rbits_a, std::string& rbits_b) {
  names_of<Gemm>(app.add_option("--gemm", c.gemm, "which GEMM of a linear layer"))->default_val("fprop");
  app.add_option("--inner", c.inner, "probe-matched: the inner tensor-core datapath per 64-group (default sm90-bf16; "
                                     "sm100-f16 for Blackwell tcgen05)");
  app.add_flag_function("--no-snap", [&c](std::int64_t) { c.snap = false; },
                        "probe-matched: skip the RNE(C*1024)/1024 lattice snap");
  app.add_option("--out-dtype", c.out_dtype, "f32, or bf16 (every output rounded RNE to BF16, as the training code casts next)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->default_val("f32");
  app.add_option("--amax-ref-a", c.a.amax_ref, "held tensor amax of operand A (periodic scaling)");
  app.add_option("--amax-ref-b", c.b.amax_ref, "held tensor amax of operand B");
  app.add_option("--target-a", c.a.target, "scale target T of operand A");
  app.add_option("--target-b", c.b.target, "scale target T of operand B");
  app.add_option("--rbits-a", rbits_a, "explicit stochastic-rounding integers for A (.npy uint8, shape of A)");
  app.add_option("--rbits-b", rbits_b, "explicit stochastic-rounding integers for B (.npy uint8, shape of B)");
  app.add_option("--seed", c.seed, "Philox seed of the stochastic-rounding bits (A: stream 0, B: stream 1)")->default_val(0);
}

CLI::Validator not_empty_path() {
  return CLI::Validator(
      [](const std::string& path) { return path.empty() ? std::string("an empty path names no file") : std::string(); }, "");
}

void add_example(CLI::App& app, const std::string& example) { app.footer("Example:\n  " + example); }

std::string datapath_help() {
  std::string help;
  for (const Datapath* dp : datapath_presets()) help += "\n  " + std::string(dp->name) + ": " + std::string(dp->summary);
  return help;
}

namespace {

std::string number_problem(const std::string& type, const std::string& text) {
  if (text.empty()) return "an empty value is not a number";
  errno = 0;
  char* end = nullptr;
  if (type == "FLOAT") {
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return "'" + text + "' is not a number";
    if (!std::isfinite(v)) return "'" + text + "' is not a finite number";
    return {};
  }
  if (type == "UINT" && text.find('-') != std::string::npos) return "'" + text + "' is negative (an unsigned number is expected)";
  if (type == "UINT") {
    std::strtoull(text.c_str(), &end, 0);
  } else {
    std::strtoll(text.c_str(), &end, 0);
  }
  if (end != text.c_str() + text.size()) return "'" + text + "' is not an integer";
  if (errno == ERANGE) return "'" + text + "' does not fit in 64 bits";
  return {};
}

}  // namespace

void check_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    for (const char* kind : {"UINT", "INT", "FLOAT"}) {
      if (type.rfind(kind, 0) == 0) {
        const std::string k = kind;
        option->check(CLI::Validator([k](std::string& text) { return number_problem(k, text); }, k));
        break;
      }
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_numbers(*sub);
}

std::optional<RandomBitsArray> random_bits_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  return npy::read_random_bits(path);
}

}  // namespace fp4sim::cli
