// Which (step, layer) pairs a replay visits (not public): --steps and --layers applied to a trace.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4sim/analysis/replay.hpp"

namespace fp4sim::replay::detail {

// --layers (and a recipe map's patterns): an ECMAScript regular expression searched in each layer
// name. A trace's names are data of any length, so the match must not recurse once per character (std::regex's default depth-first
// executor overflows the stack on a 60,000-character name): libstdc++'s breadth-first executor
// (__polynomial) keeps one set of states per character, and the search is one anchored match of
// "anything, the pattern, anything", one pass over the name instead of a pass from every position.
// That executor has no back-references; a pattern using them is refused.
class LayerFilter {
 public:
  // `key` names the argument in the error of an invalid pattern.
  explicit LayerFilter(const std::string& pattern, std::string_view key = "{layers}");
  bool matches(const std::string& name) const { return std::regex_match(name, anywhere_); }

 private:
  std::regex anywhere_;
};

// The selected steps (ascending) and the (step, layer) pairs of the run, steps ascending, layers in
// trace order; a usage error where --steps names no captured step or --layers matches no layer.
struct Selection {
  std::vector<const trace::StepInfo*> steps;
  std::vector<std::pair<const trace::StepInfo*, const trace::LayerInfo*>> work;
};
Selection select(const trace::TraceInfo& info, const Options& o, const std::optional<LayerFilter>& layer_filter);

}  // namespace fp4sim::replay::detail
