// The datapath rows' validation and description, and the golden fused dot-product-add (SoftFloat
// s_mulAddF32 shape: unpack to integers, exact products, integer alignment, one roundPack). The rows
// themselves: datapath_rows.cpp.
#include "fp4sim/core/datapath.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/json.hpp"

namespace fp4sim {

namespace {

// FP32 bits of a code of `f` (exact: every output format here fits binary32).
std::uint32_t widen_to_fp32(const Format& f, std::uint32_t code) {
  if (f == formats::fp32) return code;
  if (f == formats::e8m13) return code << 10;
  const Decoded d = decode(f, code);
  const std::uint32_t sign = d.negative ? 0x80000000u : 0u;
  switch (d.cls) {
    case ValueClass::zero: return sign;
    case ValueClass::inf: return sign | 0x7F800000u;
    case ValueClass::nan:
    case ValueClass::invalid: return 0x7FC00000u;
    case ValueClass::finite: break;
  }
  const Encoded e = round_pack(formats::fp32, EncodeOptions{Rounding::rne, false}, d.negative, d.exponent,
                               d.significand);
  return e.code;
}

std::string_view kind_name(DatapathKind k) {
  switch (k) {
    case DatapathKind::exact: return "exact";
    case DatapathKind::fp32_seq: return "fp32-seq";
    case DatapathKind::probe_matched: return "probe-matched";
    case DatapathKind::tfdpa: return "T-FDPA";
    case DatapathKind::gst_fdpa: return "GST-FDPA";
  }
  return "?";
}

std::string zero_result_text(ZeroResult z) {
  return z == ZeroResult::positive ? "positive" : "signed-underflow";
}

std::string exponent_text(int e) { return e == kNoExponent ? std::string("none") : std::to_string(e); }

std::string alpha_text(AlphaSource a) {
  switch (a) {
    case AlphaSource::recipe: return "recipe";
    case AlphaSource::division: return "division";
    case AlphaSource::reciprocal: return "reciprocal";
  }
  return "?";
}

}  // namespace


std::optional<InputSpec> find_input(const Datapath& dp, std::string_view name) {
  for (const auto& in : dp.inputs) {
    if (in.name == name) return in;
  }
  return std::nullopt;
}

std::vector<std::string> validate(const Datapath& dp) {
  std::vector<std::string> problems;
  const FusedParams& p = dp.fused;
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::gst_fdpa) {
    if (p.frac_bits < 1 || p.frac_bits > 90) problems.push_back("F must be in 1..90 (the sum is an int128)");
    if (p.group < 1) problems.push_back("G must be positive");
    if (!(p.out == formats::fp32 || p.out == formats::fp16 || p.out == formats::e8m13))
      problems.push_back("output format must be fp32, fp16 or e8m13");
    if (dp.inputs.empty()) problems.push_back("a tensor-core row needs at least one input format");
    for (const auto& in : dp.inputs) {
      if (in.instruction_k < 1) problems.push_back("instruction K must be positive");
      if (dp.kind == DatapathKind::tfdpa && in.instruction_k % p.group != 0)
        problems.push_back("instruction K must be a multiple of G");
    }
  }
  if (dp.kind == DatapathKind::gst_fdpa) {
    if (dp.instruction_k % p.subblock != 0) problems.push_back("instruction K must be a multiple of the sub-block");
    if (dp.scale_formats.empty()) problems.push_back("a block-scaled row needs scale formats");
  }
  if (dp.kind == DatapathKind::tfdpa && !dp.scale_formats.empty()) {
    if (dp.instruction_k != p.group) problems.push_back("a block-scaled T-FDPA row has one scale pair per G-step");
    for (const Format& f : dp.scale_formats)
      if (f.mantissa_bits != 0) problems.push_back("a block-scaled T-FDPA row takes power-of-two scales only");
    for (const auto& in : dp.inputs)
      if (in.instruction_k != dp.instruction_k) problems.push_back("instruction K must be the scale block");
  }
  if (p.c_window_bits != 0 || p.c_frac_bits != 0 || p.lanes != 1) {
    if (p.c_in_alignment) problems.push_back("two-stage C needs c_in_alignment false");
    if (p.c_window_bits < p.frac_bits || p.c_window_bits > 90) problems.push_back("the C window must be F..90 bits");
    if (p.c_frac_bits < 1 || p.c_frac_bits > p.c_window_bits) problems.push_back("C's bits must be 1..the C window");
    if (p.lanes < 1 || p.lanes > 4 || p.group % p.lanes != 0) problems.push_back("lanes must be 1..4 and divide G");
  }
  if (dp.kind == DatapathKind::probe_matched) {
    if (!dp.inner || dp.inner->kind != DatapathKind::tfdpa) problems.push_back("inner datapath must be a T-FDPA row");
    if (dp.group_k < 1) problems.push_back("group K must be positive");
  }
  return problems;
}

