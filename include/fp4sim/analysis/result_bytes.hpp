// Replay and sweep results as bytes and back, so that the shares of a run on many processes can travel to
// the process that writes the outputs (docs/replay.md "Many processes"). cereal's binary archive: for
// processes of one build on machines of one kind (native byte order and struct layout).
#pragma once

#include <string>
#include <string_view>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/analysis/sweep.hpp"

namespace fp4sim {

std::string to_bytes(const replay::Result& result);
std::string to_bytes(const sweep::Result& result);
// The inverse of to_bytes; DataError when the bytes end early.
replay::Result replay_result_from_bytes(std::string_view bytes);
sweep::Result sweep_result_from_bytes(std::string_view bytes);

}  // namespace fp4sim
