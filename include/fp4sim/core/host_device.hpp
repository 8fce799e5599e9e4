// FP4SIM_HOST_DEVICE marks the few small pieces (Philox, format constants, packing) that must be
// the same code on the CPU and in CUDA kernels, as CUTLASS_HOST_DEVICE does.
#pragma once

#if defined(__CUDACC__)
#define FP4SIM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FP4SIM_HOST_DEVICE inline
#endif
