// fp4sim._fp4sim.stats: the statistics replay reports for one tensor (fp4sim/stats/stats.hpp), for an
// array and what quantize made of it. Built in every module, with or without HDF5: it reads no trace.
#pragma once

#include <nanobind/nanobind.h>

namespace fp4sim::python {

void register_stats_ops(nanobind::module_& m);

}  // namespace fp4sim::python
