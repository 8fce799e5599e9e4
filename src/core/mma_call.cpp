#include "fp4sim/core/mma_call.hpp"

#include <bit>
#include <cmath>
#include <tuple>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"

namespace fp4sim {

MmaCall::Resolved MmaCall::resolve() const {
  Resolved r;
  r.row = &datapath_argument(datapath, "{datapath}");
  if (r.row->kind != DatapathKind::tfdpa) {
    throw UsageError("{datapath} " + datapath + " is a block-scaled GEMM datapath; mma takes a tensor-core row "
                     "(block-scaled instructions are gemm's: {datapath} sm100-mxf4nvf4)");
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

MmaOperands mma_operands(const MmaCall& call, const MmaCall::Resolved& resolved, const MmaOperand& a,
                         const MmaOperand& b, const MmaOperand* c) {
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
  return out;
}

}  // namespace fp4sim
