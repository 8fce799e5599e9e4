// Block-scaled GEMM C = A·Bᵀ over quantized operands (A [M,K], B [N,K], both blocked along K), through
// any datapath of the preset table (datapath.hpp), in the manner of CUTLASS's host reference gett.hpp:
// mainloop (how the K products are accumulated: the datapath) and epilogue (alpha, output cast) kept
// apart, scale factors as separate inputs.
//
// What each datapath computes for one output element (docs/datapaths.md has the full text):
//  * exact          RN32(alpha · Σ_k q_a·s_a·q_b·s_b), the sum exact (any scale range), one rounding.
//  * fp32-seq       y = +0; for each K block in order: y = RN32(y + s_a·s_b·Σ q_a·q_b) with the block
//                   term exact; then RN32(y · alpha) (TE reference qgemm; G5).
//  * probe-matched  per 64-group: the inner T-FDPA row over the encoded operands q·s (BF16), four k16
//                   steps chained from +0; partials combined by add.rz.f32 in order from +0; optional
//                   snap RNE(C·1024)/1024; RN32(C · alpha).
//  * T-FDPA rows    the encoded operands q·s in the row's first input format, one chain of G-steps over
//                   the whole K from +0 (a kernel's single accumulator), then RN32(acc · alpha).
//  * GST-FDPA rows  (sm100-mxf4nvf4, ue5m3-native) the block-scaled instruction over codes and scale
//                   codes directly, a chain of K=64 instructions from +0, then RN32(acc · alpha).
// `--out-dtype bf16` then rounds every output RNE to BF16.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/progress.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

namespace fp4sim {

enum class GemmImpl : std::uint8_t {
  fast,       // cache-blocked, OpenMP, SIMD kernels dispatched on the running CPU (golden fallbacks inside)
  reference,  // the plain scalar golden loop, one output element at a time
};

// What the fast path did (for tests and benchmarks).
struct GemmReport {
  bool simd_kernel = false;            // the SIMD tile kernels ran (else the reference loop did)
  std::string isa;                     // avx512, avx2 or portable
  std::uint64_t golden_steps = 0;      // T-FDPA lanes handed to the scalar golden step
  std::uint64_t reference_outputs = 0; // outputs recomputed by a scalar exact/reference path
  double prepare_ms = 0, kernel_ms = 0, epilogue_ms = 0;  // wall time of the fast path's phases
};

struct GemmOptions {
  const Datapath* datapath = nullptr;  // required
  const Datapath* inner = nullptr;     // probe-matched: the inner T-FDPA row (nullptr: the row's default)
  std::shared_ptr<const Datapath> what_if;  // the row with another F (GemmRequest::frac_bits) that
                                            // datapath or inner points at, kept alive with the options
  bool snap = true;                    // probe-matched: RNE(C*1024)/1024 (--no-snap clears it)
  float alpha = 1.0f;                  // the epilogue's post-scale (gemm_alpha)
  std::vector<float> row_alpha;        // non-empty (A row-scaled, AmaxScope::row): output row i's alpha
                                       // instead of alpha, one per row of A (gemm_row_alpha)
  bool bf16_output = false;            // round every output RNE to BF16 (kept as float32 values)
  GemmImpl impl = GemmImpl::fast;
  std::string_view isa{};              // fast kernels: "" = best the CPU has; "avx512", "avx2", "portable"
  GemmReport* report = nullptr;        // filled when given
  ProgressFn progress;                 // optional: output tiles (fast kernels) or rows (reference) done
};

// C [M, N] row-major. Throws DataError when the operands do not fit the datapath (shape mismatch,
// probe-matched with K % 64 != 0, an encoded operand q·s not exactly representable in the row's input
// format, an element or scale format the row does not take, a reserved scale code).
std::vector<float> gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options);

