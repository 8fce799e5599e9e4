#include "stats_ops.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstddef>
#include <optional>
#include <span>
#include <sstream>
#include <string>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/stats/stats.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp4sim::python {

namespace {

using FloatIn = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using DoubleIn = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;

// The statistics replay reports for one tensor (stats::write_figures, write_block_figures) as JSON text:
// x the quantizer's float32 input, `reference` the values the error is measured against (default x).
std::string stats_py(const QuantizedTensor& q, const FloatIn& x, const std::optional<DoubleIn>& reference,
                     std::size_t multiple) {
  const std::size_t elements = q.rows * q.cols;
  if (x.size() != elements) {
    throw DataError("{x}: " + std::to_string(x.size()) + " elements, the quantized tensor has " +
                    std::to_string(elements) + " (" + std::to_string(q.rows) + "x" + std::to_string(q.cols) + ")");
  }
  if (reference && reference->size() != elements) {
    throw DataError("{reference}: " + std::to_string(reference->size()) + " elements, x has " +
                    std::to_string(elements));
  }
  if (multiple == 0 || multiple % static_cast<std::size_t>(q.block_rows) != 0) {
    throw UsageError("{chunk_multiple}: " + std::to_string(multiple) + " is not a positive multiple of the " +
                     std::to_string(q.block_rows) + "-row blocks");
  }
  const std::span<const float> xs(x.data(), elements);
  const std::span<const double> ref = reference ? std::span<const double>(reference->data(), elements)
                                                : std::span<const double>();
  std::ostringstream json;
  {
    nb::gil_scoped_release release;
    const stats::TensorStats s = stats::tensor_stats(q, xs, ref, dequantize(q), multiple);
    stats::JsonWriter j(json, false);
    j.begin_object();
    stats::write_figures(j, s, abs_max(xs));
    j.key("block_stats").begin_object();
    stats::write_block_figures(j, s.blocks);
    j.end_object();
    j.end_object();
  }
  return json.str();
}

}  // namespace

void register_stats_ops(nb::module_& m) {
  m.def("stats", &stats_py, "q"_a, "x"_a, "reference"_a.none(), "multiple"_a);
}

}  // namespace fp4sim::python