std::string describe_parameters(const Datapath& dp) {
  std::string s = "kind=" + std::string(kind_name(dp.kind));
  const FusedParams& p = dp.fused;
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::gst_fdpa) {
    if (dp.kind == DatapathKind::tfdpa) s += " G=" + std::to_string(p.group);
    if (dp.kind == DatapathKind::gst_fdpa)
      s += " K=" + std::to_string(dp.instruction_k) + " subblock=" + std::to_string(p.subblock) + "(exact)";
    s += " F=" + std::to_string(p.frac_bits);
    s += std::string(" addend=") + (p.addend == AddendRounding::trunc_signmag ? "trunc-signmag" : "floor-twos");
    if (p.c_window_bits == 0) s += std::string(" C=") + (p.c_in_alignment ? "joint" : "late");
    if (dp.kind == DatapathKind::tfdpa)
      s += std::string(" products=") + (p.product_unnormalized ? "unnormalised" : "normalised");
    s += " E_floor=" + exponent_text(p.e_floor);
    s += " zeros_in_Emax=" + (p.zero_exponent == kNoExponent ? std::string("no") : exponent_text(p.zero_exponent));
    s += " out=" + format_name(p.out) + (p.out == formats::e8m13 ? "(fp32 low 10 bits 0)" : "");
    s += std::string(" ") + (p.out_rounding == OutputRounding::rz ? "RZ" : "RNE");
    s += std::string(" overflow=") + (p.overflow_to_inf ? "Inf" : "max-finite");
    s += std::string(" zero=") + zero_result_text(p.zero_result);
    if (p.c_at_accumulator_emin) s += " C-at-accumulator-emin";
    if (p.tf32_truncate_inputs) s += " tf32-truncate-inputs";
    if (p.product_overflow_to_inf) s += " product-overflow=Inf";
    if (p.c_window_bits > 0) {
      s += " C=two-stage(sum floor " + std::to_string(p.c_window_bits) + ", C floor " + std::to_string(p.c_frac_bits);
      if (p.c_drop_distance > 0) s += ", C dropped beyond " + std::to_string(p.c_drop_distance);
      s += ")";
      if (p.lanes > 1) s += " lanes=" + std::to_string(p.lanes);
    }
    if (p.scale_sign_ignored) s += " scale-sign-ignored";
    s += " inputs=";
    for (std::size_t i = 0; i < dp.inputs.size(); ++i) {
      if (i) s += ',';
      s.append(dp.inputs[i].name);
      s += "(k";
      s += std::to_string(dp.inputs[i].instruction_k);
      s += ')';
    }
    if (!dp.scale_formats.empty()) {
      s += " scales=";
      for (std::size_t i = 0; i < dp.scale_formats.size(); ++i) {
        if (i) s += ',';
        s += format_name(dp.scale_formats[i]);
      }
    }
  }
  if (dp.kind == DatapathKind::probe_matched) {
    s += " group_k=" + std::to_string(dp.group_k) + " inner=" + std::string(dp.inner->name) + " combine=add.rz.f32";
    s += std::string(" snap=") + (dp.snap ? "1/1024" : "off");
  }
  if (dp.kind != DatapathKind::tfdpa) s += " alpha=" + alpha_text(dp.alpha);
  char nan[16];
  std::snprintf(nan, sizeof nan, "0x%08X", dp.nan_bits);
  s += std::string(" nan=") + nan;
  return s;
}

