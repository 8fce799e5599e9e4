// Operand decoding shared by the operand checks, the scalar reference and the fast kernels of the GEMM:
// element codes as integers, scale codes unpacked, the encoded operands q·s in an input format.
#include "fp4sim/core/codec.hpp"
#include "gemm_internal.hpp"

namespace fp4sim::detail {


OperandInfo::OperandInfo(const QuantizedTensor& tensor, bool scale_sign_ignored) : q(&tensor) {
  rows = tensor.rows;
  k = tensor.cols;
  block = static_cast<std::size_t>(tensor.block_cols);
  blocks = block ? (k + block - 1) / block : 0;
  // Element grid: every finite element is n * 2^-elem_frac with n an integer (the format's smallest
  // quantum: the subnormal LSB, or the LSB of the lowest normal binade).
  const Format& e = tensor.element;
  elem_frac = -(e.min_normal_exponent() - e.mantissa_bits);
  elem_ok = e.storage_bits() == 4 && e.specials == Specials::finite;
  for (std::uint32_t code = 0; code < 16; ++code) {
    const Decoded d = decode(e, code);
    long long n = 0;
    if (d.cls == ValueClass::finite) {
      const int shift = d.exponent + elem_frac;
      n = static_cast<long long>(d.significand) << shift;
    }
    if (n > 127) elem_ok = false;
    elem_n[code] = static_cast<std::int8_t>(d.negative ? -n : n);
  }
  // Scale codes: a byte each. A UE4M3 scale's unused top bit is a sign the hardware ignores.
  const Format& s = tensor.scale;
  const std::uint32_t mask = scale_sign_ignored ? (std::uint32_t{1} << s.bits()) - 1 : 0xFFu;
  for (std::uint32_t code = 0; code < 256; ++code) {
    const Decoded d = decode(s, code & mask);
    scale_invalid[code] = d.cls == ValueClass::invalid;
    scale[code] = unpack(s, code & mask);
  }
}

int OperandInfo::n(std::size_t r, std::size_t c) const { return elem_n[q->code(r, c)]; }

std::uint8_t OperandInfo::scale_code(std::size_t r, std::size_t kb) const {
  return q->scales[(r / static_cast<std::size_t>(q->block_rows)) * q->scale_cols + kb];
}

// The encoded operand q·s of element (r, c) in `input`: value n * sig * 2^(scale exp - scale frac -
// elem_frac), which must be exact in `input`.
std::optional<Unpacked> encoded_value(const OperandInfo& op, const Format& input, int n, std::uint8_t scale_code) {
  const Unpacked& s = op.scale[scale_code];
  if (s.cls == Unpacked::nan || s.cls == Unpacked::inf) return std::nullopt;
  Unpacked u;
  if (n == 0 || s.cls == Unpacked::zero) {
    u.cls = Unpacked::zero;
    u.negative = n < 0;
    return u;
  }
  const auto mag = static_cast<std::uint64_t>(n < 0 ? -n : n) * s.sig;
  EncodeOptions o{Rounding::rne, false};
  const Encoded e = round_pack(input, o, n < 0, s.exp - s.frac - op.elem_frac, mag);
  if (e.flags & (flag::inexact | flag::overflow | flag::invalid)) return std::nullopt;
  return unpack(input, e.code);
}

EncodedTable::EncodedTable(const OperandInfo& op, const Format& input) {
  for (int sc = 0; sc < 256; ++sc) {
    for (int ec = 0; ec < 16; ++ec) {
      const auto v = encoded_value(op, input, op.elem_n[static_cast<std::size_t>(ec)], static_cast<std::uint8_t>(sc));
      ok[static_cast<std::size_t>(sc * 16 + ec)] = v.has_value();
      value[static_cast<std::size_t>(sc * 16 + ec)] = v.value_or(Unpacked{});
    }
  }
}

const Datapath& inner_of(const GemmOptions& o) { return o.inner ? *o.inner : *o.datapath->inner; }

Format encoded_input(const GemmOptions& o) {
  const Datapath& dp = o.datapath->kind == DatapathKind::probe_matched ? inner_of(o) : *o.datapath;
  return dp.inputs.front().format;
}

}  // namespace fp4sim::detail
