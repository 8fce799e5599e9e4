// verify gemm: the user's GEMM output against a golden datapath (or every datapath, --datapath auto),
// with the worst outputs traced through the datapath's own steps: block terms and running sums
// (fp32-seq), fused steps with their alignment exponent E_max and the bits cut below the F-bit window
// (T-FDPA, the groups of probe-matched, GST-FDPA instructions), the epilogue's alpha.
//
// The traces are rebuilt from the public datapath primitives (product_addend, c_addend, fused_sum,
// tfdpa_step, gst_step, add_rz); each ends by checking that it reproduces the golden output and says
// so when it does not.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/fp32.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/verify/verify.hpp"

namespace fp4sim {

namespace {

using detail::float_text;
using detail::hex_bits;

JsonField jnum(std::string key, double v) {
  std::string note;
  std::string value = detail::json_number(v, &note);
  return {std::move(key), std::move(value), std::move(note)};
}
JsonField jint(std::string key, long long v) { return {std::move(key), std::to_string(v), {}}; }
JsonField jtext(std::string key, std::string_view v) { return {std::move(key), detail::json_string(v), {}}; }
JsonField jbool(std::string key, bool v) { return {std::move(key), v ? "true" : "false", {}}; }

std::string with_bits(float v) { return float_text(v) + " (" + hex_bits(v) + ")"; }
std::string ld_text(long double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6Lg", v);
  return buf;
}

bool is_nan_bits(std::uint32_t b) { return (b & 0x7FFFFFFFu) > 0x7F800000u; }

// ---------------------------------------------------------------------------------------------------
// The operands as the datapaths see them.

// The encoded operand q·s of element (r, c) in `input` (exact: gemm() has checked it).
Unpacked encoded(const QuantizedTensor& t, const Format& input, std::size_t r, std::size_t c) {
  const double v = decode_to_double(t.element, t.code(r, c)) * decode_to_double(t.scale, t.scale_code(r, c));
  const InputCodes ic = input_codes(input, std::span<const double>(&v, 1));
  if (ic.first_unrepresentable) {
    Unpacked u;
    u.cls = Unpacked::nan;
    return u;
  }
  return unpack(input, ic.codes[0]);
}

// Element (r, c) as an integer count n of the element grid 2^-elem_frac.
int elem_frac_of(const Format& e) { return -(e.min_normal_exponent() - e.mantissa_bits); }
long long elem_n(const QuantizedTensor& t, std::size_t r, std::size_t c) {
  const Decoded d = decode(t.element, t.code(r, c));
  if (d.cls != ValueClass::finite) return 0;
  const long long n = static_cast<long long>(d.significand) << (d.exponent + elem_frac_of(t.element));
  return d.negative ? -n : n;
}

// ---------------------------------------------------------------------------------------------------
// One fused step traced: the alignment exponent and what the window cut.

struct StepTrace {
  std::size_t k0 = 0, k1 = 0;
  bool special = false;  // NaN/Inf involved: no window arithmetic to show
  int e_max = 0;
  bool any = false;
  std::size_t addends = 0, lost = 0;
  long double truncated = 0;  // signed sum of the dropped parts (exact value minus kept value)
  std::uint32_t c_in = 0, out = 0;
};

StepTrace trace_fused(const FusedParams& p, std::span<const Addend> terms, const Addend& c) {
  StepTrace s;
  s.e_max = p.e_floor;
  auto consider = [&](const Addend& t) {
    if (t.sig != 0 || t.in_emax) {
      s.e_max = std::max(s.e_max, t.exp);
      s.any = true;
    }
  };
  for (const Addend& t : terms) consider(t);
  if (p.c_in_alignment) consider(c);
  auto cut = [&](const Addend& t) {
    if (t.sig == 0) return;
    ++s.addends;
    // kept = floor(sig * 2^(F + exp - E_max - frac)): the bits below the window are dropped.
    const int shift = p.frac_bits + t.exp - s.e_max - t.frac;
    if (shift >= 0) return;
    const int d = -shift;
    const u128 dropped = d >= 128 ? t.sig : t.sig & ((u128{1} << d) - 1);
    if (dropped == 0) return;
    ++s.lost;
    const long double v = std::ldexp(static_cast<long double>(dropped), t.exp - t.frac);
    s.truncated += t.negative ? -v : v;
  };
  if (s.any) {
    for (const Addend& t : terms) cut(t);
    if (p.c_in_alignment) cut(c);
  }
  return s;
}

StepTrace trace_tfdpa_step(const Datapath& dp, std::span<const Unpacked> a, std::span<const Unpacked> b,
                           std::uint32_t c_bits) {
  StepTrace s;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].cls == Unpacked::nan || b[i].cls == Unpacked::nan || a[i].cls == Unpacked::inf || b[i].cls == Unpacked::inf)
      s.special = true;
  }
  const Unpacked c = unpack_fp32(c_bits);
  if (c.cls == Unpacked::nan || c.cls == Unpacked::inf) s.special = true;
  if (!s.special) {
    std::vector<Addend> terms(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) terms[i] = product_addend(dp.fused, a[i], b[i]);
    s = trace_fused(dp.fused, terms, c_addend(dp.fused, c));
  }
  s.c_in = c_bits;
  s.out = tfdpa_step(dp, a, b, c_bits);
  return s;
}

