// Benchmarks of the emu/ kernels on the H200 (docs/BENCHMARKS.md): device-to-device copy bandwidth, quantize
// per preset and operand spec at >= 256M elements (held amax: one pass; current amax: two passes), and the
// bf16-tc / probe-matched GEMM kernels against cuBLAS's BF16 GEMM at 8192^3 and at a 1B-parameter model's
// linear shapes in the same run.
#include <cstdio>
#include <string>

#include "fp4sim/emu/gpu.hpp"
#include "fp4sim/core/recipe.hpp"

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
        std::printf("gemm %s: %s\n", std::string(gpu::gemm_path_name(path)).c_str(), std::string(gpu::status_name(st)).c_str());
        continue;
      }
      std::printf("gemm %-14s %zux%zux%zu: %.3f ms %.1f TFLOP/s | cuBLAS bf16 %.3f ms %.1f TFLOP/s | ratio %.1f%%\n",
                  std::string(gpu::gemm_path_name(path)).c_str(), sh.m, sh.n, sh.k, ours.ms, ours.flops / ours.ms / 1e9,
                  cublas.ms, cublas.flops / cublas.ms / 1e9, 100.0 * cublas.ms / ours.ms);
    }
  }
  return 0;
}
