// Block-scaled GEMM through the datapath table: the operand checks, alpha, the options a request selects,
// and the entry point, which runs the fast kernels (gemm_fast.cpp) or the scalar reference of every
// datapath, the golden model (gemm_reference.cpp).
#include "fp4sim/core/gemm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>

#include <omp.h>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/fp32.hpp"
#include "gemm_internal.hpp"

namespace fp4sim {

using detail::EncodedTable;
using detail::encoded_input;
using detail::inner_of;
using detail::OperandInfo;

void check_gemm_operands(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& o) {
  if (!o.datapath) throw UsageError("gemm: no datapath given");
  const Datapath& dp = *o.datapath;
  if (dp.kind == DatapathKind::tfdpa && block_scaled(dp))
    throw UsageError("gemm: " + std::string(dp.name) + " is a block-scaled instruction row whose scales align each "
                     "product: mma with its block scales {sa} and {sb} runs it (gemm's T-FDPA rows take encoded operands q·s)");
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
  // A row-scaled operand's G differs per row: A's rows take their own alpha (row_alpha), B's would need one
  // per output column, which is not modelled.
  if (!b.row_amax.empty()) {
    throw DataError("gemm: B is row-scaled ({amax_scope} row): that needs a per-column alpha, which fp4sim does "
                    "not model (only A may be row-scaled)");
  }
  if (!a.row_amax.empty() && o.row_alpha.size() != a.rows) {
    throw DataError("gemm: A is row-scaled ({amax_scope} row) but the epilogue has " +
                    std::to_string(o.row_alpha.size()) + " row alphas for its " + std::to_string(a.rows) + " rows");
  }
  if (!o.row_alpha.empty() && o.row_alpha.size() != a.rows) {
    throw DataError("gemm: " + std::to_string(o.row_alpha.size()) + " row alphas for the " + std::to_string(a.rows) +
                    " rows of A");
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
      throw UsageError("gemm: {inner} must be a tensor-core row that takes bf16, got " + std::string(inner.name));
  }
  if (dp.kind == DatapathKind::gst_fdpa) {
    if (!(dp.inputs.front().format == a.element))
      throw DataError("gemm: " + std::string(dp.name) + " takes e2m1 elements, not " + format_name(a.element));
    if (std::find(dp.scale_formats.begin(), dp.scale_formats.end(), a.scale) == dp.scale_formats.end()) {
      std::string list;
      for (const Format& f : dp.scale_formats) list += (list.empty() ? "" : ", ") + format_name(f);
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
        throw DataError(std::string("gemm: operand ") + (t == &a ? "A" : "B") + " scale code " + hex_code(t->scales[i], 2) +
                        " at scale index " + std::to_string(i) + " is not a valid " + format_name(t->scale) + " code");
    }
  }
  // The encoded operands q·s must be exact in the tensor-core input format.
  if (dp.kind == DatapathKind::tfdpa || dp.kind == DatapathKind::probe_matched) {
    const Format input = encoded_input(o);
    for (const QuantizedTensor* t : {&a, &b}) {
      const OperandInfo info(*t, false);
      const EncodedTable table(info, input);
      std::array<std::uint16_t, 256> ok_mask{};  // bit e: element code e is exact under this scale code
      for (std::size_t sc = 0; sc < 256; ++sc)
        for (std::size_t ec = 0; ec < 16; ++ec)
          if (table.ok[sc * 16 + ec]) ok_mask[sc] |= static_cast<std::uint16_t>(1u << ec);
      for (std::size_t r = 0; r < t->rows; ++r) {
        const std::uint8_t* codes = t->codes.data() + r * t->code_cols();
        const std::uint8_t* scale_row = t->scales.data() + (r / static_cast<std::size_t>(t->block_rows)) * t->scale_cols;
        bool row_ok = true;
        for (std::size_t kb = 0; kb < info.blocks && row_ok; ++kb) {
          const std::uint16_t mask = ok_mask[scale_row[kb]];
          if (mask == 0xFFFF) continue;
          for (std::size_t c = kb * info.block; c < std::min(t->cols, (kb + 1) * info.block); ++c) {
            const unsigned ec = (c & 1) ? codes[c / 2] >> 4 : codes[c / 2] & 0xF;
            if (!((mask >> ec) & 1)) row_ok = false;
          }
        }
        if (row_ok) continue;
        for (std::size_t c = 0; c < t->cols; ++c) {
          const std::uint8_t sc = info.scale_code(r, c / info.block);
          const std::uint8_t ec = t->code(r, c);
          if (!table.ok[static_cast<std::size_t>(sc) * 16 + ec]) {
            const Unpacked& s = info.scale[sc];
            const char* why = (s.cls == Unpacked::nan || s.cls == Unpacked::inf) ? "a NaN scale" : "not exactly representable";
            throw DataError(std::string("gemm: operand ") + (t == &a ? "A" : "B") + " element [" + std::to_string(r) +
                            ", " + std::to_string(c) + "] (code " + hex_code(ec, 2) + ", scale " + hex_code(sc, 2) +
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

std::vector<float> gemm_row_alpha(AlphaRule rule, const QuantizedTensor& a, const QuantizedTensor& b,
                                  float element_max) {
  std::vector<float> alpha(a.row_amax.size());
  for (std::size_t i = 0; i < alpha.size(); ++i) {
    alpha[i] = gemm_alpha(rule, a.row_amax[i], a.target, b.tensor_amax, b.target, element_max);
  }
  return alpha;
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

std::vector<float> gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmOptions& options) {
  check_gemm_operands(a, b, options);
  std::vector<float> c(a.rows * b.rows);
  if (options.report) *options.report = GemmReport{};
  if (options.impl == GemmImpl::fast && detail::gemm_fast(a, b, options, c)) return c;
  if (options.report) options.report->reference_outputs = a.rows * b.rows;
  const detail::ReferenceContext ctx(a, b, options);
  const auto m = static_cast<std::int64_t>(a.rows);
  const std::size_t n = b.rows;
  // Progress counts finished rows; only the calling thread (OpenMP's thread 0) reports them.
  std::atomic<std::uint64_t> rows_done{0};
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      c[static_cast<std::size_t>(i) * n + j] = std::bit_cast<float>(ctx.element(static_cast<std::size_t>(i), j));
    const std::uint64_t done = rows_done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (options.progress && omp_get_thread_num() == 0) options.progress(done, a.rows, "GEMM rows (reference)");
  }
  if (options.progress) options.progress(a.rows, a.rows, "done");
  return c;
}

GemmOptions gemm_options(const Recipe& recipe, const GemmRequest& request) {
  GemmOptions o;
  o.datapath = request.datapath ? request.datapath : recipe.default_datapath;
  const bool probe_matched = o.datapath->kind == DatapathKind::probe_matched;
  if (probe_matched) {
    o.inner = request.inner ? request.inner : o.datapath->inner;
  } else if (request.inner) {
    throw UsageError("{inner} applies only to {datapath} probe-matched");
  }
  if (!request.snap && !probe_matched) throw UsageError("{snap=false} applies only to {datapath} probe-matched");
  if (request.frac_bits) {
    // A what-if row: the datapath (or probe-matched's inner row) with another alignment width F.
    Datapath modified = probe_matched ? *o.inner : *o.datapath;
    if (modified.kind != DatapathKind::tfdpa && modified.kind != DatapathKind::gst_fdpa)
      throw UsageError("{frac_bits} applies to tensor-core datapaths (T-FDPA, GST-FDPA, or probe-matched's inner)");
    modified.fused.frac_bits = *request.frac_bits;
    const auto problems = validate(modified);
    if (!problems.empty()) throw UsageError("{frac_bits} " + std::to_string(*request.frac_bits) + ": " + problems.front());
    o.what_if = std::make_shared<const Datapath>(modified);
    (probe_matched ? o.inner : o.datapath) = o.what_if.get();
  }
  o.snap = request.snap && o.datapath->snap;
  o.bf16_output = request.bf16_output;
  o.impl = request.impl;
  return o;
}

GemmOptions resolve_gemm(const Recipe& recipe, const QuantizedTensor& a, const QuantizedTensor& b,
                         const GemmRequest& request) {
  GemmOptions o = gemm_options(recipe, request);
  const float element_max = decode_to_float(a.element, a.element.max_finite_code());
  const AlphaRule rule = alpha_rule_for(*o.datapath, recipe);
  o.alpha = gemm_alpha(rule, a.tensor_amax, a.target, b.tensor_amax, b.target, element_max);
  if (!a.row_amax.empty()) o.row_alpha = gemm_row_alpha(rule, a, b, element_max);
  return o;
}

std::vector<GemmRequest> row_settings(const Datapath& row) {
  std::vector<GemmRequest> out;
  GemmRequest setting;
  setting.datapath = &row;
  if (row.kind == DatapathKind::tfdpa && block_scaled(row)) return out;  // not a gemm datapath (mma's)
  if (row.kind != DatapathKind::probe_matched) {
    out.push_back(setting);
    return out;
  }
  for (const Datapath* inner : datapath_presets()) {
    if (inner->kind != DatapathKind::tfdpa || !find_input(*inner, "bf16")) continue;
    setting.inner = inner;
    for (bool snap : {true, false}) {
      setting.snap = snap;
      out.push_back(setting);
    }
  }
  return out;
}

bool bf16_values_only(std::span<const float> c) {
  return std::all_of(c.begin(), c.end(),
                     [](float v) { return (std::bit_cast<std::uint32_t>(v) & 0xFFFFu) == 0 || std::isnan(v); });
}

std::vector<float> gemm(const Recipe& recipe, const QuantizedTensor& a, const QuantizedTensor& b,
                        const GemmRequest& request) {
  return gemm(a, b, resolve_gemm(recipe, a, b, request));
}

}  // namespace fp4sim