std::string describe_parameters_json(const Datapath& dp) {
  const FusedParams& p = dp.fused;
  std::string s = "{\"name\": \"" + std::string(dp.name) + "\", \"kind\": \"" + std::string(kind_name(dp.kind)) + "\"";
  auto num = [&](const char* key, int v) { s += std::string(", \"") + key + "\": " + std::to_string(v); };
  auto str = [&](const char* key, std::string_view v) {
    s += std::string(", \"") + key + "\": " + json::string(v);
  };
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::gst_fdpa) {
    num("G", dp.kind == DatapathKind::tfdpa ? p.group : dp.instruction_k);
    if (dp.kind == DatapathKind::gst_fdpa) num("subblock", p.subblock);
    num("F", p.frac_bits);
    str("addend", p.addend == AddendRounding::trunc_signmag ? "trunc-signmag" : "floor-twos");
    str("c", p.c_window_bits > 0 ? "two-stage" : p.c_in_alignment ? "joint" : "late");
    if (p.c_window_bits > 0) {
      num("c_window_bits", p.c_window_bits);
      num("c_frac_bits", p.c_frac_bits);
      num("c_drop_distance", p.c_drop_distance);
      num("lanes", p.lanes);
    }
    str("products", p.product_unnormalized ? "unnormalised" : "normalised");
    if (p.e_floor == kNoExponent) s += ", \"e_floor\": null, \"e_floor_note\": \"none\"";
    else num("e_floor", p.e_floor);
    if (p.zero_exponent == kNoExponent) s += ", \"zero_exponent\": null, \"zero_exponent_note\": \"zeros ignored\"";
    else num("zero_exponent", p.zero_exponent);
    str("out", format_name(p.out));
    str("out_rounding", p.out_rounding == OutputRounding::rz ? "rz" : "rne");
    str("overflow", p.overflow_to_inf ? "inf" : "max-finite");
    str("zero_result", zero_result_text(p.zero_result));
    s += std::string(", \"c_at_accumulator_emin\": ") + (p.c_at_accumulator_emin ? "true" : "false");
    s += std::string(", \"tf32_truncate_inputs\": ") + (p.tf32_truncate_inputs ? "true" : "false");
    s += std::string(", \"product_overflow_to_inf\": ") + (p.product_overflow_to_inf ? "true" : "false");
    s += std::string(", \"scale_sign_ignored\": ") + (p.scale_sign_ignored ? "true" : "false");
    s += ", \"inputs\": [";
    for (std::size_t i = 0; i < dp.inputs.size(); ++i)
      s += std::string(i ? ", " : "") + "{\"format\": \"" + std::string(dp.inputs[i].name) +
           "\", \"instruction_k\": " + std::to_string(dp.inputs[i].instruction_k) + "}";
    s += "]";
    if (!dp.scale_formats.empty()) {
      s += ", \"scales\": [";
      for (std::size_t i = 0; i < dp.scale_formats.size(); ++i)
        s += std::string(i ? ", " : "") + json::string(format_name(dp.scale_formats[i]));
      s += "]";
    }
  }
  if (dp.kind == DatapathKind::probe_matched) {
    num("group_k", dp.group_k);
    str("inner", dp.inner->name);
    s += std::string(", \"snap\": ") + (dp.snap ? "true" : "false");
  }
  if (dp.kind != DatapathKind::tfdpa) str("alpha", alpha_text(dp.alpha));
  char nan[16];
  std::snprintf(nan, sizeof nan, "0x%08X", dp.nan_bits);
  str("nan_bits", nan);
  str("summary", dp.summary);
  str("source", dp.source);
  s += "}";
  return s;
}

// ---------------------------------------------------------------------------------------------------
// Golden arithmetic.

Unpacked unpack(const Format& f, std::uint32_t code) {
  const Decoded d = decode(f, code);
  Unpacked u;
  u.negative = d.negative;
  switch (d.cls) {
    case ValueClass::zero: u.cls = Unpacked::zero; return u;
    case ValueClass::inf: u.cls = Unpacked::inf; return u;
    case ValueClass::nan:
    case ValueClass::invalid: u.cls = Unpacked::nan; return u;
    case ValueClass::finite: break;
  }
  // decode() gives value = significand * 2^exponent with the exponent of the LSB; the leading-bit
  // exponent is that plus the mantissa width, for normals and (at emin) subnormals alike.
  u.cls = Unpacked::finite;
  u.sig = d.significand;
  u.frac = f.mantissa_bits;
  u.exp = d.exponent + f.mantissa_bits;
  return u;
}

Unpacked unpack_fp32(std::uint32_t bits) { return unpack(formats::fp32, bits); }

