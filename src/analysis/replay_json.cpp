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

template <std::size_t N>
void write_sparse_histogram(stats::JsonWriter& j, std::string_view key, const std::array<std::uint64_t, N>& bins,
                            int first) {
  j.key(key).begin_object();
  for (std::size_t i = 0; i < N; ++i) {
    if (bins[i]) j.field(std::to_string(first + static_cast<int>(i)), bins[i]);
  }
  j.end_object();
}

}  // namespace

void write_tensor_json(stats::JsonWriter& j, const TensorEntry& e) {
  const stats::ErrorAccumulator& er = e.stats.error;
  const stats::BlockAccumulator& b = e.stats.blocks;
  const QuantizeCounts& c = e.stats.counts;
  j.begin_object();
  j.field("step", e.step).field("layer", e.layer).field("tensor", e.tensor);
  if (!e.distribution.empty()) j.field("distribution", e.distribution);
  j.field("role", name_of(e.role)).field("gemm", name_of(e.view)).field("recipe", e.recipe);
  j.field("rows", static_cast<std::uint64_t>(e.rows)).field("cols", static_cast<std::uint64_t>(e.cols));
  j.field("element_format", e.element_format).field("scale_format", e.scale_format);
  j.field("block_rows", e.block_rows).field("block_cols", e.block_cols);
  j.field("rounding", e.rounding).field("tensor_scale", e.tensor_scale);
  if (!e.orig_dtype.empty()) j.field("orig_dtype", e.orig_dtype);
  j.field("stream", e.stream);
  j.field("elements", er.elements).field("nonzero", er.nonzero);
  j.field("mse", er.mse()).field("rel_mse", er.rel_mse()).field("sqnr_db", er.sqnr_db());
  j.number_field("max_abs_err", er.max_abs_err);
  j.field("underflow_fraction", er.underflow_fraction()).field("underflow", er.underflow);
  j.field("saturated_fraction", e.stats.saturated_fraction()).field("saturated", c.saturated);
  j.field("blocks", b.blocks).field("zero_blocks", b.zero_blocks);
  j.field("scale_saturated", c.scale_saturated).field("scale_underflow", c.scale_underflow);
  j.field("nan", er.nan).field("inf", er.inf).field("nonfinite_outputs", er.nonfinite_out);
  j.number_field("amax", e.amax);
  if (er.nonzero) {
    j.number_field("amin_nonzero", er.amin_nonzero);
  } else {
    j.field("amin_nonzero", stats::Figure::none("no nonzero finite inputs"));
  }
  j.field("dynamic_range_log2", er.dynamic_range_log2());
  write_hold(j, e.hold);
  j.number_field("global_encode_scale", e.global_encode_scale);
  j.number_field("global_decode_scale", e.global_decode_scale);
  // Per-block statistics.
  j.key("block_stats").begin_object();
  j.field("nonfinite_blocks", b.nonfinite_blocks).field("exact_blocks", b.exact_blocks);
  if (b.block_amax_max > 0) {
    j.number_field("block_amax_min_nonzero", b.block_amax_min_nonzero);
    j.number_field("block_amax_max", b.block_amax_max);
  } else {
    j.field("block_amax_min_nonzero", stats::Figure::none("no nonzero finite blocks"));
    j.field("block_amax_max", stats::Figure::none("no nonzero finite blocks"));
  }
  j.field("block_amax_log2_p01", b.block_amax_log2_quantile(0.01));
  j.field("block_amax_log2_p50", b.block_amax_log2_quantile(0.50));
  j.field("block_amax_log2_p99", b.block_amax_log2_quantile(0.99));
  j.field("scale_log2_mean", b.scale_log2_mean()).field("scale_log2_std", b.scale_log2_std());
  j.field("block_sqnr_db_p01", b.block_sqnr_db_quantile(0.01));
  j.field("block_sqnr_db_p10", b.block_sqnr_db_quantile(0.10));
  j.field("block_sqnr_db_p50", b.block_sqnr_db_quantile(0.50));
  j.field("worst_block_sqnr_db", b.worst_block_sqnr_db());
  write_sparse_histogram(j, "scale_codes", b.scale_codes, 0);
  write_sparse_histogram(j, "block_amax_log2_hist", b.amax_log2, stats::BlockAccumulator::kAmaxLog2Min);
  write_sparse_histogram(j, "block_sqnr_db_hist", b.sqnr_db, stats::BlockAccumulator::kSqnrMinDb);
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
  // The value of every finite nonnegative code of each scale format the entries use, in code order: the
  // key to block_stats.scale_codes, so that readers (tools/plot_replay.py) hold no copy of the formats.
  j.key("scale_code_values").begin_object();
  std::set<std::string> written;
  for (const TensorEntry& e : r.tensors) {
    if (!written.insert(e.scale_format).second) continue;
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
      j.field("blocks", f.blocks).field("saturated_blocks", f.saturated).field("underflow_blocks", f.underflow);
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