// A chain of T-FDPA steps over [k0, k1) of row i of A and row j of B, from c.
std::vector<StepTrace> trace_tfdpa_chain(const Datapath& row, const QuantizedTensor& qa, std::size_t i,
                                         const QuantizedTensor& qb, std::size_t j, std::size_t k0, std::size_t k1,
                                         std::uint32_t c) {
  const Format input = row.inputs.front().format;
  const auto g = static_cast<std::size_t>(row.fused.group);
  std::vector<StepTrace> steps;
  std::vector<Unpacked> ua, ub;
  for (std::size_t s = k0; s < k1; s += g) {
    const std::size_t e = std::min(k1, s + g);
    ua.clear();
    ub.clear();
    for (std::size_t col = s; col < e; ++col) {
      ua.push_back(encoded(qa, input, i, col));
      ub.push_back(encoded(qb, input, j, col));
    }
    StepTrace t = trace_tfdpa_step(row, ua, ub, c);
    t.k0 = s;
    t.k1 = e;
    c = t.out;
    steps.push_back(t);
  }
  return steps;
}

std::string step_text(const StepTrace& s, const char* what) {
  std::string t = std::string(what) + " k " + std::to_string(s.k0) + ".." + std::to_string(s.k1 - 1) + ": C in " +
                  float_text(std::bit_cast<float>(s.c_in));
  if (s.special) return t + "; NaN/Inf operands; out " + float_text(std::bit_cast<float>(s.out));
  if (!s.any) return t + "; all addends zero; out " + float_text(std::bit_cast<float>(s.out));
  return t + "; E_max " + std::to_string(s.e_max) + "; " + std::to_string(s.lost) + " of " + std::to_string(s.addends) +
         " addends lost bits below the window (total cut " + ld_text(s.truncated) + "); out " +
         with_bits(std::bit_cast<float>(s.out));
}

// The steps of a chain worth showing: the first, the last, and the ones that cut the most.
void summarize_chain(const std::vector<StepTrace>& steps, const char* what, std::size_t show,
                     std::vector<std::string>& out) {
  if (steps.empty()) return;
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  std::size_t cutting = 0;
  long double total = 0;
  for (const auto& s : steps) {
    if (s.any && !s.special) {
      lo = std::min(lo, s.e_max);
      hi = std::max(hi, s.e_max);
    }
    cutting += s.lost > 0;
    total += s.truncated;
  }
  out.push_back(std::to_string(steps.size()) + " " + what + "(s) in ascending k from +0" +
                (lo <= hi ? "; alignment exponent E_max " + std::to_string(lo) + (hi > lo ? ".." + std::to_string(hi) : "")
                          : std::string()) +
                "; " + std::to_string(cutting) + " step(s) cut bits below the window (total cut " + ld_text(total) + ")");
  std::vector<std::size_t> order(steps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return std::fabs(steps[x].truncated) > std::fabs(steps[y].truncated);
  });
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < order.size() && chosen.size() < show; ++i) {
    if (steps[order[i]].lost > 0) chosen.push_back(order[i]);
  }
  if (chosen.empty()) chosen.push_back(steps.size() - 1);
  std::sort(chosen.begin(), chosen.end());
  for (auto idx : chosen) out.push_back("  " + step_text(steps[idx], what));
}

// ---------------------------------------------------------------------------------------------------
// Exact sums (for fp32-seq's running value and the exact reference of an element).

struct Exact {
  bool negative = false;
  int lsb = 0;
  u128 mag = 0;
};

int width(u128 v) {
  const auto hi = static_cast<std::uint64_t>(v >> 64);
  return hi ? 128 - std::countl_zero(hi) : 64 - std::countl_zero(static_cast<std::uint64_t>(v));
}