Addend product_addend(const FusedParams& p, const Unpacked& a, const Unpacked& b) {
  Addend t;
  t.negative = a.negative != b.negative;
  if (a.cls != Unpacked::finite || b.cls != Unpacked::finite) {
    // A zero product: an addend of 0 whose exponent counts only under the zero_exponent rule (O8).
    if (p.zero_exponent != kNoExponent) {
      t.in_emax = true;
      t.exp = (a.cls == Unpacked::finite ? a.exp : p.zero_exponent) +
              (b.cls == Unpacked::finite ? b.exp : p.zero_exponent);
    }
    return t;
  }
  t.in_emax = true;
  t.sig = static_cast<u128>(a.sig) * b.sig;  // exact: at most 48 bits
  t.frac = a.frac + b.frac;
  t.exp = a.exp + b.exp;  // significand in [1,4) (or below 1 with subnormals): not renormalised
  if (!p.product_unnormalized && (t.sig >> (t.frac + 1)) != 0) {
    t.frac += 1;  // renormalised into [1,2): same value, exponent one higher
    t.exp += 1;
  }
  return t;
}

Addend c_addend(const FusedParams& p, const Unpacked& c) {
  Addend t;
  t.negative = c.negative;
  if (c.cls != Unpacked::finite) {
    if (p.zero_exponent != kNoExponent) {
      t.in_emax = true;
      t.exp = p.zero_exponent;
    }
    return t;
  }
  t.in_emax = true;
  t.sig = c.sig;
  t.frac = c.frac;
  t.exp = c.exp;
  const int acc_emin = p.out.min_normal_exponent();
  if (p.c_at_accumulator_emin && t.exp < acc_emin) {
    t.frac += acc_emin - t.exp;  // the same value, read with the accumulator's subnormal exponent
    t.exp = acc_emin;
  }
  return t;
}

std::uint32_t round_to_fp32(bool negative, int exp_lsb, u128 mag, OutputRounding rounding) {
  if (mag == 0) return negative ? 0x80000000u : 0u;
  const int len = bit_length(mag);
  if (len > 62) {
    mag = shift_right_jam(mag, len - 62);  // 62 bits + sticky are plenty for a 24-bit result
    exp_lsb += len - 62;
  }
  const Encoded e = round_pack(formats::fp32,
                               EncodeOptions{rounding == OutputRounding::rz ? Rounding::rtz : Rounding::rne, false},
                               negative, exp_lsb, static_cast<std::uint64_t>(mag));
  return e.code;
}

std::uint32_t round_output(const FusedParams& p, bool negative, int exp_lsb, u128 mag) {
  if (mag == 0) return 0u;  // O4: an exact zero is +0
  const int len = bit_length(mag);
  const int top = exp_lsb + len - 1;  // the value lies in [2^top, 2^(top+1))
  const Format& f = p.out;
  const std::uint32_t sign32 = negative ? 0x80000000u : 0u;
  if (p.overflow_to_inf && p.out_rounding == OutputRounding::rz && top > f.max_exponent()) {
    return sign32 | 0x7F800000u;  // O5: at or above 2^(emax+1) after truncation -> Inf, not FLT_MAX
  }
  if (len > 62) {
    mag = shift_right_jam(mag, len - 62);
    exp_lsb += len - 62;
  }
  EncodeOptions o;
  o.rounding = p.out_rounding == OutputRounding::rz ? Rounding::rtz : Rounding::rne;
  o.saturate = !p.overflow_to_inf;
  const Encoded e = round_pack(f, o, negative, exp_lsb, static_cast<std::uint64_t>(mag));
  const std::uint32_t out = widen_to_fp32(f, e.code);
  if (p.zero_result == ZeroResult::positive && (out & 0x7FFFFFFFu) == 0) return 0u;  // O9: underflow to +0
  return out;
}

namespace {

// floor(sig * 2^d) for d < 0, as a magnitude, and whether bits were lost.
u128 shifted(u128 sig, int d, bool& lost) {
  lost = false;
  if (d >= 0) return sig << d;
  if (-d >= 128) {
    lost = sig != 0;
    return 0;
  }
  lost = (sig & ((u128{1} << -d) - 1)) != 0;
  return sig >> -d;
}

// Adds one addend's cut to a step's trace: the part of sig below the window, at its own exponent.
void trace_cut(FusedStepTrace& trace, const Addend& t, int d, bool lost) {
  ++trace.addends;
  if (!lost) return;
  ++trace.lost;
  const u128 dropped = -d >= 128 ? t.sig : t.sig & ((u128{1} << -d) - 1);
  const long double v = std::ldexp(static_cast<long double>(dropped), t.exp - t.frac);
  trace.truncated += t.negative ? -v : v;
}

}  // namespace

