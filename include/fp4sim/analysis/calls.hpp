// The arguments of `replay`, `sweep` and `vectors` as the command line gives them (lists and names as text; recipes
// as their front end parsed them, fp4sim/front/recipe_spec.hpp), and the one place they are checked and
// turned into replay::Options, sweep::Options and the recipe, rows and count of vectors. The front ends' argument tables set these fields
// (fp4sim/front/analysis_arguments.hpp): this header needs neither HDF5 nor the analysis library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/recipe_overrides.hpp"

namespace fp4sim::replay {
struct Options;  // fp4sim/analysis/replay.hpp
}  // namespace fp4sim::replay
namespace fp4sim::sweep {
struct Options;  // fp4sim/analysis/sweep.hpp
}  // namespace fp4sim::sweep

namespace fp4sim::replay {

struct Call {
  std::vector<RecipeOverrides> recipes;       // none: ue5m3, nvfp4, mxfp4 (replay::Options' default)
  std::optional<std::string> recipe_map;      // recipe maps (parse_recipe_maps); given, they replace `recipes`
  std::string datapath = "recipe";            // recipe, f64, or a datapath name
  std::string steps;                          // "1,200,300-310" ("": every captured step)
  std::string layers;                         // ECMAScript regex searched in layer names
  std::uint64_t seed = 0;
  std::string hold = "window";
  bool gemms = true;
  int period = 50;                            // D of the Proposition 1 headroom analysis
  double slab_mib = 256;                      // stream tensors larger than this in row slabs

  Options resolve() const;  // UsageError
};

}  // namespace fp4sim::replay

namespace fp4sim::sweep {

struct Call {
  std::string trace;  // "": synthetic distributions
  std::string synthetic = "normal,laplace,student-t:3,lognormal:1,normal+outliers:0.001:100";
  std::size_t rows = 256, cols = 4096;
  std::string role = "activation";
  std::string element_formats = "e2m1", scale_formats = "ue4m3,ue5m3,e8m0", blocks = "16,32";
  std::string tensor_scales = "none,current", roundings = "rne", rhos = "1";
  std::string scale_rules;    // "": each scale format's own rule (floor on e8m0, two-level otherwise)
  std::string block_choices;  // "": the base's
  std::optional<RecipeOverrides> base;  // the recipe every setting outside the grid comes from (none: ue5m3)
  std::string steps, layers, hold = "window";
  std::optional<std::string> recipe_map;  // trace only: one map with `grid` rules (parse_recipe_maps)
  std::uint64_t seed = 0;
  double slab_mib = 256;  // stream trace tensors larger than this in row slabs

  Options resolve() const;  // UsageError
};

}  // namespace fp4sim::sweep

namespace fp4sim::vectors {

struct Call {
  RecipeOverrides recipe;             // a preset or a user-defined recipe (this or `profile` required)
  std::optional<RecipeOverrides> profile;  // a stack profile's preset and overrides, named as the profile
  std::optional<std::size_t> cases;   // none: the recipe's edge cases plus 4 (discriminating inputs: 4)
  std::uint64_t seed = 0;
  std::string discriminate;           // datapaths separated by ',' ("": the conformance vectors)

  struct Resolved {
    Recipe recipe;
    std::vector<const Datapath*> discriminate;  // empty: the conformance vectors
    std::size_t cases = 0;
  };
  Resolved resolve() const;  // UsageError
};

}  // namespace fp4sim::vectors
