// The benchmark tool of the emu/ kernels on the H200 (fp4sim_gpu_bench, docs/BENCHMARKS.md): device-to-device
// copy bandwidth, quantize per preset and operand spec at >= 256M elements (held amax: one pass; current amax:
// two passes), and the bf16-tc / probe-matched GEMM kernels against cuBLAS's BF16 GEMM at 8192^3 and at a
// 1B-parameter model's linear shapes in the same run. Built on the device-pointer API (fp4sim/emu/device.hpp);
// the only program that links cuBLAS, for its comparison.
//
// Timing: CUDA events around each call, warm-up first, median of `reps`. Inputs are random (never zeros:
// METHOD.md), drawn on the device.
//
//   fp4sim_gpu_bench [rows [cols [gemm_n]]]     (default 16384 16384 8192)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/device.hpp"
#include "fp4sim/emu/device_buffer.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"
#include "fp4sim/emu/gpu.hpp"

namespace fp4sim::gpu {
namespace {

// What one benchmark measured: the median time of one call, and the work it did.
struct BenchFigures {
  double ms = 0.0;     // median time of one call
  double bytes = 0.0;  // bytes moved per call (read + written), as counted by the caller's model
  double flops = 0.0;  // 2*M*N*K for GEMMs
};

__device__ __forceinline__ std::uint32_t hash32(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<std::uint32_t>(x);
}

// Values spread over several binades with both signs: sign * (1 + u) * 2^(e - 8), e in 0..15.
__global__ void fill_float(float* x, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t h = hash32(i * 0x9E3779B97F4A7C15ull + seed);
    const float u = static_cast<float>(h & 0xFFFFFF) * (1.0f / 16777216.0f);
    const int e = static_cast<int>((h >> 24) & 15) - 8;
    const float v = ldexpf(1.0f + u, e);
    x[i] = (h >> 28) & 1 ? -v : v;
  }
}

// BF16 operands that are E2M1 x UE5M3-like values (exact products), random signs.
__global__ void fill_bf16(std::uint16_t* x, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t h = hash32(i * 0x9E3779B97F4A7C15ull + seed);
    const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float v = e2m1[h & 7] * ldexpf(1.0f + static_cast<float>((h >> 3) & 7) * 0.125f,
                                         static_cast<int>((h >> 6) & 7) - 4);
    x[i] = __bfloat16_as_ushort(__float2bfloat16_rn((h >> 9) & 1 ? -v : v));
  }
}

__global__ void count_diff(const std::uint32_t* a, const std::uint32_t* b, std::uint64_t n, unsigned long long* out) {
  unsigned long long bad = 0;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    bad += a[i] != b[i];
  if (bad) atomicAdd(out, bad);
}

template <class F>
Status time_median(int reps, F&& call, double& ms) {
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) return Status::cuda_error;
  std::vector<float> times;
  Status st = Status::success;
  for (int i = 0; i < 3 && st == Status::success; ++i) st = call();  // warm-up
  for (int i = 0; i < reps && st == Status::success; ++i) {
    cudaEventRecord(start);
    st = call();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t = 0.0f;
    cudaEventElapsedTime(&t, start, stop);
    times.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (st != Status::success) return st;
  if (cudaDeviceSynchronize() != cudaSuccess) return Status::cuda_error;
  std::sort(times.begin(), times.end());
  ms = times.empty() ? 0.0 : times[times.size() / 2];
  return Status::success;
}

// cudaMemcpy device-to-device of `size` bytes (bytes counts read + written = 2 * size).
Status bench_copy(std::size_t size, int reps, BenchFigures& out) {
  if (!device_available()) return Status::no_device;
  DeviceBuffer a, b;
  if (!a.allocate(size) || !b.allocate(size)) return Status::cuda_error;
  fill_float<<<1024, 256>>>(a.as<float>(), size / 4, 1);
  out.bytes = 2.0 * static_cast<double>(size);
  return time_median(
      reps,
      [&] {
        return cudaMemcpyAsync(b.as<void>(), a.as<void>(), size, cudaMemcpyDeviceToDevice) == cudaSuccess ? Status::success
                                                                                        : Status::cuda_error;
      },
      out.ms);
}

