// Block-scaled GEMM through the datapath table: operand checks, the plain scalar reference of every
// datapath (the golden model), alpha, and the dispatch to the fast kernels (gemm_kernels.inc).
#include "fp4sim/gemm.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include <boost/multiprecision/cpp_int.hpp>

#include "fp4sim/codec.hpp"
#include "fp4sim/error.hpp"
#include "fp4sim/fp32.hpp"
#include "gemm_internal.hpp"

namespace fp4sim {

namespace detail {

// ---------------------------------------------------------------------------------------------------
// Operand decoding shared by the reference and the fast kernels.

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

}  // namespace detail

using detail::EncodedTable;
using detail::OperandInfo;

namespace {

std::string hex8(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02X", v);
  return buf;
}

const Datapath& inner_of(const GemmOptions& o) {
  if (o.inner) return *o.inner;
  const Datapath* inner = find_datapath(o.datapath->inner);
  return *inner;
}

// The input format the encoded operands must fit: the T-FDPA row's (or the inner row's) first input.
Format encoded_input(const GemmOptions& o) {
  const Datapath& dp = o.datapath->kind == DatapathKind::probe_matched ? inner_of(o) : *o.datapath;
  return *input_format(dp.inputs.front().format);
}

bool row_takes(std::span<const std::string_view> names, const Format& f) {
  for (auto n : names) {
    const auto g = parse_format(n);
    if (g && *g == f) return true;
  }
  return false;
}

}  // namespace

void check_gemm_operands(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& o) {
  if (!o.datapath) throw UsageError("gemm: no datapath given");
  const Datapath& dp = *o.datapath;
  if (a.cols != b.cols)
    throw DataError("gemm: A is [" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + "] and B is [" +
                    std::to_string(b.rows) + ", " + std::to_string(b.cols) + "]: K differs (C = A·Bᵀ needs equal columns)");
  if (!(a.element == b.element) || !(a.scale == b.scale) || a.block_cols != b.block_cols)
    throw DataError("gemm: A and B differ in element format, scale format or block length along K");
  for (const QuantizedTensor* t : {&a, &b}) {
    if (t->codes.size() != t->rows * t->code_cols() || t->block_cols < 1 || t->block_rows < 1 ||
        t->scale_cols != (t->cols + static_cast<std::size_t>(t->block_cols) - 1) / static_cast<std::size_t>(t->block_cols) ||
        t->scales.size() != t->scale_rows * t->scale_cols ||
        t->scale_rows != (t->rows + static_cast<std::size_t>(t->block_rows) - 1) / static_cast<std::size_t>(t->block_rows))
      throw DataError("gemm: malformed quantized tensor (codes/scales sizes do not match its shape and blocks)");
  }
  const bool sign_ignored = dp.kind == DatapathKind::gst_fdpa && dp.fused.scale_sign_ignored;
  const OperandInfo ia(a, sign_ignored);
  if (!ia.elem_ok)
    throw DataError("gemm: element format " + format_name(a.element) +
                    " is not a 4-bit finite format (codes are packed two per byte)");
  if (dp.kind == DatapathKind::probe_matched) {
    if (a.cols % static_cast<std::size_t>(dp.group_k) != 0)
      throw DataError("gemm: probe-matched needs K % " + std::to_string(dp.group_k) + " == 0 (the authors' kernel " +
                      "does), got K = " + std::to_string(a.cols));
    const Datapath& inner = inner_of(o);
    if (inner.kind != DatapathKind::tfdpa || !find_input(inner, "bf16"))
      throw UsageError("gemm: --inner must be a tensor-core row that takes bf16, got " + std::string(inner.name));
  }
  if (dp.kind == DatapathKind::gst_fdpa) {
    if (!row_takes(std::span<const std::string_view>(&dp.inputs.front().format, 1), a.element))
      throw DataError("gemm: " + std::string(dp.name) + " takes e2m1 elements, not " + format_name(a.element));
    if (!row_takes(dp.scale_formats, a.scale)) {
      std::string list;
      for (auto s : dp.scale_formats) list += (list.empty() ? "" : ", ") + std::string(s);
      throw DataError("gemm: " + std::string(dp.name) + " takes " + list + " scales, not " + format_name(a.scale));
    }
    const auto blk = static_cast<int>(a.block_cols);
    if (blk % dp.fused.subblock != 0 || dp.instruction_k % blk != 0)
      throw DataError("gemm: " + std::string(dp.name) + " needs a scale block of 16, 32 or 64 along K, got " +
                      std::to_string(blk));
  }
  // Every scale code must be a code of the scale format (the quantizer never writes ue5m3's reserved
  // 0xF8-0xFF, nor a ue4m3 byte with its top bit set).
  for (const QuantizedTensor* t : {&a, &b}) {
    const OperandInfo info(*t, sign_ignored);
    for (std::size_t i = 0; i < t->scales.size(); ++i) {
      if (info.scale_invalid[t->scales[i]])
        throw DataError(std::string("gemm: operand ") + (t == &a ? "A" : "B") + " scale code " + hex8(t->scales[i]) +
                        " at scale index " + std::to_string(i) + " is not a valid " + format_name(t->scale) + " code");
    }
  }
  // The encoded operands q·s must be exact in the tensor-core input format.
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::probe_matched) {
    const Format input = encoded_input(o);
    for (const QuantizedTensor* t : {&a, &b}) {
      const OperandInfo info(*t, false);
      const EncodedTable table(info, input);
      for (std::size_t r = 0; r < t->rows; ++r) {
        for (std::size_t c = 0; c < t->cols; ++c) {
          const std::uint8_t sc = info.scale_code(r, c / info.block);
          const std::uint8_t ec = t->code(r, c);
          if (!table.ok[static_cast<std::size_t>(sc) * 16 + ec]) {
            const Unpacked& s = info.scale[sc];
            const char* why = (s.cls == Unpacked::nan || s.cls == Unpacked::inf) ? "a NaN scale" : "not exactly representable";
            throw DataError(std::string("gemm: operand ") + (t == &a ? "A" : "B") + " element [" + std::to_string(r) +
                            ", " + std::to_string(c) + "] (code " + hex8(ec) + ", scale " + hex8(sc) +
                            "): the encoded value q·s is " + why + " in " + format_name(input) + ", the input of " +
                            std::string(dp.kind == DatapathKind::probe_matched ? inner_of(o).name : dp.name));
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Alpha.

float gemm_alpha(AlphaRule rule, float amax_a, float target_a, float amax_b, float target_b, float element_max) {
  if (rule == AlphaRule::one) return 1.0f;
  const float num = fp32::mul_rn(amax_a, amax_b);
  const float den = fp32::mul_rn(fp32::mul_rn(element_max, target_a), fp32::mul_rn(element_max, target_b));
  if (rule == AlphaRule::division) return fp32::div_rn(num, den);
  return fp32::mul_rn(num, fp32::div_rn(1.0f, den));
}

AlphaRule alpha_rule_for(const Datapath& dp, const Recipe& recipe) {
  if (recipe.alpha == AlphaRule::one || recipe.tensor_scale == TensorScalePolicy::none) return AlphaRule::one;
  switch (dp.alpha) {
    case AlphaSource::division: return AlphaRule::division;
    case AlphaSource::reciprocal: return AlphaRule::reciprocal;
    case AlphaSource::recipe: break;
  }
  return recipe.alpha;
}

// ---------------------------------------------------------------------------------------------------
// The plain scalar reference of every datapath.

namespace detail {

std::uint32_t epilogue(const Datapath& dp, std::uint32_t acc, float alpha) {
  const float y = fp32::mul_rn(std::bit_cast<float>(acc), alpha);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(y);
  return std::isnan(y) ? dp.nan_bits : bits;
}

std::uint32_t output_cast(std::uint32_t bits, bool bf16) {
  if (!bf16) return bits;
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (bits & 0xFFFF0000u) | 0x00400000u;  // NaN keeps its top bits
  return fp32_to_bf16_rne(bits);
}

namespace {

using boost::multiprecision::cpp_int;

bool block_has_nan(const OperandInfo& op, std::size_t r) {
  for (std::size_t kb = 0; kb < op.blocks; ++kb) {
    const Unpacked& s = op.scale[op.scale_code(r, kb)];
    if (s.cls == Unpacked::nan || s.cls == Unpacked::inf) return true;
  }
  return false;
}

// Σ_k n_a n_b over block kb (an integer count of 2^(-2 elem_frac)).
long long block_dot(const OperandInfo& a, std::size_t i, const OperandInfo& b, std::size_t j, std::size_t k0,
                    std::size_t k1) {
  long long p = 0;
  for (std::size_t c = k0; c < k1; ++c) p += static_cast<long long>(a.n(i, c)) * b.n(j, c);
  return p;
}

// Exact: Σ over blocks of P * sig_a * sig_b * 2^(lsb_a + lsb_b - 2 elem_frac) in a cpp_int, times
// alpha (exact), rounded once RNE to binary32.
std::uint32_t exact_element(const Datapath& dp, const OperandInfo& a, std::size_t i, const OperandInfo& b,
                            std::size_t j, float alpha) {
  if (block_has_nan(a, i) || block_has_nan(b, j) || std::isnan(alpha)) return dp.nan_bits;
  struct Term {
    long long p;
    std::uint64_t sig;
    int lsb;
  };
  std::vector<Term> terms;
  int min_lsb = std::numeric_limits<int>::max();
  for (std::size_t kb = 0; kb < a.blocks; ++kb) {
    const Unpacked& sa = a.scale[a.scale_code(i, kb)];
    const Unpacked& sb = b.scale[b.scale_code(j, kb)];
    if (sa.cls != Unpacked::finite || sb.cls != Unpacked::finite) continue;
    const long long p = block_dot(a, i, b, j, kb * a.block, std::min(a.k, (kb + 1) * a.block));
    if (p == 0) continue;
    const int lsb = (sa.exp - sa.frac) + (sb.exp - sb.frac) - 2 * a.elem_frac;
    terms.push_back({p, sa.sig * sb.sig, lsb});
    min_lsb = std::min(min_lsb, lsb);
  }
  cpp_int sum = 0;
  for (const Term& t : terms) {
    cpp_int v = cpp_int(t.p < 0 ? -t.p : t.p) * t.sig;
    v <<= (t.lsb - min_lsb);
    if (t.p < 0) sum -= v;
    else sum += v;
  }
  if (std::isinf(alpha)) {
    if (sum == 0) return dp.nan_bits;
    return (sum < 0) != std::signbit(alpha) ? 0xFF800000u : 0x7F800000u;
  }
  if (sum == 0 || alpha == 0.0f) {
    const bool neg = sum != 0 && ((sum < 0) != std::signbit(alpha));
    return neg ? 0x80000000u : 0u;
  }
  const bool negative = (sum < 0) != std::signbit(alpha);
  const Unpacked al = unpack_fp32(std::bit_cast<std::uint32_t>(alpha));
  cpp_int mag = (sum < 0 ? cpp_int(-sum) : sum) * al.sig;
  int lsb = min_lsb + al.exp - al.frac;
  const auto bits = static_cast<int>(boost::multiprecision::msb(mag)) + 1;
  if (bits > 120) {
    const int drop = bits - 120;
    const bool sticky = boost::multiprecision::lsb(mag) < static_cast<unsigned>(drop);
    mag >>= drop;
    lsb += drop;
    if (sticky) mag |= 1;
  }
  const u128 m = static_cast<u128>(static_cast<std::uint64_t>(mag >> 64)) << 64 |
                 static_cast<std::uint64_t>(mag & cpp_int(std::numeric_limits<std::uint64_t>::max()));
  return round_to_fp32(negative, lsb, m, OutputRounding::rne);
}

// fp32-seq: y = +0; y = RN32(y + term_kb) with each block term exact; RN32(y * alpha).
std::uint32_t fp32_seq_element(const Datapath& dp, const OperandInfo& a, std::size_t i, const OperandInfo& b,
                               std::size_t j, float alpha) {
  std::uint32_t y = 0;
  for (std::size_t kb = 0; kb < a.blocks; ++kb) {
    const Unpacked& sa = a.scale[a.scale_code(i, kb)];
    const Unpacked& sb = b.scale[b.scale_code(j, kb)];
    if (sa.cls == Unpacked::nan || sa.cls == Unpacked::inf || sb.cls == Unpacked::nan || sb.cls == Unpacked::inf)
      return dp.nan_bits;
    if ((y & 0x7FFFFFFFu) == 0x7F800000u) continue;  // an Inf stays: the terms are finite
    const long long p = block_dot(a, i, b, j, kb * a.block, std::min(a.k, (kb + 1) * a.block));
    if (p == 0 || sa.cls != Unpacked::finite || sb.cls != Unpacked::finite) continue;
    const Unpacked yu = unpack_fp32(y);
    const u128 tmag = static_cast<u128>(p < 0 ? -p : p) * sa.sig * sb.sig;
    const int tlsb = (sa.exp - sa.frac) + (sb.exp - sb.frac) - 2 * a.elem_frac;
    const SignedValue s = add_exact(SignedValue{yu.negative, yu.exp - yu.frac, yu.cls == Unpacked::finite ? yu.sig : 0},
                                    SignedValue{p < 0, tlsb, tmag});
    y = round_to_fp32(s.negative, s.lsb, s.mag, OutputRounding::rne);
  }
  return epilogue(dp, y, alpha);
}

// T-FDPA over the encoded operands, one chain of G-steps from +0 over the whole K.
std::uint32_t tfdpa_chain(const Datapath& row, const EncodedTable& ta, const OperandInfo& a, std::size_t i,
                          const EncodedTable& tb, const OperandInfo& b, std::size_t j, std::size_t k0, std::size_t k1,
                          std::uint32_t c) {
  const auto g = static_cast<std::size_t>(row.fused.group);
  std::vector<Unpacked> ua(g), ub(g);
  for (std::size_t s = k0; s < k1; s += g) {
    const std::size_t n = std::min(g, k1 - s);
    for (std::size_t t = 0; t < n; ++t) {
      const std::size_t col = s + t;
      ua[t] = ta.value[static_cast<std::size_t>(a.scale_code(i, col / a.block)) * 16 + a.q->code(i, col)];
      ub[t] = tb.value[static_cast<std::size_t>(b.scale_code(j, col / b.block)) * 16 + b.q->code(j, col)];
    }
    c = tfdpa_step(row, std::span<const Unpacked>(ua.data(), n), std::span<const Unpacked>(ub.data(), n), c);
  }
  return c;
}

std::uint32_t gst_chain(const Datapath& dp, const OperandInfo& a, std::size_t i, const OperandInfo& b, std::size_t j) {
  const auto kinst = static_cast<std::size_t>(dp.instruction_k);
  const auto sub = static_cast<std::size_t>(dp.fused.subblock);
  std::uint32_t c = 0;
  std::vector<SubblockSum> sums;
  for (std::size_t k0 = 0; k0 < a.k; k0 += kinst) {
    sums.clear();
    for (std::size_t s = k0; s < k0 + kinst && s < a.k; s += sub) {
      SubblockSum ss;
      ss.sum = block_dot(a, i, b, j, s, std::min(a.k, s + sub));
      ss.scale_a = a.scale_code(i, s / a.block);
      ss.scale_b = b.scale_code(j, s / b.block);
      sums.push_back(ss);
    }
    c = gst_step(dp, a.q->scale, 2 * a.elem_frac, sums, c);
  }
  return c;
}

}  // namespace

ReferenceContext::ReferenceContext(const QuantizedTensor& qa, const QuantizedTensor& qb, const GemmOptions& o)
    : options(o),
      a(qa, o.datapath->kind == DatapathKind::gst_fdpa && o.datapath->fused.scale_sign_ignored),
      b(qb, o.datapath->kind == DatapathKind::gst_fdpa && o.datapath->fused.scale_sign_ignored) {
  const DatapathKind kind = o.datapath->kind;
  if (kind == DatapathKind::tfdpa || kind == DatapathKind::probe_matched) {
    const Format input = encoded_input(o);
    ta = std::make_unique<EncodedTable>(a, input);
    tb = std::make_unique<EncodedTable>(b, input);
  }
}

std::uint32_t ReferenceContext::element(std::size_t i, std::size_t j) const {
  const Datapath& dp = *options.datapath;
  std::uint32_t out = 0;
  switch (dp.kind) {
    case DatapathKind::exact: out = exact_element(dp, a, i, b, j, options.alpha); break;
    case DatapathKind::fp32_seq: out = fp32_seq_element(dp, a, i, b, j, options.alpha); break;
    case DatapathKind::tfdpa:
      out = epilogue(dp, tfdpa_chain(dp, *ta, a, i, *tb, b, j, 0, a.k, 0u), options.alpha);
      break;
    case DatapathKind::gst_fdpa: out = epilogue(dp, gst_chain(dp, a, i, b, j), options.alpha); break;
    case DatapathKind::probe_matched: {
      const Datapath& inner = inner_of(options);
      const auto gk = static_cast<std::size_t>(dp.group_k);
      float c = 0.0f;  // partials combined in order from +0 by add.rz.f32
      for (std::size_t k0 = 0; k0 < a.k; k0 += gk) {
        const std::uint32_t partial = tfdpa_chain(inner, *ta, a, i, *tb, b, j, k0, k0 + gk, 0u);
        c = fp32::add_rz(c, std::bit_cast<float>(partial));
      }
      std::uint32_t cb = std::bit_cast<std::uint32_t>(c);
      if (options.snap) cb = snap_1024(cb);
      out = epilogue(dp, std::isnan(c) ? dp.nan_bits : cb, options.alpha);
      break;
    }
  }
  return output_cast(out, options.bf16_output);
}

SignedValue add_exact(SignedValue x, SignedValue y) {
  if (x.mag == 0) return y;
  if (y.mag == 0) return x;
  auto width = [](u128 v) {
    const auto hi = static_cast<std::uint64_t>(v >> 64);
    return hi ? 128 - std::countl_zero(hi) : 64 - std::countl_zero(static_cast<std::uint64_t>(v));
  };
  auto jam = [](u128 v, int d) -> u128 {
    if (d <= 0) return v;
    if (d >= 128) return v != 0;
    return (v >> d) | (((v << (128 - d)) != 0) ? 1 : 0);
  };
  // Two addends: the smaller is folded into a sticky bit below a 120-bit window of the larger, which
  // cannot change a 24-bit rounding (far apart, no cancellation reaches it; close, nothing is folded).
  const int top = std::max(x.lsb + width(x.mag), y.lsb + width(y.mag));
  const int lsb = std::max(std::min(x.lsb, y.lsb), top - 120);
  auto align = [&](const SignedValue& v) { return v.lsb >= lsb ? v.mag << (v.lsb - lsb) : jam(v.mag, lsb - v.lsb); };
  const i128 ax = x.negative ? -static_cast<i128>(align(x)) : static_cast<i128>(align(x));
  const i128 ay = y.negative ? -static_cast<i128>(align(y)) : static_cast<i128>(align(y));
  const i128 s = ax + ay;
  return SignedValue{s < 0, lsb, static_cast<u128>(s < 0 ? -s : s)};
}

}  // namespace detail

float gemm_reference_element(const QuantizedTensor& a, std::size_t i, const QuantizedTensor& b, std::size_t j,
                             const GemmOptions& options) {
  const detail::ReferenceContext ctx(a, b, options);
  return std::bit_cast<float>(ctx.element(i, j));
}

std::vector<float> gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options) {
  check_gemm_operands(a, b, options);
  std::vector<float> c(a.rows * b.rows);
  if (options.impl == GemmImpl::fast && detail::gemm_fast(a, b, options, c)) return c;
  const detail::ReferenceContext ctx(a, b, options);
  const auto m = static_cast<std::int64_t>(a.rows);
  const std::size_t n = b.rows;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      c[static_cast<std::size_t>(i) * n + j] = std::bit_cast<float>(ctx.element(static_cast<std::size_t>(i), j));
  }
  return c;
}

GemmOptions resolve_gemm(const Recipe& recipe, const QuantizedTensor& a, const QuantizedTensor& b,
                         const GemmRequest& request) {
  GemmOptions o;
  const std::string name = request.datapath.empty() ? recipe.default_datapath : request.datapath;
  o.datapath = find_datapath(name);
  if (!o.datapath) throw UsageError("unknown datapath '" + name + "' (known: " + datapath_names() + ")");
  if (o.datapath->kind == DatapathKind::probe_matched) {
    const std::string inner = request.inner.empty() ? std::string(o.datapath->inner) : request.inner;
    o.inner = find_datapath(inner);
    if (!o.inner) throw UsageError("unknown --inner datapath '" + inner + "' (known: " + datapath_names() + ")");
  } else if (!request.inner.empty()) {
    throw UsageError("--inner applies only to --datapath probe-matched");
  }
  o.snap = request.snap && o.datapath->snap;
  o.bf16_output = request.bf16_output;
  o.impl = request.impl;
  const float element_max = decode_to_float(a.element, a.element.max_finite_code());
  o.alpha = gemm_alpha(alpha_rule_for(*o.datapath, recipe), a.tensor_amax, a.target, b.tensor_amax, b.target,
                       element_max);
  return o;
}

std::vector<float> gemm(const Recipe& recipe, const QuantizedTensor& a, const QuantizedTensor& b,
                        const GemmRequest& request) {
  return gemm(a, b, resolve_gemm(recipe, a, b, request));
}

}  // namespace fp4sim

namespace fp4sim::detail {
bool gemm_fast(const QuantizedTensor&, const QuantizedTensor&, const GemmOptions&, std::span<float>) { return false; }
}  // namespace fp4sim::detail