// x + y exactly when they overlap within 120 bits, else the smaller folded into a sticky bit (enough
// for one later rounding to 24 bits).
Exact add(Exact x, Exact y) {
  if (x.mag == 0) return y;
  if (y.mag == 0) return x;
  const int top = std::max(x.lsb + width(x.mag), y.lsb + width(y.mag));
  const int lsb = std::max(std::min(x.lsb, y.lsb), top - 120);
  auto align = [&](const Exact& v) -> u128 {
    if (v.lsb >= lsb) return v.mag << (v.lsb - lsb);
    const int d = lsb - v.lsb;
    if (d >= 128) return v.mag != 0;
    return (v.mag >> d) | (((v.mag << (128 - d)) != 0) ? 1 : 0);
  };
  const i128 s = (x.negative ? -static_cast<i128>(align(x)) : static_cast<i128>(align(x))) +
                 (y.negative ? -static_cast<i128>(align(y)) : static_cast<i128>(align(y)));
  return Exact{s < 0, lsb, static_cast<u128>(s < 0 ? -s : s)};
}

Exact from_float(float f) {
  const Unpacked u = unpack_fp32(std::bit_cast<std::uint32_t>(f));
  return u.cls == Unpacked::finite ? Exact{u.negative, u.exp - u.frac, u.sig} : Exact{};
}

long double to_ld(const Exact& e) {
  const long double v = std::ldexp(static_cast<long double>(e.mag), e.lsb);
  return e.negative ? -v : v;
}

// The exact term of block kb: s_a * s_b * Σ q_a q_b (0 for a zero scale; NaN flagged by the caller).
Exact block_term(const QuantizedTensor& qa, std::size_t i, const QuantizedTensor& qb, std::size_t j, std::size_t kb) {
  const std::size_t blk = static_cast<std::size_t>(qa.block_cols);
  long long p = 0;
  for (std::size_t c = kb * blk; c < std::min(qa.cols, (kb + 1) * blk); ++c) p += elem_n(qa, i, c) * elem_n(qb, j, c);
  const Unpacked sa = unpack(qa.scale, qa.scale_code(i, kb * blk));
  const Unpacked sb = unpack(qb.scale, qb.scale_code(j, kb * blk));
  if (p == 0 || sa.cls != Unpacked::finite || sb.cls != Unpacked::finite) return {};
  const int ef = elem_frac_of(qa.element);
  return Exact{p < 0, (sa.exp - sa.frac) + (sb.exp - sb.frac) - 2 * ef,
               static_cast<u128>(p < 0 ? -p : p) * sa.sig * sb.sig};
}

// ---------------------------------------------------------------------------------------------------
// Tracing one output element through the golden datapath.

