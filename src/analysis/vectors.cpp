#include "fp4sim/analysis/vectors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/float_text.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/hadamard.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/io/output_file.hpp"
#include "fp4sim/core/random.hpp"
#include "vectors_internal.hpp"

namespace fp4sim::vectors {

using namespace detail;

namespace {

struct Plan {
  std::string title;
  Role role = Role::activation;
  std::optional<Gemm> spec_from;  // the spec of this GEMM's operand A (or B, with b_operand)
  bool b_operand = false;
  std::function<Input(Context&)> build;
};

struct GemmPlan {
  std::string title;
  Gemm gemm;
  std::function<Input(Context&)> a, b;
};

struct Plans {
  std::vector<Plan> quantize;
  std::vector<GemmPlan> gemm;
};

Plans edge_plans(const Recipe& r) {
  const bool two_level = r.scale_rule == ScaleRule::two_level;
  const bool tensor_scaled = two_level && r.tensor_scale != TensorScalePolicy::none;
  const std::size_t B = static_cast<std::size_t>(r.block);
  Plans p;
  auto q = [&](std::string title, Role role, std::function<Input(Context&)> build) {
    p.quantize.push_back({std::move(title), role, std::nullopt, false, std::move(build)});
  };
  q("activation_random", Role::activation, [B](Context& c) { return random_tensor(c, 8, 4 * B); });
  q("weight_random", Role::weight, [B](Context& c) { return random_tensor(c, 2 * B, 4 * B); });
  q("grad_output_random", Role::grad_output, [B](Context& c) { return random_tensor(c, 8, 4 * B); });
  q("activation_element_ties", Role::activation, [](Context& c) { return element_ties(c, false); });
  q("weight_element_ties", Role::weight, [](Context& c) { return element_ties(c, false); });
  q("grad_output_element_ties", Role::grad_output, [](Context& c) { return element_ties(c, true); });
  if (two_level) {
    q("activation_scale_ties", Role::activation, [](Context& c) { return scale_ties(c, 1); });
    q("weight_scale_ties", Role::weight, [](Context& c) { return scale_ties(c, 9); });
  }
  if (!two_level) q("activation_scale_binade_edges", Role::activation, scale_binade_edges);
  if (tensor_scaled) {
    q("activation_held_amax_1024x_below", Role::activation,
      [B](Context& c) { return held_amax(c, 4, 4 * B, 1.0f / 1024, false); });
    q("weight_held_amax_8x_below", Role::weight,
      [B](Context& c) { return held_amax(c, 2 * B, 2 * B, 1.0f / 8, false); });
    q("grad_output_held_amax_1024x_above", Role::grad_output,
      [B](Context& c) { return held_amax(c, 4, 4 * B, 1024.0f, true); });
  }
  q("activation_scale_underflow", Role::activation, scale_underflow);
  q("activation_zero_blocks", Role::activation, zero_blocks);
  q("weight_all_zero", Role::weight, [B](Context&) { return all_zero(B, 2 * B); });
  q("activation_nan_inf", Role::activation, [](Context& c) { return nan_inf(c, false); });
  if (tensor_scaled) {
    q("grad_output_nan_inf_held_amax", Role::grad_output, [](Context& c) { return nan_inf(c, true); });
  } else {
    q("weight_nan_inf", Role::weight, [](Context& c) { return nan_inf(c, false); });
  }
  q("activation_partial_blocks", Role::activation, [B](Context& c) { return random_tensor(c, 3, 2 * B + B / 2 + 3); });
  q("weight_partial_blocks", Role::weight, [B](Context& c) { return random_tensor(c, B + 3, B + B / 2 + 5); });
  q("activation_subnormal_inputs", Role::activation, subnormal_tensor);
  q("activation_near_flt_max", Role::activation, huge_tensor);
  if (r.rht_wgrad) {
    // The wgrad operands as quantized: dYᵀ (operand A) and Xᵀ (operand B), both through the RHT.
    p.quantize.push_back({"wgrad_grad_output_rht", Role::grad_output, Gemm::wgrad, false,
                          [B](Context& c) { return bf16_tensor(c, 8, 4 * B); }});
    p.quantize.push_back({"wgrad_activation_rht", Role::activation, Gemm::wgrad, true,
                          [B](Context& c) { return bf16_tensor(c, 8, 4 * B); }});
  }

  // GEMMs: M = N = 16, K = 128 (a multiple of every block and of the probe-matched group of 64).
  constexpr std::size_t M = 16, N = 16, K = 128;
  auto rnd = [](std::size_t rows) { return [rows](Context& c) { return random_tensor(c, rows, K); }; };
  auto bf16 = [](std::size_t rows) { return [rows](Context& c) { return bf16_tensor(c, rows, K); }; };
  p.gemm.push_back({"gemm_fprop", Gemm::fprop, rnd(M), rnd(N)});
  p.gemm.push_back({"gemm_dgrad", Gemm::dgrad, rnd(M), rnd(N)});
  p.gemm.push_back({"gemm_wgrad", Gemm::wgrad, bf16(M), bf16(N)});
  // Zero and tiny blocks in A; with a tensor scale, both operands quantized with held amaxes.
  p.gemm.push_back({tensor_scaled ? "gemm_fprop_sparse_held_amax" : "gemm_fprop_sparse", Gemm::fprop,
                    [tensor_scaled](Context& c) {
                      Input in = random_tensor(c, M, K);
                      for (std::size_t r = 0; r < M; ++r) {
                        for (std::size_t i = 0; i < c.block(); ++i) {
                          in.at(r, i) = 0.0f;
                          in.at(r, K - 1 - i) = std::ldexp(in.at(r, K - 1 - i), -40);
                        }
                      }
                      if (tensor_scaled) in.amax_ref = current_amax(in.x) * 0.25f;
                      return in;
                    },
                    [tensor_scaled](Context& c) {
                      Input in = random_tensor(c, N, K);
                      if (tensor_scaled) in.amax_ref = current_amax(in.x) * 2.0f;
                      return in;
                    }});
  return p;
}

std::size_t edge_count(const Plans& p) { return p.quantize.size() + p.gemm.size(); }

std::vector<const Datapath*> gemm_datapaths(const Recipe& recipe) {
  std::vector<const Datapath*> rows{recipe.default_datapath};
  for (const Datapath* also : {&datapaths::exact, &datapaths::fp32_seq}) {
    if (std::find(rows.begin(), rows.end(), also) == rows.end()) rows.push_back(also);
  }
  return rows;
}

// Random tensors for the cases after the edge cases: every role in turn, assorted shapes, and with a
// tensor scale every third one quantized with a held amax 2^-6 .. 2^6 times its own.
Input fill_tensor(Context& c, std::size_t ordinal) {
  const std::size_t B = c.block();
  const std::size_t rows = 1 + c.draw.below(static_cast<std::uint32_t>(2 * B));
  const std::size_t whole_blocks = 1 + c.draw.below(4);
  const std::size_t cols = B * whole_blocks + (ordinal % 2 ? c.draw.below(static_cast<std::uint32_t>(B)) : 0);
  Input in(rows, cols);
  const int lo = c.draw.between(-40, 10);
  const int hi = lo + c.draw.between(1, 12);
  for (float& v : in.x) v = c.draw.value(lo, hi);
  if (c.tensor_scaled() && ordinal % 3 == 2) in.amax_ref = std::ldexp(current_amax(in.x), c.draw.between(-6, 6));
  return in;
}

bool is_subnormal(float v) { return v != 0.0f && std::fpclassify(v) == FP_SUBNORMAL; }

}  // namespace

std::string detail::case_name(std::size_t index, const std::string& title) {
  char prefix[32];
  std::snprintf(prefix, sizeof prefix, "%02zu_", index);
  return prefix + title;
}

QuantizeCase detail::quantize_case(const Recipe& recipe, std::string name, const OperandSpec& spec, Input in,
                           std::uint64_t seed, std::uint64_t stream) {
  QuantizeCase c;
  c.name = std::move(name);
  c.spec = spec;
  c.amax_ref = in.amax_ref;
  c.rows = in.rows;
  c.cols = in.cols;
  c.x = std::move(in.x);
  c.covers = std::move(in.covers);
  if (is_stochastic(spec.rounding)) {
    if (in.rbits.empty()) {
      c.philox = PhiloxKey{seed, stream, recipe.sr_bits};
      c.rbits.resize(c.x.size());
      for (std::size_t i = 0; i < c.rbits.size(); ++i) c.rbits[i] = random_bits(seed, stream, i, recipe.sr_bits);
    } else {
      c.rbits = std::move(in.rbits);
    }
  }
  QuantizeRequest request;
  request.spec = spec;
  request.amax_ref = c.amax_ref;
  request.random.seed = seed;
  request.random.stream = stream;
  request.random.explicit_bits = c.rbits;
  c.q = quantize(recipe, request, c.x, c.rows, c.cols);
  c.dequantized = dequantize(c.q);
  if (spec.rht) c.transformed = random_hadamard_transform(c.x, c.rows, c.cols, recipe.rht_signs, recipe.rht_precision);

  // Power-of-two scale formats mark a block holding NaN or Inf with the NaN scale; the codes of its finite
  // elements are left to the implementation by the OCP MX specification.
  if (recipe.scale.specials == Specials::pow2_nan) {
    c.defined.assign(c.x.size(), 1);
    bool any = false;
    for (std::size_t r = 0; r < c.rows; ++r) {
      for (std::size_t col = 0; col < c.cols; ++col) {
        if (c.q.scale_code(r, col) == recipe.scale.nan_code() && std::isfinite(c.x[r * c.cols + col])) {
          c.defined[r * c.cols + col] = 0;
          any = true;
        }
      }
    }
    if (!any) c.defined.clear();
  }

  const QuantizeCounts& n = c.q.counts;
  const std::span<const float> quantized =
      spec.rht ? std::span<const float>(c.transformed) : std::span<const float>(c.x);
  const float current = current_amax(quantized);
  auto add = [&](bool when, const char* category) {
    if (when) c.covers.push_back(category);
  };
  add(n.saturated > 0, "element_saturation");
  add(n.scale_saturated > 0, "scale_saturation");
  add(n.scale_underflow > 0, "scale_underflow");
  add(n.zero_blocks > 0, "zero_block");
  add(std::all_of(c.x.begin(), c.x.end(), [](float v) { return v == 0.0f; }), "all_zero_tensor");
  add(n.nan > 0, "nan");
  add(n.inf > 0, "inf");
  add(c.amax_ref && *c.amax_ref < current, "stale_amax_smaller");
  add(c.amax_ref && *c.amax_ref > current, "stale_amax_larger");
  add(is_stochastic(spec.rounding), "stochastic_rounding");
  add(spec.rht, "rht");
  add(spec.two_d, "two_d");
  add(c.cols % c.q.block_cols != 0 || c.rows % static_cast<std::size_t>(c.q.block_rows) != 0, "partial_block");
  add(std::any_of(c.x.begin(), c.x.end(), is_subnormal), "subnormal_input");
  const auto& order = edge_category_names();
  std::sort(c.covers.begin(), c.covers.end(), [&](const std::string& a, const std::string& b) {
    return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
  });
  return c;
}

const std::vector<std::string>& edge_category_names() {
  // clang-format off
  static const std::vector<std::string> names{
      "element_tie", "scale_tie", "scale_binade_edge",                     // rounding boundaries
      "element_saturation", "scale_saturation", "scale_underflow",        // range limits
      "zero_block", "all_zero_tensor", "nan", "inf", "subnormal_input",    // special inputs
      "stale_amax_smaller", "stale_amax_larger",                          // held tensor amax
      "stochastic_rounding", "sr_edge_bits", "rht", "two_d", "partial_block"};  // operand settings
  // clang-format on
  return names;
}

std::size_t minimum_cases(const Recipe& recipe) { return edge_count(edge_plans(recipe)); }
std::size_t default_cases(const Recipe& recipe) { return minimum_cases(recipe) + 4; }

// The number of cases asked for: at least the edge cases, at most what a disk holds.
void detail::check_cases(const Recipe& recipe, std::size_t cases) {
  if (recipe.element != formats::e2m1) {
    throw UsageError("vectors: recipe " + recipe.name + ": only E2M1 element formats are supported");
  }
  const Plans plans = edge_plans(recipe);
  if (cases < edge_count(plans)) {
    throw UsageError("{cases}: recipe " + recipe.name + " has " + std::to_string(edge_count(plans)) +
                     " edge cases; give at least that many (got " + std::to_string(cases) + ")");
  }
  // Each case is a handful of files of at most a few KiB: a million cases is already gigabytes.
  constexpr std::size_t kMaxCases = 1'000'000;
  if (cases > kMaxCases) {
    throw UsageError("{cases}: at most " + std::to_string(kMaxCases) + " (got " + std::to_string(cases) + ")");
  }
}

void generate(const Recipe& recipe, std::uint64_t seed, std::size_t cases, const std::function<void(Case&&)>& sink) {
  check_cases(recipe, cases);
  const Plans plans = edge_plans(recipe);
  std::size_t index = 0;
  for (const Plan& plan : plans.quantize) {
    OperandSpec spec = operand_for_role(recipe, plan.role);
    if (plan.spec_from) {
      const GemmOperands ops = operands_for(recipe, *plan.spec_from);
      spec = plan.b_operand ? ops.b : ops.a;
    }
    Draw draw(seed, kInputStreams | index);
    Context context{recipe, spec, draw};
    Case c;
    c.quantize = quantize_case(recipe, case_name(index, plan.title), spec, plan.build(context), seed, 2 * index);
    sink(std::move(c));
    ++index;
  }
  for (const GemmPlan& plan : plans.gemm) {
    const GemmOperands ops = operands_for(recipe, plan.gemm);
    Draw draw(seed, kInputStreams | index);
    Context ca{recipe, ops.a, draw}, cb{recipe, ops.b, draw};
    GemmCase g;
    g.name = case_name(index, plan.title);
    g.gemm = plan.gemm;
    g.a = quantize_case(recipe, g.name + ".a", ops.a, plan.a(ca), seed, 2 * index);
    g.b = quantize_case(recipe, g.name + ".b", ops.b, plan.b(cb), seed, 2 * index + 1);
    for (const Datapath* datapath : gemm_datapaths(recipe)) {
      GemmRequest request;
      request.datapath = datapath;
      GemmOutput out;
      out.datapath = datapath->name;
      out.alpha = resolve_gemm(recipe, g.a.q, g.b.q, request).alpha;
      out.c = gemm(recipe, g.a.q, g.b.q, request);
      g.outputs.push_back(std::move(out));
    }
    Case c;
    c.gemm = std::move(g);
    sink(std::move(c));
    ++index;
  }
  const Role roles[] = {Role::activation, Role::weight, Role::grad_output};
  for (std::size_t ordinal = 0; index < cases; ++ordinal, ++index) {
    const Role role = roles[ordinal % 3];
    const OperandSpec spec = operand_for_role(recipe, role);
    Draw draw(seed, kInputStreams | index);
    Context context{recipe, spec, draw};
    Case c;
    c.quantize = quantize_case(recipe, case_name(index, std::string(name_of(role)) + "_random_fill"), spec,
                               fill_tensor(context, ordinal), seed, 2 * index);
    sink(std::move(c));
  }
}

VectorSet generate(const Recipe& recipe, std::uint64_t seed, std::size_t cases) {
  VectorSet set;
  set.recipe = recipe;
  set.seed = seed;
  generate(recipe, seed, cases, [&](Case&& c) { set.cases.push_back(std::move(c)); });
  return set;
}

}  // namespace fp4sim::vectors