namespace {

// One addend cut to F bits below 2^e_max by the row's addend rule, as a signed integer with LSB 2^(e_max - F).
//   |sig| = [ kept bits ........ | dropped ]   no guard, round or sticky bit survives
i128 cut(const FusedParams& p, const Addend& t, int e_max, FusedStepTrace* trace) {
  bool lost = false;
  const int d = p.frac_bits + t.exp - e_max - t.frac;
  u128 mag = shifted(t.sig, d, lost);
  if (trace) trace_cut(*trace, t, d, lost);
  if (p.addend == AddendRounding::floor_twos && t.negative && lost) mag += 1;  // floor of a negative
  return t.negative ? -static_cast<i128>(mag) : static_cast<i128>(mag);
}

// floor(v * 2^d) of a signed fixed-point number: an arithmetic right shift is the floor (toward -inf).
i128 floor_shift(i128 v, int d) {
  if (d >= 0) return v << d;
  if (-d >= 127) return v < 0 ? -1 : 0;
  return v >> -d;
}

// Two-stage C (AMD CDNA3; MMA-Sim amd_fused_dot_rd_add, "rd" = round down):
//   1. each lane's products (lane = k mod lanes) cut to F bits below the lane's own E_max;
//   2. the lanes joined at E_p = their largest E_max, each lane's sum floored to F bits there;
//   3. that sum and C meet at E2 = max(E_p, E_C), W = c_window_bits bits below 2^E2: the sum floored to W
//      bits, C floored to c_frac_bits (or dropped when more than c_drop_distance binades below 2^E2);
//   4. one rounding of the exact total into p.out.
std::uint32_t two_stage_sum(const FusedParams& p, std::span<const Addend> terms, const Addend& c,
                            FusedStepTrace* trace) {
  constexpr std::size_t kMaxLanes = 4;  // validate() keeps lanes within this
  const auto lanes = static_cast<std::size_t>(p.lanes);
  std::array<int, kMaxLanes> e_lane{};
  std::array<bool, kMaxLanes> has{};
  std::array<i128, kMaxLanes> s_lane{};
  e_lane.fill(p.e_floor);
  for (std::size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].sig != 0 || terms[k].in_emax) {
      e_lane[k % lanes] = std::max(e_lane[k % lanes], terms[k].exp);
      has[k % lanes] = true;
    }
  }
  for (std::size_t k = 0; k < terms.size(); ++k)
    if (terms[k].sig != 0) s_lane[k % lanes] += cut(p, terms[k], e_lane[k % lanes], trace);
  bool any_p = false;
  int e_p = kNoExponent;
  for (std::size_t l = 0; l < lanes; ++l) {
    if (has[l]) e_p = std::max(e_p, e_lane[l]);
    any_p = any_p || has[l];
  }
  i128 s = 0;
  for (std::size_t l = 0; l < lanes; ++l)
    if (has[l]) s += floor_shift(s_lane[l], e_lane[l] - e_p);
  const bool any_c = c.sig != 0 || c.in_emax;
  if (trace) trace->any = any_p || any_c;
  if (!any_p && !any_c) return 0u;
  const int e2 = std::max(any_p ? e_p : kNoExponent, any_c ? c.exp : kNoExponent);
  const int w = p.c_window_bits;
  i128 total = any_p ? floor_shift(s, w - p.frac_bits - (e2 - e_p)) : 0;
  if (c.sig != 0 && !(p.c_drop_distance > 0 && c.exp < e2 - p.c_drop_distance)) {
    bool lost = false;
    const u128 mag = shifted(c.sig, p.c_frac_bits + c.exp - e2 - c.frac, lost);
    const i128 floored = c.negative ? -static_cast<i128>(mag) - (lost ? 1 : 0) : static_cast<i128>(mag);
    total += floored << (w - p.c_frac_bits);
  }
  if (trace) trace->e_max = e2;
  const bool negative = total < 0;
  return round_output(p, negative, e2 - w, static_cast<u128>(negative ? -total : total));
}

}  // namespace

