// A recipe as users name it wherever a call takes one (docs/cli.md "User-defined recipes"): a preset or a
// stack profile (verify/profiles.hpp: a preset and overrides), or either with overrides on top,
// PRESET:KEY=VALUE,KEY=VALUE,... with the keys and value spellings of the recipe
// override rows (recipe_arguments(): scale_rule=rceil, block=16, two_d=false, target=256, ...), e.g.
// mxfp4:scale_rule=rceil,block=16. The one parser of that text, for the command line and Python alike;
// the library receives RecipeOverrides and never the text. The spec as written is the recipe's name in
// every output.
#pragma once

#include <string_view>
#include <vector>

#include "fp4sim/core/recipe_overrides.hpp"

namespace fp4sim::front {

// The overrides `spec` names, its name the spec. A switch's value is true or false; a name, one of its
// table's; a number, in its row's range. The spec must name a valid recipe on its own (resolve() passes).
// UsageError "{key} 'SPEC': what is wrong", the override named as the spec writes it (`key`: the
// argument that took the spec, for the front end to spell).
RecipeOverrides recipe_spec(std::string_view spec, std::string_view key = "recipe");

// Recipe specs separated by ',', where an item KEY=VALUE continues the spec before it (no preset holds
// '='): "nvfp4,mxfp4:scale_rule=rceil,block=16" is nvfp4 and mxfp4 with two overrides, and "a,b" of
// plain presets is what it always was. UsageError naming `key` for an empty list, a bad spec or a name
// given twice.
std::vector<RecipeOverrides> recipe_spec_list(std::string_view list, std::string_view key = "recipes");

}  // namespace fp4sim::front
