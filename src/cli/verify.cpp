// `fp4sim verify quantize|gemm` (docs/cli.md): the user's kernel output judged by the golden model.
//
// The tensor-scale flag: docs/cli.md gives `verify quantize` a `--tensor-scale V` (the user's FP32 tensor
// scale), while the recipe overrides shared with `quantize` use `--tensor-scale none|current|periodic:D`
// for the policy. Both meanings stay on the one flag, told apart by the value: a policy name is the
// override, a number (decimal or C99 hex float, e.g. 74.6666641 or 0x1.2aaaaap+6) is the user's value.
// The unambiguous spellings `--tensor-scale-value V` and `--tensor-scale-policy P` exist too; giving
// one meaning twice is a usage error.
#include <cstdio>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/verify/verify_call.hpp"
#include "arguments.hpp"
#include "progress.hpp"

namespace fp4sim::cli {

namespace {

struct VerifyQuantizeOptions {
  VerifyQuantizeCall call;
  std::string rbits, in, codes, scales;
  bool json = false;
};

std::vector<std::uint8_t> read_bytes(const std::string& path, std::vector<std::size_t>* shape) {
  const npy::Array a = npy::read(path);
  if (a.dtype != npy::DType::u1) throw DataError(path + ": expected uint8 bytes, got " + npy::dtype_descr(a.dtype));
  *shape = a.shape;
  return a.bytes;
}

// A report names the arguments that would explain a mismatch by key: spelled here as flags.
void print(const std::string& report) {
  const std::string text = front::render(report, front::Spelling::cli);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void run_verify_quantize(const VerifyQuantizeOptions& o) {
  VerifyQuantizeCall call = o.call;
  call.quantize.operand.random_bits = !o.rbits.empty();
  VerifyQuantizeCall::Resolved r = call.resolve();
  const npy::Array input = npy::read(o.in);
  const std::vector<float> x = npy::as_float32(input, o.in);
  const auto random =
      attach_random_bits(random_bits_file(o.rbits), input.shape, r.recipe.sr_bits, r.request.quantize);
  const std::vector<std::uint8_t> codes = read_bytes(o.codes, &r.theirs.codes_shape);
  const std::vector<std::uint8_t> scales = read_bytes(o.scales, &r.theirs.scales_shape);
  r.theirs.codes = codes;
  r.theirs.scales = scales;
  r.theirs.codes_source = o.codes;
  r.theirs.scales_source = o.scales;
  if (r.auto_profile) {
    std::vector<std::vector<std::uint32_t>> bits;  // each profile's own check of the explicit bits
    for (ProfileCandidate& p : r.profiles) {
      if (!p.error.empty()) continue;
      try {
        bits.push_back(attach_random_bits(random_bits_file(o.rbits), input.shape, p.recipe.sr_bits, p.request));
      } catch (const UsageError& e) {
        p.error = e.what();
      }
    }
    const ProfileRanking ranking =
        rank_profiles(r.profiles, r.request.role, r.request.max_explained, x, input.rows(), input.cols(), r.theirs);
    print(o.json ? to_json(ranking) : to_text(ranking));
    if (!ranking.bit_exact()) {
      throw Mismatch("verify quantize --profile auto: no stack profile reproduces every byte; the best, " +
                     ranking.fits.front().name + ", leaves " + std::to_string(ranking.best.mismatched_elements) +
                     " element and " + std::to_string(ranking.best.mismatched_scales) + " scale mismatch(es) (exit 4)");
    }
    return;
  }
  const QuantizeVerifyReport report = verify_quantize(r.recipe, r.request, x, input.rows(), input.cols(), r.theirs);
  print(o.json ? to_json(report) : to_text(report));
  if (!report.bit_exact()) {
    throw Mismatch("verify quantize: " + std::to_string(report.mismatched_elements) + " element and " +
                   std::to_string(report.mismatched_scales) + " scale mismatch(es)" +
                   (report.tensor_scale_mismatch ? ", tensor scale differs" : "") + " (exit 4)");
  }
}

void setup_verify_quantize(CLI::App& app) {
  auto o = std::make_shared<VerifyQuantizeOptions>();
  VerifyQuantizeCall& c = o->call;
  add_recipe_options(app, c.quantize.recipe);
  app.get_option("--recipe")->required(false);  // or --profile (the call's check says which is missing)
  app.get_option("--tensor-scale")
      ->description("a number: your FP32 tensor scale, compared with the golden one (see --tensor-scale-kind); "
                    "none, current or periodic:D: the tensor-scale policy override");
  add_arguments(app, front::quantize_arguments(), c.quantize);
  app.add_option("--rbits", o->rbits, "explicit stochastic-rounding integers (.npy uint8, shape of --in)");
  app.add_option("--in", o->in, "input tensor .npy (float32, 1-D or 2-D)")->required();
  app.add_option("--codes", o->codes, "your packed E2M1 codes .npy (uint8 [rows, ceil(cols/2)]; see --nibbles; MXFP8: [rows, cols])")
      ->required();
  app.add_option("--scales", o->scales, "your block-scale bytes .npy (uint8; see --layout)")->required();
  add_arguments(app, front::verify_quantize_arguments(), c);
  app.add_flag("--json", o->json, "print one JSON object instead of text");
  add_example(app, "fp4sim verify quantize --recipe nvfp4 --in x.npy --codes my_codes.npy --scales my_scales.npy");
  add_example(app, "fp4sim verify quantize --profile auto --in x.npy --codes my_codes.npy --scales my_scales.npy");
  app.callback([o] { run_verify_quantize(*o); });
}

// ---------------------------------------------------------------------------------------------------
// verify gemm

struct VerifyGemmOptions {
  VerifyGemmCall call;
  std::string a, b, c;
  std::string rbits_a, rbits_b;
  bool json = false;
  ProgressMode progress = ProgressMode::automatic;
};

void run_verify_gemm(const VerifyGemmOptions& o) {
  VerifyGemmCall call = o.call;
  call.gemm.a.random_bits = !o.rbits_a.empty();
  call.gemm.b.random_bits = !o.rbits_b.empty();
  VerifyGemmCall::Resolved r = call.resolve();
  const npy::Array arr_a = npy::read(o.a), arr_b = npy::read(o.b), arr_c = npy::read(o.c);
  check_gemm_shapes({o.a, arr_a.shape}, {o.b, arr_b.shape});
  check_output_shape({o.c, arr_c.shape}, arr_a.rows(), arr_b.rows());
  const std::vector<float> a = npy::as_float32(arr_a, o.a), b = npy::as_float32(arr_b, o.b);
  const std::vector<float> c = npy::as_float32(arr_c, o.c);
  const auto bits_a = attach_random_bits(random_bits_file(o.rbits_a), arr_a.shape, r.recipe.sr_bits, r.request.a);
  const auto bits_b = attach_random_bits(random_bits_file(o.rbits_b), arr_b.shape, r.recipe.sr_bits, r.request.b);
  GemmVerifyReport report;
  {
    Progress progress(o.progress, r.request.auto_datapath ? "datapaths" : "tiles");
    r.request.progress = progress.callback();
    report = verify_gemm(r.recipe, r.request, a, b, arr_a.rows(), arr_b.rows(), arr_a.cols(), c);
  }
  print(o.json ? to_json(report) : to_text(report));
  const bool ok = report.auto_mode ? !report.explained_by.empty() : report.bit_exact();
  if (!ok) {
    throw Mismatch("verify gemm: " + std::to_string(report.mismatches) + " of " + std::to_string(report.outputs) +
                   " output(s) differ" + (report.auto_mode ? " under the closest datapath (no preset explains them)" : "") +
                   " (exit 4)");
  }
}

void setup_verify_gemm(CLI::App& app) {
  auto o = std::make_shared<VerifyGemmOptions>();
  GemmCall& g = o->call.gemm;
  add_recipe_options(app, g.recipe);
  app.add_option("--a", o->a, "operand A [M, K] (.npy float32)")->required();
  app.add_option("--b", o->b, "operand B [N, K] (.npy float32); C = A·Bᵀ")->required();
  app.add_option("--c", o->c, "your output C [M, N] (.npy float32)")->required();
  add_gemm_options(app, g, o->rbits_a, o->rbits_b);
  app.get_option("--datapath")
      ->description("golden datapath (default: the recipe's), or auto: try every preset and report which explains "
                    "yours, and which ones these inputs cannot tell apart (ties):" + datapath_help());
  // what-ifs and the slow loop are `fp4sim gemm`'s: verify judges against the golden datapaths as they are
  app.remove_option(app.get_option("--frac-bits"));
  app.remove_option(app.get_option("--reference"));
  app.add_flag("--json", o->json, "print one JSON object instead of text");
  add_arguments(app, front::verify_gemm_arguments(), o->call);
  add_progress_flags(app, o->progress);
  add_example(app, "fp4sim verify gemm --recipe nvfp4 --a x.npy --b w.npy --c my_c.npy --datapath auto");
  app.callback([o] { run_verify_gemm(*o); });
}

}  // namespace

void setup_verify(CLI::App& app) {
  app.require_subcommand(1);
  add_example(app, "fp4sim verify quantize --recipe nvfp4 --in x.npy --codes my_codes.npy --scales my_scales.npy");
  add_example(app, "fp4sim verify quantize --profile auto --in x.npy --codes my_codes.npy --scales my_scales.npy");
  setup_verify_quantize(*app.add_subcommand("quantize", "compare your quantized codes and scales with the golden model"));
  setup_verify_gemm(*app.add_subcommand("gemm", "compare your GEMM output with a golden datapath (or find the one that explains it)"));
}

}  // namespace fp4sim::cli