// The intermediate values of one output of the golden reference, as it computed them (verify explains a
// user's output with them). Which fields are filled depends on the datapath.
struct GemmTrace {
  std::vector<FusedStepTrace> steps;   // T-FDPA steps, probe-matched's inner steps, GST-FDPA instructions
  std::size_t blocks = 0;              // exact, fp32-seq: K blocks
  long double exact_sum = 0;           // exact: the sum of every block term s_a*s_b*sum(q_a*q_b)
  std::size_t rounded_additions = 0;   // fp32-seq: block additions that rounded
  long double largest_rounding = 0;    // fp32-seq: the largest rounding error, at block...
  std::size_t largest_rounding_block = 0;
  std::vector<float> partials, sums;   // probe-matched: each group's partial, and C after adding it (add.rz)
  bool snapped = false;                // probe-matched: the 1/1024 snap ran
  float before_snap = 0.0f;
  std::uint32_t accumulator = 0;       // what the epilogue multiplied by alpha
};

// One output element, C[i, j], by the plain scalar reference (the golden model every fast path must
// equal bit for bit), its intermediate values into `trace` when given. Operands must already have
// passed gemm()'s checks (check_gemm_operands).
float gemm_reference_element(const QuantizedTensor& a, std::size_t i, const QuantizedTensor& b, std::size_t j,
                             const GemmOptions& options, GemmTrace* trace = nullptr);
void check_gemm_operands(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options);

// The epilogue's alpha from the two tensor amaxes and targets (F = element max, 6 for E2M1):
//   one:        1
//   division:   RN(RN(A_a·A_b) / RN(RN(F·T_a)·RN(F·T_b)))          (TE reference qgemm)
//   reciprocal: RN(RN(A_a·A_b) · RN(1 / RN(RN(F·T_a)·RN(F·T_b))))   (the paper's code; TE's kernel)
float gemm_alpha(AlphaRule rule, float amax_a, float target_a, float amax_b, float target_b, float element_max);
// A row-scaled A (QuantizedTensor::row_amax): the epilogue's alpha of each output row i, gemm_alpha with
// A's row i amax in place of its tensor amax and B's tensor amax: D[i, j] = RN(acc[i, j] · alpha_i). (A
// row-scaled B would need a per-column alpha, which is not modelled: check_gemm_operands refuses it.)
std::vector<float> gemm_row_alpha(AlphaRule rule, const QuantizedTensor& a, const QuantizedTensor& b,
                                  float element_max);
// The rule a datapath applies for a recipe: AlphaRule::one when the recipe has no tensor scale,
// else the row's own rule (fp32-seq: division, probe-matched: reciprocal) or the recipe's.
AlphaRule alpha_rule_for(const Datapath& datapath, const Recipe& recipe);

// The entry point for the front ends and replay: the recipe's defaults filled in, alpha formed from
// the operands' tensor amaxes and targets.
struct GemmRequest {
  const Datapath* datapath = nullptr;  // nullptr: the recipe's default_datapath
  const Datapath* inner = nullptr;     // probe-matched's inner row (nullptr: the row's own, sm90-bf16)
  bool snap = true;                    // false (--no-snap) applies to probe-matched only
  bool bf16_output = false;
  GemmImpl impl = GemmImpl::fast;
  std::optional<int> frac_bits;        // what-if: the tensor-core row (T-FDPA, GST-FDPA, or probe-matched's
                                       // inner) with this alignment width F instead of its own
};
std::vector<float> gemm(const Recipe& recipe, const QuantizedTensor& a, const QuantizedTensor& b,
                        const GemmRequest& request = {});
// The rows and settings a request selects, alpha left at 1 (UsageError for a combination the datapath
// does not take: an inner row or --no-snap outside probe-matched, a frac_bits the row cannot hold).
GemmOptions gemm_options(const Recipe& recipe, const GemmRequest& request);
// gemm_options with alpha formed from the operands: what gemm(recipe, ...) runs.
GemmOptions resolve_gemm(const Recipe& recipe, const QuantizedTensor& a, const QuantizedTensor& b,
                         const GemmRequest& request);

// The settings of one row that `verify gemm --datapath auto` tries, and that `vectors --discriminate`
// keeps apart from the other rows: the row itself (none for a block-scaled T-FDPA row, which gemm does not
// run); for probe-matched, every inner T-FDPA row that takes bf16, each with the snap on and off (in the
// table's order, snap first).
std::vector<GemmRequest> row_settings(const Datapath& row);
// Every value a BF16 value (or NaN): an output that BF16-output settings may also give (auto tries them).
bool bf16_values_only(std::span<const float> c);

}  // namespace fp4sim
