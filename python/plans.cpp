#include "plans.hpp"

#include <nanobind/stl/string.h>

#include <memory>
#include <variant>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "operand.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp4sim::python {

QuantizedTensor QuantizePlan::described(std::size_t rows, std::size_t cols) const {
  QuantizedTensor q = blank;
  q.rows = rows;
  q.cols = cols;
  q.scale_rows = (rows + q.block_rows - 1) / q.block_rows;
  q.scale_cols = (cols + q.block_cols - 1) / q.block_cols;
  // A row-scaled operand's row amaxes lie in device memory after its scalars: sized here, their values there.
  if (row_scaled(recipe, request.spec)) q.row_amax.assign(rows, 0.0f);
  return q;
}

QuantizeRequest QuantizePlan::request_for(std::uint64_t seed, std::optional<float> amax_ref, bool random_bits) const {
  QuantizeRequest r = request;
  r.random.seed = seed;
  OperandArguments{amax_ref, std::nullopt, random_bits}.apply_to(r, suffix);
  return r;
}

namespace {

// What a plan was asked for: the registry's key, compared by value (so "" and the recipe's own datapath
// name, or 16 and numpy.int64(16), ask for one plan).
struct QuantizeKey {
  RecipeOverrides recipe;
  std::string operand;
  bool operator==(const QuantizeKey&) const = default;
};
struct GemmKey {
  RecipeOverrides recipe;
  Gemm gemm;
  const Datapath* datapath;
  const Datapath* inner;
  bool snap;
  bool operator==(const GemmKey&) const = default;
};

struct Entry {
  std::variant<QuantizeKey, GemmKey> key;
  std::variant<QuantizePlan, GemmPlan> plan;
};

// The process's plans, index = handle. Entries are never removed or moved (unique_ptr), so a reference to a
// plan outlives any later registration. Python's GIL serialises every call that reads or extends it (the
// extension is not built for free-threaded Python).
std::vector<std::unique_ptr<Entry>>& registry() {
  static std::vector<std::unique_ptr<Entry>> entries;
  return entries;
}

template <class Key>
PlanHandle find(const Key& key) {
  const auto& entries = registry();
  for (std::size_t h = 0; h < entries.size(); ++h) {
    const Key* k = std::get_if<Key>(&entries[h]->key);
    if (k != nullptr && *k == key) return static_cast<PlanHandle>(h);
  }
  return static_cast<PlanHandle>(entries.size());
}

template <class Key, class Plan>
PlanHandle add(Key key, Plan plan) {
  registry().push_back(std::make_unique<Entry>(Entry{std::move(key), std::move(plan)}));
  return static_cast<PlanHandle>(registry().size() - 1);
}

const Entry& entry(PlanHandle handle, const char* kind) {
  if (handle >= registry().size()) {
    throw UsageError("plan " + std::to_string(handle) + ": no " + kind +
                     "plan has this handle in this process (handles come from quantize_plan / gemm_plan)");
  }
  return *registry()[handle];
}

// The operand's request as a plan holds it: no seed, held amax or explicit bits (each call's own).
QuantizePlan make_quantize_plan(const RecipeOverrides& overrides, const std::string& operand) {
  QuantizeCall call;
  call.recipe = overrides;
  ResolvedOperand r = resolve_operand(call, operand);
  QuantizePlan p;
  p.operand = operand;
  const std::size_t dot = operand.find('.');
  p.suffix = dot == std::string::npos ? "" : "_" + operand.substr(dot + 1);
  p.recipe = std::move(r.recipe);
  p.request = r.request;
  p.request.random.seed = 0;
  p.blank = blank_quantized(p.recipe, p.request, 0, 0);
  p.blank.tensor_scaled = has_tensor_scale(p.recipe);
  return p;
}

}  // namespace

PlanHandle quantize_plan(const RecipeOverrides& recipe, const std::string& operand) {
  QuantizeKey key{recipe, operand};
  const PlanHandle found = find(key);
  if (found < registry().size()) return found;
  QuantizePlan plan = make_quantize_plan(recipe, operand);  // resolve before registering: a failure adds nothing
  return add(std::move(key), std::move(plan));
}

