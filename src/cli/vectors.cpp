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
#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/front/analysis_arguments.hpp"

namespace fp4sim::cli {

namespace {

struct VectorsOptions {
  vectors::Call call;
  std::string out;
};

// Discriminating GEMM inputs.
void run_discriminate(const VectorsOptions& o, const vectors::Call::Resolved& r) {
  const std::size_t files = vectors::write_discriminating(r.recipe, r.discriminate, o.call.seed, r.cases, o.out);
  std::string names;
  for (const Datapath* dp : r.discriminate) names += (names.empty() ? "" : ", ") + std::string(dp->name);
  std::printf("vectors: %zu GEMM cases for recipe %s (seed %llu) on which %s differ, in %s: manifest.json and %zu .npy "
              "files\n",
              r.cases, r.recipe.name.c_str(), static_cast<unsigned long long>(o.call.seed), names.c_str(), o.out.c_str(),
              files - 1);
}

void run_vectors(const VectorsOptions& o) {
  const vectors::Call::Resolved r = o.call.resolve();
  if (!r.discriminate.empty()) return run_discriminate(o, r);
  const std::size_t files = vectors::write(r.recipe, o.call.seed, r.cases, o.out);
  std::printf("vectors: %zu cases for recipe %s (seed %llu) in %s: manifest.json and %zu .npy files\n", r.cases,
              r.recipe.name.c_str(), static_cast<unsigned long long>(o.call.seed), o.out.c_str(), files - 1);
}

}  // namespace

void setup_vectors(CLI::App& app) {
  auto o = std::make_shared<VectorsOptions>();
  add_arguments(app, front::vectors_arguments(), o->call);
  app.add_option("--out", o->out,
                 "output directory: must not exist or be empty; manifest.json and the .npy files appear together "
                 "or not at all")
      ->required()
      ->check(not_empty_path());
  add_example(app, "fp4sim vectors --recipe mxfp4 --out vectors-mxfp4");
  add_example(app, "fp4sim vectors --profile nvfp4-rht-float32 --out vectors-te-reference-rht");
  add_example(app, "fp4sim vectors --recipe nvfp4 --discriminate sm100-mxf4nvf4,probe-matched --out which-path");
  app.callback([o] { run_vectors(*o); });
}

}  // namespace fp4sim::cli