std::vector<std::string> trace_output(const QuantizedTensor& qa, std::size_t i, const QuantizedTensor& qb,
                                      std::size_t j, const GemmOptions& o, float golden) {
  std::vector<std::string> lines;
  const Datapath& dp = *o.datapath;
  std::uint32_t acc = 0;  // the value before the epilogue
  switch (dp.kind) {
    case DatapathKind::exact: {
      Exact sum;
      for (std::size_t kb = 0; kb < qa.scale_cols; ++kb) sum = add(sum, block_term(qa, i, qb, j, kb));
      lines.push_back("exact datapath: the sum of all " + std::to_string(qa.scale_cols) +
                      " block terms s_a*s_b*sum(q_a*q_b) is " + ld_text(to_ld(sum)) +
                      " (exact), multiplied by alpha and rounded once (RNE)");
      lines.push_back("alpha = " + with_bits(o.alpha) + "; output = RN32(sum * alpha) = " + with_bits(golden));
      return lines;
    }
    case DatapathKind::fp32_seq: {
      float y = 0.0f;
      std::size_t rounded = 0;
      long double worst_err = 0;
      std::size_t worst_kb = 0;
      for (std::size_t kb = 0; kb < qa.scale_cols; ++kb) {
        const Exact t = block_term(qa, i, qb, j, kb);
        if (t.mag == 0) continue;
        const Exact s = add(from_float(y), t);
        const float next = std::bit_cast<float>(round_to_fp32(s.negative, s.lsb, s.mag, OutputRounding::rne));
        const long double err = static_cast<long double>(next) - to_ld(s);
        if (err != 0) {
          ++rounded;
          if (std::fabs(err) > std::fabs(worst_err)) {
            worst_err = err;
            worst_kb = kb;
          }
        }
        y = next;
      }
      acc = std::bit_cast<std::uint32_t>(y);
      lines.push_back("fp32-seq: y = +0; y = RN32(y + s_a*s_b*sum(q_a*q_b)) over " + std::to_string(qa.scale_cols) +
                      " K blocks in order (each block term exact); " + std::to_string(rounded) +
                      " of the additions rounded" +
                      (rounded ? "; largest rounding error " + ld_text(worst_err) + " at block " + std::to_string(worst_kb)
                               : std::string()));
      lines.push_back("accumulated y = " + with_bits(y) + "; alpha = " + with_bits(o.alpha) + "; output = RN32(y * alpha)");
      break;
    }
    case DatapathKind::tfdpa: {
      const auto steps = trace_tfdpa_chain(dp, qa, i, qb, j, 0, qa.cols, 0u);
      lines.push_back(std::string(dp.name) + " (" + describe_parameters(dp) + ") over the encoded operands q*s in " +
                      std::string(dp.inputs.front().name) + ":");
      summarize_chain(steps, "step", 3, lines);
      acc = steps.empty() ? 0u : steps.back().out;
      lines.push_back("accumulator = " + with_bits(std::bit_cast<float>(acc)) + "; alpha = " + with_bits(o.alpha) +
                      "; output = RN32(acc * alpha)");
      break;
    }
    case DatapathKind::probe_matched: {
      const Datapath& inner = o.inner ? *o.inner : *dp.inner;
      const auto gk = static_cast<std::size_t>(dp.group_k);
      float c = 0.0f;
      std::vector<StepTrace> all;
      std::string groups;
      std::size_t shown = 0;
      for (std::size_t k0 = 0; k0 < qa.cols; k0 += gk) {
        const auto steps = trace_tfdpa_chain(inner, qa, i, qb, j, k0, k0 + gk, 0u);
        all.insert(all.end(), steps.begin(), steps.end());
        const float partial = std::bit_cast<float>(steps.back().out);
        const float before = c;
        c = fp32::add_rz(c, partial);
        if (shown < 4) {
          groups += (shown ? "; " : "") + std::string("group ") + std::to_string(k0 / gk) + ": partial " +
                    float_text(partial) + ", C = add.rz(" + float_text(before) + ", partial) = " + float_text(c);
          ++shown;
        }
      }
      lines.push_back("probe-matched: per 64-group an inner " + std::string(inner.name) + " chain from +0 (" +
                      describe_parameters(inner) + "), partials combined by add.rz.f32 from +0");
      summarize_chain(all, "inner step", 3, lines);
      lines.push_back(groups + (qa.cols / gk > shown ? "; ..." : ""));
      std::uint32_t cb = std::bit_cast<std::uint32_t>(c);
      if (o.snap) {
        const std::uint32_t snapped = snap_1024(cb);
        lines.push_back("snap RNE(C*1024)/1024: " + float_text(c) + " -> " + float_text(std::bit_cast<float>(snapped)));
        cb = snapped;
      }
      acc = cb;
      lines.push_back("alpha = " + with_bits(o.alpha) + "; output = RN32(C * alpha)");
      break;
    }
    case DatapathKind::gst_fdpa: {
      const auto kinst = static_cast<std::size_t>(dp.instruction_k);
      const auto sub = static_cast<std::size_t>(dp.fused.subblock);
      const int ef2 = 2 * elem_frac_of(qa.element);
      const std::uint32_t mask = dp.fused.scale_sign_ignored ? (std::uint32_t{1} << qa.scale.bits()) - 1 : ~0u;
      std::uint32_t c = 0;
      std::vector<StepTrace> steps;
      for (std::size_t k0 = 0; k0 < qa.cols; k0 += kinst) {
        std::vector<SubblockSum> sums;
        std::vector<Addend> terms;
        bool special = false;
        for (std::size_t s = k0; s < k0 + kinst && s < qa.cols; s += sub) {
          SubblockSum ss;
          for (std::size_t col = s; col < std::min(qa.cols, s + sub); ++col) ss.sum += elem_n(qa, i, col) * elem_n(qb, j, col);
          ss.scale_a = qa.scale_code(i, s);
          ss.scale_b = qb.scale_code(j, s);
          sums.push_back(ss);
          const Unpacked sa = unpack(qa.scale, ss.scale_a & mask), sb = unpack(qb.scale, ss.scale_b & mask);
          if (sa.cls == Unpacked::nan || sb.cls == Unpacked::nan || sa.cls == Unpacked::inf || sb.cls == Unpacked::inf)
            special = true;
          Addend t;
          t.negative = ss.sum < 0;
          if (ss.sum != 0 && sa.cls == Unpacked::finite && sb.cls == Unpacked::finite) {
            t.sig = static_cast<u128>(ss.sum < 0 ? -ss.sum : ss.sum) * sa.sig * sb.sig;
            t.frac = ef2 + sa.frac + sb.frac;
            t.exp = sa.exp + sb.exp;
            t.in_emax = true;
          }
          terms.push_back(t);
        }
        const Unpacked cu = unpack_fp32(c);
        StepTrace st;
        if (special || cu.cls == Unpacked::nan || cu.cls == Unpacked::inf) {
          st.special = true;
        } else {
          st = trace_fused(dp.fused, terms, c_addend(dp.fused, cu));
        }
        st.k0 = k0;
        st.k1 = std::min(qa.cols, k0 + kinst);
        st.c_in = c;
        st.out = gst_step(dp, qa.scale, ef2, sums, c);
        c = st.out;
        steps.push_back(st);
      }
      lines.push_back(std::string(dp.name) + " (" + describe_parameters(dp) +
                      "): per K=" + std::to_string(kinst) + " instruction, exact sub-block sums scaled exactly, one fused sum");
      summarize_chain(steps, "instruction", 3, lines);
      acc = c;
      lines.push_back("accumulator = " + with_bits(std::bit_cast<float>(acc)) + "; alpha = " + with_bits(o.alpha) +
                      "; output = RN32(acc * alpha)");
      break;
    }
  }
  if (dp.kind != DatapathKind::exact) {
    float y = fp32::mul_rn(std::bit_cast<float>(acc), o.alpha);
    std::uint32_t bits = std::isnan(y) ? dp.nan_bits : std::bit_cast<std::uint32_t>(y);
    if (o.bf16_output && !is_nan_bits(bits)) bits = fp32_to_bf16_rne(bits);
    if (bits != std::bit_cast<std::uint32_t>(golden)) {
      lines.push_back("(internal: this trace ends at " + with_bits(std::bit_cast<float>(bits)) +
                      ", not the golden output; the trace is approximate here)");
    }
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------------

struct Config {
  std::string label;
  GemmRequest request;
};

std::vector<Config> auto_configs(const Recipe& recipe, bool bf16_too) {
  std::vector<Config> out;
  for (const Datapath* dp : datapath_presets()) {
    if (dp->kind == DatapathKind::probe_matched) {
      for (const Datapath* inner : datapath_presets()) {
        if (inner->kind != DatapathKind::tfdpa || !find_input(*inner, "bf16")) continue;
        for (bool snap : {true, false}) {
          GemmRequest request;
          request.datapath = dp;
          request.inner = inner;
          request.snap = snap;
          out.push_back({std::string(dp->name) + " (inner " + std::string(inner->name) + (snap ? ", snap" : ", no snap") + ")",
                         request});
        }
      }
    } else {
      GemmRequest request;
      request.datapath = dp;
      out.push_back({std::string(dp->name), request});
    }
  }
  if (bf16_too) {
    const std::size_t n = out.size();
    for (std::size_t i = 0; i < n; ++i) {
      Config c = out[i];
      c.label += ", bf16 output";
      c.request.bf16_output = true;
      out.push_back(c);
    }
  }
  (void)recipe;
  return out;
}

std::uint64_t count_exact(std::span<const float> golden, std::span<const float> theirs) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < golden.size(); ++i) {
    n += std::bit_cast<std::uint32_t>(golden[i]) == std::bit_cast<std::uint32_t>(theirs[i]);
  }
  return n;
}