// Quantize of a rows x cols tensor of random floats over several binades; held amax (one pass) or current
// (two).
Status bench_quantize(const Recipe& recipe, const OperandSpec& spec, bool held_amax, std::size_t rows,
                      std::size_t cols, int reps, BenchFigures& out) {
  if (!device_available()) return Status::no_device;
  QuantizeRequest request;
  request.spec = spec;
  if (held_amax) request.amax_ref = 100.0f;
  request.random.seed = 7;
  QuantizePlan plan;
  if (const Status s = make_plan(recipe, request, rows, cols, plan); s != Status::success) return s;
  DeviceBuffer x, codes, scales, amax;
  const std::size_t n = rows * cols;
  if (!x.allocate(n * 4) || !codes.allocate(rows * plan.code_cols) || !scales.allocate(plan.scale_rows * plan.scale_cols) ||
      !amax.allocate(4))
    return Status::cuda_error;
  fill_float<<<4096, 256>>>(x.as<float>(), n, 3);
  if (cudaDeviceSynchronize() != cudaSuccess) return Status::cuda_error;
  const bool two_pass = !(plan.tensor_scaled && plan.amax_ref);
  out.bytes = static_cast<double>(n) * 4.0 + static_cast<double>(rows * plan.code_cols) +
              static_cast<double>(plan.scale_rows * plan.scale_cols) + (two_pass ? static_cast<double>(n) * 4.0 : 0.0);
  const TensorScalars fixed = tensor_scalars(plan, 100.0f);
  return time_median(
      reps,
      [&] {
        if (two_pass) {
          // The amax pass stays on the device; the scalars for the timed quantize are the held ones
          // (the host round trip of 4 bytes is not what is being measured).
          if (const Status s = launch_amax(plan, x.as<float>(), amax.as<float>(), nullptr); s != Status::success)
            return s;
        }
        return launch_quantize(plan, fixed, x.as<const float>(), nullptr, codes.as<std::uint8_t>(),
                               scales.as<std::uint8_t>(), nullptr);
      },
      out.ms);
}

