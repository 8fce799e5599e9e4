#include "fp4sim/core/mma_call.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <tuple>
#include <utility>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"

namespace fp4sim {

MmaCall::Resolved MmaCall::resolve() const {
  Resolved r;
  r.row = &datapath_argument(datapath, "{datapath}");
  if (r.row->kind != DatapathKind::tfdpa && r.row->kind != DatapathKind::gst_fdpa) {
    throw UsageError("{datapath} " + datapath + " is a GEMM datapath of quantized tensors (gemm's); mma takes a "
                     "tensor-core row");
  }
  if (!block_scaled(*r.row) && !scale_format.empty())
    throw UsageError("{scale_format}: " + datapath + " takes no block scales");
  if (block_scaled(*r.row)) {
    std::string accepted;
    for (const Format& f : r.row->scale_formats) accepted += (accepted.empty() ? "" : ", ") + format_name(f);
    r.scale = scale_format.empty() ? r.row->scale_formats.front() : format_argument(scale_format, "{scale_format}");
    if (std::find(r.row->scale_formats.begin(), r.row->scale_formats.end(), *r.scale) == r.row->scale_formats.end())
      throw UsageError("{scale_format} " + scale_format + ": " + datapath + " takes " + accepted + " scales");
  }
  auto operand_input = [&](const std::string& own, const std::string& key) {
    const std::string& name = own.empty() ? input_format : own;
    if (name.empty()) throw UsageError("mma: {input_format}, or " + key + " for each operand, is required");
    const auto input = find_input(*r.row, name);
    if (!input) {
      std::string accepted;
      for (const auto& in : r.row->inputs) accepted += (accepted.empty() ? "" : ", ") + std::string(in.name);
      throw UsageError((own.empty() ? "{input_format}" : key) + " " + name + ": " + datapath + " takes " + accepted);
    }
    return *input;
  };
  r.a = operand_input(a_format, "{a_format}");
  r.b = operand_input(b_format, "{b_format}");
  if (r.a.instruction_k != r.b.instruction_k) {
    throw UsageError("mma: A's " + std::string(r.a.name) + " and B's " + std::string(r.b.name) +
                     " are not one instruction on " + datapath + " (K " + std::to_string(r.a.instruction_k) +
                     " and " + std::to_string(r.b.instruction_k) + ")");
  }
  return r;
}

namespace {

// A's [M, K / block] and B's [K / block, N] scale codes, checked: the block, and every code a byte of the
// scale format (sign bit ignored where the row says so; NaN scales pass, the instruction gives NaN).
void check_scales(const MmaCall& call, const MmaCall::Resolved& r, const MmaScaleOperand& sa,
                  const MmaScaleOperand& sb, MmaOperands& out) {
  for (const MmaScaleOperand* s : {&sa, &sb})
    if (s->array.shape.size() != 2) throw DataError(s->array.source + ": expected a 2-D array of scale codes");
  const std::size_t blocks = sa.array.shape[1];
  if (sa.array.shape[0] != out.m || sb.array.shape != std::vector<std::size_t>{blocks, out.n})
    throw DataError("mma: scales " + sa.array.source + " " + shape_text(sa.array.shape) + " and " + sb.array.source +
                    " " + shape_text(sb.array.shape) + " must be [M, K / block] = [" + std::to_string(out.m) +
                    ", blocks] and [blocks, N] = [blocks, " + std::to_string(out.n) + "]");
  const Datapath& row = *r.row;
  out.block = blocks == 0 || out.k % blocks != 0 ? 0 : out.k / blocks;
  const bool gst = row.kind == DatapathKind::gst_fdpa;
  const auto kinst = static_cast<std::size_t>(row.instruction_k);
  const bool ok = out.block != 0 && (gst ? out.block % static_cast<std::size_t>(row.fused.subblock) == 0 &&
                                               kinst % out.block == 0
                                         : out.block == kinst);
  if (!ok)
    throw DataError("mma: " + std::to_string(blocks) + " scale columns for K = " + std::to_string(out.k) + ": " +
                    call.datapath + " takes one scale per " +
                    (gst ? "16, 32 or 64 elements" : std::to_string(kinst) + " elements (its instruction K)"));
  const std::uint32_t mask = row.fused.scale_sign_ignored ? (1u << r.scale->bits()) - 1 : 0xFFu;
  for (const auto& [s, codes] : {std::pair{&sa, &out.scale_a}, std::pair{&sb, &out.scale_b}}) {
    for (std::size_t i = 0; i < s->codes.size(); ++i) {
      const std::uint32_t code = s->codes[i];
      if (code > 0xFF || decode(*r.scale, code & mask).cls == ValueClass::invalid)
        throw DataError(s->array.source + ": element " + position_text(s->array.shape, i) + " (" +
                        std::to_string(code) + ") is not a " + format_name(*r.scale) + " code");
    }
    codes->assign(s->codes.begin(), s->codes.end());
  }
}

}  // namespace

MmaOperands mma_operands(const MmaCall& call, const MmaCall::Resolved& resolved, const MmaOperand& a,
                         const MmaOperand& b, const MmaOperand* c, const MmaScaleOperand* scale_a,
                         const MmaScaleOperand* scale_b) {
  for (const MmaOperand* x : {&a, &b, c}) {
    if (x && x->array.shape.size() != 2) throw DataError(x->array.source + ": expected a 2-D array");
  }
  MmaOperands out;
  out.m = a.array.shape[0];
  out.k = a.array.shape[1];
  out.n = b.array.shape[1];
  if (b.array.shape[0] != out.k) {
    throw DataError("mma: A " + a.array.source + " is " + shape_text(a.array.shape) + " but B " + b.array.source +
                    " is " + shape_text(b.array.shape) + ": B must be [K, N]");
  }
  const auto instruction_k = static_cast<std::size_t>(resolved.a.instruction_k);
  if (out.k == 0 || out.k % instruction_k != 0) {
    throw DataError("mma: K = " + std::to_string(out.k) + " is not a multiple of the instruction's K = " +
                    std::to_string(instruction_k) + " for " + std::string(resolved.a.name) + " on " + call.datapath);
  }
  for (const auto& [operand, input, codes] : {std::tuple{&a, &resolved.a, &out.a}, std::tuple{&b, &resolved.b, &out.b}}) {
    InputCodes ic = input_codes(input->format, operand->values);
    if (ic.first_unrepresentable) {
      throw DataError(operand->array.source + ": element " +
                      position_text(operand->array.shape, *ic.first_unrepresentable) +
                      " is not exactly representable in " + std::string(input->name));
    }
    *codes = std::move(ic.codes);
  }
  if (c) {
    if (c->array.shape != std::vector<std::size_t>{out.m, out.n}) {
      throw DataError(c->array.source + ": C must be [" + std::to_string(out.m) + ", " + std::to_string(out.n) + "]");
    }
    // C is the accumulator register: binary32, or fp16 for an f16-accumulate row.
    const bool fp16 = resolved.row->fused.out == formats::fp16;
    for (std::size_t i = 0; i < c->values.size(); ++i) {
      const double v = c->values[i];
      const auto f = static_cast<float>(v);
      if (static_cast<double>(f) != v && !std::isnan(v)) {
        throw DataError(c->array.source + ": element " + position_text(c->array.shape, i) + " is not a binary32 value");
      }
      if (fp16 && !std::isnan(v)) {
        const Encoded h = encode(formats::fp16, v, EncodeOptions{Rounding::rne, false});
        if (h.flags & (flag::inexact | flag::overflow)) {
          throw DataError(c->array.source + ": element " + position_text(c->array.shape, i) +
                          " is not fp16-representable (" + call.datapath + " accumulates in fp16)");
        }
      }
      out.c.push_back(std::bit_cast<std::uint32_t>(f));
    }
  }
  if ((scale_a == nullptr) != (scale_b == nullptr)) throw UsageError("mma: give the scale codes of both A and B");
  if (scale_a && !block_scaled(*resolved.row))
    throw UsageError("mma: " + call.datapath + " takes no block scales (its instruction has none)");
  if (!scale_a && block_scaled(*resolved.row))
    throw UsageError("mma: " + call.datapath + " is block-scaled: it needs the scale codes of A and B "
                     "({sa}, {sb})");
  if (scale_a) check_scales(call, resolved, *scale_a, *scale_b, out);
  return out;
}

std::vector<std::uint32_t> run_mma(const MmaCall::Resolved& r, const MmaOperands& x) {
  if (!r.scale) return mma(*r.row, r.a.format, x.a, r.b.format, x.b, x.c, x.m, x.n, x.k);
  const BlockScales scales{*r.scale, x.scale_a, x.scale_b, x.block};
  return mma(*r.row, r.a.format, x.a, r.b.format, x.b, x.c, x.m, x.n, x.k, &scales);
}

}  // namespace fp4sim
