// Replay of a tensor trace through block-scaled recipes (docs/cli.md `fp4sim replay`, docs/design.md "Replay").
//
// For every selected step (ascending), layer and tensor (x, w, dy) and every recipe: the tensor is
// quantized as the first GEMM that consumes it does (x and w as in fprop, dy as in dgrad) with the
// recipe's tensor-scale state at that step, and compared with the stored values (a `tensors` entry).
// For every GEMM of the layer (fprop x·wᵀ, dgrad dy·w, wgrad dyᵀ·x) both operands are quantized per
// operands_for(recipe, gemm) and the product is compared with the float64 product of the unquantized
// operands (a `gemms` entry). Periodic tensor scaling is carried across the captured steps with a
// hold rule; `headroom` entries report Proposition 1's quantities (docs/semantics.md P2) per scale format.
// With recipe maps (policies per layer and step) each map takes, per step and layer, the entries of the
// recipe (or bf16: not quantized) its first matching rule names, labelled with the map.
//
// Memory follows max_slab_bytes everywhere: a tensor larger than it is streamed in row slabs (two
// passes: amax, then quantization), so the per-tensor statistics hold one slab at a time; a GEMM entry
// is computed in tiles of whole block rows of A and B (full K), read from the trace, that hold at most
// max_slab_bytes / (3 x recipes) of float32 operands each (a layer's three GEMMs are in work at once). A GEMM whose 16-row tiles (K elements a row) do
// not fit says so in its entry instead of running. The results do not depend on the slab size, except
// that a split B adds the error sums in another order.
//
// Many processes (share.hpp): a run given Options::share does the units of work of that share only: a
// layer through every selected step (its x, w, dy and GEMMs) or, without GEMM entries, one tensor of a
// layer through every selected step; merge() joins the shares' results into the one-process result.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4sim/core/progress.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/analysis/hold_rule.hpp"
#include "fp4sim/analysis/share.hpp"
#include "fp4sim/stats/stats.hpp"
#include "fp4sim/io/trace.hpp"

