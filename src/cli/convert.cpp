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

npy::DType code_type(int bytes) { return bytes == 1 ? npy::DType::u1 : bytes == 2 ? npy::DType::u2 : npy::DType::u4; }

// The codes of the input file: float32 data read into one buffer and encoded from there by the fast
// encoder (no other copy), other data through the golden one.
template <class Code>
std::vector<Code> codes_of(const ConvertCall& call, const ConvertCall::Resolved& r, npy::Reader& in,
                           const ArrayShape& shape, const RandomBitsArray* bits) {
  if (in.dtype() == npy::DType::f4) {
    std::vector<Code> codes(in.size());
    std::vector<float> values(in.size());
    in.read_into({reinterpret_cast<std::uint8_t*>(values.data()), values.size() * sizeof(float)});
    convert(call, r, shape, std::span<const float>(values), bits, std::span<Code>(codes));
    return codes;
  }
  // float64 data, through the golden encoder.
  npy::Array a{in.dtype(), in.shape(), {}};
  in.read_all(a.bytes);
  const std::vector<std::uint32_t> wide = convert(call, r, shape, npy::as_float64(a, shape.source), bits);
  return std::vector<Code>(wide.begin(), wide.end());
}

template <class Code>
void convert_file(const ConvertOptions& o, const ConvertCall& call, const ConvertCall::Resolved& r) {
  npy::Reader in(o.in);
  const ArrayShape shape{o.in, in.shape()};
  const std::optional<RandomBitsArray> bits = random_bits_file(o.rbits);
  const std::vector<Code> codes = codes_of<Code>(call, r, in, shape, bits ? &*bits : nullptr);
  npy::write(o.out, code_type(sizeof(Code)), shape.shape, codes.data());
  if (!o.decoded.empty()) {
    std::vector<double> decoded(codes.size());
    for (std::size_t i = 0; i < codes.size(); ++i) decoded[i] = decode_to_double(r.format, codes[i]);
    npy::write(o.decoded, npy::DType::f8, shape.shape, decoded.data());
  }
}

void run_convert(const ConvertOptions& o) {
  ConvertCall call = o.call;
  call.random_bits = !o.rbits.empty();
  const ConvertCall::Resolved r = call.resolve();
  switch (code_bytes(r.format)) {
    case 1: return convert_file<std::uint8_t>(o, call, r);
    case 2: return convert_file<std::uint16_t>(o, call, r);
    default: return convert_file<std::uint32_t>(o, call, r);
  }
}

}  // namespace

void setup_convert(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  add_arguments(app, front::convert_arguments(), o->call);
  app.get_option("--format")->required();
  app.add_option("--rbits", o->rbits, "explicit random integers (.npy, uint8/16/32, shape of --in)");
  app.add_option("--in", o->in, "input .npy (float32 or float64, 1-D or 2-D, C order)")->required();
  app.add_option("--out", o->out, "output codes .npy (uint8, uint16 for 16-bit formats, uint32 for fp32)")
      ->required()->check(not_empty_path());
  app.add_option("--decoded", o->decoded, "also write the decoded values as float64 .npy")->check(not_empty_path());
  add_example(app, "fp4sim convert --format e2m1 --rounding rne --in x.npy --out codes.npy --decoded decoded.npy");
  app.callback([o] { run_convert(*o); });
}

}  // namespace fp4sim::cli
