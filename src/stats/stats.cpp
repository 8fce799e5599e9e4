#include "fp4sim/stats/stats.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/json.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/scale_chooser.hpp"
#include "fp4sim/core/fp32.hpp"

namespace fp4sim::stats {

// The notes of a figure that is itself not finite: the three documented in docs/cli.md ("JSON").
Figure Figure::of(double v) {
  if (std::isnan(v)) return none("not finite: NaN");
  if (std::isinf(v)) return none(v > 0 ? "not finite: +Infinity" : "not finite: -Infinity");
  return {v, ""};
}

// ---------------------------------------------------------------------------------------------
// ErrorAccumulator

void ErrorAccumulator::merge(const ErrorAccumulator& o) {
  elements += o.elements;
  nonzero += o.nonzero;
  nan += o.nan;
  inf += o.inf;
  underflow += o.underflow;
  nonfinite_out += o.nonfinite_out;
  sum_sq_err += o.sum_sq_err;
  sum_sq_ref += o.sum_sq_ref;
  sum_err += o.sum_err;
  sum_prod += o.sum_prod;
  sum_sq_dead += o.sum_sq_dead;
  sum_abs_err += o.sum_abs_err;
  max_abs_err = std::max(max_abs_err, o.max_abs_err);
  amax = std::max(amax, o.amax);
  amin_nonzero = std::min(amin_nonzero, o.amin_nonzero);
}

Figure ErrorAccumulator::mse() const {
  const std::uint64_t n = finite() - nonfinite_out;
  if (n == 0) return Figure::none(elements == 0 ? "empty tensor" : "no finite elements");
  return Figure::of(sum_sq_err / static_cast<double>(n));
}

Figure ErrorAccumulator::rel_mse() const {
  if (sum_sq_ref == 0.0) {
    if (elements == 0) return Figure::none("empty tensor");
    if (nonfinite_out > 0) {
      return Figure::none("no finite nonzero input has a finite reconstruction (see nonfinite_outputs)");
    }
    return Figure::none("all-zero tensor (sum x^2 = 0)");
  }
  return Figure::of(sum_sq_err / sum_sq_ref);
}

Figure ErrorAccumulator::sqnr_db() const {
  const Figure r = rel_mse();
  if (!r.value) return r;
  if (*r.value == 0.0) return Figure::none("exact (no quantization error)");
  return Figure::of(-10.0 * std::log10(*r.value));
}

Figure ErrorAccumulator::underflow_fraction() const {
  if (nonzero == 0) return Figure::none("no nonzero finite inputs");
  return Figure::of(static_cast<double>(underflow) / static_cast<double>(nonzero));
}

Figure ErrorAccumulator::dynamic_range_log2() const {
  if (nonzero == 0) return Figure::none("no nonzero finite inputs");
  return Figure::of(std::log2(amax / amin_nonzero));
}

Figure ErrorAccumulator::bias() const {
  const Figure m = mse();  // the same elements, the same reasons for none
  if (!m.value) return m;
  return Figure::of(sum_err / static_cast<double>(finite() - nonfinite_out));
}

Figure ErrorAccumulator::dead_zone_energy_fraction() const {
  const Figure r = rel_mse();
  if (!r.value) return r;
  return Figure::of(sum_sq_dead / sum_sq_ref);
}

Figure ErrorAccumulator::shrinkage() const {
  const Figure r = rel_mse();
  if (!r.value) return r;
  return Figure::of(sum_prod / sum_sq_ref - 1.0);
}

// ---------------------------------------------------------------------------------------------
// BlockAccumulator

double BlockAccumulator::scale_log2(std::uint8_t code, float value) {
  if (log2_cache_value_[code] != value) {
    log2_cache_value_[code] = value;
    log2_cache_[code] = std::log2(static_cast<double>(value));
  }
  return log2_cache_[code];
}

void BlockAccumulator::add_block(float block_amax, std::uint8_t scale_code, float scale_value, double sum_sq_err,
                                 double sum_sq_ref, bool all_zero, bool nonfinite, bool flushed) {
  ++blocks;
  ++scale_codes[scale_code];
  if (nonfinite) {
    ++nonfinite_blocks;
    if (std::isinf(block_amax)) ++amax_inf;
    return;
  }
  if (all_zero) {
    ++zero_blocks;
    return;
  }
  ++amax_log2[static_cast<std::size_t>(std::clamp(floor_log2(block_amax), kAmaxLog2Min, kAmaxLog2Max) - kAmaxLog2Min)];
  block_amax_max = std::max<double>(block_amax_max, block_amax);
  block_amax_min_nonzero = std::min<double>(block_amax_min_nonzero, block_amax);
  if (scale_value > 0.0f && std::isfinite(scale_value)) {
    const double l = scale_log2(scale_code, scale_value);
    scale_log2_sum += l;
    scale_log2_sumsq += l * l;
    ++scale_count;
  }
  if (sum_sq_err == 0.0) {
    ++exact_blocks;
    return;
  }
  flushed_blocks += flushed;
  const double rel = sum_sq_err / sum_sq_ref;
  worst_rel_mse = std::max(worst_rel_mse, rel);
  const double db = -10.0 * std::log10(rel);
  const int bin = std::clamp(static_cast<int>(std::floor(db)), kSqnrMinDb, kSqnrMaxDb - 1) - kSqnrMinDb;
  ++sqnr_db[static_cast<std::size_t>(bin)];
}

void BlockAccumulator::merge(const BlockAccumulator& o) {
  blocks += o.blocks;
  zero_blocks += o.zero_blocks;
  nonfinite_blocks += o.nonfinite_blocks;
  exact_blocks += o.exact_blocks;
  flushed_blocks += o.flushed_blocks;
  for (std::size_t i = 0; i < scale_codes.size(); ++i) scale_codes[i] += o.scale_codes[i];
  for (std::size_t i = 0; i < amax_log2.size(); ++i) amax_log2[i] += o.amax_log2[i];
  amax_inf += o.amax_inf;
  for (std::size_t i = 0; i < sqnr_db.size(); ++i) sqnr_db[i] += o.sqnr_db[i];
  scale_log2_sum += o.scale_log2_sum;
  scale_log2_sumsq += o.scale_log2_sumsq;
  scale_count += o.scale_count;
  worst_rel_mse = std::max(worst_rel_mse, o.worst_rel_mse);
  block_amax_max = std::max(block_amax_max, o.block_amax_max);
  block_amax_min_nonzero = std::min(block_amax_min_nonzero, o.block_amax_min_nonzero);
  modelled_blocks += o.modelled_blocks;
  rescalable_blocks += o.rescalable_blocks;
  chosen_sq_err += o.chosen_sq_err;
  best_sq_err += o.best_sq_err;
}

Figure BlockAccumulator::scale_log2_mean() const {
  if (scale_count == 0) return Figure::none("no nonzero finite blocks");
  return Figure::of(scale_log2_sum / static_cast<double>(scale_count));
}

Figure BlockAccumulator::scale_log2_std() const {
  if (scale_count == 0) return Figure::none("no nonzero finite blocks");
  const double n = static_cast<double>(scale_count);
  const double mean = scale_log2_sum / n;
  return Figure::of(std::sqrt(std::max(0.0, scale_log2_sumsq / n - mean * mean)));
}

Figure BlockAccumulator::worst_block_sqnr_db() const {
  const std::uint64_t inexact = blocks - zero_blocks - nonfinite_blocks - exact_blocks;
  if (blocks == zero_blocks + nonfinite_blocks) return Figure::none("no nonzero finite blocks");
  if (inexact == 0) return Figure::none("exact (every block reconstructed without error)");
  return Figure::of(-10.0 * std::log10(worst_rel_mse));
}

Figure BlockAccumulator::block_sqnr_db_quantile(double q) const {
  const std::uint64_t counted = blocks - zero_blocks - nonfinite_blocks;
  if (counted == 0) return Figure::none("no nonzero finite blocks");
  // Rank among nonzero finite blocks, ascending SQNR; exact blocks sort last (+infinity).
  const auto rank = static_cast<std::uint64_t>(std::floor(q * static_cast<double>(counted - 1)));
  std::uint64_t seen = 0;
  for (int i = 0; i < kSqnrBins; ++i) {
    seen += sqnr_db[static_cast<std::size_t>(i)];
    if (seen > rank) return Figure::of(kSqnrMinDb + i);
  }
  return Figure::none("exact (the quantile falls on blocks without error)");
}

Figure BlockAccumulator::block_amax_log2_quantile(double q) const {
  std::uint64_t counted = 0;
  for (auto c : amax_log2) counted += c;
  if (counted == 0) return Figure::none("no nonzero finite blocks");
  const auto rank = static_cast<std::uint64_t>(std::floor(q * static_cast<double>(counted - 1)));
  std::uint64_t seen = 0;
  for (int i = 0; i < kAmaxBins; ++i) {
    seen += amax_log2[static_cast<std::size_t>(i)];
    if (seen > rank) return Figure::of(kAmaxLog2Min + i);
  }
  return Figure::none("unreachable");
}

Figure TensorStats::saturated_fraction() const {
  if (error.elements == 0) return Figure::none("empty tensor");
  return Figure::of(static_cast<double>(counts.saturated) / static_cast<double>(error.elements));
}

namespace {

// The scale-choice terms need every nonzero finite block modelled (none under RHT or a row-scaled amax).
Figure scale_model_figure(const TensorStats& s, double sum_sq) {
  const Figure r = s.error.rel_mse();
  if (!r.value) return r;
  const BlockAccumulator& b = s.blocks;
  if (b.modelled_blocks != b.blocks - b.zero_blocks - b.nonfinite_blocks) {
    return Figure::none("not modelled: the recipe rotates the tensor (RHT) or scales it per row");
  }
  return Figure::of(sum_sq / s.error.sum_sq_ref);
}

}  // namespace

Figure TensorStats::grid_noise() const { return scale_model_figure(*this, blocks.best_sq_err); }
Figure TensorStats::scale_choice_loss() const {
  return scale_model_figure(*this, blocks.chosen_sq_err - blocks.best_sq_err);
}

// ---------------------------------------------------------------------------------------------
// accumulate

namespace {

// The error sums of one row segment of a block whose inputs and outputs are all finite: branch-free,
// so the compiler vectorises it. Same figures as ErrorAccumulator::add element by element.
template <class Ref>
void add_finite_segment(const Ref* ref, const float* xhat, std::size_t n, ErrorAccumulator& acc) {
  double sse = 0, ssr = 0, se = 0, sp = 0, ssd = 0, sae = 0, maxe = 0, amax = 0;
  double amin = std::numeric_limits<double>::infinity();
  std::uint64_t nz = 0, under = 0;
#pragma omp simd reduction(+ : sse, ssr, se, sp, ssd, sae, nz, under) reduction(max : maxe, amax) reduction(min : amin)
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(ref[i]);
    const double e = static_cast<double>(xhat[i]) - x;
    const double ae = std::fabs(e), ax = std::fabs(x);
    sse += e * e;
    ssr += x * x;
    se += e;
    sp += static_cast<double>(xhat[i]) * x;
    sae += ae;
    maxe = ae > maxe ? ae : maxe;
    amax = ax > amax ? ax : amax;
    const bool nonzero = x != 0.0;
    nz += nonzero;
    const bool dead = nonzero & (xhat[i] == 0.0f);
    under += dead;
    ssd += dead ? x * x : 0.0;
    const double candidate = nonzero ? ax : std::numeric_limits<double>::infinity();
    amin = candidate < amin ? candidate : amin;
  }
  acc.elements += n;
  acc.nonzero += nz;
  acc.underflow += under;
  acc.sum_sq_err += sse;
  acc.sum_sq_ref += ssr;
  acc.sum_err += se;
  acc.sum_prod += sp;
  acc.sum_sq_dead += ssd;
  acc.sum_abs_err += sae;
  acc.max_abs_err = std::max(acc.max_abs_err, maxe);
  acc.amax = std::max(acc.amax, amax);
  acc.amin_nonzero = std::min(acc.amin_nonzero, amin);
}

}  // namespace