std::string bin_label(int key) {
  const int b = std::abs(key) - 1;  // |d| in (2^(b-1), 2^b]
  const std::int64_t hi = std::int64_t{1} << b;
  const std::int64_t lo = b == 0 ? 1 : (std::int64_t{1} << (b - 1)) + 1;
  const char* sign = key < 0 ? "-" : "+";
  return lo == hi ? sign + std::to_string(hi) : sign + std::to_string(lo) + ".." + sign + std::to_string(hi);
}

}  // namespace

GemmVerifyReport verify_gemm(const Recipe& recipe, const VerifyGemmRequest& request, std::span<const float> a,
                             std::span<const float> b, std::size_t m, std::size_t n, std::size_t k,
                             std::span<const float> theirs) {
  if (a.size() != m * k || b.size() != n * k) throw DataError("verify gemm: operand sizes do not match their shapes");
  if (theirs.size() != m * n) {
    throw DataError("verify gemm: your C holds " + std::to_string(theirs.size()) + " values; C = A·Bᵀ is [" +
                    std::to_string(m) + ", " + std::to_string(n) + "]");
  }
  const QuantizedTensor qa = quantize(recipe, request.a, a, m, k);
  const QuantizedTensor qb = quantize(recipe, request.b, b, n, k);

  GemmVerifyReport rep;
  rep.recipe = recipe.name;
  rep.gemm = std::string(name_of(request.gemm));
  rep.m = m;
  rep.n = n;
  rep.k = k;
  rep.outputs = m * n;
  rep.auto_mode = request.auto_datapath;

  GemmOptions options;
  std::vector<float> golden;
  if (request.auto_datapath) {
    bool bf16_representable = true;
    for (float v : theirs) bf16_representable &= (std::bit_cast<std::uint32_t>(v) & 0xFFFFu) == 0 || std::isnan(v);
    std::uint64_t best = 0;
    bool have = false, best_is_own = false;
    for (const Config& cfg : auto_configs(recipe, bf16_representable)) {
      GemmCandidate cand;
      cand.name = cfg.label;
      try {
        const GemmOptions o = resolve_gemm(recipe, qa, qb, cfg.request);
        std::vector<float> c = gemm(qa, qb, o);
        cand.exact_matches = count_exact(c, theirs);
        // The best count wins; among equals, the recipe's own datapath.
        const bool own = cfg.request.datapath == recipe.default_datapath && !cfg.request.bf16_output &&
                         cfg.request.snap && (!cfg.request.inner || cfg.request.inner == o.datapath->inner);
        if (!have || cand.exact_matches > best || (cand.exact_matches == best && own && !best_is_own)) {
          best_is_own = own;
          best = cand.exact_matches;
          have = true;
          options = o;
          golden = std::move(c);
        }
        if (cand.exact_matches == rep.outputs) rep.explained_by.push_back(cand.name);
      } catch (const std::exception& e) {  // DataError / UsageError: this row cannot take these operands
        cand.error = e.what();
      }
      rep.candidates.push_back(std::move(cand));
    }
    std::stable_sort(rep.candidates.begin(), rep.candidates.end(), [](const GemmCandidate& x, const GemmCandidate& y) {
      if (x.error.empty() != y.error.empty()) return x.error.empty();
      return x.exact_matches > y.exact_matches;
    });
    if (!have) throw DataError("verify gemm: no datapath preset can run these operands");
  } else {
    options = resolve_gemm(recipe, qa, qb, request.datapath);
    golden = gemm(qa, qb, options);
  }
  rep.datapath = std::string(options.datapath->name);
  if (options.datapath->kind == DatapathKind::probe_matched) {
    rep.inner = std::string(options.inner ? options.inner->name : options.datapath->inner->name);
  }
  rep.snap = options.snap;
  rep.bf16_output = options.bf16_output;
  rep.alpha = options.alpha;

  std::map<int, std::uint64_t> bins;
  std::vector<std::pair<std::int64_t, std::size_t>> bad;  // (severity, index)
  std::uint64_t zero_bin = 0, nonfinite_bin = 0;
  for (std::size_t idx = 0; idx < golden.size(); ++idx) {
    const std::uint32_t g = std::bit_cast<std::uint32_t>(golden[idx]), t = std::bit_cast<std::uint32_t>(theirs[idx]);
    if (g == t) {
      ++rep.exact_matches;
      continue;
    }
    ++rep.mismatches;
    if (!std::isfinite(golden[idx]) || !std::isfinite(theirs[idx])) {
      ++rep.nonfinite_mismatches;
      ++nonfinite_bin;
      bad.emplace_back(std::numeric_limits<std::int64_t>::max(), idx);
      continue;
    }
    const std::int64_t d = ulp_distance(golden[idx], theirs[idx]);
    if (d == 0) {
      ++zero_bin;
      bad.emplace_back(0, idx);
      continue;
    }
    (d > 0 ? rep.theirs_above : rep.theirs_below) += 1;
    const std::uint64_t ad = static_cast<std::uint64_t>(d < 0 ? -d : d);
    rep.max_abs_ulps = std::max<std::int64_t>(rep.max_abs_ulps, static_cast<std::int64_t>(ad));
    const int key = (64 - std::countl_zero(ad - 1)) + 1;  // ceil(log2 |d|) + 1
    bins[d < 0 ? -key : key] += 1;
    bad.emplace_back(static_cast<std::int64_t>(ad), idx);
  }
  for (const auto& [key, count] : bins) rep.histogram.emplace_back(bin_label(key), count);
  if (zero_bin) rep.histogram.emplace_back("0 (sign of zero)", zero_bin);
  if (nonfinite_bin) rep.histogram.emplace_back("non-finite", nonfinite_bin);

  const std::size_t take = std::min(request.worst, bad.size());
  std::partial_sort(bad.begin(), bad.begin() + static_cast<std::ptrdiff_t>(take), bad.end(),
                    [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });

  // Alternatives for the worst outputs, one element at a time.
  std::vector<std::pair<std::string, GemmOptions>> alternatives;
  if (take > 0) {
    for (const Config& cfg : auto_configs(recipe, true)) {
      try {
        const GemmOptions o = resolve_gemm(recipe, qa, qb, cfg.request);
        check_gemm_operands(qa, qb, o);
        alternatives.emplace_back(cfg.label, o);
      } catch (const std::exception&) {
      }
    }
  }
  GemmOptions exact_options = options;
  exact_options.datapath = &datapaths::exact;
  exact_options.alpha = options.alpha;
  exact_options.bf16_output = false;

  for (std::size_t w = 0; w < take; ++w) {
    const std::size_t idx = bad[w].second;
    const std::size_t i = idx / n, j = idx % n;
    GemmOutputNote note;
    note.row = i;
    note.col = j;
    note.golden = golden[idx];
    note.theirs = theirs[idx];
    const bool finite = std::isfinite(golden[idx]) && std::isfinite(theirs[idx]);
    note.ulps = finite ? ulp_distance(golden[idx], theirs[idx]) : 0;
    char diff[48];
    std::snprintf(diff, sizeof diff, "%+lld ulp(s)", static_cast<long long>(note.ulps));
    note.summary = "C[" + std::to_string(i) + ", " + std::to_string(j) + "]: golden " + with_bits(golden[idx]) +
                   ", yours " + with_bits(theirs[idx]) + ", " + (finite ? std::string(diff) : std::string("non-finite"));
    note.details = trace_output(qa, i, qb, j, options, golden[idx]);
    try {
      const float ex = gemm_reference_element(qa, i, qb, j, exact_options);
      note.details.push_back("exact result rounded once: " + with_bits(ex) + " (golden " +
                             std::to_string(ulp_distance(ex, golden[idx])) + " ulps from it, yours " +
                             (std::isfinite(theirs[idx]) && std::isfinite(ex) ? std::to_string(ulp_distance(ex, theirs[idx]))
                                                                              : std::string("?")) +
                             ")");
    } catch (const std::exception&) {
    }
    std::string same;
    for (const auto& [label, o] : alternatives) {
      if (std::bit_cast<std::uint32_t>(gemm_reference_element(qa, i, qb, j, o)) == std::bit_cast<std::uint32_t>(theirs[idx])) {
        same += (same.empty() ? "" : ", ") + label;
      }
    }
    note.details.push_back(same.empty() ? "no modelled datapath gives yours for this output"
                                        : "datapaths that give yours for this output: " + same);
    note.fields = {jint("row", static_cast<long long>(i)), jint("col", static_cast<long long>(j)),
                   jnum("golden", golden[idx]), jtext("golden_bits", hex_bits(golden[idx])),
                   jnum("theirs", theirs[idx]), jtext("theirs_bits", hex_bits(theirs[idx])),
                   jint("ulps", note.ulps), jbool("finite", finite)};
    std::string all;
    for (const auto& d : note.details) all += (all.empty() ? "" : "; ") + d;
    note.fields.push_back(jtext("explanation", all));
    rep.worst.push_back(std::move(note));
  }
  return rep;
}

