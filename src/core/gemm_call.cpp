#include "fp4sim/core/gemm_call.hpp"

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim {

GemmCall::Resolved GemmCall::resolve() const {
  Resolved r;
  r.recipe = recipe.resolve();
  r.gemm = parse_name_or_throw<Gemm>(gemm, "{gemm}");
  if (r.recipe.amax_scope == AmaxScope::row && r.gemm != Gemm::fprop) {
    throw UsageError("{amax_scope} row scales the forward activations, fprop's A (one alpha per output row); TE "
                     "runs a row-scaled recipe's dgrad and wgrad in high precision, so fp4sim has no quantized "
                     "one: use {gemm} fprop");
  }
  if (out_dtype != "f32" && out_dtype != "bf16") {
    throw UsageError("{out_dtype}: expected f32 or bf16, got '" + out_dtype + "'");
  }
  GemmRequest& g = r.request;
  g.datapath = datapath.empty() ? r.recipe.default_datapath : &datapath_argument(datapath, "{datapath}");
  if (!inner.empty()) g.inner = &datapath_argument(inner, "{inner}");
  g.snap = snap;
  g.bf16_output = out_dtype == "bf16";
  g.impl = reference ? GemmImpl::reference : GemmImpl::fast;
  g.frac_bits = frac_bits;
  gemm_options(r.recipe, g);  // the combination, checked before any data is read
  const GemmOperands operands = operands_for(r.recipe, r.gemm);
  r.a.spec = operands.a;
  r.b.spec = operands.b;
  r.a.random.seed = r.b.random.seed = seed;
  r.a.random.stream = 0;
  r.b.random.stream = 1;
  a.apply_to(r.a, "_a");
  b.apply_to(r.b, "_b");
  return r;
}

void check_gemm_shapes(const ArrayShape& a, const ArrayShape& b) {
  for (const ArrayShape* x : {&a, &b}) {
    if (x->shape.size() != 2) {
      throw DataError(x->source + ": expected a 2-D array [rows, K], got shape " + shape_text(x->shape));
    }
  }
  if (a.shape[1] != b.shape[1]) {
    throw DataError("gemm: A " + a.source + " is " + shape_text(a.shape) + " and B " + b.source + " is " +
                    shape_text(b.shape) + ": C = A·Bᵀ needs the same K (columns)");
  }
}

}  // namespace fp4sim
