// The decomposition per block-amax decile (fp4sim/stats/amax_deciles.hpp): bins, deciles and their figures.
#include "fp4sim/stats/amax_deciles.hpp"

#include <bit>

#include "fp4sim/stats/stats.hpp"

namespace fp4sim::stats {

void AmaxBinSums::add(const ErrorAccumulator& block) {
  ++blocks;
  elements += block.elements;
  nonzero += block.nonzero;
  underflow += block.underflow;
  sum_err += block.sum_err;
  sum_sq_err += block.sum_sq_err;
  sum_sq_ref += block.sum_sq_ref;
  sum_prod += block.sum_prod;
  sum_sq_dead += block.sum_sq_dead;
}

void AmaxBinSums::add_model(double chosen, double best) {
  ++modelled;
  rescalable += best < chosen;
  chosen_sq_err += chosen;
  best_sq_err += best;
}

void AmaxBinSums::merge(const AmaxBinSums& o) {
  blocks += o.blocks;
  elements += o.elements;
  nonzero += o.nonzero;
  underflow += o.underflow;
  modelled += o.modelled;
  rescalable += o.rescalable;
  sum_err += o.sum_err;
  sum_sq_err += o.sum_sq_err;
  sum_sq_ref += o.sum_sq_ref;
  sum_prod += o.sum_prod;
  sum_sq_dead += o.sum_sq_dead;
  chosen_sq_err += o.chosen_sq_err;
  best_sq_err += o.best_sq_err;
}

std::uint32_t AmaxBins::bin_of(float block_amax) { return std::bit_cast<std::uint32_t>(block_amax) >> kShift; }

void AmaxBins::merge(const AmaxBins& o) {
  for (const auto& [bin, sums] : o.bins) bins[bin].merge(sums);
}

std::array<AmaxBins::Decile, 10> AmaxBins::deciles() const {
  std::uint64_t n = 0;
  for (const auto& [bin, sums] : bins) n += sums.blocks;
  std::array<Decile, 10> out;
  std::uint64_t below = 0;
  for (const auto& [bin, sums] : bins) {
    // The decile of the bin's median block: floor(10 (below + blocks / 2) / n), in integers.
    const std::uint64_t d = std::min<std::uint64_t>(9, (20 * below + 10 * sums.blocks) / (2 * n));
    Decile& decile = out[d];
    const float from = std::bit_cast<float>(bin << kShift), to = std::bit_cast<float>((bin + 1) << kShift);
    if (decile.sums.blocks == 0) decile.amax_from = from;
    decile.amax_to = to;
    decile.sums.merge(sums);
    below += sums.blocks;
  }
  return out;
}

namespace {

Figure ratio(double num, double den, const char* empty) {
  return den == 0.0 ? Figure::none(empty) : Figure::of(num / den);
}

}  // namespace

void write_amax_deciles(JsonWriter& j, const TensorStats& s) {
  const auto deciles = s.amax_bins.deciles();
  double energy = 0.0;
  for (const auto& d : deciles) energy += d.sums.sum_sq_ref;
  const BlockAccumulator& blocks = s.blocks;
  const bool modelled = blocks.modelled_blocks == blocks.blocks - blocks.zero_blocks - blocks.nonfinite_blocks;
  j.key("amax_deciles").begin_array();
  for (std::size_t i = 0; i < deciles.size(); ++i) {
    const AmaxBinSums& b = deciles[i].sums;
    const char* empty = b.blocks == 0 ? "empty decile (its bins fell to a neighbour)" : "all-zero decile (sum x^2 = 0)";
    j.begin_object();
    j.field("decile", static_cast<int>(i)).field("blocks", b.blocks);
    if (b.blocks) {
      j.number_field("block_amax_from", deciles[i].amax_from).number_field("block_amax_to", deciles[i].amax_to);
    } else {
      j.field("block_amax_from", Figure::none(empty)).field("block_amax_to", Figure::none(empty));
    }
    j.field("energy_fraction", ratio(b.sum_sq_ref, energy, "no nonzero finite block"));
    j.field("rel_mse", ratio(b.sum_sq_err, b.sum_sq_ref, empty));
    j.field("bias", ratio(b.sum_err, static_cast<double>(b.elements), empty));
    j.field("shrinkage", b.sum_sq_ref == 0.0 ? Figure::none(empty) : Figure::of(b.sum_prod / b.sum_sq_ref - 1.0));
    j.field("underflow_fraction", ratio(static_cast<double>(b.underflow), static_cast<double>(b.nonzero), empty));
    j.field("dead_zone_energy_fraction", ratio(b.sum_sq_dead, b.sum_sq_ref, empty));
    if (!modelled) {  // RHT, a row-scaled amax: the tensor's note
      j.field("grid_noise", s.grid_noise()).field("scale_choice_loss", s.grid_noise());
    } else {
      j.field("grid_noise", ratio(b.best_sq_err, b.sum_sq_ref, empty));
      j.field("scale_choice_loss", ratio(b.chosen_sq_err - b.best_sq_err, b.sum_sq_ref, empty));
    }
    j.field("rescalable_blocks", b.rescalable);
    j.end_object();
  }
  j.end_array();
}

}  // namespace fp4sim::stats
