// Ranks without MPI: this process alone (src/cli/ranks.hpp).
#include "ranks.hpp"

namespace fp4sim::cli {

Ranks& Ranks::world() {
  static Ranks ranks;
  return ranks;
}

Ranks::Ranks() = default;
Ranks::~Ranks() = default;

std::pair<std::int64_t, int> Ranks::lowest(std::int64_t position) { return {position, 0}; }

std::string Ranks::broadcast(std::string text, int) { return text; }

std::vector<std::string> Ranks::gather(std::string bytes) { return {std::move(bytes)}; }

}  // namespace fp4sim::cli
