// Device memory owned by one object, for the host-memory API of emu/ and the benchmarks (CUDA code only:
// includes cuda_runtime.h).
// One rule for every buffer: zero bytes allocate 16, so a buffer is always a valid, aligned pointer a
// kernel may load a vector from; the destructor frees without checking (a failed free cannot be reported
// usefully from a destructor, and the Status of the call was already decided).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <span>

#include "fp4sim/emu/gpu.hpp"

namespace fp4sim::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  bool allocate(std::size_t bytes) { return cudaMalloc(&ptr_, bytes == 0 ? 16 : bytes) == cudaSuccess; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// A buffer holding a copy of host memory (false on any CUDA error).
template <class T>
bool upload(DeviceBuffer& buffer, std::span<const T> host) {
  return buffer.allocate(host.size_bytes()) &&
         cudaMemcpy(buffer.as<void>(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice) == cudaSuccess;
}

// The Status of a failed CUDA call, with the runtime's sticky error cleared for the next call.
inline Status cuda_failed() {
  cudaGetLastError();
  return Status::cuda_error;
}

}  // namespace fp4sim::gpu