// The bf16-tc / probe-matched GEMM kernel on BF16 operands of M x N x K (random data), and cuBLAS's BF16
// GEMM (cublasGemmEx, FP32 compute) on the same operands.
Status bench_gemm(GemmPath path, std::size_t m, std::size_t n, std::size_t k, int reps, BenchFigures& ours,
                  BenchFigures& cublas) {
  if (!device_available()) return Status::no_device;
  DeviceBuffer a, b, c, c2;
  if (!a.allocate(m * k * 2) || !b.allocate(n * k * 2) || !c.allocate(m * n * 4) || !c2.allocate(m * n * 4))
    return Status::cuda_error;
  fill_bf16<<<4096, 256>>>(a.as<std::uint16_t>(), m * k, 11);
  fill_bf16<<<4096, 256>>>(b.as<std::uint16_t>(), n * k, 12);
  if (cudaDeviceSynchronize() != cudaSuccess) return Status::cuda_error;
  ours.flops = cublas.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  Status st = Status::success;
  // cuBLAS BF16 (FP32 compute) on the same operands, timed before and after ours (the card's clocks drift under
  // sustained load): reported, the faster of the two medians.
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return Status::cuda_error;
  struct HandleGuard {
    cublasHandle_t h;
    ~HandleGuard() { cublasDestroy(h); }
  } guard{handle};
  const float one = 1.0f, zero = 0.0f;
  // Row-major C [m,n] = A [m,k] . B [n,k]^T  <=>  column-major C^T [n,m] = B^T(k x n)^T ... : op(B)=T on the
  // column-major view of B (k x n, ld k) and A (k x m, ld k).
  auto time_cublas = [&](double& ms) {
    return time_median(
        reps,
        [&] {
          const cublasStatus_t s = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                                static_cast<int>(k), &one, b.as<void>(), CUDA_R_16BF, static_cast<int>(k), a.as<void>(),
                                                CUDA_R_16BF, static_cast<int>(k), &zero, c2.as<void>(), CUDA_R_32F,
                                                static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          return s == CUBLAS_STATUS_SUCCESS ? Status::success : Status::cuda_error;
        },
        ms);
  };
  double cublas_before = 0.0, cublas_after = 0.0;
  if (const Status s = time_cublas(cublas_before); s != Status::success) return s;
  // Every tile configuration of the path is timed and printed (wgmma kernels first); reported: the best. Each
  // wgmma kernel is also compared bit for bit with the mma.sync kernel of its path on these operands.
  double best = 1e30;
  const bool wgmma = wgmma_available();
  const std::vector<int> variants = path == GemmPath::probe_matched ? (wgmma ? std::vector<int>{5, 6, 7, 8, 3} : std::vector<int>{3})
                                    : wgmma                         ? std::vector<int>{4, 0, 1, 2}
                                                                    : std::vector<int>{0, 1, 2};
  for (int v : variants) {
    double t = 0.0;
    st = time_median(
        reps,
        [&] {
          return launch_gemm_bf16_variant(v, a.as<const std::uint16_t>(), b.as<const std::uint16_t>(), c.as<float>(), m,
                                          n, k, nullptr);
        },
        t);
    if (st != Status::success) return st;
    std::printf("  gemm variant %d (%s): %.3f ms, %.1f TFLOP/s\n", v,
                v == 8 ? "wgmma probe-matched 192x128, 3 consumers, free issue"
                : v == 7 ? "wgmma probe-matched 128x192, 2 consumers, free issue"
                : v == 6 ? "wgmma probe-matched 192x128, 3 consumers, in turn"
                : v == 5 ? "wgmma probe-matched 128x192, 2 consumers, in turn"
                : v == 4 ? "wgmma 128x256x64, TMA 4 stages" : v == 3 ? "mma.sync probe-matched 128x128" : v == 0 ? "mma.sync 128x128" : v == 1 ? "mma.sync 128x256" : "mma.sync 256x128",
                t, ours.flops / t / 1e9);
    best = std::min(best, t);
  }
  // Each wgmma kernel against the mma.sync kernel of the same path (a different instruction, tiling and
  // order of issue computing the same chains), bit for bit on these operands; the outputs are poisoned
  // (all ones, a NaN) first so that an unwritten output counts.
  if (wgmma) {
    const int reference = path == GemmPath::probe_matched ? 3 : 1;
    for (int v : variants) {
      if (v < 4) continue;
      DeviceBuffer flag;
      if (!flag.allocate(sizeof(unsigned long long))) return Status::cuda_error;
      cudaMemset(flag.as<void>(), 0, sizeof(unsigned long long));
      cudaMemset(c.as<void>(), 0xFF, m * n * 4);
      cudaMemset(c2.as<void>(), 0xFF, m * n * 4);
      if (launch_gemm_bf16_variant(reference, a.as<const std::uint16_t>(), b.as<const std::uint16_t>(), c.as<float>(),
                                   m, n, k, nullptr) != Status::success ||
          launch_gemm_bf16_variant(v, a.as<const std::uint16_t>(), b.as<const std::uint16_t>(), c2.as<float>(), m, n,
                                   k, nullptr) != Status::success)
        return Status::cuda_error;
      count_diff<<<4096, 256>>>(c.as<const std::uint32_t>(), c2.as<const std::uint32_t>(), m * n,
                                flag.as<unsigned long long>());
      unsigned long long diff = 0;
      if (cudaMemcpy(&diff, flag.as<void>(), sizeof diff, cudaMemcpyDeviceToHost) != cudaSuccess) return Status::cuda_error;
      std::printf("  wgmma vs mma.sync (variant %d vs %d), %zux%zux%zu: %llu differing output words of %zu\n", v, reference,
                  m, n, k, diff, m * n);
    }
  }
  ours.ms = best;
  st = time_cublas(cublas_after);
  std::printf("  cuBLAS bf16 before / after: %.3f / %.3f ms\n", cublas_before, cublas_after);
  cublas.ms = std::min(cublas_before, cublas_after);
  return st;
}

}  // namespace
}  // namespace fp4sim::gpu

