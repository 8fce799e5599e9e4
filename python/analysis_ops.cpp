#include "analysis_ops.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <tuple>

#include "fp4sim/analysis/calls.hpp"
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/front/arguments.hpp"
#include "fp4sim/front/analysis_arguments.hpp"
#include "operand.hpp"
#include "fp4sim/analysis/sweep.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/quantize.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp4sim::python {

namespace {

// (the --json text, the summary table) of `fp4sim replay TRACE` with the options of `call`.
std::tuple<std::string, std::string> replay_py(const std::string& trace, const replay::Call& call) {
  const replay::Options options = call.resolve();
  replay::Result result;
  {
    nb::gil_scoped_release release;
    result = replay::run(trace, options);
  }
  std::ostringstream json;
  replay::write_json(result, json);
  return {json.str(), front::render(replay::summary(result), front::Spelling::python)};
}

std::tuple<std::string, std::string> sweep_py(const sweep::Call& call) {
  const sweep::Options options = call.resolve();
  sweep::Result result;
  {
    nb::gil_scoped_release release;
    result = sweep::run(options);
  }
  std::ostringstream json;
  sweep::write_json(result, json);
  return {json.str(), sweep::summary(result)};
}

}  // namespace

namespace {

// The keywords of `args` carried into `call` through the call's rows (a None keeps the default).
template <class Call>
void set_keywords(std::span<const front::Argument<Call>> rows, Call& call, const nb::dict& args, const char* what) {
  for (auto [key, value] : args) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    if (!set_keyword(rows, call, k, value)) throw UsageError(std::string("unknown ") + what + " option '" + k + "'");
  }
}

}  // namespace

void register_analysis_ops(nb::module_& m) {
  m.def(
      "replay",
      [](const std::string& trace, const nb::dict& args) {
        replay::Call call;
        set_keywords(front::replay_arguments(), call, args, "replay");
        return replay_py(trace, call);
      },
      "trace"_a, "args"_a,
      "`fp4sim replay TRACE` with its options as keywords (front::replay_arguments()): (the --json text, the "
      "summary table).");
  m.def(
      "sweep",
      [](const std::string& trace, const nb::dict& args) {
        sweep::Call call;
        call.trace = trace;
        set_keywords(front::sweep_arguments(), call, args, "sweep");
        return sweep_py(call);
      },
      "trace"_a, "args"_a,
      "`fp4sim sweep [TRACE]` (\"\": synthetic) with its options as keywords (front::sweep_arguments()).");
}

}  // namespace fp4sim::python
