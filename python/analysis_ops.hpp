// The trace analyses of fp4sim._fp4sim (built only where fp4sim::analysis is, i.e. with HDF5: FP4SIM_IO=ON):
// replay and sweep through the library calls the CLI makes (fp4sim/analysis/calls.hpp), each result handed
// back as the CLI's --json text and its summary table, so that Python reads the same fields by the same
// names. Without them the module simply lacks these entry points (fp4sim/__init__.py says why when called).
#pragma once

#include <nanobind/nanobind.h>

namespace fp4sim::python {

void register_analysis_ops(nanobind::module_& m);

}  // namespace fp4sim::python
