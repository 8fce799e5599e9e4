// `fp4sim vectors` (docs/cli.md): conformance vectors of a recipe written to a directory (fp4sim::vectors).
#include <cstdio>
#include <memory>
#include <string>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/analysis/vectors.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/front/recipe_spec.hpp"

namespace fp4sim::cli {

namespace {

struct VectorsOptions {
  std::string recipe, out;
  std::optional<std::size_t> cases;
  std::uint64_t seed = 0;
  std::vector<std::string> discriminate;
};

// Discriminating GEMM inputs: 4 cases unless --cases says otherwise.
void run_discriminate(const VectorsOptions& o, const Recipe& recipe) {
  std::vector<const Datapath*> rows;
  for (std::string name : o.discriminate) {
    std::erase(name, ' ');  // "a, b" as "a,b"
    rows.push_back(&datapath_argument(name, "--discriminate"));
  }
  const std::size_t cases = o.cases.value_or(4);
  const std::size_t files = vectors::write_discriminating(recipe, rows, o.seed, cases, o.out);
  std::string names;
  for (const Datapath* dp : rows) names += (names.empty() ? "" : ", ") + std::string(dp->name);
  std::printf("vectors: %zu GEMM cases for recipe %s (seed %llu) on which %s differ, in %s: manifest.json and %zu .npy "
              "files\n",
              cases, recipe.name.c_str(), static_cast<unsigned long long>(o.seed), names.c_str(), o.out.c_str(),
              files - 1);
}

void run_vectors(const VectorsOptions& o) {
  const Recipe recipe = front::recipe_spec(o.recipe).resolve();
  if (!o.discriminate.empty()) return run_discriminate(o, recipe);
  const std::size_t cases = o.cases.value_or(vectors::default_cases(recipe));
  const std::size_t files = vectors::write(recipe, o.seed, cases, o.out);
  std::printf("vectors: %zu cases for recipe %s (seed %llu) in %s: manifest.json and %zu .npy files\n",
              cases, recipe.name.c_str(), static_cast<unsigned long long>(o.seed), o.out.c_str(),
              files - 1);
}

}  // namespace

void setup_vectors(CLI::App& app) {
  auto o = std::make_shared<VectorsOptions>();
  add_recipe_option(app, o->recipe)->required();
  app.add_option("--cases", o->cases,
                 "number of cases: the recipe's edge cases first, then random tensors (default: the edge cases "
                 "plus 4)");
  app.add_option("--discriminate", o->discriminate,
                 "instead of the conformance vectors, GEMM inputs on which these datapaths (two or more, "
                 "comma-separated) give different outputs, with each one's C (default 4 cases)")
      ->delimiter(',');
  app.add_option("--seed", o->seed, "seed of the input draws and of the Philox stochastic-rounding bits")
      ->default_val(0);
  app.add_option("--out", o->out,
                 "output directory: must not exist or be empty; manifest.json and the .npy files appear together "
                 "or not at all")
      ->required()
      ->check(not_empty_path());
  add_example(app, "fp4sim vectors --recipe mxfp4 --out vectors-mxfp4");
  add_example(app, "fp4sim vectors --recipe nvfp4 --discriminate sm100-mxf4nvf4,probe-matched --out which-path");
  app.callback([o] { run_vectors(*o); });
}

}  // namespace fp4sim::cli
