// A read-only HDF5 file driver that checks every global heap collection before HDF5 parses it, so that a
// corrupted trace cannot hang the process (docs/fuzzing.md, issue 26).
#pragma once

#include <hdf5.h>

namespace fp4sim::hdf5 {

// A file access property list for reading a file through the guard (HDF5 1.10, whose collection parser
// loops forever on a free-space object of size 0), or the default one where the guard is not built.
// The caller owns the id (H5Pclose); negative (with HDF5's error stack) if the driver cannot be set.
hid_t guarded_read_access();

}  // namespace fp4sim::hdf5
