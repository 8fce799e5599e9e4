// Tensor-scale policies across training steps: the UE5M3 paper's periodic sample-and-hold rule
// (paper §5.1, Eqs. 4-5): a_t is refreshed at optimizer steps 1, 1+D, 1+2D, ... (one-based) and held
// in between; current scaling is D = 1.
#pragma once

namespace fp4sim {

// The refresh step whose amax a periodic cache holds at `step` (>= 1).
constexpr int refresh_step_for(int step, int period) { return 1 + ((step - 1) / period) * period; }
constexpr bool is_refresh_step(int step, int period) { return (step - 1) % period == 0; }

}  // namespace fp4sim
