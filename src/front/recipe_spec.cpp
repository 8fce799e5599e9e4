#include "fp4sim/front/recipe_spec.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/front/arguments.hpp"
#include "fp4sim/verify/profiles.hpp"

namespace fp4sim::front {

namespace {

constexpr auto npos = std::string_view::npos;

std::string_view trimmed(std::string_view text) {
  const std::size_t first = text.find_first_not_of(' ');
  if (first == npos) return {};
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

// The items of `text` between ',' (trimmed; empty ones kept for the caller to judge).
std::vector<std::string_view> items_of(std::string_view text) {
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    items.push_back(trimmed(text.substr(start, comma == npos ? npos : comma - start)));
    if (comma == npos) return items;
    start = comma + 1;
  }
}

// 'text' (built by append: GCC 12 sees a false -Wrestrict in "'" + std::string(text))
std::string quoted(std::string_view text) {
  std::string out = "'";
  out.append(text).append("'");
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// A problem of one spec, as one line: "{key} 'SPEC': why".
struct SpecProblem {
  std::string key, spec;
  [[noreturn]] void operator()(const std::string& why) const {
    throw UsageError("{" + key + "} '" + spec + "': " + why);
  }
};

// The value of override `row` written as `text`, as the row's type takes it (CLI11 and Python check the
// same for their own spellings: src/cli/arguments.cpp, python/operand.cpp).
ArgValue value_of(const Argument<RecipeOverrides>& row, std::string_view text, const SpecProblem& fail) {
  const std::string item = std::string(row.key) + "=" + std::string(text);
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  switch (row.type) {
    case ArgType::switch_:
      if (text == "true") return true;
      if (text == "false") return false;
      fail(item + ": expected true or false");
    case ArgType::integer: {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(first, last, v);
      if (text.empty() || ec != std::errc{} || end != last) fail(item + ": not an integer");
      if (row.min <= row.max && (v < row.min || v > row.max)) {
        fail(item + ": must be between " + std::to_string(row.min) + " and " + std::to_string(row.max));
      }
      return v;
    }
    case ArgType::count: {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(first, last, v);
      if (text.empty() || ec != std::errc{} || end != last) fail(item + ": not an unsigned integer");
      return v;
    }
    case ArgType::real: {
      const std::string number(text);
      char* end = nullptr;
      const double v = std::strtod(number.c_str(), &end);
      if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(v)) {
        fail(item + ": not a finite number");
      }
      return v;
    }
    case ArgType::text: {
      if (text.empty()) fail(item + ": an empty value names nothing");
      if (row.names) {
        const std::vector<std::string> names = row.names();
        bool known = false;
        for (const std::string& n : names) known = known || n == text;
        if (!known) fail(item + ": unknown name (known: " + joined(names) + ")");
      }
      return std::string(text);
    }
  }
  fail(item + ": unknown argument type");
}

const Argument<RecipeOverrides>* override_row(std::string_view key) {
  for (const auto& row : recipe_arguments()) {
    if (row.key == key && row.key != "recipe") return &row;
  }
  return nullptr;
}

std::string override_keys() {
  std::string keys;
  for (const auto& row : recipe_arguments()) {
    if (row.key != "recipe") keys += (keys.empty() ? "" : ", ") + std::string(row.key);
  }
  return keys;
}

// What a spec may start from: a preset, or a stack profile (a preset and overrides, docs/recipes.md), the
// overrides after ':' then applied on top. False for neither.
bool start_from(std::string_view head, RecipeOverrides& o) {
  if (find_recipe(head)) {
    o.recipe = head;
    return true;
  }
  const StackProfile* p = find_profile(head);
  if (!p) return false;
  o = p->recipe;
  o.name = head;
  return true;
}

std::string known_recipes() {
  std::string known = recipe_names();
  for (const StackProfile& p : stack_profiles()) {
    if (!find_recipe(p.name)) known += ", " + p.name;
  }
  return known;
}

}  // namespace

RecipeOverrides recipe_spec(std::string_view text, std::string_view key) {
  const std::string_view spec = trimmed(text);
  const SpecProblem fail{std::string(key), std::string(spec)};
  // outputs name files and plots after their recipes
  if (spec.find('/') != npos) fail("a recipe's name holds no '/'");
  const std::size_t colon = spec.find(':');
  const std::string_view head = trimmed(spec.substr(0, colon));
  RecipeOverrides o;
  if (colon == npos) {  // a preset or a stack profile
    if (!start_from(head, o)) {
      throw UsageError("{" + fail.key + "}: unknown recipe '" + std::string(head) + "' (known: " + known_recipes() +
                       ")");
    }
    return o;
  }
  if (!start_from(head, o)) fail("unknown preset or profile '" + std::string(head) + "' (known: " + known_recipes() + ")");
  std::string name = std::string(head) + ":";
  std::set<std::string_view> given;
  for (const std::string_view item : items_of(spec.substr(colon + 1))) {
    const std::size_t eq = item.find('=');
    if (item.empty() || eq == npos) {
      fail(quoted(item) + " is no override KEY=VALUE (after ':' and between ',')");
    }
    const std::string_view k = trimmed(item.substr(0, eq)), v = trimmed(item.substr(eq + 1));
    const Argument<RecipeOverrides>* row = override_row(k);
    if (!row) fail("unknown override '" + std::string(k) + "' (keys: " + override_keys() + ")");
    if (!given.insert(k).second) fail(std::string(k) + " is given twice");
    row->set(o, value_of(*row, v, fail));
    if (given.size() > 1) name += ',';
    name.append(k).append("=").append(v);
  }
  o.name = name;
  try {
    (void)o.resolve();  // the spec is a recipe on its own: a bad combination is its problem
  } catch (const UsageError& e) {
    fail(render_keys(e.keyed(), [](std::string_view k, std::string_view v) {
      std::string bare(k);  // as the spec writes it: block, two_d=false
      if (!v.empty()) bare.append("=").append(v);
      return bare;
    }));
  }
  return o;
}

std::vector<RecipeOverrides> recipe_spec_list(std::string_view list, std::string_view key) {
  const std::string k(key);
  std::vector<std::string> specs;
  for (const std::string_view item : items_of(list)) {
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == npos || item.substr(0, eq).find(':') != npos) {
      specs.emplace_back(item);
      continue;
    }
    // KEY=VALUE: the next override of the spec before it
    if (specs.empty()) throw UsageError("{" + k + "}: " + quoted(item) + " follows no recipe (PRESET:KEY=VALUE)");
    std::string& spec = specs.back();
    if (spec.find(':') == std::string::npos) {
      throw UsageError("{" + k + "}: " + quoted(item) + " follows the preset " + spec + " without ':' (" + spec + ":" +
                       std::string(item) + ")");
    }
    spec.append(",").append(item);
  }
  if (specs.empty()) throw UsageError("{" + k + "}: no recipe named");
  std::vector<RecipeOverrides> recipes;
  std::set<std::string> names;
  for (const std::string& spec : specs) {
    RecipeOverrides o = recipe_spec(spec, key);
    const std::string& name = o.name.empty() ? o.recipe : o.name;
    if (!names.insert(name).second) throw UsageError("{" + k + "}: '" + name + "' is named twice");
    recipes.push_back(std::move(o));
  }
  return recipes;
}

}  // namespace fp4sim::front
