#include "fp4sim/analysis/calls.hpp"

#include <algorithm>
#include <charconv>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "fp4sim/analysis/vectors.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim {

namespace {

// "a,b, c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

std::vector<Recipe> recipes_from(const std::vector<RecipeOverrides>& specs) {
  std::vector<Recipe> out;
  for (const RecipeOverrides& spec : specs) out.push_back(spec.resolve());
  return out;
}

// "1,200,300-310" -> single steps and ranges (a range selects the captured steps inside it).
struct StepSelection {
  std::vector<std::int64_t> steps;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
};

StepSelection steps_from(const std::string& text) {
  StepSelection out;
  for (const std::string& item : split_list(text)) {
    auto parse = [&](const std::string& s) {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
        throw UsageError("{steps}: '" + item + "' is not a step or a range A-B");
      }
      return v;
    };
    const auto dash = item.find('-', 1);
    if (dash == std::string::npos) {
      out.steps.push_back(parse(item));
    } else {
      const std::int64_t a = parse(item.substr(0, dash)), b = parse(item.substr(dash + 1));
      if (b < a) throw UsageError("{steps}: range '" + item + "' ends before it starts");
      out.ranges.emplace_back(a, b);
    }
  }
  if (out.steps.empty() && out.ranges.empty()) {
    throw UsageError("{steps}: '" + text + "' names no step (leave {steps} out to replay every captured step)");
  }
  return out;
}

// --slab-mib as bytes. The bound keeps the product (and the few multiples of it replay takes) far inside
// 64 bits: a budget of 2e13 MiB would wrap to nothing, and no machine holds 2^24 MiB (16 TiB) at once.
std::size_t slab_bytes(double slab_mib) {
  constexpr double kMaxSlabMiB = 1 << 24;
  if (!(slab_mib > 0) || !(slab_mib <= kMaxSlabMiB)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", slab_mib);
    throw UsageError(std::string("{slab_mib} must be in (0, 16777216] (MiB), got ") + text);
  }
  return static_cast<std::size_t>(slab_mib * 1024 * 1024);
}

}  // namespace

replay::Options replay::Call::resolve() const {
  Options options;
  if (recipe_map) {
    options.recipe_maps = parse_recipe_maps(*recipe_map);
  } else {
    options.recipes = recipes_from(recipes);
  }
  options.datapath = datapath;
  if (!steps.empty()) {
    StepSelection selection = steps_from(steps);
    options.steps = std::move(selection.steps);
    options.step_ranges = std::move(selection.ranges);
  }
  options.layers = layers;
  options.seed = seed;
  options.hold = parse_name_or_throw<HoldRule>(hold, "{hold}");
  options.gemms = gemms;
  options.headroom_period = period;
  options.max_slab_bytes = slab_bytes(slab_mib);
  return options;
}

