// Error, overflow, underflow and scale statistics of a quantized tensor: mergeable accumulators
// (docs/design.md: "Statistics are mergeable"), so OpenMP threads, slabs of a large tensor and ranks combine
// the same way; plus the figures derived from them, which are null with a reason instead of Inf/NaN.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/stats/amax_deciles.hpp"

namespace fp4sim::stats {

// A derived figure: a finite number, or none with a reason ("exact", "all-zero tensor").
struct Figure {
  std::optional<double> value;
  std::string note;

  static Figure of(double v);  // non-finite v becomes none with note "inf" / "nan"
  static Figure none(std::string why) { return {std::nullopt, std::move(why)}; }
};

// Element-wise error of x-hat against x. Only finite inputs enter the error sums; NaN and Inf inputs
// are counted (they are data, docs/trace-format.md) and so are finite inputs whose x-hat is not finite.
struct ErrorAccumulator {
  std::uint64_t elements = 0;
  std::uint64_t nonzero = 0;         // finite, nonzero inputs
  std::uint64_t nan = 0, inf = 0;    // inputs
  std::uint64_t underflow = 0;       // finite nonzero inputs whose x-hat is zero
  std::uint64_t nonfinite_out = 0;   // finite inputs whose x-hat is NaN or Inf
  double sum_sq_err = 0.0;           // sum (x-hat - x)^2 over finite inputs with finite x-hat
  double sum_sq_ref = 0.0;           // sum x^2 over the same elements
  double sum_err = 0.0;              // sum (x-hat - x), signed, over the same elements
  double sum_prod = 0.0;             // sum x-hat * x over the same elements
  double sum_sq_dead = 0.0;          // sum x^2 over the underflow elements (the dead zone's energy)
  double sum_abs_err = 0.0;
  double max_abs_err = 0.0;
  double amax = 0.0;                              // max |x| over finite inputs
  double amin_nonzero = std::numeric_limits<double>::infinity();  // min |x| over finite nonzero inputs

  void add(double x, double xhat) {
    ++elements;
    if (x != x) {
      ++nan;
      return;
    }
    const double ax = x < 0 ? -x : x;
    if (ax == std::numeric_limits<double>::infinity()) {
      ++inf;
      return;
    }
    if (xhat != xhat || xhat == std::numeric_limits<double>::infinity() ||
        xhat == -std::numeric_limits<double>::infinity()) {
      ++nonfinite_out;
      return;
    }
    const double e = xhat - x;
    const double ae = e < 0 ? -e : e;
    sum_sq_err += e * e;
    sum_sq_ref += x * x;
    sum_err += e;
    sum_prod += xhat * x;
    sum_abs_err += ae;
    if (ae > max_abs_err) max_abs_err = ae;
    if (ax > amax) amax = ax;
    if (x != 0.0) {
      ++nonzero;
      if (ax < amin_nonzero) amin_nonzero = ax;
      if (xhat == 0.0) {
        ++underflow;
        sum_sq_dead += x * x;
      }
    }
  }
  void merge(const ErrorAccumulator& o);

  std::uint64_t finite() const { return elements - nan - inf; }
  Figure mse() const;                 // sum_sq_err / finite elements
  Figure rel_mse() const;             // sum_sq_err / sum_sq_ref
  Figure sqnr_db() const;             // -10 log10(rel_mse)
  Figure underflow_fraction() const;  // underflow / nonzero
  Figure dynamic_range_log2() const;  // log2(amax / amin_nonzero), TE's dynamic_range
  // The error decomposition (docs/replay.md "Error decomposition"):
  Figure bias() const;                       // sum_err / finite elements: the mean signed error
  Figure dead_zone_energy_fraction() const;  // sum_sq_dead / sum_sq_ref
  Figure shrinkage() const;                  // sum_prod / sum_sq_ref - 1
};

// Per-block statistics (peers.md §6: what TE's users ask for): distributions of block amax, of scale
// codes and of per-block error, and the spread of the decoded block scales.
struct BlockAccumulator {
  static constexpr int kAmaxLog2Min = -149;  // floor(log2) of the smallest binary32 subnormal
  static constexpr int kAmaxLog2Max = 127;
  static constexpr int kAmaxBins = kAmaxLog2Max - kAmaxLog2Min + 1;
  static constexpr int kSqnrMinDb = -20, kSqnrMaxDb = 100;  // 1 dB bins; below/above go to the ends
  static constexpr int kSqnrBins = kSqnrMaxDb - kSqnrMinDb;

