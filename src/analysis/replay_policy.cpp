// Recipe maps (replay_policy.hpp, docs/replay.md "Recipe maps"): their text, the columns a run replays for
// them, each map's choice per step and layer (first matching rule wins) and its entries.
#include "replay_policy.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <optional>
#include <set>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"

namespace fp4sim::replay {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// `text` cut at every `separator` outside (), [] and {} (a regex's groups, classes and counts hold commas).
std::vector<std::string_view> split_outside_brackets(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool escaped = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == separator && depth == 0) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(text.substr(start));
  return out;
}

std::optional<std::int64_t> step_number(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

MapRule parse_rule(std::string_view text, bool grid) {
  const std::string rule(text);
  auto fail = [&](const std::string& why) -> MapRule {
    throw UsageError("{recipe_map}: rule '" + rule + "': " + why);
  };
  const auto equals = text.rfind('=');
  if (equals == std::string_view::npos) return fail("expected PATTERN[@STEPS]=RECIPE");
  MapRule r;
  r.text = rule;
  const std::string name(trimmed(text.substr(equals + 1)));
  if (grid && name == "grid") {
    r.grid = true;
  } else if (name != detail::kBf16) {
    const Recipe* recipe = find_recipe(name);
    if (!recipe) {
      return fail("unknown recipe '" + name + "' (known: " + (grid ? "grid, " : "") + "bf16, " + recipe_names() + ")");
    }
    r.recipe = *recipe;
  }
  std::string_view pattern = trimmed(text.substr(0, equals));
  if (const auto at = pattern.rfind('@'); at != std::string_view::npos) {
    const std::string_view steps = trimmed(pattern.substr(at + 1));
    pattern = trimmed(pattern.substr(0, at));
    const auto dash = steps.find('-', 1);
    const auto first = step_number(steps.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first
                      : dash + 1 == steps.size()     ? std::optional<std::int64_t>(INT64_MAX)
                                                     : step_number(steps.substr(dash + 1));
    if (!first || !last) return fail("'@" + std::string(steps) + "' is not a step, A-B or A-");
    if (*last < *first) return fail("step range '" + std::string(steps) + "' ends before it starts");
    r.steps = std::make_pair(*first, *last);
  }
  if (pattern.empty()) return fail("no layer pattern (`*` matches every layer)");
  if (pattern != "*") {
    r.pattern = std::string(pattern);
    detail::LayerFilter check(r.pattern, "{recipe_map}");  // refuses an invalid regex now, naming the key
  }
  return r;
}

}  // namespace

std::vector<RecipeMap> parse_recipe_maps(std::string_view text, bool grid) {
  std::vector<RecipeMap> maps;
  for (std::string_view part : split_outside_brackets(text, ';')) {
    part = trimmed(part);
    if (part.empty()) continue;
    RecipeMap m;
    m.name = std::string(part);
    for (std::string_view rule : split_outside_brackets(part, ',')) {
      rule = trimmed(rule);
      if (!rule.empty()) m.rules.push_back(parse_rule(rule, grid));
    }
    for (const RecipeMap& other : maps) {
      if (other.name == m.name) throw UsageError("{recipe_map}: map '" + m.name + "' is given twice");
    }
    maps.push_back(std::move(m));
  }
  if (maps.empty()) throw UsageError("{recipe_map}: '" + std::string(text) + "' holds no rule");
  return maps;
}

namespace detail {

MapColumns map_columns(std::span<const RecipeMap> maps) {
  MapColumns c;
  for (const RecipeMap& m : maps) {
    for (const MapRule& r : m.rules) {
      if (r.grid) throw UsageError("{recipe_map}: rule '" + r.text + "': `grid` is a sweep's grid point");
      if (!r.recipe) {
        c.bf16 = true;
      } else if (std::none_of(c.recipes.begin(), c.recipes.end(),
                              [&](const Recipe& x) { return x.name == r.recipe->name; })) {
        c.recipes.push_back(*r.recipe);
      }
    }
  }
  return c;
}

MapChoice resolve_maps(std::span<const RecipeMap> maps, const Selection& selection) {
  MapChoice choice(maps.size());
  for (std::size_t mi = 0; mi < maps.size(); ++mi) {
    const RecipeMap& m = maps[mi];
    std::vector<std::optional<LayerFilter>> filters;
    for (const MapRule& r : m.rules) {
      filters.push_back(r.pattern.empty() ? std::nullopt
                                          : std::optional<LayerFilter>(LayerFilter(r.pattern, "{recipe_map}")));
    }
    std::vector<bool> used(m.rules.size(), false);
    for (const auto& [step, layer] : selection.work) {
      const auto key = std::make_pair(step->step, layer->name);
      if (choice[mi].count(key)) continue;
      std::size_t ri = 0;
      for (; ri < m.rules.size(); ++ri) {
        const MapRule& r = m.rules[ri];
        const bool in_steps = !r.steps || (step->step >= r.steps->first && step->step <= r.steps->second);
        if (in_steps && (!filters[ri] || filters[ri]->matches(layer->name))) break;
      }
      if (ri == m.rules.size()) {
        throw UsageError("{recipe_map}: map '" + m.name + "' matches no rule for layer " + layer->name + " at step " +
                         std::to_string(step->step) + " (end the map with *=RECIPE)");
      }
      used[ri] = true;
      choice[mi][key] = m.rules[ri].recipe ? m.rules[ri].recipe->name : std::string(kBf16);
    }
    for (std::size_t ri = 0; ri < m.rules.size(); ++ri) {
      if (!used[ri]) {
        throw UsageError("{recipe_map}: rule '" + m.rules[ri].text + "' of map '" + m.name +
                         "' is the first match of no replayed layer and step (a typo, a rule an earlier one "
                         "covers, or one that {steps} / {layers} leave nothing to)");
      }
    }
  }
  return choice;
}

namespace {

// Entries [first, last) of one work item (and GEMM) hold one per column; each map takes its column's.
template <class Entry, class SameGroup>
std::vector<Entry> take(std::vector<Entry>& entries, std::span<const RecipeMap> maps, const MapChoice& choice,
                        SameGroup same) {
  std::vector<Entry> out;
  for (std::size_t first = 0; first < entries.size();) {
    std::size_t last = first + 1;
    while (last < entries.size() && same(entries[first], entries[last])) ++last;
    for (std::size_t mi = 0; mi < maps.size(); ++mi) {
      const std::string& column = choice[mi].at(std::make_pair(entries[first].step, entries[first].layer));
      for (std::size_t i = first; i < last; ++i) {
        if (entries[i].recipe != column) continue;
        out.push_back(entries[i]);
        out.back().policy = maps[mi].name;
      }
    }
    first = last;
  }
  return out;
}

}  // namespace

void apply_maps(Result& result, std::span<const RecipeMap> maps, const MapChoice& choice) {
  result.tensors = take(result.tensors, maps, choice, [](const TensorEntry& a, const TensorEntry& b) {
    return a.item == b.item && a.step == b.step && a.layer == b.layer && a.tensor == b.tensor;
  });
  result.gemms = take(result.gemms, maps, choice, [](const GemmEntry& a, const GemmEntry& b) {
    return a.item == b.item && a.step == b.step && a.layer == b.layer && a.gemm == b.gemm;
  });
  for (const RecipeMap& m : maps) result.policies.push_back(m.name);
}

std::vector<float> to_bf16(std::span<const float> x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = std::bit_cast<float>(fp32_to_bf16_rne(std::bit_cast<std::uint32_t>(x[i])));
  }
  return out;
}

void accumulate_unscaled(std::span<const float> x, std::span<const double> reference, std::span<const float> xhat,
                         stats::TensorStats& out) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    out.error.add(reference.empty() ? static_cast<double>(x[i]) : reference[i], static_cast<double>(xhat[i]));
  }
}

}  // namespace detail

}  // namespace fp4sim::replay
