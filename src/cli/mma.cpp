// `fp4sim mma`: a raw D = A·B + C as the modeled tensor core computes it (docs/cli.md), for inputs already
// in the instruction's input format; K longer than one instruction is a chain in K order.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/npy.hpp"

namespace fp4sim::cli {

namespace {

struct MmaOptions {
  std::string datapath, input_format, a, b, c, out;
};

std::vector<double> read_values(const std::string& path, npy::Array& array) {
  array = npy::read(path);
  if (array.shape.size() != 2) throw DataError(path + ": expected a 2-D array");
  if (array.dtype != npy::DType::f4 && array.dtype != npy::DType::f8)
    throw DataError(path + ": expected float32 or float64, got " + npy::dtype_descr(array.dtype));
  return npy::as_float64(array);
}

std::string position(const npy::Array& a, std::size_t i) {
  return "[" + std::to_string(i / a.cols()) + ", " + std::to_string(i % a.cols()) + "]";
}

void run_mma(const MmaOptions& o) {
  const Datapath* dp = find_datapath(o.datapath);
  if (!dp) throw UsageError("--datapath: unknown datapath '" + o.datapath + "' (known: " + datapath_names() + ")");
  if (dp->kind != DatapathKind::tfdpa) {
    throw UsageError("--datapath " + o.datapath + " is a block-scaled GEMM datapath; mma takes a tensor-core row "
                     "(block-scaled instructions are `fp4sim gemm --datapath sm100-mxf4nvf4`)");
  }
  std::string accepted;
  for (const auto& in : dp->inputs) accepted += (accepted.empty() ? "" : ", ") + std::string(in.format);
  const auto spec = find_input(*dp, o.input_format);
  if (!spec) throw UsageError("--input-format " + o.input_format + ": " + o.datapath + " takes " + accepted);
  const Format input = *input_format(o.input_format);

  npy::Array aa, ab, ac;
  const std::vector<double> a = read_values(o.a, aa);
  const std::vector<double> b = read_values(o.b, ab);
  const std::size_t m = aa.rows(), k = aa.cols(), n = ab.cols();
  if (ab.rows() != k)
    throw DataError("mma: A " + o.a + " is [" + std::to_string(m) + ", " + std::to_string(k) + "] but B " + o.b + " is [" +
                    std::to_string(ab.rows()) + ", " + std::to_string(n) + "]: B must be [K, N]");
  if (k == 0 || k % static_cast<std::size_t>(spec->instruction_k) != 0)
    throw DataError("mma: K = " + std::to_string(k) + " is not a multiple of the instruction's K = " +
                    std::to_string(spec->instruction_k) + " for " + o.input_format + " on " + o.datapath);
  const InputCodes ca = input_codes(input, a);
  if (ca.first_unrepresentable)
    throw DataError(o.a + ": element " + position(aa, *ca.first_unrepresentable) + " is not exactly representable in " +
                    o.input_format);
  const InputCodes cb = input_codes(input, b);
  if (cb.first_unrepresentable)
    throw DataError(o.b + ": element " + position(ab, *cb.first_unrepresentable) + " is not exactly representable in " +
                    o.input_format);

  std::vector<std::uint32_t> c_bits;
  if (!o.c.empty()) {
    const std::vector<double> c = read_values(o.c, ac);
    if (ac.rows() != m || ac.cols() != n)
      throw DataError(o.c + ": C must be [" + std::to_string(m) + ", " + std::to_string(n) + "]");
    // C is the accumulator register: binary32, or fp16 for an f16-accumulate row.
    const Format acc = dp->fused.out == formats::fp16 ? formats::fp16 : formats::fp32;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const auto f = static_cast<float>(c[i]);
      if (static_cast<double>(f) != c[i] && !std::isnan(c[i]))
        throw DataError(o.c + ": element " + position(ac, i) + " is not a binary32 value");
      if (acc == formats::fp16 && !std::isnan(c[i])) {
        const Encoded h = encode(formats::fp16, c[i], EncodeOptions{Rounding::rne, false});
        if (h.flags & (flag::inexact | flag::overflow))
          throw DataError(o.c + ": element " + position(ac, i) + " is not fp16-representable (" + o.datapath +
                          " accumulates in fp16)");
      }
      c_bits.push_back(std::bit_cast<std::uint32_t>(f));
    }
  }
  const std::vector<std::uint32_t> d = mma(*dp, input, ca.codes, cb.codes, c_bits, m, n, k);
  npy::write(o.out, npy::DType::f4, {m, n}, d.data());
}

}  // namespace

void setup_mma(CLI::App& app) {
  auto o = std::make_shared<MmaOptions>();
  app.add_option("--datapath", o->datapath, "tensor-core row (see `fp4sim gemm --list-datapaths`), e.g. sm90-bf16")
      ->required();
  app.add_option("--input-format", o->input_format, "format of A and B (e.g. bf16, fp16, tf32, fp32, e4m3, e5m2)")
      ->required();
  app.add_option("--a", o->a, "A [M, K] (.npy float32/float64, values exact in the input format)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--b", o->b, "B [K, N] (.npy)")->required()->check(CLI::ExistingFile);
  app.add_option("--c", o->c, "C [M, N] (.npy, binary32 values; fp16 values for f16-accumulate rows); default +0")
      ->check(CLI::ExistingFile);
  app.add_option("--out", o->out, "D [M, N] (.npy float32)")->required();
  app.callback([o] { run_mma(*o); });
}

}  // namespace fp4sim::cli