namespace fp4sim::replay {

// The GEMM-level evaluation of one quantized GEMM: returns Ĉ [M, N] (row-major, double) from the
// quantized operands A [M, K] and B [N, K] (for tests and experiments; replay otherwise calls gemm.hpp
// or, for datapath "f64", multiplies the dequantized operands in float64). Called concurrently from
// OpenMP threads (one task per GEMM and recipe): it must be thread-safe.
using GemmEvaluator = std::function<std::vector<double>(const Recipe& recipe, Gemm gemm, const QuantizedTensor& a,
                                                         const QuantizedTensor& b, const std::string& datapath)>;

// A recipe map (docs/replay.md "Recipe maps"): which recipe quantizes a layer at a step, first matching
// rule first. A map is one policy of a run; the entries it takes are labelled with its `name`.
struct MapRule {
  std::string text;     // the rule as written: "lm_head@100-200=bf16"
  std::string pattern;  // ECMAScript regex searched in the layer name, as Options::layers; "" = every layer
  std::optional<std::pair<std::int64_t, std::int64_t>> steps;  // inclusive; none = every step
  std::optional<Recipe> recipe;  // none: bf16, the layer's tensors rounded RNE to BF16 and not block-scaled
  bool grid = false;             // sweep's `grid`: each grid point in turn (replay refuses it)
};
struct RecipeMap {
  std::string name;  // the map's text
  std::vector<MapRule> rules;
};
// "lm_head=bf16,.*=nvfp4; .*=nvfp4": maps separated by ';', rules by ',' (outside (), [] and {}), each
// rule PATTERN[@A-B|@A|@A-]=RECIPE with RECIPE a preset or bf16 and PATTERN `*` for every layer.
// RECIPE may also be `grid` where `grid` is true (sweep). UsageError naming {recipe_map} and the rule.
std::vector<RecipeMap> parse_recipe_maps(std::string_view text, bool grid = false);

struct Options {
  std::vector<Recipe> recipes;                 // default: ue5m3, nvfp4, mxfp4 (with recipe_maps: none)
  // Policies per layer and step: every recipe they name (and bf16) is replayed and each map takes, per
  // step and layer, the entries of its first matching rule (docs/replay.md "Recipe maps").
  std::vector<RecipeMap> recipe_maps;
  // GEMM datapath of the `gemms` entries: "recipe" = each recipe's default (gemm.hpp: probe-matched for
  // ue5m3*, fp32-seq for nvfp4*/mxfp4), "f64" = the dequantized operands multiplied in float64 (fast, no
  // hardware model), or any datapath preset name.
  std::string datapath = "recipe";
  std::optional<std::vector<std::int64_t>> steps;  // captured steps to replay; all when empty (and no ranges)
  // With `steps`: also every captured step in [first, last]; a range holding no captured step is an error.
  std::vector<std::pair<std::int64_t, std::int64_t>> step_ranges;
  std::string layers;                          // ECMAScript regex searched in the layer name; "" = all
  std::uint64_t seed = 0;                      // keys the stochastic-rounding bits (stream per tensor)
  HoldRule hold = HoldRule::window;
  bool gemms = true;                           // compute `gemms` entries
  int headroom_period = 50;                    // D of the Proposition 1 analysis
  float headroom_target = 448.0f;              // T of the Proposition 1 analysis
  std::size_t max_slab_bytes = std::size_t{256} << 20;  // float32 bytes of one slab of a large tensor
  ProgressFn progress;  // optional: tensor elements replayed of all selected (per step and layer)
  GemmEvaluator gemm_evaluator;                // empty: the float64 product of dequantized operands
  Share share;                                 // the part of the work this run does (default: all of it)
  // Optional: called before each work item with its position in the one-process order (the `item` of
  // the entries it makes), so that processes sharing a run agree on the failure one process meets first.
  std::function<void(std::uint64_t item)> starting;
};

// Work items, in the order one process does them: 3 x (index of the (step, layer) pair among the selected
// ones, steps ascending, layers in trace order) + the tensor (x 0, w 1, dy 2); a layer's GEMM entries
// follow its dy and share its item.

// The tensor-scale reference a quantization used.
struct Hold {
  std::optional<float> held_amax;             // none: the recipe has no tensor scale
  std::optional<std::int64_t> held_from_step;
  std::optional<bool> held_exact;             // the held amax is the one training would have held
  stats::Figure rho;                          // current amax / held amax
};

struct TensorEntry {
  std::int64_t step = 0;
  std::string layer, tensor;  // tensor: the dataset name ("x", "w", "dy")
  Role role = Role::activation;
  Gemm view = Gemm::fprop;    // the GEMM whose orientation rules quantized it (fprop or dgrad)
  std::string recipe;         // a preset, or "bf16" (recipe maps)
  std::string policy;         // the recipe map that took it ("" without maps)
  std::size_t rows = 0, cols = 0;
  int block_rows = 1, block_cols = 16;
  std::string element_format, scale_format, rounding, tensor_scale;
  std::string orig_dtype;
  std::uint64_t stream = 0;
  float amax = 0.0f;          // current tensor amax (NaN-ignoring, float32)
  Hold hold;
  float global_encode_scale = 1.0f, global_decode_scale = 1.0f;
  stats::TensorStats stats;
  // sweep only: what the grid point was
  std::string distribution;
  std::uint64_t item = 0;     // the work item (see Options::starting); merge() orders shares by it
};

struct HeadroomEntry {
  std::int64_t step = 0;
  std::string layer, tensor;
  Role role = Role::activation;
  int period = 50;
  float target = 448.0f;
  int block_rows = 1, block_cols = 16;
  float amax = 0.0f;
  Hold hold;
  std::vector<stats::HeadroomCounts> formats;  // ue4m3, ue5m3, ue5m3fn
  std::uint64_t item = 0;
};

struct GemmEntry {
  std::int64_t step = 0;
  std::string layer;
  Gemm gemm = Gemm::fprop;
  std::string recipe, datapath;
  std::string policy;  // as TensorEntry::policy
  std::size_t m = 0, n = 0, k = 0;
  stats::Figure rel_fro_err;
  double max_abs_err = 0.0;
  double ref_fro_norm = 0.0;
  Hold hold_a, hold_b;
  std::uint64_t stream_a = 0, stream_b = 0;
  std::uint64_t item = 0;
};

struct Result {
  trace::TraceInfo trace;
  std::vector<std::string> recipe_names;
  std::vector<std::string> recipe_sources;
  std::vector<std::string> policies;  // the recipe maps' names, in order (none without maps)
  std::string datapath, datapath_note;
  HoldRule hold = HoldRule::window;
  std::uint64_t seed = 0;
  std::vector<std::int64_t> steps;  // replayed
  std::vector<TensorEntry> tensors;
  std::vector<GemmEntry> gemms;
  std::vector<HeadroomEntry> headroom;
  std::uint64_t tensor_bytes = 0;  // float32 bytes of tensor data quantized per recipe
  // Run metadata, the only fields by which a run on many processes differs from one on a single process:
  double seconds = 0.0;            // wall time (merged: of the slowest share)
  int shares = 1;                  // the processes that did the work
};

// Replays a trace. DataError for bad input (naming file, path and rule); UsageError for options that
// select nothing (a step not in the trace, a regex matching no layer, an unknown datapath).
Result run(const std::filesystem::path& trace_path, const Options& options);

// A tensors entry as far as the recipe decides it: role, view, recipe name, shape, block shape, formats,
// rounding and tensor-scale policy (the caller fills where the tensor came from and what was measured).
TensorEntry tensor_entry(const Recipe& recipe, Role role, Gemm view, std::size_t rows, std::size_t cols);

// The results of every share of one run (share.hpp), in any order, as one process would have returned
// it: entries in one-process order, tensor_bytes summed, seconds of the slowest share, shares counted.
Result merge(std::vector<Result> shares);

// The random stream of one quantized operand: FNV-1a (64-bit) of "<step>/<layer>/<tensor>/<gemm>",
// e.g. "200/lm_head/dy/dgrad" (documented in docs/replay.md).
std::uint64_t stream_id(std::int64_t step, std::string_view layer, std::string_view tensor, Gemm gemm);

// The float64 product C = A · Bᵀ (A [M,K], B [N,K], row-major); uses every OpenMP thread.
std::vector<double> matmul_abt(std::span<const double> a, std::span<const double> b, std::size_t m, std::size_t n,
                               std::size_t k);

// Writers. JSON: {"fp4sim":..., "trace":..., "tensors":[...], "gemms":[...], "headroom":[...]}.
void write_json(const Result& r, std::ostream& os);
void write_tensor_json(stats::JsonWriter& j, const TensorEntry& e);  // one `tensors` object (sweep reuses)
// CSV: one table per kind of entry, a header line then one row per entry; a missing value is an empty
// cell, integers are written as integers and held_exact as true or false (docs/cli.md).
// Each kind's name is its JSON array's and its CSV file's suffix (`--csv a.csv`: a_tensors.csv, ...).
enum class Records : std::uint8_t { tensors, gemms, headroom };
std::span<const NameRow<Records>> names(Records);
void write_csv(const Result& r, Records records, std::ostream& os);
void write_tensors_csv(const std::vector<TensorEntry>& entries, std::ostream& os);
// HDF5: /tensors, /gemms, /headroom groups of column datasets (one row per entry) plus histograms.
void write_h5(const Result& r, const std::filesystem::path& path);
// The terminal summary, per policy where recipe maps were given, else per recipe: overall figures, the
// best per tensor role, worst layers, GEMM errors, headroom.
std::string summary(const Result& r);

}  // namespace fp4sim::replay
