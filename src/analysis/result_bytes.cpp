#include "fp4sim/analysis/result_bytes.hpp"

#include <cereal/archives/binary.hpp>
#include <cereal/types/array.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <sstream>
#include <type_traits>

#include "fp4sim/core/error.hpp"

// One serialize() per type, in the type's namespace (cereal finds it there), naming every field; the
// accumulators, flat structs of counters and sums, travel as their bytes.

namespace fp4sim {

template <class Archive, class Flat>
void flat(Archive& archive, Flat& value) {
  static_assert(std::is_trivially_copyable_v<Flat>);
  archive(cereal::binary_data(&value, sizeof value));
}

template <class Archive>
void serialize(Archive& a, QuantizeCounts& c) {
  flat(a, c);
}
template <class Archive>
void serialize(Archive& a, Format& f) {
  flat(a, f);
}

namespace trace {
template <class Archive>
void serialize(Archive& a, TensorInfo& t) {
  a(t.name, t.path, t.role, t.rows, t.cols, t.type, t.orig_dtype, t.chunked);
}
template <class Archive>
void serialize(Archive& a, LayerInfo& l) {
  a(l.name, l.path, l.tensors);
}
template <class Archive>
void serialize(Archive& a, StepInfo& s) {
  a(s.step, s.group, s.layers);
}
template <class Archive>
void serialize(Archive& a, TraceInfo& t) {
  a(t.path, t.schema_version, t.model, t.framework, t.notes, t.steps, t.x_w_dy_elements);
}
}  // namespace trace

namespace stats {
template <class Archive>
void serialize(Archive& a, Figure& f) {
  a(f.value, f.note);
}
template <class Archive>
void serialize(Archive& a, ErrorAccumulator& e) {
  flat(a, e);
}
template <class Archive>
void serialize(Archive& a, BlockAccumulator& b) {
  flat(a, b);
}
template <class Archive>
void serialize(Archive& a, AmaxBinSums& b) {
  flat(a, b);
}
template <class Archive>
void serialize(Archive& a, TensorStats& s) {
  a(s.error, s.blocks, s.counts, s.amax_bins.bins);
}
template <class Archive>
void serialize(Archive& a, HeadroomCounts& h) {
  a(h.scale, h.scale_name, h.max_scale, h.blocks, h.saturated, h.saturated_rounding, h.underflow);
}
}  // namespace stats

namespace replay {
template <class Archive>
void serialize(Archive& a, Hold& h) {
  a(h.held_amax, h.held_from_step, h.held_exact, h.rho);
}
template <class Archive>
void serialize(Archive& a, TensorEntry& e) {
  a(e.step, e.layer, e.tensor, e.role, e.view, e.recipe, e.rows, e.cols, e.block_rows, e.block_cols,
    e.element_format, e.scale_format, e.rounding, e.tensor_scale, e.orig_dtype, e.stream, e.amax, e.hold,
    e.global_encode_scale, e.global_decode_scale, e.stats, e.distribution, e.policy, e.item);
}
template <class Archive>
void serialize(Archive& a, HeadroomEntry& e) {
  a(e.step, e.layer, e.tensor, e.role, e.period, e.target, e.block_rows, e.block_cols, e.amax, e.hold, e.formats,
    e.item);
}
template <class Archive>
void serialize(Archive& a, GemmEntry& e) {
  a(e.step, e.layer, e.gemm, e.recipe, e.datapath, e.m, e.n, e.k, e.rel_fro_err, e.max_abs_err, e.ref_fro_norm,
    e.hold_a, e.hold_b, e.stream_a, e.stream_b, e.policy, e.item);
}
template <class Archive>
void serialize(Archive& a, Result& r) {
  a(r.trace, r.recipe_names, r.recipe_sources, r.policies, r.datapath, r.datapath_note, r.hold, r.seed, r.steps,
    r.tensors, r.gemms, r.headroom, r.tensor_bytes, r.seconds, r.shares);
}
}  // namespace replay

namespace sweep {
template <class Archive>
void serialize(Archive& a, Skipped& s) {
  a(s.config, s.reason);
}
template <class Archive>
void serialize(Archive& a, Result& r) {
  a(r.tensors, r.configs, r.skipped, r.input, r.recipe_map, r.seed, r.rows, r.cols, r.seconds, r.shares);
}
}  // namespace sweep

namespace {

template <class Result>
std::string encode(const Result& result) {
  std::ostringstream out(std::ios::binary);
  {
    cereal::BinaryOutputArchive archive(out);
    archive(result);
  }
  return std::move(out).str();
}

template <class Result>
Result decode(std::string_view bytes) {
  std::istringstream in(std::string(bytes), std::ios::binary);
  Result result;
  try {
    cereal::BinaryInputArchive archive(in);
    archive(result);
  } catch (const cereal::Exception& e) {
    throw DataError(std::string("a share's result ends early (") + e.what() + ")");
  }
  return result;
}

}  // namespace

std::string to_bytes(const replay::Result& result) { return encode(result); }
std::string to_bytes(const sweep::Result& result) { return encode(result); }
replay::Result replay_result_from_bytes(std::string_view bytes) { return decode<replay::Result>(bytes); }
sweep::Result sweep_result_from_bytes(std::string_view bytes) { return decode<sweep::Result>(bytes); }

}  // namespace fp4sim
