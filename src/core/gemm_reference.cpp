// The plain scalar reference of every datapath, the golden model every fast path must equal bit for bit,
// reporting its intermediate values to a GemmTrace when asked. The exact datapath's sum is a
// Boost.Multiprecision integer: Boost stays inside this file.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <boost/multiprecision/cpp_int.hpp>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/fp32.hpp"
#include "gemm_internal.hpp"

namespace fp4sim {

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
                            std::size_t j, float alpha, GemmTrace* trace) {
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
  if (trace) {
    trace->blocks = a.blocks;
    trace->exact_sum = terms.empty() ? 0.0L : std::ldexp(sum.convert_to<long double>(), min_lsb);
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
                               std::size_t j, float alpha, GemmTrace* trace) {
  std::uint32_t y = 0;
  if (trace) trace->blocks = a.blocks;
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
    if (trace) {
      const long double exact = std::ldexp(static_cast<long double>(s.mag), s.lsb) * (s.negative ? -1 : 1);
      const long double error = static_cast<long double>(std::bit_cast<float>(y)) - exact;
      if (error != 0) {
        ++trace->rounded_additions;
        if (std::fabs(error) > std::fabs(trace->largest_rounding)) {
          trace->largest_rounding = error;
          trace->largest_rounding_block = kb;
        }
      }
    }
  }
  if (trace) trace->accumulator = y;
  return epilogue(dp, y, alpha);
}

// The trace of the next fused step over [k0, k1), when a trace is kept.
FusedStepTrace* next_step(GemmTrace* trace, std::size_t k0, std::size_t k1) {
  if (!trace) return nullptr;
  FusedStepTrace& step = trace->steps.emplace_back();
  step.k0 = k0;
  step.k1 = k1;
  return &step;
}

// T-FDPA over the encoded operands, one chain of G-steps from +0 over the whole K.
std::uint32_t tfdpa_chain(const Datapath& row, const EncodedTable& ta, const OperandInfo& a, std::size_t i,
                          const EncodedTable& tb, const OperandInfo& b, std::size_t j, std::size_t k0, std::size_t k1,
                          std::uint32_t c, GemmTrace* trace) {
  const auto g = static_cast<std::size_t>(row.fused.group);
  std::vector<Unpacked> ua(g), ub(g);
  for (std::size_t s = k0; s < k1; s += g) {
    const std::size_t n = std::min(g, k1 - s);
    for (std::size_t t = 0; t < n; ++t) {
      const std::size_t col = s + t;
      ua[t] = ta.value[static_cast<std::size_t>(a.scale_code(i, col / a.block)) * 16 + a.q->code(i, col)];
      ub[t] = tb.value[static_cast<std::size_t>(b.scale_code(j, col / b.block)) * 16 + b.q->code(j, col)];
    }
    c = tfdpa_step(row, std::span<const Unpacked>(ua.data(), n), std::span<const Unpacked>(ub.data(), n), c,
                   next_step(trace, s, s + n));
  }
  return c;
}

std::uint32_t gst_chain(const Datapath& dp, const OperandInfo& a, std::size_t i, const OperandInfo& b, std::size_t j,
                        GemmTrace* trace) {
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
    c = gst_step(dp, a.q->scale, 2 * a.elem_frac, sums, c, next_step(trace, k0, std::min(a.k, k0 + kinst)));
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

std::uint32_t ReferenceContext::element(std::size_t i, std::size_t j, GemmTrace* trace) const {
  const Datapath& dp = *options.datapath;
  std::uint32_t out = 0;
  switch (dp.kind) {
    case DatapathKind::exact: out = exact_element(dp, a, i, b, j, alpha_of_row(options, i), trace); break;
    case DatapathKind::fp32_seq: out = fp32_seq_element(dp, a, i, b, j, alpha_of_row(options, i), trace); break;
    case DatapathKind::tfdpa: {
      const std::uint32_t acc = tfdpa_chain(dp, *ta, a, i, *tb, b, j, 0, a.k, 0u, trace);
      if (trace) trace->accumulator = acc;
      out = epilogue(dp, acc, alpha_of_row(options, i));
      break;
    }
    case DatapathKind::gst_fdpa: {
      const std::uint32_t acc = gst_chain(dp, a, i, b, j, trace);
      if (trace) trace->accumulator = acc;
      out = epilogue(dp, acc, alpha_of_row(options, i));
      break;
    }
    case DatapathKind::probe_matched: {
      const Datapath& inner = inner_of(options);
      const auto gk = static_cast<std::size_t>(dp.group_k);
      float c = 0.0f;  // partials combined in order from +0 by add.rz.f32
      for (std::size_t k0 = 0; k0 < a.k; k0 += gk) {
        const std::uint32_t partial = tfdpa_chain(inner, *ta, a, i, *tb, b, j, k0, k0 + gk, 0u, trace);
        c = fp32::add_rz(c, std::bit_cast<float>(partial));
        if (trace) {
          trace->partials.push_back(std::bit_cast<float>(partial));
          trace->sums.push_back(c);
        }
      }
      std::uint32_t cb = std::bit_cast<std::uint32_t>(c);
      if (options.snap) cb = snap_1024(cb);
      if (trace) {
        trace->snapped = options.snap;
        trace->before_snap = c;
        trace->accumulator = std::isnan(c) ? dp.nan_bits : cb;
      }
      out = epilogue(dp, std::isnan(c) ? dp.nan_bits : cb, alpha_of_row(options, i));
      break;
    }
  }
  return output_cast(out, options.bf16_output);
}

}  // namespace detail

float gemm_reference_element(const QuantizedTensor& a, std::size_t i, const QuantizedTensor& b, std::size_t j,
                             const GemmOptions& options, GemmTrace* trace) {
  const detail::ReferenceContext ctx(a, b, options);
  return std::bit_cast<float>(ctx.element(i, j, trace));
}

}  // namespace fp4sim
