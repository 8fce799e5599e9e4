// The CUDA entry points of fp4sim._fp4sim (built only with FP4SIM_CUDA=ON): launches of the emu/ kernels on
// device memory the caller owns, given as raw pointers (Python ints, e.g. torch's tensor.data_ptr()) with a
// cudaStream_t as an int (torch.cuda.current_stream().cuda_stream). No allocation, no host synchronisation:
// the tensor amax, G, Gd and alpha stay in device memory, so a sequence of these calls can be captured in a
// CUDA graph. Each call names its recipe, operand or GEMM by a plan handle (python/plans.hpp), resolved
// once beforehand: nothing is parsed per launch. No dependency on any framework's headers.
#pragma once

#include <nanobind/nanobind.h>

namespace fp4sim::python {

void register_cuda_ops(nanobind::module_& m);

}  // namespace fp4sim::python