namespace {

// The scale-choice model (docs/replay.md "Error decomposition"): a block's values v (the reference the
// error is measured against) rounded to nearest, ties to the even code, on the element format's grid at
// the decode scale d = Gd x (decoded scale code), saturating at the largest element; its squared error at
// the chosen code and at the best valid code within kScaleWindow codes of it. Every decision is exact: |v|
// is compared with the midpoints times d, products of few significant bits that binary64 holds exactly
// (d has at most 24 + 5), and so is the value reached (a grid value times d); only e = ±m·d - v and the
// sums round.
class ScaleChoiceModel {
 public:
  explicit ScaleChoiceModel(const QuantizedTensor& q) : applies_(!q.spec.rht && q.row_amax.empty()) {
    std::vector<double> grid;  // the element format's nonnegative values by code, ascending from 0
    for (std::uint32_t c = 0; c <= q.element.max_finite_code(); ++c) grid.push_back(decode_to_double(q.element, c));
    top_ = grid.back();
    for (std::size_t i = 0; i + 1 < grid.size(); ++i) {
      midpoints_.push_back((grid[i] + grid[i + 1]) / 2);
      steps_.push_back(grid[i + 1] - grid[i]);
      tie_up_.push_back((i + 1) % 2 == 0);  // a tie goes to the even code
    }
    max_code_ = static_cast<int>(q.scale.max_finite_code());
    for (int c = 0; c <= max_code_; ++c) {
      const double s = decode_to_double(q.scale, static_cast<std::uint32_t>(c));
      decode_[static_cast<std::size_t>(c)] = std::isfinite(s) && s > 0 ? s * q.global_decode_scale : 0.0;
    }
  }
  bool applies() const { return applies_; }

