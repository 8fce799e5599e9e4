#include "fp4sim/front/analysis_arguments.hpp"

#include <climits>

#include "fp4sim/analysis/hold_rule.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/front/recipe_spec.hpp"
#include "fp4sim/verify/profiles.hpp"

namespace fp4sim::front {

namespace {

void assign(std::string& field, const ArgValue& v) { field = std::get<std::string>(v); }
void assign(std::optional<std::string>& field, const ArgValue& v) { field = std::get<std::string>(v); }
void assign(bool& field, const ArgValue& v) { field = std::get<bool>(v); }
void assign(std::uint64_t& field, const ArgValue& v) { field = std::get<std::uint64_t>(v); }
void assign(std::optional<std::uint64_t>& field, const ArgValue& v) { field = std::get<std::uint64_t>(v); }
void assign(int& field, const ArgValue& v) { field = static_cast<int>(std::get<std::int64_t>(v)); }  // row's range
void assign(double& field, const ArgValue& v) { field = std::get<double>(v); }

// A row's setter: the call's field `member` takes the value.
#define FP4SIM_SETS(member) [](auto& call, const ArgValue& v) { assign(call.member, v); }

template <class E>
constexpr std::vector<std::string> (*kNames)() = &name_strings<E>;
template <class E>
constexpr std::string (*kNamesHelp)() = &name_help<E>;

constexpr std::int64_t kIntMin = INT_MIN, kIntMax = INT_MAX;

// A stack profile (docs/recipes.md "Stack profiles") as the preset and overrides it is, named as the profile.
void set_profile(vectors::Call& call, const ArgValue& v) {
  const std::string& name = std::get<std::string>(v);
  const StackProfile* p = find_profile(name);
  if (!p) throw UsageError("{profile}: unknown profile '" + name + "' (fp4sim vectors --help lists them)");
  call.profile = p->recipe;
  call.profile->name = p->name;
}
std::vector<std::string> stack_profile_names() {
  std::vector<std::string> names;
  for (const StackProfile& p : stack_profiles()) names.push_back(p.name);
  return names;
}

const Argument<replay::Call> kReplay[] = {
    {.key = "recipes", .type = ArgType::text,
     .help = "recipes separated by ',': presets, or user-defined PRESET:KEY=VALUE,... whose KEY=VALUE items continue "
             "the recipe before them (nvfp4,mxfp4:scale_rule=rceil,block=16; docs/cli.md \"User-defined recipes\")",
     .set = [](replay::Call& call, const ArgValue& v) { call.recipes = recipe_spec_list(std::get<std::string>(v)); },
     .metavar = "SPECS", .default_text = "ue5m3,nvfp4,mxfp4"},
    {.key = "recipe_map", .type = ArgType::text,
     .help = "policies per layer and step instead of {recipes}: maps separated by ';', each a list of "
             "PATTERN[@STEPS]=RECIPE|bf16 rules, the first that matches a layer (regex as {layers}, * = every layer) "
             "and step (A, A-B or A-) wins, e.g. 'lm_head=bf16,*=nvfp4; *=nvfp4' (docs/replay.md)",
     .set = FP4SIM_SETS(recipe_map), .metavar = "MAPS"},
    {.key = "datapath", .type = ArgType::text,
     .help = "GEMM datapath of the gemms entries: recipe = each recipe's default (fp4sim gemm's datapath list), f64 = "
             "float64 product of the dequantized operands (fast), or a datapath:",
     .set = FP4SIM_SETS(datapath), .metavar = "NAME", .names_help = &datapath_help, .default_text = "recipe"},
    {.key = "steps", .type = ArgType::text, .help = "captured steps to replay, e.g. 1,200 or 100-200 (default: all)",
     .set = FP4SIM_SETS(steps), .metavar = "LIST"},
    {.key = "layers", .type = ArgType::text, .help = "regular expression (ECMAScript) searched in layer names",
     .set = FP4SIM_SETS(layers), .metavar = "REGEX"},
    {.key = "seed", .type = ArgType::count, .help = "seed of the stochastic-rounding bits", .set = FP4SIM_SETS(seed),
     .default_text = "0"},
    {.key = "hold", .type = ArgType::text, .help = "what periodic tensor scaling holds when a refresh step was not captured",
     .set = FP4SIM_SETS(hold), .metavar = "NAME", .names = kNames<replay::HoldRule>,
     .names_help = kNamesHelp<replay::HoldRule>, .default_text = "window"},
    {.key = "period", .type = ArgType::integer, .help = "D of the Proposition 1 headroom analysis",
     .set = FP4SIM_SETS(period), .min = kIntMin, .max = kIntMax, .default_text = "50"},
    {.key = "gemms", .type = ArgType::switch_, .help = "compute the GEMM-level entries (default)",
     .set = FP4SIM_SETS(gemms), .off = "no-gemms", .off_help = "skip the GEMM-level entries (per-tensor statistics only)",
     .on_flag = false},
    {.key = "slab_mib", .type = ArgType::real,
     .help = "memory bound: tensors larger than this many MiB of float32 are streamed in row slabs, GEMM entries "
             "computed in tiles of at most this much (over the recipes)",
     .set = FP4SIM_SETS(slab_mib), .default_text = "256"},
};

const Argument<sweep::Call> kSweep[] = {
    {.key = "synthetic", .type = ArgType::text,
     .help = "distributions: normal, laplace, student-t:NU, lognormal:SIGMA, each with optional +outliers:P:K",
     .set = FP4SIM_SETS(synthetic), .metavar = "LIST",
     .default_text = "normal,laplace,student-t:3,lognormal:1,normal+outliers:0.001:100"},
    {.key = "rows", .type = ArgType::count, .help = "rows of each synthetic tensor", .set = FP4SIM_SETS(rows),
     .default_text = "256"},
    {.key = "cols", .type = ArgType::count, .help = "columns of each synthetic tensor (blocks run along them)",
     .set = FP4SIM_SETS(cols), .default_text = "4096"},
    {.key = "role", .type = ArgType::text, .help = "how synthetic tensors are quantized", .set = FP4SIM_SETS(role),
     .metavar = "NAME", .names = kNames<Role>, .names_help = kNamesHelp<Role>, .default_text = "activation"},
    {.key = "element_formats", .type = ArgType::text, .help = "element formats (docs/cli.md names or eXmY)",
     .set = FP4SIM_SETS(element_formats), .metavar = "LIST", .default_text = "e2m1"},
    {.key = "scale_formats", .type = ArgType::text,
     .help = "block-scale formats (e8m0 uses the OCP floor rule unless {scale_rules})",
     .set = FP4SIM_SETS(scale_formats), .metavar = "LIST", .default_text = "ue4m3,ue5m3,e8m0"},
    {.key = "blocks", .type = ArgType::text, .help = "block sizes", .set = FP4SIM_SETS(blocks), .metavar = "LIST",
     .default_text = "16,32"},
    {.key = "tensor_scales", .type = ArgType::text, .help = "tensor-scale policies:", .set = FP4SIM_SETS(tensor_scales),
     .metavar = "LIST", .names_help = kNamesHelp<TensorScalePolicy>, .default_text = "none,current"},
    {.key = "roundings", .type = ArgType::text, .help = "element roundings:", .set = FP4SIM_SETS(roundings),
     .metavar = "LIST", .names_help = kNamesHelp<Rounding>, .default_text = "rne"},
    {.key = "scale_rules", .type = ArgType::text,
     .help = "scale rules, each suiting every scale format (default: each format's own, floor on e8m0 and two-level "
             "otherwise; given, the configurations name their rule):",
     .set = FP4SIM_SETS(scale_rules), .metavar = "LIST", .names_help = kNamesHelp<ScaleRule>},
    {.key = "block_choices", .type = ArgType::text,
     .help = "scale candidates per two-level block (default: the base's; given, the configurations name their "
             "choice; 4over6 needs a tensor scale):",
     .set = FP4SIM_SETS(block_choices), .metavar = "LIST", .names_help = kNamesHelp<BlockScaleChoice>},
    {.key = "rho", .type = ArgType::text, .help = "synthetic periodic scaling: held amax = amax / rho, for each rho",
     .set = FP4SIM_SETS(rhos), .metavar = "LIST", .default_text = "1"},
    {.key = "base", .type = ArgType::text,
     .help = "recipe every other setting comes from: a preset or PRESET:KEY=VALUE,... (docs/cli.md \"User-defined "
             "recipes\")",
     .set = [](sweep::Call& call, const ArgValue& v) { call.base = recipe_spec(std::get<std::string>(v), "base"); },
     .metavar = "SPEC", .default_text = "ue5m3"},
    {.key = "steps", .type = ArgType::text, .help = "trace steps (default: all)", .set = FP4SIM_SETS(steps),
     .metavar = "LIST"},
    {.key = "layers", .type = ArgType::text, .help = "trace layers: regular expression", .set = FP4SIM_SETS(layers),
     .metavar = "REGEX"},
    {.key = "recipe_map", .type = ArgType::text,
     .help = "trace only: one recipe map as replay's whose RECIPE may be grid (each grid point in turn), e.g. "
             "'lm_head=bf16,*=grid'; one policy per grid point",
     .set = FP4SIM_SETS(recipe_map), .metavar = "MAP"},
    {.key = "hold", .type = ArgType::text,
     .help = "trace periodic scaling: what is held when a refresh step was not captured", .set = FP4SIM_SETS(hold),
     .metavar = "NAME", .names = kNames<replay::HoldRule>, .names_help = kNamesHelp<replay::HoldRule>,
     .default_text = "window"},
    {.key = "seed", .type = ArgType::count, .help = "seed of the synthetic data and of stochastic rounding",
     .set = FP4SIM_SETS(seed), .default_text = "0"},
    {.key = "slab_mib", .type = ArgType::real,
     .help = "stream trace tensors larger than this many MiB of float32 in row slabs", .set = FP4SIM_SETS(slab_mib),
     .default_text = "256"},
};

const Argument<vectors::Call> kVectors[] = {
    {.key = "recipe", .type = ArgType::text,
     .help = "recipe: a preset, or a preset with overrides PRESET:KEY=VALUE,... in the keys of quantize's recipe "
             "overrides (docs/cli.md \"User-defined recipes\"); the presets:",
     .set = [](vectors::Call& call, const ArgValue& v) { call.recipe = recipe_spec(std::get<std::string>(v)); },
     .metavar = "SPEC", .names_help = &recipe_presets_help},
    {.key = "profile", .type = ArgType::text,
     .help = "instead of the recipe, a stack profile: its preset and overrides (fp4sim verify quantize --help says "
             "what each follows)",
     .set = &set_profile, .metavar = "NAME", .names = &stack_profile_names},
    {.key = "cases", .type = ArgType::count,
     .help = "number of cases: the recipe's edge cases first, then random tensors (default: the edge cases plus 4)",
     .set = FP4SIM_SETS(cases)},
    {.key = "discriminate", .type = ArgType::text,
     .help = "instead of the conformance vectors, GEMM inputs on which these datapaths (two or more, comma-separated) "
             "give different outputs, with each one's C (default 4 cases)",
     .set = FP4SIM_SETS(discriminate), .metavar = "LIST"},
    {.key = "seed", .type = ArgType::count, .help = "seed of the input draws and of the Philox stochastic-rounding bits",
     .set = FP4SIM_SETS(seed), .default_text = "0"},
};

#undef FP4SIM_SETS

}  // namespace

std::span<const Argument<replay::Call>> replay_arguments() { return kReplay; }
std::span<const Argument<sweep::Call>> sweep_arguments() { return kSweep; }
std::span<const Argument<vectors::Call>> vectors_arguments() { return kVectors; }

}  // namespace fp4sim::front