PlanHandle gemm_plan(const GemmCall& call) {
  GemmCall::Resolved r = call.resolve();
  GemmKey key{call.recipe, r.gemm, r.request.datapath, r.request.inner, r.request.snap};
  const PlanHandle found = find(key);
  if (found < registry().size()) return found;
  GemmPlan p;
  p.gemm = r.gemm;
  const std::string gemm_name(name_of(r.gemm));
  p.a = quantize_plan(call.recipe, gemm_name + ".a");
  p.b = quantize_plan(call.recipe, gemm_name + ".b");
  p.recipe = std::move(r.recipe);
  p.request = r.request;
  p.options = gemm_options(p.recipe, p.request);
  p.alpha_rule = alpha_rule_for(*p.options.datapath, p.recipe);
  p.element_max = decode_to_float(p.recipe.element, p.recipe.element.max_finite_code());
  p.kernel = gpu::gemm_kernel_for(p.options);
  return add(std::move(key), std::move(p));
}

const QuantizePlan& quantize_plan_of(PlanHandle handle) {
  const QuantizePlan* p = std::get_if<QuantizePlan>(&entry(handle, "quantize ").plan);
  if (p == nullptr) {
    throw UsageError("plan " + std::to_string(handle) + ": a GEMM plan where a quantize plan is expected");
  }
  return *p;
}

const GemmPlan& gemm_plan_of(PlanHandle handle) {
  const GemmPlan* p = std::get_if<GemmPlan>(&entry(handle, "GEMM ").plan);
  if (p == nullptr) {
    throw UsageError("plan " + std::to_string(handle) + ": a quantize plan where a GEMM plan is expected");
  }
  return *p;
}

nb::dict operand_info(const Recipe& recipe, const QuantizeRequest& request) {
  nb::dict d;
  d["block_rows"] = request.spec.two_d ? recipe.block : 1;
  d["block_cols"] = recipe.block;
  d["rounding"] = std::string(name_of(request.spec.rounding));
  d["rht"] = request.spec.rht;
  d["target"] = request.spec.target;
  d["tensor_scaled"] = has_tensor_scale(recipe);
  d["tensor_scale"] = std::string(name_of(recipe.tensor_scale));
  d["row_scaled"] = row_scaled(recipe, request.spec);
  d["period"] = recipe.period;
  d["sr_bits"] = recipe.sr_bits;
  d["datapath"] = std::string(recipe.default_datapath->name);
  return d;
}

namespace {

nb::dict plan_info(PlanHandle handle) {
  const Entry& e = entry(handle, "");
  if (const QuantizePlan* q = std::get_if<QuantizePlan>(&e.plan)) {
    nb::dict d = operand_info(q->recipe, q->request);
    d["operand"] = q->operand;
    return d;
  }
  const GemmPlan& g = std::get<GemmPlan>(e.plan);
  nb::dict d;
  d["gemm"] = std::string(name_of(g.gemm));
  d["a"] = g.a;
  d["b"] = g.b;
  d["datapath"] = std::string(g.options.datapath->name);
  d["snap"] = g.options.snap;
  d["kernel"] = g.kernel != nullptr ? nb::cast(std::string(g.kernel->name)) : nb::none();
  d["k_multiple"] = g.kernel != nullptr ? g.kernel->k_multiple : 1;
  d["workspace_k_align"] = g.kernel != nullptr ? g.kernel->workspace_k_align : 0;
  return d;
}

}  // namespace

void register_plans(nb::module_& m) {
  m.def(
      "quantize_plan",
      [](const std::string& recipe, const nb::dict& overrides, const std::string& operand) {
        return quantize_plan(overrides_from(recipe, overrides), operand);
      },
      "recipe"_a, "overrides"_a, "operand"_a,
      "The handle of operand `operand` (a role, or <gemm>.a / <gemm>.b) of the recipe with keyword overrides, "
      "resolved once per process (equal settings, one handle); UsageError naming the key for a bad one.");
  m.def(
      "gemm_plan",
      [](const std::string& recipe, const nb::dict& overrides, const std::string& gemm, const std::string& datapath,
         bool snap) {
        GemmCall call;
        call.recipe = overrides_from(recipe, overrides);
        call.gemm = gemm;
        call.datapath = datapath;
        call.snap = snap;
        return gemm_plan(call);
      },
      "recipe"_a, "overrides"_a, "gemm"_a, "datapath"_a, "snap"_a,
      "The handle of GEMM `gemm` (fprop, dgrad, wgrad) of the recipe through `datapath` (\"\": the recipe's), "
      "with its operands' quantize plans; resolved once per process.");
  m.def("plan_info", &plan_info, "plan"_a,
        "What a plan resolved to: an operand's blocks, rounding, RHT, target, tensor scaling, sr_bits (as "
        "operand_info); a GEMM's operand plans a and b, datapath, snap and GPU kernel (None: the GPU has none), "
        "its K multiple and workspace K alignment.");
}

}  // namespace fp4sim::python
