#include "analysis_ops.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <tuple>

#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/front/arguments.hpp"
#include "fp4sim/front/recipe_spec.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/quantize.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp4sim::python {

namespace {

// (the --json text, the summary table) of `fp4sim replay TRACE` with the options of `call`.
std::tuple<std::string, std::string> replay_py(const std::string& trace, const replay::Call& call) {
  const replay::Options options = call.resolve();
  replay::Result result;
  {
    nb::gil_scoped_release release;
    result = replay::run(trace, options);
  }
  std::ostringstream json;
  replay::write_json(result, json);
  return {json.str(), front::render(replay::summary(result), front::Spelling::python)};
}

std::tuple<std::string, std::string> sweep_py(const sweep::Call& call) {
  const sweep::Options options = call.resolve();
  sweep::Result result;
  {
    nb::gil_scoped_release release;
    result = sweep::run(options);
  }
  std::ostringstream json;
  sweep::write_json(result, json);
  return {json.str(), sweep::summary(result)};
}

}  // namespace

void register_analysis_ops(nb::module_& m) {
  m.def(
      "replay",
      [](const std::string& trace, std::string recipes, std::optional<std::string> recipe_map, std::string datapath, std::string steps,
         std::string layers, std::uint64_t seed, std::string hold, bool gemms, int period, double slab_mib) {
        replay::Call call;
        call.recipes = front::recipe_spec_list(recipes);
        call.recipe_map = std::move(recipe_map);
        call.datapath = std::move(datapath);
        call.steps = std::move(steps);
        call.layers = std::move(layers);
        call.seed = seed;
        call.hold = std::move(hold);
        call.gemms = gemms;
        call.period = period;
        call.slab_mib = slab_mib;
        return replay_py(trace, call);
      },
      "trace"_a, "recipes"_a, "recipe_map"_a, "datapath"_a, "steps"_a, "layers"_a, "seed"_a, "hold"_a, "gemms"_a, "period"_a,
      "slab_mib"_a);
  m.def(
      "sweep",
      [](std::string trace, std::string synthetic, std::size_t rows, std::size_t cols, std::string role,
         std::string element_formats, std::string scale_formats, std::string blocks, std::string tensor_scales,
         std::string roundings, std::string rhos, std::string base, std::string steps, std::string layers,
         std::optional<std::string> recipe_map, std::string hold, std::uint64_t seed, double slab_mib) {
        sweep::Call call;
        call.trace = std::move(trace);
        call.synthetic = std::move(synthetic);
        call.rows = rows;
        call.cols = cols;
        call.role = std::move(role);
        call.element_formats = std::move(element_formats);
        call.scale_formats = std::move(scale_formats);
        call.blocks = std::move(blocks);
        call.tensor_scales = std::move(tensor_scales);
        call.roundings = std::move(roundings);
        call.rhos = std::move(rhos);
        call.base = front::recipe_spec(base, "base");
        call.steps = std::move(steps);
        call.layers = std::move(layers);
        call.recipe_map = std::move(recipe_map);
        call.hold = std::move(hold);
        call.seed = seed;
        call.slab_mib = slab_mib;
        return sweep_py(call);
      },
      "trace"_a, "synthetic"_a, "rows"_a, "cols"_a, "role"_a, "element_formats"_a, "scale_formats"_a, "blocks"_a,
      "tensor_scales"_a, "roundings"_a, "rhos"_a, "base"_a, "steps"_a, "layers"_a, "recipe_map"_a, "hold"_a, "seed"_a, "slab_mib"_a);
}

}  // namespace fp4sim::python
