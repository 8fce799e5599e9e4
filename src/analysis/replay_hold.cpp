#include "replay_hold.hpp"

#include "fp4sim/core/names.hpp"
#include "fp4sim/core/tensor_scale.hpp"

namespace fp4sim::replay {

namespace detail {

namespace {

stats::Figure ratio(float current, float held) {
  if (held == 0.0f) {
    return stats::Figure::none(current == 0.0f ? "all-zero tensor (current and held amax are 0)" : "held amax is 0");
  }
  return stats::Figure::of(static_cast<double>(current) / static_cast<double>(held));
}

}  // namespace

Hold hold_for(TensorScalePolicy policy, int period, HoldRule rule, std::int64_t step, float current,
              const std::set<std::int64_t>& captured, const std::function<bool(std::int64_t)>& has_layer,
              const std::function<float(std::int64_t)>& amax_at) {
  Hold h;
  if (policy == TensorScalePolicy::none) {
    h.rho = stats::Figure::none("recipe has no tensor scale");
    return h;
  }
  if (policy == TensorScalePolicy::current) {
    h.held_amax = current;
    h.held_from_step = step;
    h.held_exact = true;
    h.rho = ratio(current, current);
    return h;
  }
  const std::int64_t refresh = refresh_step_for(step, period);
  std::optional<std::int64_t> from;
  bool exact = false;
  if (rule == HoldRule::window) {
    if (refresh == step) {
      from = step;
      exact = true;
    } else if (captured.count(refresh) && has_layer(refresh)) {
      from = refresh;
      exact = true;
    } else {
      from = step;
      exact = false;
    }
  } else {
    std::optional<std::int64_t> prev;
    for (std::int64_t s : captured) {
      if (s < step && has_layer(s)) prev = s;
    }
    from = prev.value_or(step);
    exact = *from == refresh;
  }
  h.held_amax = *from == step ? current : amax_at(*from);
  h.held_from_step = from;
  h.held_exact = exact;
  h.rho = ratio(current, *h.held_amax);
  return h;
}

std::optional<float> amax_ref(const Recipe& r, const OperandSpec& spec, const Hold& h, float current) {
  if (r.tensor_scale == TensorScalePolicy::none || row_scaled(r, spec)) return std::nullopt;
  if (r.tensor_scale == TensorScalePolicy::current) return current;
  return h.held_amax;
}

}  // namespace detail

}  // namespace fp4sim::replay
