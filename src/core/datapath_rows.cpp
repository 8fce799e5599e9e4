// The datapath preset table: every row with the source of its parameters and the open points it
// decides (docs/datapaths.md §6.2-§6.4), and the lookups the CLI, the tests and --list-datapaths use.
#include <string>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/error.hpp"

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
constexpr Format kMxScales[] = {formats::e8m0};
// AMD CDNA3 (MI300) MFMA inputs, as MMA-Sim's isa/amd.py names them. fp8 and bf8 are CDNA3's FNUZ
// encodings (bias 8 and 16, no Inf, no -0; the NaN is the -0 code 0x80): their finite values are exactly
// those of e4m3b8fin and e5m2b16fin, which read them; a NaN input cannot be given as a value.
constexpr InputSpec kCdna3F16In[] = {{"bf16", formats::bf16, 8}, {"fp16", formats::fp16, 8}};
constexpr InputSpec kCdna3Xf32In[] = {{"tf32", formats::tf32, 4}, {"fp32", formats::fp32, 4}};
constexpr InputSpec kCdna3Fp8In[] = {{"fp8", Format{4, 3, 8, true, Specials::finite}, 16},
                                     {"bf8", Format{5, 2, 16, true, Specials::finite}, 16}};
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

constexpr FusedParams truncating_tf32(FusedParams p) {
  p.tf32_truncate_inputs = true;
  return p;
}

constexpr FusedParams tf32_tc(int group, int frac_bits, int e_floor) { return truncating_tf32(tc(group, frac_bits, e_floor)); }

constexpr FusedParams gst(int frac_bits, bool scale_sign_ignored) {
  FusedParams p = tc(64, frac_bits, kNoExponent);
  p.subblock = 16;
  p.scale_sign_ignored = scale_sign_ignored;
  return p;
}

// AMD CDNA3 MFMA (MMA-Sim amd_fused_dot_rd_add): F = 24 with truncated products, then the product sum
// (floored to 31 bits) and C (floored to 24 bits) in a second window, RNE into FP32. MMA-Sim's rules,
// assumed: a zero operand or C has exponent -126 in E_max, no E_max floor, a product >= 2^128 is Inf, a
// negative sum that rounds to zero is -0 (an IEEE conversion).
constexpr FusedParams cdna3(int group, int lanes, int c_drop_distance) {
  FusedParams p = tc(group, 24, kNoExponent, formats::fp32, OutputRounding::rne);
  p.c_in_alignment = false;
  p.c_window_bits = 31;
  p.c_frac_bits = 24;
  p.c_drop_distance = c_drop_distance;
  p.lanes = lanes;
  p.zero_exponent = -126;
  p.product_overflow_to_inf = true;
  return p;
}

constexpr std::uint32_t kF16Nan = 0x7FFFE000u;  // fp16 0x7FFF widened to binary32
}  // namespace

// The rows. Parameters: docs/datapaths.md §6.2 (MMA-Sim nv_ptx.py/arithmetic.py; Khattak–Mikaitis
// models/*TC.m). Open points (§6.3) are decided here, one place, as SoftFloat keeps its choices in
// specialize.h: O3 floor = K–M min_exp_limit; O8 zeros take no part in E_max; O4 exact zero is +0;
// O5 overflow -> Inf (measured on H200, docs/design.md); O9 no -0 and O11 C at the accumulator's emin on
// the Hopper rows (`hopper()`, measured on H200, docs/datapaths.md §7.4). The AMD CDNA3 rows take MMA-Sim's
// own choices instead (`cdna3()`, docs/datapaths.md §1.6), all unmeasured.
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

constinit const Datapath sm100_mxf8f6f4{
    .name = "sm100-mxf8f6f4",
    .summary = "B200 tcgen05.mma kind::mxf8f6f4.block_scale (K=32, UE8M0 per 32) -> f32: T-FDPA G=32, F=25, RZ; "
               "each product aligned on its element and scale exponents",
    .source = "MMA-Sim arithmetic.py nv_fused_dot_add with scale_a/scale_b (tcgen05mma_block_scale, k = 32); "
              "E_floor -133, zeros out of E_max and signed underflow as sm100-f8f6f4; unmeasured",
    .fused = tc(32, 25, -133),
    .inputs = kF8f6f4In,
    .scale_formats = kMxScales,
    .instruction_k = 32};

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

constinit const Datapath cdna3_bf16{
    .name = "cdna3-bf16",
    .summary = "MI300 v_mfma_f32_*x*x8(16)_bf16|f16 -> f32: 8 products at F=24 truncated, then sum and C floored "
               "(31 / 24 bits) at max(E, E_C), RNE",
    .source = "MMA-Sim simulator/amd.py and arithmetic.py amd_fused_dot_rd_add (CDNA3, group min(8, k)); unmeasured",
    .fused = cdna3(8, 1, 0),
    .inputs = kCdna3F16In,
    .nan_bits = 0x7FC00000u};

constinit const Datapath cdna3_xf32{
    .name = "cdna3-xf32",
    .summary = "MI300 v_mfma_f32_*_xf32 -> f32: inputs cut to tf32, 4 products at F=24 truncated, then sum and C "
               "floored (31 / 24 bits), RNE",
    .source = "MMA-Sim simulator/amd.py (CDNA3 xf32: truncate_to_tf32, group 4) and amd_fused_dot_rd_add; unmeasured",
    .fused = truncating_tf32(cdna3(4, 1, 0)),
    .inputs = kCdna3Xf32In,
    .nan_bits = 0x7FC00000u};

constinit const Datapath cdna3_fp8{
    .name = "cdna3-fp8",
    .summary = "MI300 v_mfma_f32_*_{fp8,bf8}_{fp8,bf8} -> f32: 16 products in two interleaved lanes of 8 at F=24, "
               "joined floored, then sum and C (dropped 25 binades below) floored, RNE",
    .source = "MMA-Sim simulator/amd.py and amd_fused_dot_rd_add(is_fp8) (CDNA3, group 16); unmeasured",
    .fused = cdna3(16, 2, 25),
    .inputs = kCdna3Fp8In,
    .nan_bits = 0x7FC00000u};

}  // namespace datapaths

namespace {
constexpr const Datapath* kTable[] = {
    &datapaths::exact, &datapaths::fp32_seq, &datapaths::probe_matched, &datapaths::sm70, &datapaths::sm80,
    &datapaths::sm80_tf32, &datapaths::sm90_bf16, &datapaths::sm90_f16acc, &datapaths::sm90_tf32,
    &datapaths::sm90_fp8, &datapaths::sm90_fp8_f16acc, &datapaths::sm100_f16, &datapaths::sm100_f16acc,
    &datapaths::sm100_tf32, &datapaths::sm100_f8f6f4, &datapaths::sm100_f8f6f4_f16acc, &datapaths::sm100_mxf8f6f4,
    &datapaths::sm100_mxf4nvf4, &datapaths::ue5m3_native, &datapaths::cdna3_bf16, &datapaths::cdna3_xf32,
    &datapaths::cdna3_fp8};
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

}  // namespace fp4sim
