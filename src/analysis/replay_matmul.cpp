// The float64 reference product of replay's GEMM entries (replay.hpp matmul_abt): 4x4 register tiles
// dispatched on the CPU they run on.
#include <algorithm>
#include <vector>

#include "fp4sim/analysis/replay.hpp"

namespace fp4sim::replay {

namespace {

// C[i0..i0+4, j0..j0+4] of A·Bᵀ: 16 dot products sharing their loads. Statistics, not bits: the
// float64 sum order is free (omp simd); a float64 dot product of length K is accurate to ~K·2^-53
// relative, far below any FP4 error measured against it. Compiled for AVX-512, AVX2 and baseline
// x86-64, chosen at run time (docs/design.md: fast paths dispatch on the CPU they run on); compiled once
// for the baseline of any other target (aarch64).
#if defined(__x86_64__)
#define FP4SIM_DOT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FP4SIM_DOT_CLONES
#endif
FP4SIM_DOT_CLONES
void dot_4x4(const double* a, const double* b, std::size_t k, double* out) {
  const double *a0 = a, *a1 = a + k, *a2 = a + 2 * k, *a3 = a + 3 * k;
  const double *b0 = b, *b1 = b + k, *b2 = b + 2 * k, *b3 = b + 3 * k;
  double s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
  double s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
#pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)
  for (std::size_t t = 0; t < k; ++t) {
    const double x0 = a0[t], x1 = a1[t], x2 = a2[t], x3 = a3[t];
    const double y0 = b0[t], y1 = b1[t], y2 = b2[t], y3 = b3[t];
    s00 += x0 * y0, s01 += x0 * y1, s02 += x0 * y2, s03 += x0 * y3;
    s10 += x1 * y0, s11 += x1 * y1, s12 += x1 * y2, s13 += x1 * y3;
    s20 += x2 * y0, s21 += x2 * y1, s22 += x2 * y2, s23 += x2 * y3;
    s30 += x3 * y0, s31 += x3 * y1, s32 += x3 * y2, s33 += x3 * y3;
  }
  const double s[16] = {s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33};
  for (int i = 0; i < 16; ++i) out[i] = s[i];
}

FP4SIM_DOT_CLONES
double dot_1(const double* a, const double* b, std::size_t k) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (std::size_t t = 0; t < k; ++t) s += a[t] * b[t];
  return s;
}

}  // namespace

std::vector<double> matmul_abt(std::span<const double> a, std::span<const double> b, std::size_t m, std::size_t n,
                               std::size_t k) {
  std::vector<double> c(m * n, 0.0);
  const std::size_t mb = (m + 3) / 4, nb = (n + 3) / 4;
  const bool parallel = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) > 4e6;
#pragma omp parallel for schedule(dynamic, 4) if (parallel)
  for (std::size_t ib = 0; ib < mb; ++ib) {
    const std::size_t i = ib * 4;
    for (std::size_t jb = 0; jb < nb; ++jb) {
      const std::size_t j = jb * 4;
      if (i + 4 <= m && j + 4 <= n) {
        double out[16];
        dot_4x4(a.data() + i * k, b.data() + j * k, k, out);
        for (int di = 0; di < 4; ++di)
          for (int dj = 0; dj < 4; ++dj) c[(i + di) * n + j + dj] = out[di * 4 + dj];
      } else {
        for (std::size_t ii = i; ii < std::min(m, i + 4); ++ii)
          for (std::size_t jj = j; jj < std::min(n, j + 4); ++jj) c[ii * n + jj] = dot_1(a.data() + ii * k, b.data() + jj * k, k);
      }
    }
  }
  return c;
}

}  // namespace fp4sim::replay
