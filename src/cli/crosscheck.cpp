// `fp4sim crosscheck` (docs/cli.md): the flags of fp4sim::crosscheck::Options; the engine is the library's
// (emu/crosscheck.cpp). Exit 4 on any mismatch, 3 when no GPU can run the kernels or this fp4sim was
// built without CUDA: nothing can be checked, and crosscheck never reports success without a GPU.
#include <cstdio>
#include <memory>
#include <regex>

#include "arguments.hpp"
#include "cli.hpp"
#include "progress.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/crosscheck.hpp"
#include "fp4sim/front/recipe_spec.hpp"
#include "fp4sim/verify/profiles.hpp"

namespace fp4sim::cli {

namespace {

struct CrosscheckCliOptions {
  crosscheck::Options run;
  std::vector<std::string> recipes;
  ProgressMode progress = ProgressMode::automatic;
};

// The recipes one --recipe value names: "all" (the default set), "profiles" (every stack profile,
// docs/recipes.md, whose settings the GPU kernels serve), or a recipe spec (a preset or a stack profile, and
// :KEY=VALUE,...). Resolved before the GPU is looked for: a bad name is a usage error anywhere.
void add_recipes(const std::string& name, std::vector<Recipe>& out) {
  if (name == "all") {
    const std::vector<Recipe> all = crosscheck::default_recipes();
    out.insert(out.end(), all.begin(), all.end());
  } else if (name == "profiles") {
    for (const StackProfile& p : stack_profiles()) {
      Recipe r = front::recipe_spec(p.name).resolve();
      if (cpu_only_settings(r).empty()) out.push_back(std::move(r));
    }
  } else {
    Recipe r = front::recipe_spec(name).resolve();
    const auto keys = cpu_only_settings(r);
    if (!keys.empty()) {
      throw UsageError("crosscheck: recipe " + r.name + " sets " + std::string(keys.front()) +
                       ", which only the CPU golden model implements: no GPU kernel to check");
    }
    out.push_back(std::move(r));
  }
}

void run_crosscheck(const CrosscheckCliOptions& cli) {
  std::vector<Recipe> recipes;
  for (const std::string& name : cli.recipes) add_recipes(name, recipes);
#if defined(FP4SIM_HAVE_CUDA)
  crosscheck::Options o = cli.run;
  o.recipes = std::move(recipes);
  // Two counts, one after the other: quantize elements, then GEMMs (the label says which).
  Progress progress(cli.progress, "");
  o.progress = progress.callback();
  const std::uint64_t mismatches = crosscheck::run(o, stdout);
  if (mismatches != 0) {
    throw Mismatch("crosscheck: " + std::to_string(mismatches) + " mismatches between the GPU kernels and the golden model");
  }
  std::printf("crosscheck: no mismatches\n");
#else
  (void)cli;
  throw DataError("crosscheck: this fp4sim was built without CUDA (FP4SIM_CUDA=OFF), so no GPU kernel can be checked");
#endif
}

}  // namespace

void setup_crosscheck(CLI::App& app) {
  auto cli = std::make_shared<CrosscheckCliOptions>();
  crosscheck::Options* o = &cli->run;
  app.add_option("--recipe", cli->recipes,
                 "what to check: all (default), profiles (every stack profile the kernels serve), a stack profile "
                 "or a recipe spec PRESET[:KEY=VALUE,...]");
  std::string known;
  for (const std::string& path : crosscheck::all_paths()) known += (known.empty() ? "" : " ") + path;
  app.add_option("--paths", o->paths, known + " (default: all)");
  app.add_option("--elements", o->elements, "quantize elements per preset (default 1e8)");
  app.add_option("--gemms", o->gemms, "random GEMMs in total (default 10000)");
  app.add_option("--large-gemms", o->large_gemms, "how many of them are large (default 4)");
  app.add_option("--max-gemm", o->max_gemm, "M = N of the large GEMMs, K up to 4x (default 1024)");
  // Checked here, before the GPU is looked for, so a malformed shape is a usage error (2) on any machine.
  app.add_option("--shape", o->shapes, "extra GEMMs MxNxK (e.g. 1024x1024x4096), checked with the first recipe")
      ->check(CLI::Validator(
          [](std::string& text) {
            static const std::regex shape(R"([1-9][0-9]{0,8}x[1-9][0-9]{0,8}x[1-9][0-9]{0,8})");
            return std::regex_match(text, shape) ? std::string() : "--shape wants MxNxK (positive integers), got '" + text + "'";
          },
          "MxNxK"));
  app.add_option("--seed", o->seed, "seed of the case generator (default 1)");
  app.add_flag("--verbose", o->verbose, "print every case");
  add_example(app, "fp4sim crosscheck --recipe nvfp4 --gemms 100 --seed 11");
  add_progress_flags(app, cli->progress);
  app.callback([cli] { run_crosscheck(*cli); });
}

}  // namespace fp4sim::cli
