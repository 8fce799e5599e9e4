// The hold rule of replay (not public): which amax a tensor-scale policy holds at a step, shared by the
// tensor and GEMM entries of replay.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>

#include "fp4sim/analysis/replay.hpp"

namespace fp4sim::replay::detail {

// The hold of a tensor-scale policy (period D) at `step` under `rule`: `captured` holds the captured
// steps, has_layer(s) says whether step s holds the layer, amax_at(s) gives the operand amax at a
// captured step s.
Hold hold_for(TensorScalePolicy policy, int period, HoldRule rule, std::int64_t step, float current,
              const std::set<std::int64_t>& captured, const std::function<bool(std::int64_t)>& has_layer,
              const std::function<float(std::int64_t)>& amax_at);

// The amax reference operand `spec` takes: none without a tensor scale or when its rows take their own
// (a row-scaled recipe), the current amax under current scaling, else the held one.
std::optional<float> amax_ref(const Recipe& r, const OperandSpec& spec, const Hold& h, float current);

}  // namespace fp4sim::replay::detail
