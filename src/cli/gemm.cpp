// `fp4sim gemm`: C = A·Bᵀ with both operands quantized along K under a recipe, accumulated by a
// datapath (docs/cli.md); `fp4sim gemm --list-datapaths` prints the datapath table.
#include <cstdio>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/npy.hpp"
#include "arguments.hpp"
#include "progress.hpp"

namespace fp4sim::cli {

namespace {

struct GemmCliOptions {
  GemmCall call;
  bool list = false;
  bool json = false;
  std::string a, b, out;
  std::string rbits_a, rbits_b;
  ProgressMode progress = ProgressMode::automatic;
};

void list_datapaths(bool json) {
  const auto rows = datapath_presets();
  if (json) {
    std::printf("[\n");
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::printf("  %s%s\n", describe_parameters_json(*rows[i]).c_str(), i + 1 < rows.size() ? "," : "");
    std::printf("]\n");
    return;
  }
  for (const Datapath* dp : rows) {
    std::printf("%s\n  %s\n  parameters: %s\n  source: %s\n", std::string(dp->name).c_str(),
                std::string(dp->summary).c_str(), describe_parameters(*dp).c_str(), std::string(dp->source).c_str());
  }
}

void run_gemm(const GemmCliOptions& o) {
  if (o.list) {
    list_datapaths(o.json);
    return;
  }
  if (o.call.recipe.recipe.empty()) throw UsageError("gemm: --recipe is required (or --list-datapaths)");
  if (o.a.empty() || o.b.empty()) throw UsageError("gemm: --a and --b are required");
  GemmCall call = o.call;
  call.a.random_bits = !o.rbits_a.empty();
  call.b.random_bits = !o.rbits_b.empty();
  GemmCall::Resolved r = call.resolve();

  const npy::Array arr_a = npy::read(o.a), arr_b = npy::read(o.b);
  check_gemm_shapes({o.a, arr_a.shape}, {o.b, arr_b.shape});
  const std::vector<float> a = npy::as_float32(arr_a, o.a), b = npy::as_float32(arr_b, o.b);
  const auto bits_a = attach_random_bits(random_bits_file(o.rbits_a), arr_a.shape, r.recipe.sr_bits, r.a);
  const auto bits_b = attach_random_bits(random_bits_file(o.rbits_b), arr_b.shape, r.recipe.sr_bits, r.b);

  const QuantizedTensor qa = quantize(r.recipe, r.a, a, arr_a.rows(), arr_a.cols());
  const QuantizedTensor qb = quantize(r.recipe, r.b, b, arr_b.rows(), arr_b.cols());
  GemmOptions options = resolve_gemm(r.recipe, qa, qb, r.request);
  Progress progress(o.progress, options.impl == GemmImpl::fast ? "tiles" : "rows");
  options.progress = progress.callback();
  const std::vector<float> c = gemm(qa, qb, options);
  if (!o.out.empty()) {
    npy::write(o.out, npy::DType::f4, {qa.rows, qb.rows}, c.data());
  } else {
    std::printf("C [%zu, %zu] = A·Bᵀ, recipe %s, gemm %s, datapath %s, alpha %.9g\n", qa.rows, qb.rows,
                r.recipe.name.c_str(), call.gemm.c_str(), std::string(options.datapath->name).c_str(),
                static_cast<double>(options.alpha));
  }
}

}  // namespace

void setup_gemm(CLI::App& app) {
  auto o = std::make_shared<GemmCliOptions>();
  GemmCall& c = o->call;
  add_recipe_options(app, c.recipe);
  app.get_option("--recipe")->required(false);
  app.add_flag("--list-datapaths", o->list, "describe every datapath: parameters and source");
  app.add_flag("--json", o->json, "with --list-datapaths: a JSON array");
  app.add_option("--a", o->a, "operand A [M, K] (.npy float32)");
  app.add_option("--b", o->b, "operand B [N, K] (.npy float32); C = A·Bᵀ");
  add_gemm_options(app, c, o->rbits_a, o->rbits_b);
  app.get_option("--datapath")
      ->description("accumulation datapath (default: the recipe's; --list-datapaths has the parameters):" +
                    datapath_help());
  app.add_option("--out", o->out, "output C [M, N] (.npy float32)")->check(not_empty_path());
  add_progress_flags(app, o->progress);
  add_example(app, "fp4sim gemm --recipe ue5m3 --a x.npy --b w.npy --datapath exact --out c.npy");
  app.callback([o] { run_gemm(*o); });
}

}  // namespace fp4sim::cli
