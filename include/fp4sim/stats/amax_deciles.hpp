// The error decomposition per block-amax decile (docs/replay.md "Error decomposition"): the terms of the
// tensor's decomposition over the blocks of one decile of its block amax, to see where in the range the
// error comes from (the dead zone of small blocks, the scale choice of large ones).
//
// Mergeable like the other accumulators, so slabs, threads and ranks combine: the sums are kept per bin of
// 1/8 octave of the block amax (its binary32 bits >> 20: exponent and three leading fraction bits), and a
// decile is a run of whole bins. The bin holding a block of rank i (ascending amax, 0-based) of n nonzero
// finite blocks belongs to decile floor(10 (b + c/2) / n), b the blocks in lower bins and c in its own: the
// decile of its median block. Bins are whole, so a decile holds about a tenth of the blocks, up to one bin,
// and may be empty.
#pragma once

#include <array>
#include <cstdint>
#include <map>

namespace fp4sim::stats {

struct ErrorAccumulator;

// Sums over nonzero blocks whose inputs and outputs are all finite (the blocks of the scale-choice model).
struct AmaxBinSums {
  std::uint64_t blocks = 0, elements = 0, nonzero = 0, underflow = 0;
  std::uint64_t modelled = 0, rescalable = 0;  // the scale-choice model's blocks, and those a neighbour serves better
  double sum_err = 0, sum_sq_err = 0, sum_sq_ref = 0, sum_prod = 0, sum_sq_dead = 0;  // as ErrorAccumulator's
  double chosen_sq_err = 0, best_sq_err = 0;  // as BlockAccumulator's

  void add(const ErrorAccumulator& block);    // one block's error sums
  void add_model(double chosen, double best);  // and its scale-choice model's
  void merge(const AmaxBinSums& o);
};

struct AmaxBins {
  static constexpr int kShift = 20;  // binary32 bits kept: sign (0), exponent, three fraction bits
  std::map<std::uint32_t, AmaxBinSums> bins;

  // The bin of a nonzero finite block amax.
  static std::uint32_t bin_of(float block_amax);
  AmaxBinSums& at(float block_amax) { return bins[bin_of(block_amax)]; }
  void merge(const AmaxBins& o);

  // Decile d (0: smallest amax) with the block-amax range of its bins, [lower edge of the first, upper
  // edge of the last) as binary32 values; an empty decile has blocks 0.
  struct Decile {
    AmaxBinSums sums;
    float amax_from = 0.0f, amax_to = 0.0f;
  };
  std::array<Decile, 10> deciles() const;
};

}  // namespace fp4sim::stats
