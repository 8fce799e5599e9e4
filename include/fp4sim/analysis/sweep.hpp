// Format sweeps (docs/cli.md `fp4sim sweep`): a grid over element format x scale format x block size x
// tensor-scale policy x rounding (x scale rule x block choice where given), run over the tensors of a trace (through replay, so periodic scaling
// follows the trace's steps) or over seeded synthetic distributions, reporting the fields of replay's
// `tensors` entries for every (input, grid point).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fp4sim/core/recipe.hpp"
#include "fp4sim/analysis/replay.hpp"

namespace fp4sim::sweep {

// A synthetic distribution, symmetric about 0, with optional outliers:
//   normal            N(0, 1)
//   laplace           Laplace(0, 1)
//   student-t:NU      Student's t with NU (integer 1..64) degrees of freedom
//   lognormal:SIGMA   ±exp(SIGMA·Z), sign uniform
// and the suffix "+outliers:P:K" multiplies each element by K with probability P.
// Every value comes from Philox4x32-10 keyed by the seed (random.hpp), so a (name, seed, shape) gives the
// same tensor everywhere (up to the last ulp of the platform's libm log/exp/sqrt/cos).
struct Distribution {
  enum class Kind : std::uint8_t { normal, laplace, student_t, lognormal } kind = Kind::normal;
  double parameter = 0.0;  // NU for student-t, SIGMA for lognormal
  double outlier_probability = 0.0;
  double outlier_scale = 1.0;
  std::string name;        // canonical text, as parsed
};
std::optional<Distribution> parse_distribution(std::string_view text);
// rows x cols values; `stream` separates distributions generated under one seed.
std::vector<float> generate(const Distribution& d, std::size_t rows, std::size_t cols, std::uint64_t seed,
                            std::uint64_t stream);


struct Grid {
  std::vector<Format> element_formats{formats::e2m1};
  std::vector<Format> scale_formats{formats::ue4m3, formats::ue5m3, formats::e8m0};
  std::vector<int> blocks{16, 32};
  // Tensor-scale policies (parse_tensor_scale; default: none, current): periodic:D on a trace holds for
  // D steps per the hold rule; on synthetic data the held amax is current amax / rho for every rho.
  std::vector<TensorScaleSetting> tensor_scales;
  std::vector<Rounding> roundings{Rounding::rne};
  // Scale rules; empty: each scale format's own (floor on a power-of-two format, two-level otherwise).
  // Given, each grid point names its rule, and every rule must suit every scale format (Call::resolve()).
  std::vector<ScaleRule> scale_rules;
  // Scale candidates per two-level block (single, TE's 4over6); empty: the base's. Given, each grid point
  // names its choice; a 4over6 choice without a tensor scale is skipped with the reason.
  std::vector<BlockScaleChoice> block_choices;
  std::vector<double> rhos{1.0};  // synthetic periodic only
  Recipe base = *find_recipe("ue5m3");  // the recipe every other field comes from
};

// One grid point as a recipe; nullopt with `why` when the combination is not a valid recipe (e.g. an
// E8M0 scale with a tensor scale). Without a scale rule, power-of-two scale formats use the OCP floor rule;
// without a block choice, the base's.
std::optional<Recipe> make_recipe(const Grid& grid, const Format& element, const Format& scale, int block,
                                  const TensorScaleSetting& ts, Rounding rounding, std::string& why,
                                  std::optional<ScaleRule> rule = std::nullopt,
                                  std::optional<BlockScaleChoice> choice = std::nullopt);

struct Options {
  Grid grid;
  // Synthetic input (used when `trace` is empty).
  std::vector<Distribution> distributions;
  std::size_t rows = 256, cols = 4096;
  Role role = Role::activation;  // how synthetic tensors are quantized (weight: 2-D tiles)
  // Trace input.
  std::filesystem::path trace;
  std::optional<std::vector<std::int64_t>> steps;
  std::vector<std::pair<std::int64_t, std::int64_t>> step_ranges;  // as replay::Options
  std::string layers;
  // Trace only: a recipe map whose `grid` rules take each grid point in turn (one policy per grid point,
  // named by it; docs/replay.md "Sweeps").
  std::optional<replay::RecipeMap> recipe_map;
  replay::HoldRule hold = replay::HoldRule::window;
  std::uint64_t seed = 0;
  std::size_t max_slab_bytes = std::size_t{256} << 20;
  ProgressFn progress;  // optional: tensor elements quantized of all (one tensor per input and configuration)
  // The part of the work this run does (share.hpp): on a trace, replay's units (a tensor of a layer); on
  // synthetic input, a distribution. `starting` as replay::Options::starting (synthetic: the item is the
  // distribution's index).
  Share share;
  std::function<void(std::uint64_t item)> starting;
};

struct Skipped {
  std::string config, reason;
};

struct Result {
  std::vector<replay::TensorEntry> tensors;  // recipe = grid point name; distribution set for synthetic
  std::vector<std::string> configs;          // grid point names in order
  std::vector<Skipped> skipped;
  std::string input;                         // trace path or "synthetic"
  std::string recipe_map;                    // the map's text, where one was given
  std::uint64_t seed = 0;
  std::size_t rows = 0, cols = 0;
  // Run metadata (as replay::Result's):
  double seconds = 0.0;
  int shares = 1;
};

Result run(const Options& options);
// The results of every share of one run, as one process would have returned it (replay::merge's rules).
Result merge(std::vector<Result> shares);

void write_json(const Result& r, std::ostream& os);  // {"kind":"sweep", ..., "tensors":[...], "skipped":[...]}
void write_csv(const Result& r, std::ostream& os);   // replay's tensor columns
std::string summary(const Result& r);                // SQNR per configuration and input, best per input

}  // namespace fp4sim::sweep