std::uint32_t fused_sum(const FusedParams& p, std::span<const Addend> terms, const Addend& c, FusedStepTrace* trace) {
  if (p.c_window_bits > 0) return two_stage_sum(p, terms, c, trace);
  int e_max = p.e_floor;
  bool any = false;
  auto consider = [&](const Addend& t) {
    if (t.sig != 0 || t.in_emax) {
      e_max = std::max(e_max, t.exp);
      any = true;
    }
  };
  for (const Addend& t : terms) consider(t);
  if (p.c_in_alignment) consider(c);

  // Each addend becomes floor(|sig| * 2^(F + exp - E_max - frac)), sign reattached (`cut`): a fixed-point
  // number with F fraction bits below 2^E_max, summed exactly.
  i128 sum = 0;
  if (any) {
    for (const Addend& t : terms)
      if (t.sig != 0) sum += cut(p, t, e_max, trace);
    if (p.c_in_alignment && c.sig != 0) sum += cut(p, c, e_max, trace);
  }
  if (trace) {
    trace->any = any;
    trace->e_max = e_max;
  }
  const bool negative = sum < 0;
  const u128 mag = static_cast<u128>(negative ? -sum : sum);
  if (p.c_in_alignment || c.sig == 0) return any ? round_output(p, negative, e_max - p.frac_bits, mag) : 0u;
  // Late C: added exactly to the truncated product sum, one rounding.
  const SignedValue s = add_exact(SignedValue{negative, e_max - p.frac_bits, any ? mag : 0},
                                  SignedValue{c.negative, c.exp - c.frac, c.sig});
  return round_output(p, s.negative, s.lsb, s.mag);
}

namespace {

// A step's result, recorded in its trace (special: decided by NaN/Inf rules, not by the window).
std::uint32_t finish_step(FusedStepTrace* trace, std::uint32_t c_in, std::uint32_t out, bool special) {
  if (trace) {
    trace->c_in = c_in;
    trace->out = out;
    trace->special = special;
  }
  return out;
}

}  // namespace

std::uint32_t tfdpa_step(const Datapath& dp, std::span<const Unpacked> a, std::span<const Unpacked> b,
                         std::uint32_t c_bits, FusedStepTrace* trace) {
  const FusedParams& p = dp.fused;
  bool nan = false, pos_inf = false, neg_inf = false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const Unpacked& x = a[k];
    const Unpacked& y = b[k];
    if (x.cls == Unpacked::nan || y.cls == Unpacked::nan) nan = true;
    if (x.cls == Unpacked::inf || y.cls == Unpacked::inf) {
      if (x.cls == Unpacked::zero || y.cls == Unpacked::zero) nan = true;  // 0 * Inf
      (x.negative != y.negative ? neg_inf : pos_inf) = true;
    }
  }
  const Unpacked c = unpack_fp32(c_bits);
  if (c.cls == Unpacked::nan) nan = true;
  if (c.cls == Unpacked::inf) (c.negative ? neg_inf : pos_inf) = true;
  if (nan || (pos_inf && neg_inf)) return finish_step(trace, c_bits, dp.nan_bits, true);  // NaN, Inf - Inf, 0 * Inf
  if (pos_inf) return finish_step(trace, c_bits, 0x7F800000u, true);
  if (neg_inf) return finish_step(trace, c_bits, 0xFF800000u, true);

  std::array<Addend, 64> buffer;
  std::vector<Addend> heap;
  Addend* terms = buffer.data();
  if (a.size() > buffer.size()) {
    heap.resize(a.size());
    terms = heap.data();
  }
  for (std::size_t k = 0; k < a.size(); ++k) terms[k] = product_addend(p, a[k], b[k]);
  if (p.product_overflow_to_inf) {
    // A finite product at or above 2^128 is ±Inf before the sum; +Inf beside -Inf is NaN (C is finite here).
    for (std::size_t k = 0; k < a.size(); ++k) {
      const Addend& t = terms[k];
      if (t.sig != 0 && bit_length(t.sig) - 1 + t.exp - t.frac > formats::fp32.max_exponent())
        (t.negative ? neg_inf : pos_inf) = true;
    }
    if (pos_inf && neg_inf) return finish_step(trace, c_bits, dp.nan_bits, true);
    if (pos_inf) return finish_step(trace, c_bits, 0x7F800000u, true);
    if (neg_inf) return finish_step(trace, c_bits, 0xFF800000u, true);
  }
  return finish_step(trace, c_bits, fused_sum(p, std::span<const Addend>(terms, a.size()), c_addend(p, c), trace),
                     false);
}

