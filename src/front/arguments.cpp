#include "fp4sim/front/arguments.hpp"

#include <cfloat>
#include <climits>
#include <cmath>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/layout.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/front/recipe_spec.hpp"
#include "fp4sim/verify/profiles.hpp"

namespace fp4sim::front {

namespace {

void assign(std::string& field, const ArgValue& v) { field = std::get<std::string>(v); }
void assign(bool& field, const ArgValue& v) { field = std::get<bool>(v); }
void assign(std::optional<bool>& field, const ArgValue& v) { field = std::get<bool>(v); }
void assign(std::uint64_t& field, const ArgValue& v) { field = std::get<std::uint64_t>(v); }
// The row's range keeps an integer within int.
void assign(int& field, const ArgValue& v) { field = static_cast<int>(std::get<std::int64_t>(v)); }
void assign(std::optional<int>& field, const ArgValue& v) { field = static_cast<int>(std::get<std::int64_t>(v)); }
// A double beyond binary32's range is +-Inf (the call's check refuses it), not undefined behaviour.
void assign(std::optional<float>& field, const ArgValue& v) {
  const double x = std::get<double>(v);
  field = std::fabs(x) > FLT_MAX ? std::copysign(INFINITY, static_cast<float>(x)) : static_cast<float>(x);
}

// A row's setter: the call's field `member` takes the value.
#define FP4SIM_SETS(member) [](auto& call, const ArgValue& v) { assign(call.member, v); }

template <class E>
constexpr std::vector<std::string> (*kNames)() = &name_strings<E>;
template <class E>
constexpr std::string (*kNamesHelp)() = &name_help<E>;

// The recipe row's setter, the one that checks: a spec sets every override it names, so it runs before the
// other rows (the first row; CLI11 runs callbacks in the order the options were added), whose flags and
// keywords then override the spec as they override a preset.
void set_recipe(RecipeOverrides& call, const ArgValue& v) { call = recipe_spec(std::get<std::string>(v)); }
std::vector<std::string> out_dtypes() { return {"f32", "bf16"}; }
std::string tensor_scale_help() { return name_help<TensorScalePolicy>(); }
std::string profile_help() {
  std::string help = "\n  auto: every profile below, ranked by how much of your bytes it reproduces";
  for (const StackProfile& p : stack_profiles()) {
    help += "\n  " + p.name + ": " + (p.follows.empty() ? "the preset of that name" : p.follows);
  }
  return help;
}
std::string rht_signs_help() { return " (default TE's " + rht_signs_text(kRhtSigns) + "; CPU model only)"; }

constexpr std::int64_t kIntMin = INT_MIN, kIntMax = INT_MAX;

const Argument<RecipeOverrides> kRecipe[] = {
    {.key = "recipe", .type = ArgType::text,
     .help = "recipe: a preset, or a preset with overrides PRESET:KEY=VALUE,... in the keys of the overrides here "
             "(mxfp4:scale_rule=rceil,block=16; docs/cli.md \"User-defined recipes\"); the presets:",
     .set = &set_recipe, .metavar = "SPEC", .names_help = &recipe_presets_help},
    {.key = "block", .type = ArgType::integer, .help = "block size B along the reduction dimension",
     .set = FP4SIM_SETS(block), .min = kIntMin, .max = kIntMax},
    {.key = "two_d", .type = ArgType::switch_, .help = "B x B tiles", .set = FP4SIM_SETS(two_d), .off = "one-d",
     .off_help = "1 x B blocks"},
    {.key = "scale_format", .type = ArgType::text,
     .help = "block scale format: ue5m3, ue4m3, ue5m3fn, e8m0, ... or ueXmY (fp4sim formats lists them)",
     .set = FP4SIM_SETS(scale_format), .metavar = "FORMAT"},
    {.key = "element_format", .type = ArgType::text,
     .help = "element format: e2m1, e2m3, e3m2, ... or eXmY (fp4sim formats lists them)",
     .set = FP4SIM_SETS(element_format), .metavar = "FORMAT"},
    {.key = "target", .type = ArgType::real, .help = "scale target T", .set = FP4SIM_SETS(target)},
    {.key = "wgrad_grad_target", .type = ArgType::real,
     .help = "scale target T of dY as wgrad's operand alone (the UE5M3 paper's 2048 on chosen layers)",
     .set = FP4SIM_SETS(wgrad_grad_target)},
    {.key = "tensor_scale", .type = ArgType::text, .help = "tensor scale policy: none, current or periodic:D:",
     .set = FP4SIM_SETS(tensor_scale), .metavar = "POLICY", .names_help = &tensor_scale_help},
    {.key = "scale_rule", .type = ArgType::text, .help = "how a block's scale is chosen from its amax",
     .set = FP4SIM_SETS(scale_rule), .metavar = "NAME", .names = kNames<ScaleRule>, .names_help = kNamesHelp<ScaleRule>},
    {.key = "zero_scale", .type = ArgType::text, .help = "a block scale that rounds to zero",
     .set = FP4SIM_SETS(zero_scale), .metavar = "NAME", .names = kNames<ZeroScale>, .names_help = kNamesHelp<ZeroScale>},
    {.key = "element_scaling", .type = ArgType::text,
     .help = "how a two-level block's elements are scaled before rounding", .set = FP4SIM_SETS(element_scaling),
     .metavar = "NAME", .names = kNames<ElementScaling>, .names_help = kNamesHelp<ElementScaling>},
    {.key = "scale_order", .type = ArgType::text,
     .help = "FP32 operation order of a two-level scale and its elements' scaling (TE, torchao, ModelOpt)",
     .set = FP4SIM_SETS(scale_order), .metavar = "NAME", .names = kNames<ScaleOrder>,
     .names_help = kNamesHelp<ScaleOrder>},
    {.key = "scale_min", .type = ArgType::real,
     .help = "raise a two-level scale below this to it before rounding (torchao 2^-6, ModelOpt 2^-9; 0 none)",
     .set = FP4SIM_SETS(scale_min)},
    {.key = "block_choice", .type = ArgType::text, .help = "scale candidates per two-level block (TE 4over6 tries two)",
     .set = FP4SIM_SETS(block_choice), .metavar = "NAME", .names = kNames<BlockScaleChoice>,
     .names_help = kNamesHelp<BlockScaleChoice>},
    {.key = "four_over_six_error", .type = ArgType::text, .help = "where 4over6 measures a candidate's error",
     .set = FP4SIM_SETS(four_over_six_error), .metavar = "NAME", .names = kNames<FourOverSixErrorDomain>,
     .names_help = kNamesHelp<FourOverSixErrorDomain>},
    {.key = "element_specials", .type = ArgType::text, .help = "how an element encodes -0 and NaN",
     .set = FP4SIM_SETS(element_specials), .metavar = "NAME", .names = kNames<SpecialConvention>,
     .names_help = kNamesHelp<SpecialConvention>},
    {.key = "amax_scope", .type = ArgType::text, .help = "what the tensor scale's amax is taken over",
     .set = FP4SIM_SETS(amax_scope), .metavar = "NAME", .names = kNames<AmaxScope>, .names_help = kNamesHelp<AmaxScope>},
    {.key = "nan_amax", .type = ArgType::text, .help = "what a NaN does to the tensor scale's amax",
     .set = FP4SIM_SETS(nan_amax), .metavar = "NAME", .names = kNames<NanAmax>, .names_help = kNamesHelp<NanAmax>},
    {.key = "dequantize_order", .type = ArgType::text, .help = "order of the multiplications that reconstruct a value",
     .set = FP4SIM_SETS(dequantize_order), .metavar = "NAME", .names = kNames<DequantizeOrder>,
     .names_help = kNamesHelp<DequantizeOrder>},
    {.key = "rounding", .type = ArgType::text, .help = "element rounding of this operand", .set = FP4SIM_SETS(rounding),
     .metavar = "NAME", .names = kNames<Rounding>, .names_help = kNamesHelp<Rounding>},
    {.key = "sr_bits", .type = ArgType::integer, .help = "random bits per element for stochastic rounding",
     .set = FP4SIM_SETS(sr_bits), .min = 1, .max = 16},
    {.key = "rht", .type = ArgType::switch_, .help = "apply the 16-point RHT", .set = FP4SIM_SETS(rht), .off = "no-rht",
     .off_help = "no RHT"},
    {.key = "alpha", .type = ArgType::text,
     .help = "how the GEMM forms alpha from the two tensor scales, where the datapath takes the recipe's",
     .set = FP4SIM_SETS(alpha), .metavar = "NAME", .names = kNames<AlphaRule>, .names_help = kNamesHelp<AlphaRule>},
    {.key = "rht_signs", .type = ArgType::text,
     .help = "the RHT's 16 signs as + and -", .set = FP4SIM_SETS(rht_signs), .metavar = "SIGNS",
     .names_help = &rht_signs_help},
    {.key = "rht_precision", .type = ArgType::text, .help = "what the RHT's binary32 sum is rounded to (CPU model only)",
     .set = FP4SIM_SETS(rht_precision), .metavar = "NAME", .names = kNames<RhtPrecision>,
     .names_help = kNamesHelp<RhtPrecision>},
};

const Argument<QuantizeCall> kQuantize[] = {
    {.key = "role", .type = ArgType::text, .help = "operand role, quantized as in its first GEMM",
     .set = FP4SIM_SETS(role), .metavar = "NAME", .names = kNames<Role>, .names_help = kNamesHelp<Role>,
     .default_text = "activation"},
    {.key = "amax_ref", .type = ArgType::real, .help = "held (stale) tensor amax for periodic scaling; default: current amax",
     .set = FP4SIM_SETS(operand.amax_ref)},
    {.key = "seed", .type = ArgType::count, .help = "Philox seed for stochastic rounding bits (stream 0)",
     .set = FP4SIM_SETS(seed), .default_text = "0"},
};

const Argument<GemmCall> kGemm[] = {
    {.key = "gemm", .type = ArgType::text, .help = "which GEMM of a linear layer", .set = FP4SIM_SETS(gemm),
     .metavar = "NAME", .names = kNames<Gemm>, .names_help = kNamesHelp<Gemm>, .default_text = "fprop"},
    {.key = "datapath", .type = ArgType::text, .help = "accumulation datapath (default: the recipe's)",
     .set = FP4SIM_SETS(datapath), .metavar = "NAME"},
    {.key = "inner", .type = ArgType::text,
     .help = "probe-matched: the inner tensor-core datapath per 64-group (default sm90-bf16; sm100-f16 for "
             "Blackwell tcgen05)",
     .set = FP4SIM_SETS(inner), .metavar = "NAME"},
    {.key = "snap", .type = ArgType::switch_, .help = "probe-matched: the RNE(C*1024)/1024 lattice snap (default)",
     .set = FP4SIM_SETS(snap), .off = "no-snap", .off_help = "probe-matched: skip the RNE(C*1024)/1024 lattice snap",
     .on_flag = false},
    {.key = "out_dtype", .type = ArgType::text,
     .help = "f32, or bf16 (every output rounded RNE to BF16, as the training code casts next)",
     .set = FP4SIM_SETS(out_dtype), .metavar = "TEXT", .names = &out_dtypes, .default_text = "f32"},
    {.key = "amax_ref_a", .type = ArgType::real, .help = "held tensor amax of operand A (periodic scaling)",
     .set = FP4SIM_SETS(a.amax_ref)},
    {.key = "amax_ref_b", .type = ArgType::real, .help = "held tensor amax of operand B", .set = FP4SIM_SETS(b.amax_ref)},
    {.key = "target_a", .type = ArgType::real, .help = "scale target T of operand A", .set = FP4SIM_SETS(a.target)},
    {.key = "target_b", .type = ArgType::real, .help = "scale target T of operand B", .set = FP4SIM_SETS(b.target)},
    {.key = "seed", .type = ArgType::count,
     .help = "Philox seed of the stochastic-rounding bits (A: stream 0, B: stream 1)", .set = FP4SIM_SETS(seed),
     .default_text = "0"},
    {.key = "frac_bits", .type = ArgType::integer,
     .help = "what-if: replace the tensor-core row's alignment width F (e.g. ue5m3-native with F=35)",
     .set = FP4SIM_SETS(frac_bits), .min = kIntMin, .max = kIntMax},
    {.key = "reference", .type = ArgType::switch_,
     .help = "run the plain scalar golden loop instead of the fast kernels (slow)", .set = FP4SIM_SETS(reference)},
};

const Argument<ConvertCall> kConvert[] = {
    {.key = "format", .type = ArgType::text,
     .help = "target format: a preset (see `fp4sim formats`) or eXmY/ueXmY[bN][fn|fin]", .set = FP4SIM_SETS(format),
     .metavar = "FORMAT"},
    {.key = "rounding", .type = ArgType::text, .help = "rounding mode", .set = FP4SIM_SETS(rounding), .metavar = "NAME",
     .names = kNames<Rounding>, .names_help = kNamesHelp<Rounding>, .default_text = "rne"},
    {.key = "sr_bits", .type = ArgType::integer, .help = "random bits per element for stochastic rounding (k)",
     .set = FP4SIM_SETS(sr_bits), .min = 1, .max = 16, .default_text = "8"},
    {.key = "seed", .type = ArgType::count, .help = "Philox seed for stochastic rounding bits (stream 0)",
     .set = FP4SIM_SETS(seed), .default_text = "0"},
    {.key = "saturate", .type = ArgType::switch_,
     .help = "overflow and +-Inf to +-max finite, as cvt .satfinite, IEEE formats too (default for formats without "
             "Inf)",
     .set = FP4SIM_SETS(saturate), .off = "no-saturate",
     .off_help = "overflow to +-Inf, else NaN with the sign, else a data error where the format has neither (default "
                 "for IEEE formats)"},
    {.key = "specials", .type = ArgType::text, .help = "-0 and NaN convention", .set = FP4SIM_SETS(specials),
     .metavar = "NAME", .names = kNames<SpecialConvention>, .names_help = kNamesHelp<SpecialConvention>,
     .default_text = "hardware"},
};

const Argument<MmaCall> kMma[] = {
    {.key = "datapath", .type = ArgType::text, .help = "tensor-core datapath row:", .set = FP4SIM_SETS(datapath),
     .metavar = "NAME", .names_help = &datapath_help},
    {.key = "input_format", .type = ArgType::text,
     .help = "format of A and B (e.g. bf16, fp16, tf32, fp32, e4m3, e5m2); required unless both of the next two",
     .set = FP4SIM_SETS(input_format), .metavar = "TEXT"},
    {.key = "a_format", .type = ArgType::text, .help = "format of A alone (default {input_format})",
     .set = FP4SIM_SETS(a_format), .metavar = "TEXT"},
    {.key = "b_format", .type = ArgType::text,
     .help = "format of B alone (e.g. e5m2 beside an e4m3 A; default {input_format})", .set = FP4SIM_SETS(b_format),
     .metavar = "TEXT"},
    {.key = "scale_format", .type = ArgType::text,
     .help = "block-scaled rows: format of the scale codes (ue4m3 or e8m0; default the row's first)",
     .set = FP4SIM_SETS(scale_format), .metavar = "TEXT"},
};

const Argument<VerifyQuantizeCall> kVerifyQuantize[] = {
    {.key = "tensor_scale_value", .type = ArgType::text,
     .help = "your FP32 tensor scale (also accepted as {tensor_scale} V when V is a number)",
     .set = FP4SIM_SETS(tensor_scale_text), .metavar = "TEXT"},
    {.key = "tensor_scale_policy", .type = ArgType::text,
     .help = "tensor scale policy override: none, current or periodic:D", .set = FP4SIM_SETS(tensor_scale_policy),
     .metavar = "TEXT"},
    {.key = "tensor_scale_kind", .type = ArgType::text, .help = "which golden value your tensor scale is",
     .set = FP4SIM_SETS(tensor_scale_kind), .metavar = "NAME", .names = kNames<TensorScaleKind>,
     .names_help = kNamesHelp<TensorScaleKind>, .default_text = "any"},
    {.key = "layout", .type = ArgType::text, .help = "how your scales are stored (docs/layouts.md)",
     .set = FP4SIM_SETS(layout), .metavar = "NAME", .names = kNames<ScaleLayout>, .names_help = kNamesHelp<ScaleLayout>,
     .default_text = "rowmajor"},
    {.key = "nibbles", .type = ArgType::text, .help = "how your codes are stored", .set = FP4SIM_SETS(nibbles),
     .metavar = "NAME", .names = kNames<NibbleOrder>, .names_help = kNamesHelp<NibbleOrder>,
     .default_text = "low-first"},
    {.key = "max_explained", .type = ArgType::count, .help = "explain at most N mismatches",
     .set = FP4SIM_SETS(max_explained), .default_text = "10"},
    {.key = "profile", .type = ArgType::text,
     .help = "a stack profile instead of the recipe, or auto: rank every profile by fit (docs/recipes.md)",
     .set = FP4SIM_SETS(profile), .metavar = "NAME", .names = &profile_names, .names_help = &profile_help},
};

const Argument<VerifyGemmCall> kVerifyGemm[] = {
    {.key = "worst", .type = ArgType::count, .help = "trace the N worst outputs through the datapath",
     .set = FP4SIM_SETS(worst), .default_text = "3"},
};

#undef FP4SIM_SETS

// The CLI's flag for the false side of switch `key` ("" when the key is no switch of any call).
template <class Call>
std::string_view off_flag(std::span<const Argument<Call>> rows, std::string_view key) {
  for (const auto& row : rows) {
    if (row.key == key && row.type == ArgType::switch_) return row.off;
  }
  return {};
}

std::string dashed(std::string_view key) {
  std::string out(key);
  for (char& c : out) c = c == '_' ? '-' : c;
  return out;
}

}  // namespace

std::span<const Argument<RecipeOverrides>> recipe_arguments() { return kRecipe; }
std::span<const Argument<QuantizeCall>> quantize_arguments() { return kQuantize; }
std::span<const Argument<GemmCall>> gemm_arguments() { return kGemm; }
std::span<const Argument<ConvertCall>> convert_arguments() { return kConvert; }
std::span<const Argument<MmaCall>> mma_arguments() { return kMma; }
std::span<const Argument<VerifyQuantizeCall>> verify_quantize_arguments() { return kVerifyQuantize; }
std::span<const Argument<VerifyGemmCall>> verify_gemm_arguments() { return kVerifyGemm; }

std::string cli_flag(std::string_view key, std::string_view value) {
  if (value != "false") return "--" + dashed(key);
  std::string_view off = off_flag(recipe_arguments(), key);
  if (off.empty()) off = off_flag(gemm_arguments(), key);
  if (off.empty()) off = off_flag(convert_arguments(), key);
  return off.empty() ? "--no-" + dashed(key) : "--" + std::string(off);
}

std::string render(std::string_view keyed, Spelling spelling) {
  return render_keys(keyed, [spelling](std::string_view key, std::string_view value) {
    if (spelling == Spelling::cli) return cli_flag(key, value);
    if (value.empty()) return std::string(key);
    return std::string(key) + (value == "true" ? "=True" : "=False");
  });
}

std::string recipe_presets_help() {
  std::string help;
  for (const Recipe& preset : recipe_presets()) help += "\n  " + preset.name + ": " + preset.source;
  return help;
}

std::string datapath_help() {
  std::string help;
  for (const Datapath* dp : datapath_presets()) help += "\n  " + std::string(dp->name) + ": " + std::string(dp->summary);
  return help;
}

}  // namespace fp4sim::front
