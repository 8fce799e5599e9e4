// What periodic tensor scaling holds across a trace's captured steps (replay, sweep): its own header, with
// its names inline, so that the argument tables of the front ends (fp4sim/front/analysis_arguments.hpp)
// list them without the analysis library or HDF5.
#pragma once

#include <cstdint>
#include <span>

#include "fp4sim/core/names.hpp"

namespace fp4sim::replay {

// Which amax a periodic tensor scale holds at a step whose refresh step may not have been captured.
enum class HoldRule : std::uint8_t {
  window,    // the refresh step's amax when captured, else the step's own amax (held_exact: false)
  previous,  // the previous captured step's amax (a stress test of staleness beyond D)
};

inline constexpr NameRow<HoldRule> kHoldRules[] = {
    {"window", HoldRule::window, "the refresh step's amax when captured, else the step's own (held_exact false)"},
    {"previous", HoldRule::previous, "the previous captured step's amax (staleness beyond D)"}};
inline std::span<const NameRow<HoldRule>> names(HoldRule) { return kHoldRules; }

}  // namespace fp4sim::replay