  // One thread's working arrays, reused block after block.
  struct Scratch {
    std::vector<double> values, magnitudes, reached;
  };

  // Rows [r0, r1) of a block of columns [c0, c1) of v (row length cols) with chosen scale code `code`.
  // A block's squared error at the chosen code and at the best code of the window.
  struct Terms {
    double chosen = 0.0, best = 0.0;
  };

  template <class Ref>
  Terms add(const Ref* v, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1,
            std::uint8_t code, Scratch& scratch, BlockAccumulator& out) const {
    const std::size_t n = c1 - c0;
    std::vector<double>& values = scratch.values;
    std::vector<double>& magnitudes = scratch.magnitudes;
    std::vector<double>& reached = scratch.reached;
    values.resize((r1 - r0) * n);
    magnitudes.resize(values.size());
    reached.resize(values.size());
    for (std::size_t r = r0; r < r1; ++r) {
      for (std::size_t j = 0; j < n; ++j) values[(r - r0) * n + j] = static_cast<double>(v[r * cols + c0 + j]);
    }
    double amax = 0.0;
    for (std::size_t j = 0; j < values.size(); ++j) {
      magnitudes[j] = std::fabs(values[j]);
      amax = std::max(amax, magnitudes[j]);
    }
    // One pass per midpoint, vectorised over the block: with d = 0 every midpoint is 0 and a nonzero value
    // climbs to the top code, whose value 0·top is 0 (flushed).
    auto sq_err = [&](double d) {
      const std::size_t size = values.size();
      const double* mag = magnitudes.data();
      double* up = reached.data();
      std::fill(up, up + size, 0.0);
      for (std::size_t i = 0; i < midpoints_.size(); ++i) {
        const double mid = midpoints_[i] * d, step = steps_[i] * d;
        if (tie_up_[i]) {
#pragma omp simd
          for (std::size_t j = 0; j < size; ++j) up[j] += mag[j] >= mid ? step : 0.0;
        } else {
#pragma omp simd
          for (std::size_t j = 0; j < size; ++j) up[j] += mag[j] > mid ? step : 0.0;
        }
      }
      double sum = 0.0;
      const double* val = values.data();
#pragma omp simd reduction(+ : sum)
      for (std::size_t j = 0; j < size; ++j) {
        const double e = (val[j] < 0 ? -up[j] : up[j]) - val[j];
        sum += e * e;
      }
      return sum;
    };
    const double chosen = sq_err(code <= max_code_ ? decode_[code] : 0.0);
    double best = chosen;
    for (int c = std::max(0, code - BlockAccumulator::kScaleWindow);
         c <= std::min(max_code_, code + BlockAccumulator::kScaleWindow); ++c) {
      const double d = decode_[static_cast<std::size_t>(c)];
      if (c == code || d == 0.0) continue;
      // Skipped when the clipping of the amax element alone, one term of the sum (a sum of nonnegative
      // terms rounds to no less than any of them), already loses: the minimum is the same.
      const double clipped = amax > top_ * d ? amax - top_ * d : 0.0;
      if (clipped * clipped >= best) continue;
      best = std::min(best, sq_err(d));
    }
    ++out.modelled_blocks;
    out.rescalable_blocks += best < chosen;
    out.chosen_sq_err += chosen;
    out.best_sq_err += best;
    return {chosen, best};
  }

