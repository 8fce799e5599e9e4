// A 2-D transpose copy in device memory (fp4sim.torch's wgrad and dgrad operands): 64 x 64 tiles through
// shared memory, so that both the reads and the writes of a warp are contiguous. torch's copy of a transposed
// view indexes every element on its own and moves a BF16 tensor at a fraction of the bandwidth.
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4sim/emu/device.hpp"

namespace fp4sim::gpu {
namespace {

constexpr int kTile = 64, kRowsPerPass = 8;

template <class T>
__global__ void __launch_bounds__(32 * kRowsPerPass) transpose_kernel(const T* __restrict__ in, T* __restrict__ out,
                                                                      std::uint64_t rows, std::uint64_t cols) {
  __shared__ T tile[kTile][kTile + 1];  // the extra column spreads a tile column over the banks
  const std::uint64_t c0 = static_cast<std::uint64_t>(blockIdx.x) * kTile;
  const std::uint64_t r0 = static_cast<std::uint64_t>(blockIdx.y) * kTile;
#pragma unroll
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
#pragma unroll
    for (int j = threadIdx.x; j < kTile; j += 32) {
      if (r0 + i < rows && c0 + j < cols) tile[i][j] = in[(r0 + i) * cols + c0 + j];
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = threadIdx.y; i < kTile; i += kRowsPerPass) {
#pragma unroll
    for (int j = threadIdx.x; j < kTile; j += 32) {
      if (c0 + i < cols && r0 + j < rows) out[(c0 + i) * rows + r0 + j] = tile[j][i];
    }
  }
}

}  // namespace

Status launch_transpose(const void* d_in, void* d_out, std::size_t rows, std::size_t cols, int element_bytes,
                        void* stream) {
  if (rows == 0 || cols == 0) return Status::success;
  const std::uint64_t tiles_c = (cols + kTile - 1) / kTile, tiles_r = (rows + kTile - 1) / kTile;
  if (tiles_c > 0x7FFFFFFFu || tiles_r > 65535u) return Status::invalid_argument;
  const dim3 grid(static_cast<unsigned>(tiles_c), static_cast<unsigned>(tiles_r)), block(32, kRowsPerPass);
  auto s = static_cast<cudaStream_t>(stream);
  if (element_bytes == 2) {
    transpose_kernel<<<grid, block, 0, s>>>(static_cast<const std::uint16_t*>(d_in), static_cast<std::uint16_t*>(d_out),
                                            rows, cols);
  } else if (element_bytes == 4) {
    transpose_kernel<<<grid, block, 0, s>>>(static_cast<const std::uint32_t*>(d_in), static_cast<std::uint32_t*>(d_out),
                                            rows, cols);
  } else {
    return Status::invalid_argument;
  }
  return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error;
}

}  // namespace fp4sim::gpu