std::uint32_t tfdpa_dot(const Datapath& dp, const Format& input, std::span<const std::uint32_t> a,
                        std::span<const std::uint32_t> b, std::uint32_t c_bits) {
  return tfdpa_dot(dp, input, a, input, b, c_bits);
}

namespace {

// The chain of T-FDPA steps over unpacked operands.
std::uint32_t tfdpa_chain(const Datapath& dp, std::span<const Unpacked> ua, std::span<const Unpacked> ub,
                          std::uint32_t c_bits) {
  const FusedParams& p = dp.fused;
  // K in ascending order, G products per fused step, the running result fed back as C.
  std::uint32_t c = c_bits;
  for (std::size_t k0 = 0; k0 < ua.size(); k0 += static_cast<std::size_t>(p.group)) {
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(p.group), ua.size() - k0);
    c = tfdpa_step(dp, ua.subspan(k0, n), ub.subspan(k0, n), c);
  }
  return c;
}

Unpacked load_operand(const FusedParams& p, const Format& f, std::uint32_t code) {
  const bool truncate = p.tf32_truncate_inputs && f == formats::fp32;
  return unpack(f, truncate ? code & ~0x1FFFu : code);
}

}  // namespace

bool block_scaled(const Datapath& dp) { return !dp.scale_formats.empty(); }

std::uint32_t tfdpa_dot(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                        const Format& b_format, std::span<const std::uint32_t> b, std::uint32_t c_bits) {
  std::vector<Unpacked> ua(a.size()), ub(b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    ua[k] = load_operand(dp.fused, a_format, a[k]);
    ub[k] = load_operand(dp.fused, b_format, b[k]);
  }
  return tfdpa_chain(dp, ua, ub, c_bits);
}

std::uint32_t tfdpa_dot(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                        const Format& b_format, std::span<const std::uint32_t> b, const BlockScales& scales,
                        std::uint32_t c_bits) {
  // A power-of-two scale moves its element's exponent (a subnormal element keeps its significand below 1
  // at emin + the scale exponent); a NaN scale makes the element NaN, so the instruction is NaN.
  auto scaled = [&](Unpacked u, std::uint32_t scale_code) {
    const Unpacked s = unpack(scales.format, scale_code);
    if (s.cls != Unpacked::finite) u.cls = Unpacked::nan;
    u.exp += s.exp;
    return u;
  };
  std::vector<Unpacked> ua(a.size()), ub(b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    ua[k] = scaled(load_operand(dp.fused, a_format, a[k]), scales.a[k / scales.block]);
    ub[k] = scaled(load_operand(dp.fused, b_format, b[k]), scales.b[k / scales.block]);
  }
  return tfdpa_chain(dp, ua, ub, c_bits);
}

std::uint32_t gst_step(const Datapath& dp, const Format& scale_format, int elem_frac,
                       std::span<const SubblockSum> sums, std::uint32_t c_bits, FusedStepTrace* trace) {
  const FusedParams& p = dp.fused;
  // A UE4M3 scale lives in a byte whose top bit is a sign the hardware ignores (MMA-Sim: abs()).
  const std::uint32_t sign_mask = p.scale_sign_ignored ? (std::uint32_t{1} << scale_format.bits()) - 1 : ~0u;
  bool nan = false;
  std::array<Addend, 16> terms{};
  std::size_t n = 0;
  for (const SubblockSum& s : sums) {
    const Unpacked sa = unpack(scale_format, s.scale_a & sign_mask);
    const Unpacked sb = unpack(scale_format, s.scale_b & sign_mask);
    if (sa.cls == Unpacked::nan || sb.cls == Unpacked::nan || sa.cls == Unpacked::inf || sb.cls == Unpacked::inf) {
      nan = true;
      continue;
    }
    Addend t;
    t.negative = s.sum < 0;
    if (s.sum != 0 && sa.cls == Unpacked::finite && sb.cls == Unpacked::finite) {
      const u128 mag = static_cast<u128>(s.sum < 0 ? -s.sum : s.sum);
      t.sig = mag * sa.sig * sb.sig;  // exact: the scales are applied to the exact sub-block sum
      t.frac = elem_frac + sa.frac + sb.frac;
      t.exp = sa.exp + sb.exp;        // only the scale exponents, not renormalised by |sum|
      t.in_emax = true;
    }
    if (n < terms.size()) terms[n++] = t;
  }
  const Unpacked c = unpack_fp32(c_bits);
  if (nan || c.cls == Unpacked::nan) return finish_step(trace, c_bits, dp.nan_bits, true);
  if (c.cls == Unpacked::inf) return finish_step(trace, c_bits, c.negative ? 0xFF800000u : 0x7F800000u, true);
  return finish_step(trace, c_bits, fused_sum(p, std::span<const Addend>(terms.data(), n), c_addend(p, c), trace),
                     false);
}

