// What the tensor-core probes (mma_probe.cu, corner_probe.cu) share on the CUDA side: the error check that
// ends a probe, device arrays for one launch, and the wgmma shared-memory descriptor.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

// A probe is a one-shot measurement program: any CUDA failure ends it, naming the call's place.
#define CHECK(x)                                                                                      \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);  \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

namespace probes {

// n elements of device memory, freed with the array; from a host vector, a copy of it.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) : n_(n) { CHECK(cudaMalloc(&p_, n * sizeof(T))); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(p_); }

  T* get() const { return p_; }
  void poison() const { CHECK(cudaMemset(p_, 0xAB, n_ * sizeof(T))); }  // a result nobody wrote shows
  std::vector<T> to_host() const {
    std::vector<T> host(n_);
    CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

// wgmma with A and B from shared memory, K-major, no swizzle: core matrices of 8 rows x 16 bytes stored
// contiguously (128 B); along K the next core matrix is `lbo` bytes on, along M/N `sbo` bytes.
__device__ __forceinline__ std::uint64_t smem_desc(const void* p, std::uint32_t lbo, std::uint32_t sbo) {
  const std::uint32_t addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((addr >> 4) & 0x3FFF);
  d |= static_cast<std::uint64_t>((lbo >> 4) & 0x3FFF) << 16;
  d |= static_cast<std::uint64_t>((sbo >> 4) & 0x3FFF) << 32;
  return d;  // base offset 0, swizzle mode 0 (none)
}

}  // namespace probes