std::string to_text(const GemmVerifyReport& rep) {
  std::string out;
  const auto line = [&out](const std::string& s) { out += s + "\n"; };
  std::string dp = rep.datapath + (rep.inner.empty() ? "" : " (inner " + rep.inner + (rep.snap ? ", snap)" : ", no snap)")) +
                   (rep.bf16_output ? ", bf16 output" : "");
  line("verify gemm: recipe " + rep.recipe + ", gemm " + rep.gemm + ", C [" + std::to_string(rep.m) + ", " +
       std::to_string(rep.n) + "] = A [" + std::to_string(rep.m) + ", " + std::to_string(rep.k) + "] · B [" +
       std::to_string(rep.n) + ", " + std::to_string(rep.k) + "]ᵀ, datapath " + dp + ", alpha " + with_bits(rep.alpha));
  if (rep.auto_mode) {
    if (rep.explained_by.empty()) {
      line("auto: no datapath preset explains your outputs bit for bit; the closest is compared below");
    } else {
      std::string all;
      for (const auto& e : rep.explained_by) all += (all.empty() ? "" : "; ") + e;
      line("auto: your outputs equal, bit for bit, those of: " + all);
    }
    for (const auto& c : rep.candidates) {
      if (c.error.empty()) {
        char pct[32];
        std::snprintf(pct, sizeof pct, "%.2f%%", rep.outputs ? 100.0 * static_cast<double>(c.exact_matches) / static_cast<double>(rep.outputs) : 100.0);
        line("  " + c.name + ": " + std::to_string(c.exact_matches) + " of " + std::to_string(rep.outputs) + " exact (" + pct + ")");
      } else {
        line("  " + c.name + ": cannot run these operands (" + c.error + ")");
      }
    }
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.2f%%", rep.outputs ? 100.0 * static_cast<double>(rep.exact_matches) / static_cast<double>(rep.outputs) : 100.0);
  line("outputs: " + std::to_string(rep.outputs) + ", exact matches " + std::to_string(rep.exact_matches) + " (" + pct +
       "), mismatches " + std::to_string(rep.mismatches) + " (yours above golden " + std::to_string(rep.theirs_above) +
       ", below " + std::to_string(rep.theirs_below) + ", non-finite " + std::to_string(rep.nonfinite_mismatches) + ")");
  if (!rep.histogram.empty()) {
    std::string h;
    for (const auto& [label, count] : rep.histogram) h += (h.empty() ? "" : ", ") + label + ": " + std::to_string(count);
    line("ulp differences (yours - golden): " + h + "; max |difference| " + std::to_string(rep.max_abs_ulps) + " ulp(s)");
  }
  line(rep.bit_exact() ? "BIT-EXACT" : "NOT BIT-EXACT: " + std::to_string(rep.mismatches) + " output(s) differ");
  if (!rep.worst.empty()) {
    line("");
    line("worst " + std::to_string(rep.worst.size()) + " output(s), traced through " + rep.datapath + ":");
  }
  for (std::size_t w = 0; w < rep.worst.size(); ++w) {
    line("[" + std::to_string(w + 1) + "] " + rep.worst[w].summary);
    for (const auto& d : rep.worst[w].details) line("    " + d);
  }
  return out;
}

std::string to_json(const GemmVerifyReport& rep) {
  std::vector<JsonField> f = {jtext("command", "verify gemm"),
                              jtext("recipe", rep.recipe),
                              jtext("gemm", rep.gemm),
                              jtext("datapath", rep.datapath),
                              rep.inner.empty() ? JsonField{"inner", "null", "not probe-matched"} : jtext("inner", rep.inner),
                              jbool("snap", rep.snap),
                              jbool("bf16_output", rep.bf16_output),
                              jnum("alpha", rep.alpha),
                              jint("m", static_cast<long long>(rep.m)),
                              jint("n", static_cast<long long>(rep.n)),
                              jint("k", static_cast<long long>(rep.k)),
                              jbool("bit_exact", rep.bit_exact()),
                              jint("outputs", static_cast<long long>(rep.outputs)),
                              jint("exact_matches", static_cast<long long>(rep.exact_matches)),
                              jint("mismatches", static_cast<long long>(rep.mismatches)),
                              jint("theirs_above", static_cast<long long>(rep.theirs_above)),
                              jint("theirs_below", static_cast<long long>(rep.theirs_below)),
                              jint("nonfinite_mismatches", static_cast<long long>(rep.nonfinite_mismatches)),
                              jint("max_abs_ulps", rep.max_abs_ulps),
                              jbool("auto", rep.auto_mode)};
  std::string out = "{";
  auto emit = [&out](const std::vector<JsonField>& fields, const std::string& indent) {
    for (std::size_t i = 0; i < fields.size(); ++i) {
      out += (i ? ",\n" : "\n") + indent + detail::json_string(fields[i].key) + ": " + fields[i].value;
      if (!fields[i].note.empty())
        out += ",\n" + indent + detail::json_string(fields[i].key + "_note") + ": " + detail::json_string(fields[i].note);
    }
  };
  emit(f, "  ");
  out += ",\n  \"ulp_histogram\": {";
  for (std::size_t i = 0; i < rep.histogram.size(); ++i) {
    out += (i ? ", " : "") + detail::json_string(rep.histogram[i].first) + ": " + std::to_string(rep.histogram[i].second);
  }
  out += "},\n  \"explained_by\": [";
  for (std::size_t i = 0; i < rep.explained_by.size(); ++i) out += (i ? ", " : "") + detail::json_string(rep.explained_by[i]);
  out += "],\n  \"candidates\": [";
  for (std::size_t i = 0; i < rep.candidates.size(); ++i) {
    const auto& c = rep.candidates[i];
    out += std::string(i ? "," : "") + "\n    {\"name\": " + detail::json_string(c.name) +
           ", \"exact_matches\": " + std::to_string(c.exact_matches) +
           (c.error.empty() ? std::string() : ", \"error\": " + detail::json_string(c.error)) + "}";
  }
  out += rep.candidates.empty() ? "],\n  \"worst\": [" : "\n  ],\n  \"worst\": [";
  for (std::size_t i = 0; i < rep.worst.size(); ++i) {
    out += i ? ",\n    {" : "\n    {";
    emit(rep.worst[i].fields, "      ");
    out += "\n    }";
  }
  out += rep.worst.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

}  // namespace fp4sim
