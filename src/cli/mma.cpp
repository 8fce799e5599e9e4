// `fp4sim mma`: a raw D = A·B + C as the modeled tensor core computes it (docs/cli.md), for inputs already
// in the instruction's input format (and, on a block-scaled row, the scale codes of A and B); K longer than
// one instruction is a chain in K order.
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/core/mma_call.hpp"
#include "fp4sim/io/npy.hpp"

namespace fp4sim::cli {

namespace {

struct MmaOptions {
  MmaCall call;
  std::string a, b, c, sa, sb, out;
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
  npy::Array asa, asb;
  std::vector<std::uint32_t> sa, sb;
  if (!o.sa.empty()) {
    asa = npy::read(o.sa);
    sa = npy::as_uint32(asa, o.sa);
  }
  if (!o.sb.empty()) {
    asb = npy::read(o.sb);
    sb = npy::as_uint32(asb, o.sb);
  }
  const MmaScaleOperand sa_operand{{o.sa, asa.shape}, sa}, sb_operand{{o.sb, asb.shape}, sb};
  const MmaOperands x = mma_operands(o.call, r, {{o.a, aa.shape}, a}, {{o.b, ab.shape}, b},
                                     o.c.empty() ? nullptr : &c_operand, o.sa.empty() ? nullptr : &sa_operand,
                                     o.sb.empty() ? nullptr : &sb_operand);
  const std::vector<std::uint32_t> d = run_mma(r, x);
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
  app.add_option("--sa", o->sa, "block-scaled rows: A's scale codes [M, K / block] (.npy uint8)");
  app.add_option("--sb", o->sb, "block-scaled rows: B's scale codes [K / block, N] (.npy uint8)");
  app.add_option("--out", o->out, "D [M, N] (.npy float32)")->required()->check(not_empty_path());
  add_example(app, "fp4sim mma --datapath sm90-bf16 --input-format bf16 --a a.npy --b b.npy --c c.npy --out d.npy");
  app.callback([o] { run_mma(*o); });
}

}  // namespace fp4sim::cli