  std::uint64_t blocks = 0;
  std::uint64_t zero_blocks = 0;       // every element +-0
  std::uint64_t nonfinite_blocks = 0;  // holding NaN or Inf
  std::uint64_t exact_blocks = 0;      // nonzero, finite, reconstructed without error
  std::uint64_t flushed_blocks = 0;    // nonzero, finite, every element flushed to 0: block SQNR exactly 0 dB
  std::array<std::uint64_t, 256> scale_codes{};     // count of blocks per scale code
  std::array<std::uint64_t, kAmaxBins> amax_log2{};  // nonzero finite block amax by floor(log2)
  std::uint64_t amax_inf = 0;
  std::array<std::uint64_t, kSqnrBins> sqnr_db{};  // nonzero inexact finite blocks by floor(SQNR dB)
  double scale_log2_sum = 0.0, scale_log2_sumsq = 0.0;  // log2 of decoded nonzero finite block scales
  std::uint64_t scale_count = 0;
  double worst_rel_mse = 0.0;  // max over nonzero finite blocks of sum err^2 / sum x^2
  double block_amax_max = 0.0;
  double block_amax_min_nonzero = std::numeric_limits<double>::infinity();
  // The scale-choice model (docs/replay.md "Error decomposition"), over the nonzero finite blocks it models:
  // sum of squared errors of round-to-nearest on the element grid at the chosen scale and at the best
  // scale code within kScaleWindow codes of it, and the blocks whose best code is another.
  static constexpr int kScaleWindow = 4;
  std::uint64_t modelled_blocks = 0;
  std::uint64_t rescalable_blocks = 0;
  double chosen_sq_err = 0.0, best_sq_err = 0.0;

  // One block: its NaN-ignoring amax, its scale code and decoded scale value, its error sums, and whether
  // every nonzero element of it was flushed to 0.
  void add_block(float block_amax, std::uint8_t scale_code, float scale_value, double sum_sq_err, double sum_sq_ref,
                 bool all_zero, bool nonfinite, bool flushed);
  void merge(const BlockAccumulator& o);

  Figure scale_log2_mean() const;
  Figure scale_log2_std() const;
  Figure worst_block_sqnr_db() const;
  // The q-quantile (0..1) of per-block SQNR over nonzero finite blocks, exact blocks counting as
  // +infinity (none with note when the quantile falls on them); resolution 1 dB (bin lower edge).
  Figure block_sqnr_db_quantile(double q) const;
  // floor(log2) bin of the q-quantile of nonzero finite block amax.
  Figure block_amax_log2_quantile(double q) const;

 private:
  double scale_log2(std::uint8_t code, float value);  // log2 of a decoded scale, cached per code
  std::array<float, 256> log2_cache_value_{};         // 0 = not cached (a zero scale is never asked)
  std::array<double, 256> log2_cache_{};
};

// Everything replay reports for one quantized tensor.
struct TensorStats {
  ErrorAccumulator error;
  BlockAccumulator blocks;
  QuantizeCounts counts;  // from the quantizer: saturated elements, scale_saturated/underflow blocks
  AmaxBins amax_bins;     // the decomposition per block-amax decile

