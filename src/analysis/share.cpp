#include "fp4sim/analysis/share.hpp"

#include <numeric>
#include <string>

#include "fp4sim/core/error.hpp"

namespace fp4sim {

std::vector<int> assign_shares(std::span<const std::uint64_t> unit_costs, const Share& share) {
  const int count = share.count;
  if (count < 1 || share.index < 0 || share.index >= count) {
    throw UsageError("share " + std::to_string(share.index) + " of " + std::to_string(count) + " does not exist");
  }
  std::vector<std::size_t> order(unit_costs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return unit_costs[a] > unit_costs[b]; });
  std::vector<std::uint64_t> load(static_cast<std::size_t>(count), 0);
  std::vector<int> owner(unit_costs.size(), 0);
  for (const std::size_t unit : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equals
    owner[unit] = static_cast<int>(least - load.begin());
    *least += unit_costs[unit];
  }
  return owner;
}

}  // namespace fp4sim