 private:
  bool applies_;
  std::vector<double> midpoints_, steps_;  // between consecutive grid values, ascending
  std::vector<char> tie_up_;               // a value on midpoint i rounds up (to the even code)
  double top_ = 0.0;                       // the largest element
  int max_code_ = 0;
  std::array<double, 256> decode_{};       // Gd x scale per code; 0 for a zero or invalid scale
};

// The block rows [sr_begin, sr_end) of q; x, reference and dequantized hold q's rows from row sr_begin *
// block_rows on. Groups of block rows are counted from sr_begin, so a range sums as the tensor of its rows
// alone would.
void accumulate_rows(const QuantizedTensor& q, std::size_t sr_begin, std::size_t sr_end, std::span<const float> x,
                     std::span<const double> reference, std::span<const float> dequantized, TensorStats& out) {
  std::array<float, 256> scale_values{};
  for (std::uint32_t c = 0; c < 256; ++c) scale_values[c] = decode_to_float(q.scale, c);
  const std::size_t br = static_cast<std::size_t>(q.block_rows), bc = static_cast<std::size_t>(q.block_cols);
  const std::size_t cols = q.cols, rows = std::min(q.rows, sr_end * br) - sr_begin * br;
  const std::size_t scale_rows = sr_end - sr_begin;
  const bool have_reference = !reference.empty();
  const ScaleChoiceModel model(q);
  // Fixed groups of block rows, merged in order: the sums do not depend on the number of threads.
  const std::size_t group = std::max<std::size_t>(1, (std::size_t{1} << 16) / std::max<std::size_t>(cols * br, 1));
  const std::size_t groups = (scale_rows + group - 1) / group;
  std::vector<TensorStats> partial(groups);
#pragma omp parallel for schedule(dynamic, 1) if (groups > 1 && rows * cols >= kParallelThreshold)
  for (std::size_t gi = 0; gi < groups; ++gi) {
    TensorStats& local = partial[gi];
    ScaleChoiceModel::Scratch scratch;
    for (std::size_t sr = gi * group; sr < std::min(scale_rows, gi * group + group); ++sr) {
      const std::size_t r0 = sr * br, r1 = std::min(rows, r0 + br);
      for (std::size_t sc = 0; sc < q.scale_cols; ++sc) {
        const std::size_t c0 = sc * bc, c1 = std::min(cols, c0 + bc), n = c1 - c0;
        // First pass over the block's floats: amax (NaN-ignoring), all zero, all finite (x and x-hat).
        float block_amax = 0.0f;
        bool finite = true, all_zero = true;
        for (std::size_t r = r0; r < r1; ++r) {
          const float* xr = x.data() + r * cols + c0;
          const float* yr = dequantized.data() + r * cols + c0;
          float m = 0.0f;
          bool f = true, z = true;
#pragma omp simd reduction(max : m) reduction(&& : f, z)
          for (std::size_t c = 0; c < n; ++c) {
            const float a = std::fabs(xr[c]);
            m = a > m ? a : m;
            f = f && (a <= std::numeric_limits<float>::max()) && (std::fabs(yr[c]) <= std::numeric_limits<float>::max());
            z = z && (xr[c] == 0.0f);
          }
          block_amax = m > block_amax ? m : block_amax;
          finite = finite && f;
          all_zero = all_zero && z;
        }
        ErrorAccumulator block;
        bool nonfinite_input = false;
        if (finite) {
          for (std::size_t r = r0; r < r1; ++r) {
            const std::size_t base = r * cols + c0;
            if (have_reference) {
              add_finite_segment(reference.data() + base, dequantized.data() + base, n, block);
            } else {
              add_finite_segment(x.data() + base, dequantized.data() + base, n, block);
            }
          }
        } else {
          for (std::size_t r = r0; r < r1; ++r) {
            const std::size_t base = r * cols;
            for (std::size_t c = c0; c < c1; ++c) {
              nonfinite_input |= !std::isfinite(x[base + c]);
              block.add(have_reference ? reference[base + c] : static_cast<double>(x[base + c]),
                        dequantized[base + c]);
            }
          }
        }
        const std::uint8_t code = q.scales[(sr_begin + sr) * q.scale_cols + sc];
        if (finite && !all_zero) {
          AmaxBinSums& bin = local.amax_bins.at(block_amax);
          bin.add(block);
          if (model.applies()) {
            const auto terms = have_reference ? model.add(reference.data(), cols, r0, r1, c0, c1, code, scratch, local.blocks)
                                              : model.add(x.data(), cols, r0, r1, c0, c1, code, scratch, local.blocks);
            bin.add_model(terms.chosen, terms.best);
          }
        }
        local.blocks.add_block(block_amax, code, scale_values[code], block.sum_sq_err, block.sum_sq_ref, all_zero,
                               nonfinite_input, block.underflow == block.nonzero);
        local.error.merge(block);
      }
    }
  }
  TensorStats total;
  for (const TensorStats& p : partial) total.merge(p);
  out.merge(total);
}

}  // namespace

