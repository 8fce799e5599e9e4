// `fp4sim mma`: a raw D = A·B + C as the modeled tensor core computes it (docs/cli.md), for inputs already
// in the instruction's input format; K longer than one instruction is a chain in K order.
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/core/mma_call.hpp"
#include "fp4sim/io/npy.hpp"

namespace fp4sim::cli {

namespace {

struct MmaOptions {
  MmaCall call;
  std::string a, b, c, out;
};

std::vector<double> read_values(const std::string& path, npy::Array& array) {
  array = npy::read(path);
  return npy::as_float64(array, path);
}

void run_mma(const MmaOptions& o) {
  const MmaCall::Resolved r = o.call.resolve();
  npy::Array aa, ab, ac;
  const std::vector<double> a = read_values(o.a, aa);
  const std::vector<double> b = read_values(o.b, ab);
  std::vector<double> c;
  if (!o.c.empty()) c = read_values(o.c, ac);
  const MmaOperand c_operand{{o.c, ac.shape}, c};
  const MmaOperands x = mma_operands(o.call, r, {{o.a, aa.shape}, a}, {{o.b, ab.shape}, b},
                                     o.c.empty() ? nullptr : &c_operand);
  const std::vector<std::uint32_t> d = mma(*r.row, r.a.format, x.a, r.b.format, x.b, x.c, x.m, x.n, x.k);
  npy::write(o.out, npy::DType::f4, {x.m, x.n}, d.data());
}

}  // namespace

void setup_mma(CLI::App& app) {
  auto o = std::make_shared<MmaOptions>();
  add_arguments(app, front::mma_arguments(), o->call);
  app.get_option("--datapath")->required();
  app.add_option("--a", o->a, "A [M, K] (.npy float32/float64, values exact in the input format)")
      ->required();
  app.add_option("--b", o->b, "B [K, N] (.npy)")->required();
  app.add_option("--c", o->c, "C [M, N] (.npy, binary32 values; fp16 values for f16-accumulate rows); default +0");
  app.add_option("--out", o->out, "D [M, N] (.npy float32)")->required()->check(not_empty_path());
  add_example(app, "fp4sim mma --datapath sm90-bf16 --input-format bf16 --a a.npy --b b.npy --c c.npy --out d.npy");
  app.callback([o] { run_mma(*o); });
}

}  // namespace fp4sim::cli
