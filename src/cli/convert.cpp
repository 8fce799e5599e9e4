// `fp4sim convert` (docs/cli.md): the flags of fp4sim::ConvertCall, the input read, the codes (and the
// decoded values) written.
#include <memory>

#include "arguments.hpp"
#include "cli.hpp"
#include "fp4sim/core/convert_call.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/npy.hpp"

namespace fp4sim::cli {

namespace {

struct ConvertOptions {
  ConvertCall call;
  std::string rbits;
  std::string in, out, decoded;
};

void run_convert(const ConvertOptions& o) {
  ConvertCall call = o.call;
  call.random_bits = !o.rbits.empty();
  const ConvertCall::Resolved r = call.resolve();
  const Format& format = r.format;
  const npy::Array input = npy::read(o.in);
  const std::vector<double> values = npy::as_float64(input, o.in);
  const std::optional<RandomBitsArray> bits = random_bits_file(o.rbits);
  const std::vector<std::uint32_t> codes = convert(call, r, {o.in, input.shape}, values, bits ? &*bits : nullptr);

  const int width = format.storage_bits() <= 8 ? 1 : format.storage_bits() <= 16 ? 2 : 4;
  std::vector<std::uint8_t> packed(codes.size() * width);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    for (int b = 0; b < width; ++b) packed[i * width + b] = static_cast<std::uint8_t>(codes[i] >> (8 * b));
  }
  const npy::DType code_type = width == 1 ? npy::DType::u1 : width == 2 ? npy::DType::u2 : npy::DType::u4;
  npy::write(o.out, code_type, input.shape, packed.data());
  if (!o.decoded.empty()) {
    std::vector<double> decoded(codes.size());
    for (std::size_t i = 0; i < codes.size(); ++i) decoded[i] = decode_to_double(format, codes[i]);
    npy::write(o.decoded, npy::DType::f8, input.shape, decoded.data());
  }
}

}  // namespace

void setup_convert(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  app.add_option("--format", o->call.format, "target format: a preset (see `fp4sim formats`) or eXmY/ueXmY[bN][fn|fin]")
      ->required();
  app.add_option("--rounding", o->call.rounding, "rounding mode")
      ->check(CLI::IsMember(name_strings<Rounding>()))
      ->default_val("rne");
  app.add_option("--sr-bits", o->call.sr_bits, "random bits per element for stochastic rounding (k)")
      ->check(CLI::Range(1, 16))
      ->default_val(8);
  app.add_option("--seed", o->call.seed, "Philox seed for stochastic rounding bits (stream 0)")->default_val(0);
  app.add_option("--rbits", o->rbits, "explicit random integers (.npy, uint8/16/32, shape of --in)");
  auto* sat = app.add_flag_function(
      "--saturate", [o](std::int64_t) { o->call.saturate = true; },
      "overflow and +-Inf to +-max finite, as cvt .satfinite, IEEE formats too (default for formats without "
      "Inf)");
  app.add_flag_function(
         "--no-saturate", [o](std::int64_t) { o->call.saturate = false; },
         "overflow to +-Inf, else NaN with the sign, else a data error where the format has neither (default for "
         "IEEE formats)")
      ->excludes(sat);
  app.add_option("--specials", o->call.specials,
                 "-0 and NaN convention: hardware (cvt.*.satfinite) or te-python (TE's cast_to_fp4x2: -0, NaN -> +0)")
      ->check(CLI::IsMember(name_strings<SpecialConvention>()))
      ->default_val("hardware");
  app.add_option("--in", o->in, "input .npy (float32 or float64, 1-D or 2-D, C order)")->required();
  app.add_option("--out", o->out, "output codes .npy (uint8, uint16 for 16-bit formats, uint32 for fp32)")
      ->required();
  app.add_option("--decoded", o->decoded, "also write the decoded values as float64 .npy");
  app.callback([o] { run_convert(*o); });
}

}  // namespace fp4sim::cli
