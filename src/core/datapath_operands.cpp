// The golden datapath's operands: element codes from values (input_codes, and widen_binary32, its exact
// inverse for binary32) and a whole matrix multiply-accumulate, one tfdpa_dot or gst_dot per output (mma).
#include <bit>
#include <cmath>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"

namespace fp4sim {

std::vector<std::uint32_t> mma(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                               const Format& b_format, std::span<const std::uint32_t> b,
                               std::span<const std::uint32_t> c, std::size_t m, std::size_t n, std::size_t k,
                               const BlockScales* scales) {
  std::vector<std::uint32_t> d(m * n);
  const std::size_t blocks = scales ? k / scales->block : 0;
  const auto rows = static_cast<std::int64_t>(m);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t i = 0; i < rows; ++i) {
    const auto r = static_cast<std::size_t>(i);
    std::vector<std::uint32_t> column(k), column_scales(blocks);
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t t = 0; t < k; ++t) column[t] = b[t * n + j];
      const std::uint32_t c0 = c.empty() ? 0u : c[r * n + j];
      const auto row_a = a.subspan(r * k, k);
      std::uint32_t out = 0;
      if (scales) {
        for (std::size_t t = 0; t < blocks; ++t) column_scales[t] = scales->b[t * n + j];
        const BlockScales own{scales->format, scales->a.subspan(r * blocks, blocks), column_scales, scales->block};
        out = dp.kind == DatapathKind::gst_fdpa ? gst_dot(dp, a_format, row_a, column, own, c0)
                                                : tfdpa_dot(dp, a_format, row_a, b_format, column, own, c0);
      } else {
        out = tfdpa_dot(dp, a_format, row_a, b_format, column, c0);
      }
      d[r * n + j] = out;
    }
  }
  return d;
}

double widen_binary32(std::uint32_t bits) {
  const std::uint32_t payload = bits & 0x7FFFFFu;
  if ((bits & 0x7F800000u) != 0x7F800000u || payload == 0) return static_cast<double>(std::bit_cast<float>(bits));
  return std::bit_cast<double>((static_cast<std::uint64_t>(bits & 0x80000000u) << 32) | 0x7FF0000000000000u |
                               (static_cast<std::uint64_t>(payload) << 29));
}

InputCodes input_codes(const Format& input, std::span<const double> values) {
  InputCodes out;
  out.codes.resize(values.size());
  const bool binary32 = input == formats::fp32;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    std::uint32_t code = 0;
    bool ok = true;
    if (binary32 && std::isnan(v)) {
      // Narrowed by bits, the inverse of widen_binary32: no conversion quiets or canonicalises it (O10).
      const auto bits = std::bit_cast<std::uint64_t>(v);
      const auto payload = static_cast<std::uint32_t>((bits >> 29) & 0x7FFFFFu);
      ok = payload != 0 && (bits & ((std::uint64_t{1} << 29) - 1)) == 0;
      code = static_cast<std::uint32_t>((bits >> 32) & 0x80000000u) | 0x7F800000u | payload;
    } else if (binary32) {
      const auto f = static_cast<float>(v);
      ok = static_cast<double>(f) == v;
      code = std::bit_cast<std::uint32_t>(f);
    } else {
      const Encoded e = encode(input, v, EncodeOptions{Rounding::rne, false});
      code = e.code;
      ok = (e.flags & (flag::inexact | flag::invalid | flag::overflow)) == 0;
      if (std::isnan(v)) ok = input.has_nan();
      if (std::isinf(v)) ok = input.has_inf();
    }
    if (!ok) {
      out.first_unrepresentable = i;
      return out;
    }
    out.codes[i] = code;
  }
  return out;
}

}  // namespace fp4sim
