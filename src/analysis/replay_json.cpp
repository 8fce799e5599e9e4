// replay's JSON report: {"fp4sim":..., "trace":..., "tensors":[...], "gemms":[...], "headroom":[...]}.
#include <array>
#include <cmath>
#include <ostream>
#include <set>
#include <string>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim::replay {

namespace {

void write_hold(stats::JsonWriter& j, const Hold& h, const char* prefix = "") {
  const std::string p(prefix);
  const char* none = "recipe has no tensor scale";
  if (h.held_amax) {
    j.number_field(p + "held_amax", *h.held_amax);
  } else {
    j.field(p + "held_amax", stats::Figure::none(none));
  }
  if (h.held_from_step) {
    j.field(p + "held_from_step", *h.held_from_step);
  } else {
    j.field(p + "held_from_step", stats::Figure::none(h.held_amax ? "not from a trace step" : none));
  }
  if (h.held_exact) {
    j.field(p + "held_exact", *h.held_exact);
  } else {
    j.field(p + "held_exact", stats::Figure::none(h.held_amax ? "not from a trace step" : none));
  }
  j.field(p + "rho", h.rho);
}

}  // namespace

void write_tensor_json(stats::JsonWriter& j, const TensorEntry& e) {
  j.begin_object();
  j.field("step", e.step).field("layer", e.layer).field("tensor", e.tensor);
  if (!e.distribution.empty()) j.field("distribution", e.distribution);
  j.field("role", name_of(e.role)).field("gemm", name_of(e.view)).field("recipe", e.recipe);
  if (!e.policy.empty()) j.field("policy", e.policy);
  j.field("rows", static_cast<std::uint64_t>(e.rows)).field("cols", static_cast<std::uint64_t>(e.cols));
  j.field("element_format", e.element_format).field("scale_format", e.scale_format);
  j.field("block_rows", e.block_rows).field("block_cols", e.block_cols);
  j.field("rounding", e.rounding).field("tensor_scale", e.tensor_scale);
  if (!e.orig_dtype.empty()) j.field("orig_dtype", e.orig_dtype);
  j.field("stream", e.stream);
  stats::write_figures(j, e.stats, e.amax);
  write_hold(j, e.hold);
  j.number_field("global_encode_scale", e.global_encode_scale);
  j.number_field("global_decode_scale", e.global_decode_scale);
  // Per-block statistics.
  j.key("block_stats").begin_object();
  stats::write_block_figures(j, e.stats.blocks);
  j.end_object();
  j.end_object();
}

void write_json(const Result& r, std::ostream& os) {
  stats::JsonWriter j(os, false);
  j.begin_object();
  j.field("fp4sim", FP4SIM_VERSION);
  j.key("trace").begin_object();
  j.field("path", r.trace.path).field("schema_version", r.trace.schema_version);
  j.field("model", r.trace.model).field("framework", r.trace.framework);
  j.key("steps").begin_array();
  for (const auto& s : r.trace.steps) j.value(s.step);
  j.end_array();
  j.end_object();
  j.key("recipes").begin_array();
  for (std::size_t i = 0; i < r.recipe_names.size(); ++i) {
    j.begin_object().field("name", r.recipe_names[i]).field("source", r.recipe_sources[i]).end_object();
  }
  j.end_array();
  if (!r.policies.empty()) {
    j.key("policies").begin_array();
    for (const auto& p : r.policies) j.value(p);
    j.end_array();
  }
  // The value of every finite nonnegative code of each scale format the entries use, in code order: the
  // key to block_stats.scale_codes, so that readers (tools/plot_replay.py) hold no copy of the formats.
  j.key("scale_code_values").begin_object();
  std::set<std::string> written;
  for (const TensorEntry& e : r.tensors) {
    if (e.scale_format.empty() || !written.insert(e.scale_format).second) continue;  // bf16: no scale
    const Format f = parse_format(e.scale_format).value();  // format_name() output always parses
    j.key(e.scale_format).begin_array();
    for (std::uint32_t code = 0; code <= f.max_finite_code(); ++code) j.value(decode_to_double(f, code));
    j.end_array();
  }
  j.end_object();
  j.field("datapath", r.datapath);
  if (!r.datapath_note.empty()) j.field("datapath_note", r.datapath_note);
  j.field("hold", name_of(r.hold)).field("seed", r.seed);
  j.key("replayed_steps").begin_array();
  for (auto s : r.steps) j.value(s);
  j.end_array();
  j.field("tensor_bytes", r.tensor_bytes);
  j.number_field("seconds", r.seconds);
  j.field("shares", r.shares);
  j.key("tensors").begin_array();
  for (const TensorEntry& e : r.tensors) write_tensor_json(j, e);
  j.end_array();
  j.key("gemms").begin_array();
  for (const GemmEntry& e : r.gemms) {
    j.begin_object();
    j.field("step", e.step).field("layer", e.layer).field("gemm", name_of(e.gemm)).field("recipe", e.recipe);
    if (!e.policy.empty()) j.field("policy", e.policy);
    j.field("datapath", e.datapath);
    j.field("m", static_cast<std::uint64_t>(e.m)).field("n", static_cast<std::uint64_t>(e.n));
    j.field("k", static_cast<std::uint64_t>(e.k));
    j.field("rel_fro_err", e.rel_fro_err);
    j.number_field("max_abs_err", e.max_abs_err).number_field("ref_fro_norm", e.ref_fro_norm);
    write_hold(j, e.hold_a, "a_");
    write_hold(j, e.hold_b, "b_");
    j.field("stream_a", e.stream_a).field("stream_b", e.stream_b);
    j.end_object();
  }
  j.end_array();
  j.key("headroom").begin_array();
  for (const HeadroomEntry& h : r.headroom) {
    j.begin_object();
    j.field("step", h.step).field("layer", h.layer).field("tensor", h.tensor).field("role", name_of(h.role));
    j.field("period", h.period).number_field("target", h.target);
    j.field("block_rows", h.block_rows).field("block_cols", h.block_cols);
    j.number_field("amax", h.amax);
    write_hold(j, h.hold);
    j.key("formats").begin_object();
    for (const auto& f : h.formats) {
      j.key(f.scale_name).begin_object();
      j.number_field("max_scale", f.max_scale);
      j.number_field("headroom", f.max_scale / h.target);
      // Proposition 1: every block is unsaturated iff T * rho <= U (exact arithmetic; the FP32 rounding of
      // the ideal scale can still put the block holding the amax one ulp above U, counted below).
      if (h.hold.rho.value) {
        j.field("guaranteed_unsaturated", *h.hold.rho.value * h.target <= f.max_scale);
      } else {
        j.field("guaranteed_unsaturated", stats::Figure::none(h.hold.rho.note));
      }
      j.field("blocks", f.blocks).field("saturated_blocks", f.saturated);
      j.field("saturated_rounding_blocks", f.saturated_rounding).field("underflow_blocks", f.underflow);
      j.end_object();
    }
    j.end_object();
    j.end_object();
  }
  j.end_array();
  j.end_object();
  os << '\n';
}

}  // namespace fp4sim::replay