  void merge(const TensorStats& o) {
    error.merge(o.error);
    blocks.merge(o.blocks);
    counts.merge(o.counts);
    amax_bins.merge(o.amax_bins);
  }
  Figure saturated_fraction() const;  // counts.saturated / elements
  Figure grid_noise() const;          // blocks.best_sq_err / error.sum_sq_ref
  Figure scale_choice_loss() const;   // (blocks.chosen_sq_err - blocks.best_sq_err) / error.sum_sq_ref
};

// Adds x (what the quantizer saw; `reference`, when not empty, the original float64 values the
// error is measured against) and its reconstruction to `out`, block by block in q's layout.
// Uses every OpenMP thread.
void accumulate(const QuantizedTensor& q, std::span<const float> x, std::span<const double> reference,
                std::span<const float> dequantized, TensorStats& out);

// The rows of one chunk of a tensor [rows, cols] in replay's order of summation: about 2^16 elements,
// a multiple of `multiple` (16, or the lcm of 16 and the 2-D tiles of the recipes replayed together), so
// that a chunk holds whole block rows. Fixed by the shape alone: the sums do not depend on threads or slabs.
std::size_t chunk_rows(std::size_t cols, std::size_t multiple);

// The statistics of one whole quantized tensor (fp4sim.stats): accumulate() over chunks of
// chunk_rows(q.cols, multiple) rows, merged in order, which is how replay sums the chunks it quantizes
// one by one; with replay's `multiple` (a multiple of q.block_rows), equal inputs give replay's figures bit
// for bit.
TensorStats tensor_stats(const QuantizedTensor& q, std::span<const float> x, std::span<const double> reference,
                         std::span<const float> dequantized, std::size_t multiple = 16);

// ---------------------------------------------------------------------------------------------
// Proposition 1 (docs/semantics.md P2): with a held tensor amax g and target T, block B (amax a_B) gets the
// ideal scale u = RN(a_B * RN(G * RN(1/F))), G = RN(RN(F*T)/g); it saturates iff u > U (the scale
// format's max) and underflows iff u > 0 rounds to 0. All blocks are unsaturated iff T * rho <= U.

struct HeadroomCounts {
  Format scale = formats::ue4m3;
  std::string scale_name;
  double max_scale = 0.0;      // U
  std::uint64_t blocks = 0;
  std::uint64_t saturated = 0;  // u > U before rounding
  std::uint64_t saturated_rounding = 0;  // of those, within FP32 rounding of U (saturated_by_rounding)
  std::uint64_t underflow = 0;  // u > 0 rounds to 0 (RNE)

  void merge(const HeadroomCounts& o) {
    blocks += o.blocks;
    saturated += o.saturated;
    saturated_rounding += o.saturated_rounding;
    underflow += o.underflow;
  }
};

// Counts, for each scale format, the blocks (block_rows x block_cols tiles of x [rows, cols]) that
// saturate or underflow when the tensor scale comes from held_amax with target T and element max F.
void accumulate_headroom(std::span<const float> x, std::size_t rows, std::size_t cols, int block_rows, int block_cols,
                         float held_amax, float target, float element_max, std::span<HeadroomCounts> out);

// ---------------------------------------------------------------------------------------------
// JSON output: numbers in shortest round-trip form; never a bare Infinity or NaN (docs/cli.md).

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& os, bool pretty = false) : os_(os), pretty_(pretty) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);

  JsonWriter& value(double v);  // non-finite: null (use field() for the *_note)
  JsonWriter& value(std::int64_t v);
  JsonWriter& value(std::uint64_t v);
  JsonWriter& value(int v) { return value(static_cast<std::int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  template <class T>
  JsonWriter& value(const T* v) = delete;  // a row pointer is not a bool: write its name
  JsonWriter& null();

  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  // A figure: "k": number, or "k": null, "k_note": why.
  JsonWriter& field(std::string_view k, const Figure& f);
  // A double that may be non-finite: null with a note naming Inf/NaN.
  JsonWriter& number_field(std::string_view k, double v);

 private:
  void separator();
  std::ostream& os_;
  bool pretty_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

// The per-tensor figures under the names and in the order of replay's `tensors` entries (docs/replay.md),
// the one place they are derived for replay, sweep and fp4sim.stats: `elements` .. `rescalable_blocks`
// (`amax`: the tensor's NaN-ignoring float32 amax, which replay also reads), and the members of `block_stats`.
void write_figures(JsonWriter& j, const TensorStats& s, float amax);
// `amax_deciles` (written last by write_figures): the decomposition's terms per block-amax decile.
void write_amax_deciles(JsonWriter& j, const TensorStats& s);
void write_block_figures(JsonWriter& j, const BlockAccumulator& b);

}  // namespace fp4sim::stats