void accumulate(const QuantizedTensor& q, std::span<const float> x, std::span<const double> reference,
                std::span<const float> dequantized, TensorStats& out) {
  TensorStats total;
  accumulate_rows(q, 0, q.scale_rows, x, reference, dequantized, total);
  total.counts = q.counts;
  out.merge(total);
}

std::size_t chunk_rows(std::size_t cols, std::size_t multiple) {
  const std::size_t target = (std::size_t{1} << 16) / std::max<std::size_t>(cols, 1);
  return std::max(multiple, target / multiple * multiple);
}

TensorStats tensor_stats(const QuantizedTensor& q, std::span<const float> x, std::span<const double> reference,
                         std::span<const float> dequantized, std::size_t multiple) {
  const std::size_t br = static_cast<std::size_t>(q.block_rows);
  const std::size_t chunk_scale_rows = std::max<std::size_t>(1, chunk_rows(q.cols, multiple) / br);
  TensorStats out;
  for (std::size_t sr = 0; sr < q.scale_rows; sr += chunk_scale_rows) {
    const std::size_t end = std::min(q.scale_rows, sr + chunk_scale_rows);
    const std::size_t first = sr * br * q.cols, n = (std::min(q.rows, end * br) - sr * br) * q.cols;
    TensorStats chunk;
    accumulate_rows(q, sr, end, x.subspan(first, n), reference.empty() ? reference : reference.subspan(first, n),
                    dequantized.subspan(first, n), chunk);
    out.merge(chunk);
  }
  out.counts = q.counts;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Headroom (Proposition 1)

void accumulate_headroom(std::span<const float> x, std::size_t rows, std::size_t cols, int block_rows, int block_cols,
                         float held_amax, float target, float element_max, std::span<HeadroomCounts> out) {
  const GlobalScale g = global_scale(held_amax, target, element_max);
  const float multiplier = fp32::mul_rn(g.encode, fp32::div_rn(1.0f, element_max));
  // Per format: U, and the largest ideal scale that RNE sends to 0. With subnormals that is half the
  // smallest subnormal (a tie at exactly half goes to the even code, 0); without, the encoder decides.
  std::vector<float> maxima, zero_below;
  std::vector<Float32Encoder> encoders;
  for (const HeadroomCounts& h : out) {
    maxima.push_back(decode_to_float(h.scale, h.scale.max_finite_code()));
    zero_below.push_back(h.scale.has_subnormals() ? fp32::mul_rn(decode_to_float(h.scale, 1), 0.5f) : -1.0f);
    encoders.emplace_back(h.scale, EncodeOptions{Rounding::rne, true});
  }
  const std::size_t br = static_cast<std::size_t>(block_rows), bc = static_cast<std::size_t>(block_cols);
  const std::size_t scale_rows = (rows + br - 1) / br, scale_cols = (cols + bc - 1) / bc;
  const std::size_t nf = out.size();
  std::vector<std::uint64_t> sat(nf, 0), sat_rounding(nf, 0), under(nf, 0);
  std::uint64_t blocks = 0;
  for (std::size_t sr = 0; sr < scale_rows; ++sr) {
    for (std::size_t sc = 0; sc < scale_cols; ++sc) {
      float amax = 0.0f;
      const std::size_t c0 = sc * bc, n = std::min(cols, c0 + bc) - c0;
      for (std::size_t r = sr * br; r < std::min(rows, sr * br + br); ++r) {
        const float* xr = x.data() + r * cols + c0;
        float m = 0.0f;
#pragma omp simd reduction(max : m)
        for (std::size_t c = 0; c < n; ++c) {
          const float a = std::fabs(xr[c]);
          m = a > m ? a : m;
        }
        amax = m > amax ? m : amax;
      }
      ++blocks;
      const float ideal = fp32::min(fp32::mul_rn(amax, multiplier), std::numeric_limits<float>::max());
      for (std::size_t f = 0; f < nf; ++f) {
        sat[f] += ideal > maxima[f];
        sat_rounding[f] += saturated_by_rounding(ideal, maxima[f]);
        if (ideal > 0.0f) {
          if (zero_below[f] >= 0.0f) {
            under[f] += ideal <= zero_below[f];
          } else {
            under[f] += decode_to_float(out[f].scale, encoders[f](std::bit_cast<std::uint32_t>(ideal))) == 0.0f;
          }
        }
      }
    }
  }
  for (std::size_t f = 0; f < nf; ++f) {
    out[f].blocks += blocks;
    out[f].saturated += sat[f];
    out[f].saturated_rounding += sat_rounding[f];
    out[f].underflow += under[f];
  }
}

// ---------------------------------------------------------------------------------------------
// JsonWriter

void JsonWriter::separator() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) os_ << ',';
    first_.back() = false;
    if (pretty_) os_ << '\n' << std::string(2 * first_.size(), ' ');
  }
}