std::uint32_t gst_dot(const Datapath& dp, const Format& element, std::span<const std::uint32_t> a,
                      std::span<const std::uint32_t> b, const BlockScales& scales, std::uint32_t c_bits) {
  // An element as an integer count of 2^-m (m its mantissa bits; e2m1: halves), so that a sub-block sum
  // counts 2^-2m exactly (e2m1: quarters).
  const int m = element.mantissa_bits;
  auto count = [&](std::uint32_t code) {
    const Decoded d = decode(element, code);
    if (d.cls != ValueClass::finite) return std::int64_t{0};  // the GST rows' elements (e2m1) are all finite
    const auto n = static_cast<std::int64_t>(d.significand << (d.exponent + m));
    return d.negative ? -n : n;
  };
  const auto kinst = static_cast<std::size_t>(dp.instruction_k);
  const auto sub = static_cast<std::size_t>(dp.fused.subblock);
  std::uint32_t c = c_bits;
  std::vector<SubblockSum> sums;
  for (std::size_t k0 = 0; k0 < a.size(); k0 += kinst) {
    sums.clear();
    for (std::size_t s = k0; s < std::min(a.size(), k0 + kinst); s += sub) {
      SubblockSum ss;
      for (std::size_t k = s; k < std::min(a.size(), s + sub); ++k) ss.sum += count(a[k]) * count(b[k]);
      ss.scale_a = scales.a[s / scales.block];
      ss.scale_b = scales.b[s / scales.block];
      sums.push_back(ss);
    }
    c = gst_step(dp, scales.format, 2 * m, sums, c);
  }
  return c;
}

std::uint32_t round_to_integer_rne(std::uint32_t bits) {
  const std::uint32_t sign = bits & 0x80000000u;
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  if (field == 0xFF) return bits;                 // Inf, NaN
  if (field >= 127 + 23) return bits;             // already an integer
  if (field < 126) return sign;                   // |x| < 0.5 -> ±0
  // 0.5 <= |x| < 2^23: the integer part sits above bit (150 - field) of the significand.
  const std::uint32_t sig = (bits & 0x7FFFFFu) | 0x800000u;
  const int shift = 150 - field;                   // fraction bits
  const std::uint32_t kept = sig >> shift;
  const std::uint32_t rest = sig & ((1u << shift) - 1);
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t rounded = kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
  if (rounded == 0) return sign;
  return sign | round_to_fp32(false, 0, rounded, OutputRounding::rne);
}

std::uint32_t snap_1024(std::uint32_t bits) {
  const int field = static_cast<int>((bits >> 23) & 0xFF);
  if (field == 0xFF) return bits;
  // C*1024 in binary32: exact (an exponent add) unless it overflows to Inf (RNE), then rint, then
  // /1024: exact, the result is an integer multiple of 2^-10 far above the subnormal range or zero.
  std::uint32_t scaled;
  if (field == 0) {
    // subnormal input: |C| < 2^-126, so C*1024 < 0.5 and rounds to ±0
    return bits & 0x80000000u;
  }
  if (field + 10 >= 0xFF) {
    scaled = (bits & 0x80000000u) | 0x7F800000u;
    return scaled;  // Inf / 1024 = Inf
  }
  scaled = bits + (10u << 23);
  const std::uint32_t r = round_to_integer_rne(scaled);
  if ((r & 0x7FFFFFFFu) == 0) return r;
  return r - (10u << 23);
}

std::uint32_t fp32_to_bf16_rne(std::uint32_t bits) {
  const Encoded e = encode(formats::bf16, std::bit_cast<float>(bits), EncodeOptions{Rounding::rne, false});
  if ((e.code & 0x7FFF) > 0x7F80) return 0x7FC00000u;  // NaN
  return e.code << 16;
}

}  // namespace fp4sim
