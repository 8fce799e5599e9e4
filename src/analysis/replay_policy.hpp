// Recipe maps inside replay (not public; docs/replay.md "Recipe maps"): the columns a run with maps
// replays (every recipe the maps name, then bf16), which column each map takes per step and layer, and
// the entries of each map cut out of the columns' entries.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fp4sim/analysis/replay.hpp"
#include "replay_select.hpp"

namespace fp4sim::replay::detail {

inline constexpr const char* kBf16 = "bf16";

// The recipes the maps name, each once in the order first named, and whether one names bf16.
struct MapColumns {
  std::vector<Recipe> recipes;
  bool bf16 = false;
};
MapColumns map_columns(std::span<const RecipeMap> maps);

// Per map, the column name (recipe or "bf16") it takes at each (step, layer name) of the selection.
// UsageError naming {recipe_map} when a map leaves a selected layer unmatched, or holds a rule that is the
// first match of no selected (step, layer).
using MapChoice = std::vector<std::map<std::pair<std::int64_t, std::string>, std::string>>;
MapChoice resolve_maps(std::span<const RecipeMap> maps, const Selection& selection);

// The result's entries as the maps take them: for each tensor (and each GEMM of a layer), one entry per
// map, in map order, labelled with the map's name; headroom entries stay as they are.
void apply_maps(Result& result, std::span<const RecipeMap> maps, const MapChoice& choice);

// A bf16 column's tensor entry as far as that decides it (tensor_entry's counterpart): no blocks, no scale.
TensorEntry bf16_entry(Role role, Gemm view, std::size_t rows, std::size_t cols);
// x rounded RNE to BF16 (NaN stays NaN, overflow goes to Inf as IEEE 754 conversions do).
std::vector<float> to_bf16(std::span<const float> x);
// The error figures of x-hat against x (`reference` when not empty), for a tensor that is not block-scaled:
// no blocks and no quantizer counts.
void accumulate_unscaled(std::span<const float> x, std::span<const double> reference, std::span<const float> xhat,
                         stats::TensorStats& out);

}  // namespace fp4sim::replay::detail
