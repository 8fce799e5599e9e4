// The arguments of `replay`, `sweep` and `vectors` (fp4sim/analysis/calls.hpp), one row each, as arguments.hpp's rows:
// the command line (src/cli/replay.cpp, sweep.cpp) and the Python module (python/analysis_ops.cpp) both
// iterate them. A trace (and each command's outputs) is no row. The rows only carry values (a
// recipe list or spec parsed on the way, recipe_spec.hpp); Call::resolve() checks them, naming keys.
#pragma once

#include <span>

#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/front/arguments.hpp"

namespace fp4sim::front {

std::span<const Argument<replay::Call>> replay_arguments();
std::span<const Argument<sweep::Call>> sweep_arguments();
std::span<const Argument<vectors::Call>> vectors_arguments();  // the CLI's alone (Python has no vectors)

}  // namespace fp4sim::front
