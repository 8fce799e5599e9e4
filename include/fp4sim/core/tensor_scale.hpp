// Tensor-scale policies across training steps: the UE5M3 paper's periodic sample-and-hold rule
// (paper §5.1, Eqs. 4-5): a_t is refreshed at optimizer steps 1, 1+D, 1+2D, ... (one-based) and held
// in between; current scaling is D = 1.
#pragma once

#include <cstdint>

namespace fp4sim {

// The refresh step whose amax a periodic cache holds at `step` (>= 1). Steps are 64-bit, as a trace's
// @step is: a step past 2^31 must not alias a small one.
constexpr std::int64_t refresh_step_for(std::int64_t step, std::int64_t period) {
  return 1 + ((step - 1) / period) * period;
}
constexpr bool is_refresh_step(std::int64_t step, std::int64_t period) { return (step - 1) % period == 0; }

}  // namespace fp4sim