JsonWriter& JsonWriter::begin_object() {
  separator();
  os_ << '{';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  const bool empty = first_.back();
  first_.pop_back();
  if (pretty_ && !empty) os_ << '\n' << std::string(2 * first_.size(), ' ');
  os_ << '}';
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  separator();
  os_ << '[';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  const bool empty = first_.back();
  first_.pop_back();
  if (pretty_ && !empty) os_ << '\n' << std::string(2 * first_.size(), ' ');
  os_ << ']';
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view k) {
  separator();
  os_ << json::string(k) << (pretty_ ? ": " : ":");
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  separator();
  if (std::isfinite(v)) {
    os_ << json::number(v);
  } else {
    os_ << "null";
  }
  return *this;
}
// Integers through to_chars, as json::number writes doubles: a stream's operator<< formats through its
// locale's num_put facet (digit grouping under a user's global locale), and in the Python module on the
// H200 image (g++ 13, Python 3.12) the first such insertion crashed inside libstdc++'s facet code.
namespace {
template <class Integer>
void write_integer(std::ostream& os, Integer v) {
  char text[24];
  const auto end = std::to_chars(text, text + sizeof text, v).ptr;
  os.write(text, end - text);
}
}  // namespace

JsonWriter& JsonWriter::value(std::int64_t v) {
  separator();
  write_integer(os_, v);
  return *this;
}
JsonWriter& JsonWriter::value(std::uint64_t v) {
  separator();
  write_integer(os_, v);
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  separator();
  os_ << (v ? "true" : "false");
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view v) {
  separator();
  os_ << json::string(v);
  return *this;
}
JsonWriter& JsonWriter::null() {
  separator();
  os_ << "null";
  return *this;
}
JsonWriter& JsonWriter::field(std::string_view k, const Figure& f) {
  key(k);
  if (f.value) return value(*f.value);
  null();
  key(std::string(k) + "_note");
  return value(f.note.empty() ? std::string_view("not a finite number") : std::string_view(f.note));
}
JsonWriter& JsonWriter::number_field(std::string_view k, double v) { return field(k, Figure::of(v)); }