using namespace fp4sim;

int main(int argc, char** argv) {
  const std::size_t rows = argc > 1 ? std::stoull(argv[1]) : 16384, cols = argc > 2 ? std::stoull(argv[2]) : 16384;
  const std::size_t gemm_n = argc > 3 ? std::stoull(argv[3]) : 8192;
  if (!gpu::device_available()) {
    std::fprintf(stderr, "gpu_bench: no GPU\n");
    return 3;
  }
  gpu::BenchFigures copy;
  const std::size_t bytes = rows * cols * 4;
  if (gpu::bench_copy(bytes, 20, copy) != gpu::Status::success) return 3;
  const double copy_gbs = copy.bytes / copy.ms / 1e6;
  std::printf("copy D2D %zu MB: %.3f ms, %.1f GB/s (read+write)\n", bytes >> 20, copy.ms, copy_gbs);
  std::printf("%-12s %-26s %-7s %10s %10s %8s\n", "recipe", "spec", "amax", "ms", "GB/s", "vs copy");
  for (const Recipe& r : recipe_presets()) {
    if (!cpu_only_settings(r).empty()) continue;  // no kernel path
    for (Gemm g : {Gemm::fprop, Gemm::dgrad, Gemm::wgrad}) {
      const GemmOperands ops = operands_for(r, g);
      for (int which = 0; which < 2; ++which) {
        const OperandSpec s = which == 0 ? ops.a : ops.b;
        if (g == Gemm::dgrad && which == 1) continue;  // the weight again
        if (g == Gemm::wgrad && !s.rht && which == 1) continue;
        for (int held = 1; held >= 0; --held) {
          if (held && r.tensor_scale == TensorScalePolicy::none) continue;
          gpu::BenchFigures q;
          const gpu::Status st = gpu::bench_quantize(r, s, held != 0, rows, cols, 10, q);
          const std::string spec = std::string(name_of(g)) + ":" + std::string(name_of(s.role)) +
                                   (s.two_d ? "/2d" : "") + "/" + std::string(name_of(s.rounding)) + (s.rht ? "/rht" : "");
          if (st != gpu::Status::success) {
            std::printf("%-12s %-26s %s\n", r.name.c_str(), spec.c_str(), std::string(gpu::status_name(st)).c_str());
            continue;
          }
          const double gbs = q.bytes / q.ms / 1e6;
          std::printf("%-12s %-26s %-7s %10.3f %10.1f %7.1f%%\n", r.name.c_str(), spec.c_str(), held ? "held" : "current",
                      q.ms, gbs, 100.0 * gbs / copy_gbs);
        }
      }
    }
  }
  // gemm_n^3, then the linears of a 1B-parameter model at 8192 tokens (d 2048, ffn 8192): up (M = tokens,
  // N = 8192, K = 2048) and down (N = 2048, K = 8192).
  struct Shape {
    std::size_t m, n, k;
  };
  const Shape shapes[] = {{gemm_n, gemm_n, gemm_n}, {8192, 8192, 2048}, {8192, 2048, 8192}};
  for (const Shape& sh : shapes) {
    for (gpu::GemmPath path : {gpu::GemmPath::bf16_tc, gpu::GemmPath::probe_matched}) {
      gpu::BenchFigures ours, cublas;
      const gpu::Status st = gpu::bench_gemm(path, sh.m, sh.n, sh.k, 10, ours, cublas);
      if (st != gpu::Status::success) {
        std::printf("gemm %s: %s\n", std::string(gpu::gemm_kernel(path).name).c_str(), std::string(gpu::status_name(st)).c_str());
        continue;
      }
      std::printf("gemm %-14s %zux%zux%zu: %.3f ms %.1f TFLOP/s | cuBLAS bf16 %.3f ms %.1f TFLOP/s | ratio %.1f%%\n",
                  std::string(gpu::gemm_kernel(path).name).c_str(), sh.m, sh.n, sh.k, ours.ms, ours.flops / ours.ms / 1e9,
                  cublas.ms, cublas.flops / cublas.ms / 1e9, 100.0 * cublas.ms / ours.ms);
    }
  }
  return 0;
}
