#include "replay_select.hpp"

#include <algorithm>

#include "fp4sim/core/error.hpp"

namespace fp4sim::replay::detail {

LayerFilter::LayerFilter(const std::string& pattern, std::string_view key) {
  constexpr auto kFlags = std::regex::ECMAScript | std::regex::nosubs | std::regex_constants::__polynomial;
  try {
    std::regex(pattern, kFlags);  // the pattern on its own is valid: "a)(b" must not pass once wrapped
    anywhere_ = std::regex("[\\s\\S]*(?:" + pattern + ")[\\s\\S]*", kFlags);
  } catch (const std::regex_error& e) {
    throw UsageError(std::string(key) + ": invalid regular expression '" + pattern + "': " + e.what());
  }
}

Selection select(const trace::TraceInfo& info, const Options& o, const std::optional<LayerFilter>& layer_filter) {
  Selection selection;
  std::vector<const trace::StepInfo*>& steps = selection.steps;
  if ((o.steps && !o.steps->empty()) || !o.step_ranges.empty()) {
    std::string known;
    for (const auto& x : info.steps) known += (known.empty() ? "" : ", ") + std::to_string(x.step);
    auto take = [&](const trace::StepInfo* si) {
      if (std::find(steps.begin(), steps.end(), si) == steps.end()) steps.push_back(si);
    };
    for (std::int64_t s : o.steps.value_or(std::vector<std::int64_t>{})) {
      const trace::StepInfo* si = info.find_step(s);
      if (!si) throw UsageError("{steps}: step " + std::to_string(s) + " is not in " + info.path + " (captured: " + known + ")");
      take(si);
    }
    for (const auto& [first, last] : o.step_ranges) {
      bool any = false;
      for (const auto& x : info.steps) {
        if (x.step >= first && x.step <= last) {
          take(&x);
          any = true;
        }
      }
      if (!any) {
        throw UsageError("{steps}: no captured step in " + std::to_string(first) + "-" + std::to_string(last) + " of " +
                         info.path + " (captured: " + known + ")");
      }
    }
    std::sort(steps.begin(), steps.end(), [](auto* a, auto* b) { return a->step < b->step; });
  } else {
    for (const auto& s : info.steps) steps.push_back(&s);
  }
  auto& work = selection.work;
  for (const auto* s : steps) {
    for (const auto& l : s->layers) {
      if (layer_filter && !layer_filter->matches(l.name)) continue;
      work.emplace_back(s, &l);
    }
  }
  if (work.empty()) throw UsageError("{layers} '" + o.layers + "' matches no layer of " + info.path);
  return selection;
}

}  // namespace fp4sim::replay::detail