// ---------------------------------------------------------------------------------------------
// The per-tensor figures

namespace {

template <std::size_t N>
void write_sparse_histogram(JsonWriter& j, std::string_view key, const std::array<std::uint64_t, N>& bins,
                            int first) {
  j.key(key).begin_object();
  for (std::size_t i = 0; i < N; ++i) {
    if (bins[i]) j.field(std::to_string(first + static_cast<int>(i)), bins[i]);
  }
  j.end_object();
}

}  // namespace

void write_figures(JsonWriter& j, const TensorStats& s, float amax) {
  const ErrorAccumulator& er = s.error;
  const BlockAccumulator& b = s.blocks;
  const QuantizeCounts& c = s.counts;
  j.field("elements", er.elements).field("nonzero", er.nonzero);
  j.field("mse", er.mse()).field("rel_mse", er.rel_mse()).field("sqnr_db", er.sqnr_db());
  j.number_field("max_abs_err", er.max_abs_err);
  j.field("underflow_fraction", er.underflow_fraction()).field("underflow", er.underflow);
  j.field("saturated_fraction", s.saturated_fraction()).field("saturated", c.saturated);
  j.field("blocks", b.blocks).field("zero_blocks", b.zero_blocks);
  j.field("scale_saturated", c.scale_saturated).field("scale_saturated_rounding", c.scale_saturated_rounding);
  j.field("scale_underflow", c.scale_underflow).field("scale_repaired", c.scale_repaired);
  j.field("nan", er.nan).field("inf", er.inf).field("nonfinite_outputs", er.nonfinite_out);
  j.number_field("amax", amax);
  if (er.nonzero) {
    j.number_field("amin_nonzero", er.amin_nonzero);
  } else {
    j.field("amin_nonzero", Figure::none("no nonzero finite inputs"));
  }
  j.field("dynamic_range_log2", er.dynamic_range_log2());
  j.field("bias", er.bias()).field("shrinkage", er.shrinkage());
  j.field("dead_zone_energy_fraction", er.dead_zone_energy_fraction());
  j.field("grid_noise", s.grid_noise()).field("scale_choice_loss", s.scale_choice_loss());
  j.field("rescalable_blocks", b.rescalable_blocks);
  write_amax_deciles(j, s);
}

void write_block_figures(JsonWriter& j, const BlockAccumulator& b) {
  j.field("nonfinite_blocks", b.nonfinite_blocks).field("exact_blocks", b.exact_blocks);
  j.field("flushed_blocks", b.flushed_blocks);
  if (b.block_amax_max > 0) {
    j.number_field("block_amax_min_nonzero", b.block_amax_min_nonzero);
    j.number_field("block_amax_max", b.block_amax_max);
  } else {
    j.field("block_amax_min_nonzero", Figure::none("no nonzero finite blocks"));
    j.field("block_amax_max", Figure::none("no nonzero finite blocks"));
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
  write_sparse_histogram(j, "block_amax_log2_hist", b.amax_log2, BlockAccumulator::kAmaxLog2Min);
  write_sparse_histogram(j, "block_sqnr_db_hist", b.sqnr_db, BlockAccumulator::kSqnrMinDb);
}

}  // namespace fp4sim::stats
