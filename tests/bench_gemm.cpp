// GEMM datapath throughput against OpenBLAS SGEMM on the same machine (docs/BENCHMARKS.md).
//
// M = N = K = 2048 by default; operands are N(0,1) tensors quantized under the `ue5m3` recipe (fprop:
// A = x as an activation, B = w as a weight with 16x16 tiles), quantized once outside the timed loop.
// Each case reports MAC/s (M*N*K per iteration); the ratio to BM_Sgemm_OpenBLAS is the figure of
// merit. OpenBLAS 0.3.21 does not recognise every recent Xeon and may fall back to its generic
// "Prescott" kernel: run once as is and once with OPENBLAS_CORETYPE=SkylakeX (its AVX-512 kernel).
// SGEMM runs last, because OpenBLAS's worker threads keep spinning for a while after each call.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <omp.h>
#include <sys/resource.h>

#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/quantize.hpp"

extern "C" {
// OpenBLAS's CBLAS entry point (declared here so the bench needs no BLAS header path).
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
char* openblas_get_corename(void);
int openblas_get_num_threads(void);
}

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

std::size_t dim() {
  if (const char* s = std::getenv("FP4SIM_BENCH_DIM")) return static_cast<std::size_t>(std::atoi(s));
  return 2048;
}

struct Operands {
  std::size_t m, n, k;
  std::vector<float> x, w;
  fp4sim::Recipe recipe;
  fp4sim::QuantizedTensor qa, qb;
};

const Operands& operands() {
  static const Operands ops = [] {
    Operands o;
    o.m = o.n = o.k = dim();
    std::mt19937_64 rng(2048);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    o.x.resize(o.m * o.k);
    o.w.resize(o.n * o.k);
    for (auto& v : o.x) v = normal(rng);
    for (auto& v : o.w) v = normal(rng) * 0.02f;
    o.recipe = *fp4sim::find_recipe("ue5m3");
    const auto ops = fp4sim::operands_for(o.recipe, fp4sim::Gemm::fprop);
    fp4sim::QuantizeRequest ra, rb;
    ra.spec = ops.a;
    rb.spec = ops.b;
    o.qa = fp4sim::quantize(o.recipe, ra, o.x, o.m, o.k);
    o.qb = fp4sim::quantize(o.recipe, rb, o.w, o.n, o.k);
    return o;
  }();
  return ops;
}

// Process CPU seconds (all threads, user + system).
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// MAC/s: wall-clock rate. cpu_MAC/s: MACs per CPU-second of the whole process times the thread count,
// i.e. the rate the run would have on `threads` otherwise idle cores; far less sensitive to other
// jobs sharing the machine (spinning worker threads count as CPU time on both sides).
void set_counters(benchmark::State& state, const Operands& o, double cpu_seconds, int threads) {
  const double macs = static_cast<double>(o.m) * static_cast<double>(o.n) * static_cast<double>(o.k);
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["cpu_MAC/s"] = macs * static_cast<double>(state.iterations()) * threads / cpu_seconds;
  state.counters["threads"] = threads;
  state.counters["dim"] = static_cast<double>(o.m);
}

void BM_Gemm(benchmark::State& state, const char* datapath) {
  const Operands& o = operands();
  fp4sim::GemmRequest request;
  request.datapath = fp4sim::find_datapath(datapath);
  fp4sim::GemmOptions options = fp4sim::resolve_gemm(o.recipe, o.qa, o.qb, request);
  fp4sim::GemmReport report;
  options.report = &report;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    auto c = fp4sim::gemm(o.qa, o.qb, options);
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(state, o, process_cpu_seconds() - cpu0, omp_get_max_threads());
  state.counters["prepare_ms"] = report.prepare_ms;
  state.counters["kernel_ms"] = report.kernel_ms;
  state.counters["epilogue_ms"] = report.epilogue_ms;
  state.counters["golden_steps"] = static_cast<double>(report.golden_steps);
  state.counters["ref_outputs"] = static_cast<double>(report.reference_outputs);
  state.SetLabel(std::string(datapath) + " recipe=ue5m3 isa=" + report.isa);
}

void BM_Sgemm_OpenBLAS(benchmark::State& state) {
  const Operands& o = operands();
  std::vector<float> c(o.m * o.n);
  const int m = static_cast<int>(o.m), n = static_cast<int>(o.n), k = static_cast<int>(o.k);
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    // C = X * W^T, the same shape as the fprop GEMM above.
    cblas_sgemm(kRowMajor, kNoTrans, kTrans, m, n, k, 1.0f, o.x.data(), k, o.w.data(), k, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_counters(state, o, process_cpu_seconds() - cpu0, openblas_get_num_threads());
  state.SetLabel(std::string("OpenBLAS core=") + openblas_get_corename());
}

BENCHMARK_CAPTURE(BM_Gemm, exact, "exact")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemm, sm90_bf16, "sm90-bf16")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemm, fp32_seq, "fp32-seq")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Gemm, probe_matched, "probe-matched")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Sgemm_OpenBLAS)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
