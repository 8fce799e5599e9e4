#include <cmath>
#include <filesystem>
#include <memory>

#include "cli.hpp"
#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/io/npy.hpp"
#include "fp4sim/core/random.hpp"

namespace fp4sim::cli {

namespace {

struct ConvertOptions {
  std::string format;
  Rounding rounding = Rounding::rne;
  int sr_bits = 8;
  std::uint64_t seed = 0;
  std::string rbits;
  std::optional<bool> saturate;
  std::string specials = "hardware";
  std::string in, out, decoded;
};

std::string describe_position(const npy::Array& a, std::size_t i) {
  if (a.shape.size() == 2) return "[" + std::to_string(i / a.cols()) + ", " + std::to_string(i % a.cols()) + "]";
  return "[" + std::to_string(i) + "]";
}

void run_convert(const ConvertOptions& o) {
  const Format format = format_from_flag(o.format, "--format");
  EncodeOptions enc;
  enc.rounding = o.rounding;
  enc.sr_bits = o.sr_bits;
  enc.saturate = o.saturate.value_or(default_saturate(format));
  enc.convention = o.specials == "te-python" ? SpecialConvention::te_python : SpecialConvention::hardware;

  const npy::Array input = npy::read(o.in);
  if (input.dtype != npy::DType::f4 && input.dtype != npy::DType::f8) {
    throw DataError(o.in + ": expected float32 or float64 values, got " + npy::dtype_descr(input.dtype));
  }
  const std::vector<double> values = npy::as_float64(input);

  std::vector<std::uint32_t> random;
  if (is_stochastic(enc.rounding)) {
    if (!o.rbits.empty()) {
      const npy::Array r = npy::read(o.rbits);
      if (r.shape != input.shape) throw DataError(o.rbits + ": shape differs from " + o.in);
      random = npy::as_uint32(r, o.rbits);
      for (std::size_t i = 0; i < random.size(); ++i) {
        if (random[i] >> enc.sr_bits) {
          throw DataError(o.rbits + ": element " + describe_position(r, i) + " = " + std::to_string(random[i]) +
                          " does not fit in --sr-bits " + std::to_string(enc.sr_bits));
        }
      }
    } else {
      random.resize(values.size());
      for (std::size_t i = 0; i < random.size(); ++i) random[i] = random_bits(o.seed, 0, i, enc.sr_bits);
    }
  } else if (!o.rbits.empty()) {
    throw UsageError("--rbits needs a stochastic --rounding");
  }

  std::vector<std::uint32_t> codes(values.size());
  if (auto bad = encode_all(format, enc, values, random, codes)) {
    const double v = values[*bad];
    std::string why = std::isnan(v)                        ? "NaN and the format has no NaN (try --saturate)"
                      : (std::signbit(v) && !format.is_signed) ? "negative value in an unsigned format"
                      : format.has_zero()                  ? "out of range and --no-saturate (the format has no Inf)"
                                                           : "zero or out of range and --no-saturate";
    char value_text[64];
    std::snprintf(value_text, sizeof value_text, "%.17g", v);
    throw DataError(o.in + ": element " + describe_position(input, *bad) + " = " + value_text +
                    " cannot be represented in " + o.format + ": " + why);
  }

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
    try {
      npy::write(o.decoded, npy::DType::f8, input.shape, decoded.data());
    } catch (...) {
      std::error_code ec;  // no partial output: the codes go too
      std::filesystem::remove(o.out, ec);
      throw;
    }
  }
}

}  // namespace

void setup_convert(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  app.add_option("--format", o->format, "target format: a preset (see `fp4sim formats`) or eXmY/ueXmY[bN][fn|fin]")
      ->required();
  app.add_option("--rounding", o->rounding, "rounding mode")
      ->transform(CLI::CheckedTransformer(rounding_map()))
      ->default_str("rne");
  app.add_option("--sr-bits", o->sr_bits, "random bits per element for stochastic rounding (k)")
      ->check(CLI::Range(1, 16))
      ->default_val(8);
  app.add_option("--seed", o->seed, "Philox seed for stochastic rounding bits (stream 0)")->default_val(0);
  app.add_option("--rbits", o->rbits, "explicit random integers (.npy, uint8/16/32, shape of --in)");
  auto* sat = app.add_flag_function(
      "--saturate", [o](std::int64_t) { o->saturate = true; },
      "overflow and +-Inf to +-max finite, as cvt .satfinite, IEEE formats too (default for formats without "
      "Inf)");
  app.add_flag_function(
         "--no-saturate", [o](std::int64_t) { o->saturate = false; },
         "overflow to +-Inf, else NaN with the sign, else a data error where the format has neither (default for "
         "IEEE formats)")
      ->excludes(sat);
  app.add_option("--specials", o->specials,
                 "-0 and NaN convention: hardware (cvt.*.satfinite) or te-python (TE's cast_to_fp4x2: -0, NaN -> +0)")
      ->check(CLI::IsMember({"hardware", "te-python"}))
      ->default_val("hardware");
  app.add_option("--in", o->in, "input .npy (float32 or float64, 1-D or 2-D, C order)")->required();
  app.add_option("--out", o->out, "output codes .npy (uint8, uint16 for 16-bit formats, uint32 for fp32)")
      ->required();
  app.add_option("--decoded", o->decoded, "also write the decoded values as float64 .npy");
  app.callback([o] { run_convert(*o); });
}

}  // namespace fp4sim::cli
