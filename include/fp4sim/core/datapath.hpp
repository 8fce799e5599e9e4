// How a dot product is accumulated: tensor-core datapaths as data (docs/datapaths.md §6), and the
// block-scaled GEMM datapaths of docs/design.md (exact, fp32-seq, probe-matched, GST-FDPA presets).
//
// The golden core is SoftFloat's s_mulAddF32 shape: operands unpacked to integer significands and
// exponents, exact integer products, alignment by integer shifts, one rounding at the end. Every
// parameter that decides a bit is a field of `FusedParams`; every GPU is a row of the preset table
// (`datapath_presets()`), which the CLI, `--list-datapaths`, the tests and docs/datapaths.md all read.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/primitives.hpp"

namespace fp4sim {

namespace formats {
// TF32 as an input format: binary32's exponent with 10 fraction bits (wgmma/mma .tf32).
inline constexpr Format tf32{8, 10, 127, true, Specials::ieee};
// Hopper/Ada FP8 tensor-core output: binary32 with the low 10 fraction bits cleared ("f32_e8m13").
inline constexpr Format e8m13{8, 13, 127, true, Specials::ieee};
}  // namespace formats

enum class DatapathKind : std::uint8_t {
  exact,          // exact sum of all scaled products, one rounding (block-scaled GEMM only)
  fp32_seq,       // exact block terms, sequential binary32 RNE accumulation in K-block order (TE reference)
  probe_matched,  // UE5M3 paper: inner tensor-core datapath per 64-group, add.rz of partials, snap, alpha
  tfdpa,          // T-FDPA: truncated fused dot-product-add (MMA-Sim nv_fused_dot_add), chained per group
  gst_fdpa,       // GST-FDPA: exact sub-block sums, exact scale application, one T-FDPA over sub-block terms
};

// How an addend is cut to the F-bit window below 2^E_max.
enum class AddendRounding : std::uint8_t {
  trunc_signmag,  // |x| truncated, sign reattached: toward zero per addend (NVIDIA, all presets)
  floor_twos,     // two's-complement floor: toward -inf per addend (AMD-style; for probe 3's alternative)
};

enum class OutputRounding : std::uint8_t { rz, rne };

// The sign of a result that is zero (O9). An exact zero sum is +0 under both (O4).
enum class ZeroResult : std::uint8_t {
  signed_underflow,  // IEEE: a nonzero sum that rounds to zero keeps its sign (-2^-150 under RZ -> -0)
  positive,          // every zero result is +0 (H200: mma.sync and wgmma never return -0)
};

// The sentinel for "no lower bound on the alignment exponent" and "zeros take no part in E_max".
inline constexpr int kNoExponent = std::numeric_limits<int>::min() / 4;

// Every parameter of one fused dot-product-add step that can decide a bit (docs/datapaths.md §6.1).
struct FusedParams {
  int group = 16;          // G: products fused with C in one step; K is a chain of G-steps, each
                           //   rounded to the output format and fed back as C (instruction chaining,
                           //   and Ampere/Ada's split k16 = 8 + 8)
  int frac_bits = 25;      // F: fraction bits kept below 2^E_max (validate: 1..90, so int128 holds the sum)
  AddendRounding addend = AddendRounding::trunc_signmag;
  bool c_in_alignment = true;        // C takes part in E_max and is truncated like a product (NVIDIA);
                                     //   false: "late C", added exactly after the product sum
  bool product_unnormalized = true;  // a product keeps exponent ea+eb with significand in [1,4)
  int e_floor = kNoExponent;         // E_max >= e_floor (Khattak–Mikaitis min_exp_limit; O3)
  int zero_exponent = kNoExponent;   // kNoExponent: zero operands and a zero C take no part in E_max
                                     //   (K–M, old MMA-Sim; O8). Otherwise a zero operand has this
                                     //   exponent (MMA-Sim HEAD: -126) and raises E_max like any other.
  bool c_at_accumulator_emin = false; // C is read in the accumulator format `out`: a subnormal C aligns at
                                     //   out's emin (fp16: -14, H200), not at its leading bit
  Format out = formats::fp32;        // fp32, fp16 (f16 accumulator) or e8m13 (Hopper FP8)
  OutputRounding out_rounding = OutputRounding::rz;
  ZeroResult zero_result = ZeroResult::signed_underflow;
  bool overflow_to_inf = true;       // >= 2^(emax+1) after truncation -> Inf even under RZ (O5, measured)
  bool tf32_truncate_inputs = false; // fp32 inputs lose their low 13 bits before the multiply (PTX wgmma)
  bool product_overflow_to_inf = false; // a product >= 2^128 is ±Inf before any sum (both signs: NaN); MMA-Sim's
                                     //   CDNA3 model, whose products live in binary32's exponent range
  // Two-stage C (AMD CDNA3, MMA-Sim amd_fused_dot_rd_add; c_in_alignment false, validate: all three or none):
  // the products are summed in their own window (F bits below their E_max, `addend` cut) and that sum meets
  // C in a second window at E2 = max(E_products, E_C): the sum floored to c_window_bits below 2^E2, C
  // floored to c_frac_bits. 0: off.
  int c_window_bits = 0;             // CDNA3: 31 (validate: >= F, <= 90)
  int c_frac_bits = 0;               // CDNA3: 24 (validate: 1..c_window_bits)
  int c_drop_distance = 0;           // > 0: a C more than this many binades below 2^E2 is dropped, not floored
                                     //   (CDNA3 FP8: 25; 0: always floored)
  int lanes = 1;                     // two-stage: product lanes (lane = k mod lanes), each in its own window, then
                                     //   joined at their largest E_max, each lane floored to F bits (CDNA3 FP8: 2;
                                     //   validate: 1..4, dividing G)
  // GST-FDPA (block-scaled instructions)
  int subblock = 16;                 // elements summed exactly before the scales are applied
  bool scale_sign_ignored = false;   // UE4M3 scale byte's sign bit ignored (MMA-Sim takes abs())
};

// How the GEMM epilogue's alpha (post-scale from the two tensor amaxes) is formed.
enum class AlphaSource : std::uint8_t {
  recipe,      // the recipe's AlphaRule
  division,    // TE's reference: RN(RN(A_a*A_b) / RN(RN(F*T_a)*RN(F*T_b)))
  reciprocal,  // the paper's code (and TE's kernel): RN(RN(A_a*A_b) * RN(1/RN(RN(F*T_a)*RN(F*T_b))))
};
// A recipe without a tensor scale (AlphaRule::one) has alpha = 1 under every datapath.

struct InputSpec {
  std::string_view name;  // as users name it: a docs/cli.md format name, or "tf32"
  Format format;
  int instruction_k;      // K of one instruction for this input type
};

struct Datapath {
  std::string_view name;
  DatapathKind kind = DatapathKind::tfdpa;
  std::string_view summary;  // one line for --list-datapaths
  std::string_view source;   // where the parameters come from
  FusedParams fused{};
  // T-FDPA: accepted input formats, first = the encoded-operand format `gemm` uses. GST-FDPA: the
  // element formats accepted.
  std::span<const InputSpec> inputs{};
  // GST-FDPA: accepted block-scale formats. A T-FDPA row with scale formats is block-scaled (tcgen05
  // kind::mxf8f6f4): one power-of-two scale pair per instruction_k elements, whose exponents join each
  // product's alignment exponent (validate: scales without significand bits, instruction_k == G).
  std::span<const Format> scale_formats{};
  int instruction_k = 0;                              // GST-FDPA: K of one instruction (64); block-scaled T-FDPA: 32
  // probe-matched composition
  const Datapath* inner = nullptr;  // default inner tensor-core datapath per group
  int group_k = 0;           // K of one group (64), K % group_k == 0 required
  bool snap = false;         // RNE(C*1024)/1024 before alpha (default on; --no-snap)
  AlphaSource alpha = AlphaSource::recipe;
  std::uint32_t nan_bits = 0x7FFFFFFFu;  // the NaN this datapath outputs (FP32 bits)
};

// The rows, each a named object (the recipes and probe-matched's inner row point at them), and the
// table of them in --list-datapaths order.
namespace datapaths {
extern const Datapath exact, fp32_seq, probe_matched, sm70, sm80, sm80_tf32, sm90_bf16, sm90_f16acc, sm90_tf32,
    sm90_fp8, sm90_fp8_f16acc, sm100_f16, sm100_f16acc, sm100_tf32, sm100_f8f6f4, sm100_f8f6f4_f16acc, sm100_mxf8f6f4,
    sm100_mxf4nvf4, ue5m3_native, cdna3_bf16, cdna3_xf32, cdna3_fp8;
}  // namespace datapaths
std::span<const Datapath* const> datapath_presets();
const Datapath* find_datapath(std::string_view name);
std::string datapath_names();  // "exact fp32-seq ..." for messages
// The row a flag or keyword names; UsageError "<what>: unknown datapath ..." listing the rows.
const Datapath& datapath_argument(std::string_view name, std::string_view what);

// Problems that make a datapath row unusable (empty when valid).
std::vector<std::string> validate(const Datapath& datapath);

// "G=16 F=25 addend=trunc-signmag C=joint products=unnormalised E_floor=-133 out=fp32 RZ ..." and a
// JSON object with the same facts, for --list-datapaths.
std::string describe_parameters(const Datapath& datapath);
std::string describe_parameters_json(const Datapath& datapath);

// The input format a T-FDPA row accepts under this name, with its instruction K (nullopt if none).
std::optional<InputSpec> find_input(const Datapath& datapath, std::string_view format_name);

// ---------------------------------------------------------------------------------------------------
// Golden arithmetic.

// One addend of a fused dot-product-add: value = (negative ? -1 : 1) * sig * 2^(exp - frac). `exp` is
// the addend's alignment exponent: for an operand its leading-bit position (a subnormal keeps the
// format's emin), for a product ea + eb (significand in [1,4), not renormalised), for a GST sub-block
// term the sum of the two scale exponents. sig == 0 is a zero addend; it raises E_max only when
// `in_emax` (the zero_exponent rule, O8).
struct Addend {
  bool negative = false;
  bool in_emax = false;
  int exp = 0;
  int frac = 0;
  u128 sig = 0;
};

// An operand unpacked (SoftFloat's signF32UI/expF32UI/fracF32UI): value = ±sig * 2^(exp - frac).
struct Unpacked {
  enum Cls : std::uint8_t { zero, finite, inf, nan } cls = zero;
  bool negative = false;
  int exp = 0;   // leading-bit exponent: floor(log2 |x|) for normals, emin for subnormals
  int frac = 0;  // the format's mantissa bits
  std::uint64_t sig = 0;
};
Unpacked unpack(const Format& format, std::uint32_t code);
Unpacked unpack_fp32(std::uint32_t bits);

// The exact product of two finite operands as an addend (exp = ea + eb, frac = fa + fb).
// A zero operand yields a zero addend, which takes part in E_max only under p.zero_exponent.
Addend product_addend(const FusedParams& p, const Unpacked& a, const Unpacked& b);
Addend c_addend(const FusedParams& p, const Unpacked& c);

// What one fused step decided (a T-FDPA step, a GST-FDPA instruction), reported by the golden step to
// a caller that asks (verify explains a GEMM output with it).
struct FusedStepTrace {
  std::size_t k0 = 0, k1 = 0;  // the K range of the step (set by the chain that runs it)
  bool special = false;        // NaN or Inf among the operands or C: decided without the window
  bool any = false;            // some addend took part in E_max
  int e_max = 0;               // the alignment exponent
  std::size_t addends = 0;     // nonzero addends cut to the window
  std::size_t lost = 0;        // of them, those that lost bits below it
  long double truncated = 0;   // the signed sum of the parts cut below the window
  std::uint32_t c_in = 0, out = 0;
};

// One fused step on finite addends and C (already unpacked): E_max over the nonzero addends and C,
// each addend cut to F bits below 2^E_max, an exact integer sum, one rounding into p.out. Returns the
// result as FP32 bits (an fp16 or e8m13 result widened exactly). An exact zero sum is +0 (O4).
std::uint32_t fused_sum(const FusedParams& p, std::span<const Addend> terms, const Addend& c,
                        FusedStepTrace* trace = nullptr);

// Rounds ±mag * 2^exp_lsb into p.out with p's output rounding and overflow rule; FP32 bits.
std::uint32_t round_output(const FusedParams& p, bool negative, int exp_lsb, u128 mag);

// D = A·B + C for one output element, as the modeled instruction chain computes it: the K products
// in groups of G, ascending k, each group fused with the running C. `a` and `b` are codes of
// `input` (binary32 bits for fp32, which tf32 rows truncate), `c_bits` the FP32 bits of C. Specials: any NaN, Inf - Inf
// or 0 * Inf gives the row's canonical NaN; otherwise an Inf propagates with its sign.
std::uint32_t tfdpa_dot(const Datapath& dp, const Format& input, std::span<const std::uint32_t> a,
                        std::span<const std::uint32_t> b, std::uint32_t c_bits);
// The same with A and B in different formats (wgmma e4m3 x e5m2, Blackwell's f8f6f4 mixes).
std::uint32_t tfdpa_dot(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                        const Format& b_format, std::span<const std::uint32_t> b, std::uint32_t c_bits);

// A block-scaled T-FDPA row (scale_formats non-empty, tcgen05 kind::mxf8f6f4): element k of A and B under
// the scale codes a[k / block] and b[k / block] of `format` (powers of two: UE8M0); each
// product's exponent gains both scale exponents, its significand is the elements'. A NaN scale makes its
// instruction NaN, whatever the elements.
struct BlockScales {
  Format format;
  std::span<const std::uint32_t> a, b;
  std::size_t block = 0;
};
std::uint32_t tfdpa_dot(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                        const Format& b_format, std::span<const std::uint32_t> b, const BlockScales& scales,
                        std::uint32_t c_bits);
// The row takes block scales: a GST-FDPA row or a block-scaled T-FDPA row.
bool block_scaled(const Datapath& dp);

// D = A·B + C over matrices (row-major A [M,K], B [K,N], C and D [M,N]) as FP32 bits, one tfdpa_dot
// per element (OpenMP across rows). `c` empty means C = +0. A T-FDPA or GST-FDPA row; A codes of
// `a_format`, B codes of `b_format`. A block-scaled row (block_scaled(dp)) needs `scales`: A's
// [M, K / block] row-major, B's [K / block, N].
std::vector<std::uint32_t> mma(const Datapath& dp, const Format& a_format, std::span<const std::uint32_t> a,
                               const Format& b_format, std::span<const std::uint32_t> b,
                               std::span<const std::uint32_t> c, std::size_t m, std::size_t n, std::size_t k,
                               const BlockScales* scales = nullptr);

// The code of each value in `input`, or the index of the first value `input` cannot hold exactly
// (NaN/Inf only where the format has them). Codes are the format's own (tf32: 19-bit codes; fp32:
// binary32 bit patterns, which tf32 rows truncate to 10 fraction bits). A binary32 NaN keeps its sign
// and payload (the double's top 23 payload bits, as an exact widening put them there), so a tf32 row
// truncates it like any other pattern; a double NaN whose payload binary32 cannot hold is refused.
struct InputCodes {
  std::vector<std::uint32_t> codes;
  std::optional<std::size_t> first_unrepresentable;
};
InputCodes input_codes(const Format& input, std::span<const double> values);
// binary32 bits -> double, exact; a NaN keeps sign, payload and signalling bit (payload << 29), which a
// hardware float -> double conversion would quiet. input_codes(fp32) gives the same bits back.
double widen_binary32(std::uint32_t bits);

// One fused step with specials, on unpacked operands (tfdpa_dot's group body).
std::uint32_t tfdpa_step(const Datapath& dp, std::span<const Unpacked> a, std::span<const Unpacked> b,
                         std::uint32_t c_bits, FusedStepTrace* trace = nullptr);

// GST-FDPA (block-scaled instruction, MMA-Sim nv_fused_dot_add_with_block_scale): one instruction of
// `sums.size()` sub-blocks. Sub-block j's exact element dot product is sums[j] * 2^(-elem_frac) (an
// integer count of the element grid's squared quantum), scaled exactly by its two block scales
// (scale codes of `scale_format`; a UE4M3 sign bit is ignored when the row says so). Its addend has
// exponent e_sa + e_sb (scale exponents only) and significand |sums[j]| * m_sa * m_sb. NaN scales or C
// give the row's NaN. Returns FP32 bits.
struct SubblockSum {
  std::int64_t sum = 0;
  std::uint32_t scale_a = 0, scale_b = 0;
};
std::uint32_t gst_step(const Datapath& dp, const Format& scale_format, int elem_frac,
                       std::span<const SubblockSum> sums, std::uint32_t c_bits, FusedStepTrace* trace = nullptr);
// The same for whole element vectors (codes of the row's element format, K a multiple of the instruction's):
// a chain of instructions from C, sub-block sums formed exactly, scale_a/scale_b one code per `block`.
std::uint32_t gst_dot(const Datapath& dp, const Format& element, std::span<const std::uint32_t> a,
                      std::span<const std::uint32_t> b, const BlockScales& scales, std::uint32_t c_bits);

// Exact rounding of ±mag * 2^exp_lsb to binary32 (RNE or RZ), saturating nothing: IEEE overflow.
std::uint32_t round_to_fp32(bool negative, int exp_lsb, u128 mag, OutputRounding rounding);

// A few binary32 helpers the composed datapaths use (integer implementations, no FP environment).
std::uint32_t round_to_integer_rne(std::uint32_t bits);  // torch.round / rint on binary32
std::uint32_t snap_1024(std::uint32_t bits);              // RNE(C*1024)/1024 in binary32
std::uint32_t fp32_to_bf16_rne(std::uint32_t bits);      // result as FP32 bits (low 16 bits zero)

}  // namespace fp4sim
