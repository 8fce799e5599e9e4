// The datapath preset table and the golden fused dot-product-add (SoftFloat s_mulAddF32 shape:
// unpack to integers, exact products, integer alignment, one roundPack).
#include "fp4sim/core/datapath.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/json.hpp"

namespace fp4sim {

namespace {

// ---------------------------------------------------------------------------------------------------
// Accepted inputs per row (first = the encoded-operand format `gemm` uses).
constexpr InputSpec kSm70In[] = {{"fp16", formats::fp16, 4}};
constexpr InputSpec kF16In[] = {{"bf16", formats::bf16, 16}, {"fp16", formats::fp16, 16}};
constexpr InputSpec kF16AccIn[] = {{"fp16", formats::fp16, 16}};
constexpr InputSpec kTf32In[] = {{"tf32", formats::tf32, 8}, {"fp32", formats::fp32, 8}};
constexpr InputSpec kFp8In[] = {{"e4m3", formats::e4m3, 32}, {"e5m2", formats::e5m2, 32}};
constexpr InputSpec kF8f6f4In[] = {{"e4m3", formats::e4m3, 32}, {"e5m2", formats::e5m2, 32},
                                   {"e3m2", formats::e3m2, 32}, {"e2m3", formats::e2m3, 32},
                                   {"e2m1", formats::e2m1, 32}};
constexpr InputSpec kMxf4In[] = {{"e2m1", formats::e2m1, 64}};
constexpr Format kMxf4Scales[] = {formats::ue4m3, formats::e8m0};
constexpr Format kUe5m3Scales[] = {formats::ue5m3};

constexpr FusedParams tc(int group, int frac_bits, int e_floor, Format out = formats::fp32,
                         OutputRounding rounding = OutputRounding::rz) {
  FusedParams p;
  p.group = group;
  p.frac_bits = frac_bits;
  p.e_floor = e_floor;
  p.out = out;
  p.out_rounding = rounding;
  return p;
}

// What the H200 measured beyond the published models (docs/datapaths.md §7.4): no result is -0 (O9),
// and an fp16 accumulator's subnormal C aligns at -14.
constexpr FusedParams hopper(FusedParams p) {
  p.zero_result = ZeroResult::positive;
  p.c_at_accumulator_emin = true;
  return p;
}

constexpr FusedParams tf32_tc(int group, int frac_bits, int e_floor) {
  FusedParams p = tc(group, frac_bits, e_floor);
  p.tf32_truncate_inputs = true;
  return p;
}

constexpr FusedParams gst(int frac_bits, bool scale_sign_ignored) {
  FusedParams p = tc(64, frac_bits, kNoExponent);
  p.subblock = 16;
  p.scale_sign_ignored = scale_sign_ignored;
  return p;
}

constexpr std::uint32_t kF16Nan = 0x7FFFE000u;  // fp16 0x7FFF widened to binary32

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

// The rows. Parameters: docs/datapaths.md §6.2 (MMA-Sim nv_ptx.py/arithmetic.py; Khattak–Mikaitis
// models/*TC.m). Open points (§6.3) are decided here, one place, as SoftFloat keeps its choices in
// specialize.h: O3 floor = K–M min_exp_limit; O8 zeros take no part in E_max; O4 exact zero is +0;
// O5 overflow -> Inf (measured on H200, docs/design.md); O9 no -0 and O11 C at the accumulator's emin on
// the Hopper rows (`hopper()`, measured on H200, docs/datapaths.md §7.4).
namespace datapaths {

constinit const Datapath exact{
    .name = "exact",
    .kind = DatapathKind::exact,
    .summary = "exact sum of all scaled products (wide fixed point), alpha applied exactly, one RNE rounding to FP32",
    .source = "fp4sim golden reference (docs/semantics.md G5 without intermediate rounding); docs/datapaths.md",
    .alpha = AlphaSource::recipe,
    .nan_bits = 0x7FC00000u};

constinit const Datapath fp32_seq{
    .name = "fp32-seq",
    .kind = DatapathKind::fp32_seq,
    .summary = "exact per-block terms s_a*s_b*sum(q_a*q_b), sequential FP32 RNE accumulation in K-block order "
               "from +0, then RN(y*alpha), alpha by division",
    .source = "TransformerEngine reference_nvfp4.py::qgemm (docs/semantics.md G5, N11, M8)",
    .alpha = AlphaSource::division,
    .nan_bits = 0x7FC00000u};

constinit const Datapath probe_matched{
    .name = "probe-matched",
    .kind = DatapathKind::probe_matched,
    .summary = "64-deep groups through an inner tensor-core datapath (4 chained k16 steps from +0), group "
               "partials add.rz.f32 in order from +0, RNE(C*1024)/1024 snap, RN(C*alpha), alpha by reciprocal",
    .source = "UE5M3 paper §6, backends/triton/gemm.py probe_matched_triton_issue_rz (docs/semantics.md P5; docs/design.md)",
    .inner = &sm90_bf16,
    .group_k = 64,
    .snap = true,
    .alpha = AlphaSource::reciprocal};

constinit const Datapath sm70{
    .name = "sm70",
    .summary = "V100 mma.m8n8k4 / wmma f16 -> f32: T-FDPA G=4, F=23, RZ",
    .source = "Fasi et al. 2021; Khattak–Mikaitis V100TC.m; MMA-Sim nv_ptx.py (Volta)",
    .fused = tc(4, 23, kNoExponent),
    .inputs = kSm70In};

constinit const Datapath sm80{
    .name = "sm80",
    .summary = "A100 mma.m16n8k16 f16/bf16 -> f32: k16 split 8+8 (G=8), F=24, RZ",
    .source = "Khattak–Mikaitis A100TC.m; MMA-Sim nv_ptx.py (Ampere, is_split_k)",
    .fused = tc(8, 24, -132),
    .inputs = kF16In};

constinit const Datapath sm80_tf32{
    .name = "sm80-tf32",
    .summary = "A100 mma.m16n8k8 tf32 -> f32: k8 split 4+4 (G=4), F=24, RZ",
    .source = "Khattak–Mikaitis A100TC.m; MMA-Sim nv_ptx.py (Ampere)",
    .fused = tf32_tc(4, 24, -132),
    .inputs = kTf32In};

constinit const Datapath sm90_bf16{
    .name = "sm90-bf16",
    .summary = "H100/H200 mma.sync m16n8k16 / wgmma k16 bf16|f16 -> f32: T-FDPA G=16, F=25, RZ",
    .source = "MMA-Sim nv_ptx.py (Hopper); Khattak–Mikaitis H100TC.m/H200TC.m; 5000/5000 H200/H100 vectors",
    .fused = hopper(tc(16, 25, -133)),
    .inputs = kF16In};

constinit const Datapath sm90_f16acc{
    .name = "sm90-f16acc",
    .summary = "H100/H200 m16n8k16 f16 -> f16 accumulator: T-FDPA G=16, F=25, RNE to fp16",
    .source = "Khattak–Mikaitis H100TC.m (frmode rne, min_exp_limit -21); H200/H100 d_*_fp16 vectors; H200 corners "
              "(tests/data/tensorcore_corners: E_floor -21, no -0, C at -14)",
    .fused = hopper(tc(16, 25, -21, formats::fp16, OutputRounding::rne)),
    .inputs = kF16AccIn,
    .nan_bits = kF16Nan};

constinit const Datapath sm90_tf32{
    .name = "sm90-tf32",
    .summary = "H100/H200 wgmma/wmma k8 tf32 -> f32: T-FDPA G=8, F=25, RZ",
    .source = "MMA-Sim nv_ptx.py; Khattak–Mikaitis H100TC.m (TF32 fma 8); H200/H100 tf32 vectors",
    .fused = hopper(tf32_tc(8, 25, -133)),
    .inputs = kTf32In};

constinit const Datapath sm90_fp8{
    .name = "sm90-fp8",
    .summary = "H100/H200 wgmma k32 e4m3|e5m2 -> f32: T-FDPA G=32, F=13, RZ to e8m13",
    .source = "MMA-Sim nv_ptx.py (Hopper wgmma fp8); Khattak–Mikaitis H100TC.m (neab -10); DeepSeek-V3 §3.5.2; "
              "H200/H100 WGMMA C=0 vectors",
    .fused = hopper(tc(32, 13, -133, formats::e8m13)),
    .inputs = kFp8In};

constinit const Datapath sm90_fp8_f16acc{
    .name = "sm90-fp8-f16acc",
    .summary = "H100/H200 wgmma k32 e4m3|e5m2 -> f16 accumulator: T-FDPA G=32, F=13, RNE to fp16",
    .source = "H200 measurements (tests/data/tensorcore_corners, 21,524 wgmma cases, all four e4m3/e5m2 pairings: G, F, "
              "RNE, no -0, C at -14); E_floor -21 as sm90-f16acc (it cannot cut an FP8 product: all >= 2^-32)",
    .fused = hopper(tc(32, 13, -21, formats::fp16, OutputRounding::rne)),
    .inputs = kFp8In,
    .nan_bits = kF16Nan};

constinit const Datapath sm100_f16{
    .name = "sm100-f16",
    .summary = "B200 tcgen05.mma kind::f16 bf16|f16 -> f32: T-FDPA G=16, F=25, RZ",
    .source = "MMA-Sim nv_ptx.py (Blackwell); Khattak–Mikaitis B200TC.m; B200 bf16/fp16 vectors",
    .fused = tc(16, 25, -133),
    .inputs = kF16In};

constinit const Datapath sm100_f16acc{
    .name = "sm100-f16acc",
    .summary = "B200 f16 -> f16 accumulator: T-FDPA G=16, F=25, RNE to fp16",
    .source = "Khattak–Mikaitis B200TC.m (min_exp_limit -21); B200 d_B200_fp16 vectors",
    .fused = tc(16, 25, -21, formats::fp16, OutputRounding::rne),
    .inputs = kF16AccIn,
    .nan_bits = kF16Nan};

constinit const Datapath sm100_tf32{
    .name = "sm100-tf32",
    .summary = "B200 tcgen05.mma kind::tf32 -> f32: T-FDPA G=8, F=25, RZ",
    .source = "MMA-Sim nv_ptx.py (Blackwell); Khattak–Mikaitis B200TC.m; B200 tf32 vectors",
    .fused = tf32_tc(8, 25, -133),
    .inputs = kTf32In};

constinit const Datapath sm100_f8f6f4{
    .name = "sm100-f8f6f4",
    .summary = "B200 tcgen05.mma kind::f8f6f4 -> f32: T-FDPA G=32, F=25, RZ (FP8 no longer 13-bit)",
    .source = "MMA-Sim nv_ptx.py (Blackwell); Khattak–Mikaitis B200TC.m (fp8 neab 2)",
    .fused = tc(32, 25, -133),
    .inputs = kF8f6f4In};

constinit const Datapath sm100_f8f6f4_f16acc{
    .name = "sm100-f8f6f4-f16acc",
    .summary = "B200 tcgen05.mma kind::f8f6f4 -> f16 accumulator: T-FDPA G=32, F=25, RNE to fp16",
    .source = "MMA-Sim nv_ptx.py tcgen05mma (f16 output: F = 25, RNE); E_floor -21 as sm100-f16acc (Khattak–Mikaitis "
              "B200TC.m fp16 min_exp_limit; it cannot cut an FP8/FP6/FP4 product: all >= 2^-32); unmeasured",
    .fused = tc(32, 25, -21, formats::fp16, OutputRounding::rne),
    .inputs = kF8f6f4In,
    .nan_bits = kF16Nan};

constinit const Datapath sm100_mxf4nvf4{
    .name = "sm100-mxf4nvf4",
    .kind = DatapathKind::gst_fdpa,
    .summary = "B200 tcgen05.mma kind::mxf4nvf4 (K=64): exact 16-element sub-block sums, scales applied exactly, "
               "4 sub-block terms + C in one T-FDPA with F=35 relative to the scale-exponent sum, RZ",
    .source = "MMA-Sim arithmetic.py nv_fused_dot_add_with_block_scale (GST-FDPA); docs/datapaths.md §1.4",
    .fused = gst(35, true),
    .inputs = kMxf4In,
    .scale_formats = kMxf4Scales,
    .instruction_k = 64};

constinit const Datapath ue5m3_native{
    .name = "ue5m3-native",
    .kind = DatapathKind::gst_fdpa,
    .summary = "proposed native UE5M3 block-scaled instruction (K=64): as sm100-mxf4nvf4 with UE5M3 scales and "
               "F=66, wide enough that every sub-block term is exact over UE5M3's whole scale range",
    .source = "fp4sim proposal, docs/datapaths.md (\"ue5m3-native\")",
    .fused = gst(66, false),
    .inputs = kMxf4In,
    .scale_formats = kUe5m3Scales,
    .instruction_k = 64};

}  // namespace datapaths

namespace {
constexpr const Datapath* kTable[] = {&datapaths::exact, &datapaths::fp32_seq, &datapaths::probe_matched, &datapaths::sm70, &datapaths::sm80, &datapaths::sm80_tf32, &datapaths::sm90_bf16, &datapaths::sm90_f16acc, &datapaths::sm90_tf32, &datapaths::sm90_fp8, &datapaths::sm90_fp8_f16acc, &datapaths::sm100_f16, &datapaths::sm100_f16acc, &datapaths::sm100_tf32, &datapaths::sm100_f8f6f4, &datapaths::sm100_f8f6f4_f16acc, &datapaths::sm100_mxf4nvf4, &datapaths::ue5m3_native};
}  // namespace

std::span<const Datapath* const> datapath_presets() { return kTable; }

const Datapath* find_datapath(std::string_view name) {
  for (const Datapath* d : kTable) {
    if (d->name == name) return d;
  }
  return nullptr;
}

std::string datapath_names() {
  std::string s;
  for (const Datapath* d : kTable) s += std::string(s.empty() ? "" : " ") + std::string(d->name);
  return s;
}

const Datapath& datapath_argument(std::string_view name, std::string_view what) {
  const Datapath* row = find_datapath(name);
  if (!row) {
    throw UsageError(std::string(what) + ": unknown datapath '" + std::string(name) + "' (known: " + datapath_names() +
                     ")");
  }
  return *row;
}

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
    s += std::string(" C=") + (p.c_in_alignment ? "joint" : "late");
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
    str("c", p.c_in_alignment ? "joint" : "late");
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

std::uint32_t fused_sum(const FusedParams& p, std::span<const Addend> terms, const Addend& c, FusedStepTrace* trace) {
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

  // Each addend becomes floor(|sig| * 2^(F + exp - E_max - frac)): a fixed-point number with F
  // fraction bits below 2^E_max. Bits below the window are dropped, toward zero per addend:
  //   |sig| = [ kept bits ........ | dropped ]   no guard, round or sticky bit survives
  i128 sum = 0;
  if (any) {
    auto add = [&](const Addend& t) {
      if (t.sig == 0) return;
      bool lost = false;
      const int d = p.frac_bits + t.exp - e_max - t.frac;
      u128 mag = shifted(t.sig, d, lost);
      if (trace) trace_cut(*trace, t, d, lost);
      if (p.addend == AddendRounding::floor_twos && t.negative && lost) mag += 1;  // floor of a negative
      sum += t.negative ? -static_cast<i128>(mag) : static_cast<i128>(mag);
    };
    for (const Addend& t : terms) add(t);
    if (p.c_in_alignment) add(c);
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
  return finish_step(trace, c_bits, fused_sum(p, std::span<const Addend>(terms, a.size()), c_addend(p, c), trace),
                     false);
}

std::uint32_t tfdpa_dot(const Datapath& dp, const Format& input, std::span<const std::uint32_t> a,
                        std::span<const std::uint32_t> b, std::uint32_t c_bits) {
  return tfdpa_dot(dp, input, a, input, b, c_bits);
}

std::uint32_t tfdpa_dot(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                        const Format& b_format, std::span<const std::uint32_t> b, std::uint32_t c_bits) {
  const FusedParams& p = dp.fused;
  auto load = [&](const Format& f, std::uint32_t code) {
    const bool truncate = p.tf32_truncate_inputs && f == formats::fp32;
    return unpack(f, truncate ? code & ~0x1FFFu : code);
  };
  std::vector<Unpacked> ua(a.size()), ub(b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    ua[k] = load(a_format, a[k]);
    ub[k] = load(b_format, b[k]);
  }
  // K in ascending order, G products per fused step, the running result fed back as C.
  std::uint32_t c = c_bits;
  for (std::size_t k0 = 0; k0 < a.size(); k0 += static_cast<std::size_t>(p.group)) {
    const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(p.group), a.size() - k0);
    c = tfdpa_step(dp, std::span<const Unpacked>(ua).subspan(k0, n), std::span<const Unpacked>(ub).subspan(k0, n), c);
  }
  return c;
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