sweep::Options sweep::Call::resolve() const {
  Options s;
  if (base) s.grid.base = base->resolve();
  s.grid.element_formats.clear();
  for (const auto& f : split_list(element_formats)) s.grid.element_formats.push_back(format_argument(f, "{element_formats}"));
  s.grid.scale_formats.clear();
  for (const auto& f : split_list(scale_formats)) s.grid.scale_formats.push_back(format_argument(f, "{scale_formats}"));
  s.grid.blocks.clear();
  for (const auto& b : split_list(blocks)) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(b, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != b.size() || v < 2 || v > 256) throw UsageError("{blocks}: '" + b + "' is not a block size in 2..256");
    s.grid.blocks.push_back(v);
  }
  for (const auto& t : split_list(tensor_scales)) {
    const auto ts = parse_tensor_scale(t);
    if (!ts) throw UsageError("{tensor_scales}: expected none, current or periodic:D, got '" + t + "'");
    s.grid.tensor_scales.push_back(*ts);
  }
  s.grid.roundings.clear();
  for (const auto& r : split_list(roundings)) s.grid.roundings.push_back(parse_name_or_throw<Rounding>(r, "{roundings}"));
  for (const auto& name : split_list(scale_rules)) {
    const ScaleRule rule = parse_name_or_throw<ScaleRule>(name, "{scale_rules}");
    // A rule that does not suit a scale format of the grid is refused before any work (crossed, the pair
    // would be a grid point of no recipe): a problem validate() finds with this rule and not with the
    // format's own.
    for (const Format& format : s.grid.scale_formats) {
      std::string own_why, why;
      const TensorScaleSetting none{};
      const int block = s.grid.base.block;
      const auto own = sweep::make_recipe(s.grid, s.grid.base.element, format, block, none, Rounding::rne, own_why);
      if (!sweep::make_recipe(s.grid, s.grid.base.element, format, block, none, Rounding::rne, why, rule) &&
          (own || why != own_why)) {
        throw UsageError("{scale_rules} " + name + " with {scale_formats} " + format_name(format) + ": " + why);
      }
    }
    s.grid.scale_rules.push_back(rule);
  }
  for (const auto& name : split_list(block_choices)) {
    s.grid.block_choices.push_back(parse_name_or_throw<BlockScaleChoice>(name, "{block_choices}"));
  }
  s.grid.rhos.clear();
  for (const auto& r : split_list(rhos)) {
    char* end = nullptr;
    const double v = std::strtod(r.c_str(), &end);
    if (end != r.c_str() + r.size() || !(v > 0) || !std::isfinite(v)) throw UsageError("{rho}: bad value '" + r + "'");
    s.grid.rhos.push_back(v);
  }
  s.role = parse_name_or_throw<Role>(role, "{role}");
  s.rows = rows;
  s.cols = cols;
  s.seed = seed;
  s.max_slab_bytes = slab_bytes(slab_mib);
  if (!trace.empty()) {
    s.trace = trace;
    if (!steps.empty()) {
      StepSelection selection = steps_from(steps);
      s.steps = std::move(selection.steps);
      s.step_ranges = std::move(selection.ranges);
    }
    s.layers = layers;
    s.hold = parse_name_or_throw<replay::HoldRule>(hold, "{hold}");
    if (recipe_map) {
      std::vector<replay::RecipeMap> maps = replay::parse_recipe_maps(*recipe_map, true);
      if (maps.size() != 1) throw UsageError("{recipe_map}: a sweep takes one map (its `grid` rules take each grid point)");
      if (std::none_of(maps[0].rules.begin(), maps[0].rules.end(), [](const auto& r) { return r.grid; })) {
        throw UsageError("{recipe_map}: a sweep's map needs a rule PATTERN=grid (the grid point)");
      }
      s.recipe_map = std::move(maps[0]);
    }
  } else if (recipe_map) {
    throw UsageError("{recipe_map} needs a trace");
  } else {
    for (const auto& d : split_list(synthetic)) {
      const auto dist = parse_distribution(d);
      if (!dist) {
        throw UsageError("{synthetic}: unknown distribution '" + d +
                         "' (normal, laplace, student-t:NU, lognormal:SIGMA, each with optional +outliers:P:K)");
      }
      s.distributions.push_back(*dist);
    }
  }
  return s;
}

vectors::Call::Resolved vectors::Call::resolve() const {
  if (profile && !recipe.recipe.empty()) throw UsageError("{profile} names the recipe: drop {recipe}");
  if (!profile && recipe.recipe.empty()) throw UsageError("{recipe} SPEC or {profile} NAME is required");
  Resolved r;
  r.recipe = (profile ? *profile : recipe).resolve();
  for (const std::string& name : split_list(discriminate)) r.discriminate.push_back(&datapath_argument(name, "{discriminate}"));
  if (!discriminate.empty() && r.discriminate.empty()) throw UsageError("{discriminate}: '" + discriminate + "' names no datapath");
  r.cases = cases.value_or(r.discriminate.empty() ? default_cases(r.recipe) : 4);
  return r;
}

}  // namespace fp4sim
