// Throughput of the fast binary32 -> code path (Float32Encoder::encode_array, uint8 codes) beside the
// machine's own limit, a STREAM-like copy, measured in the same binary and run.
//
//  encode/<format>/<rounding>/threads:<t>   64 Mi elements; items/s = elements/s, bytes/s counts 4 bytes
//                                           read + 1 byte written per element
//  copy/threads:<t>                         memcpy of 256 MiB in t slices; bytes/s counts read + write
//                                           (STREAM's convention), so the two bytes/s compare directly
//  threshold/{serial,parallel}/<n>          encode_array on n elements with one thread, and split over
//                                           all threads: where parallel starts to win is the measured
//                                           OpenMP threshold of src/core/codec.cpp (CPFloat's autotune idea)
//
// Inputs are fixed before timing (TestFloat's timesoftfloat: no RNG in the timed loop): magnitudes
// log-uniform over 2^-12 .. 2^10 (the scaled-tensor range the formats see), random signs for signed
// formats. tools/bench_convert.sh runs this and ml_dtypes on the same machine and prints them together.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/format.hpp"

namespace {

constexpr std::size_t kElements = std::size_t{1} << 26;  // 64 Mi: 256 MiB in, far beyond any cache

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The value is built from bits (exponent -12..10, random mantissa), so generating needs no float math.
std::vector<float> make_inputs(std::size_t n, bool signed_values) {
  std::vector<float> v(n);
  std::uint64_t state = 0x5EEDull;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t r = splitmix64(state);
    const std::uint32_t exponent = 127 - 12 + static_cast<std::uint32_t>((r >> 32) % 23);
    const std::uint32_t sign = signed_values ? static_cast<std::uint32_t>(r >> 63) << 31 : 0u;
    v[i] = std::bit_cast<float>(sign | (exponent << 23) | (static_cast<std::uint32_t>(r) & 0x7FFFFFu));
  }
  return v;
}

const std::vector<float>& inputs(bool signed_values) {
  static const std::vector<float> with_sign = make_inputs(kElements, true);
  static const std::vector<float> without_sign = make_inputs(kElements, false);
  return signed_values ? with_sign : without_sign;
}

// Runs `body` with OpenMP limited to `threads`, then restores the default.
template <class Body>
void with_threads(int threads, Body body) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  body();
  omp_set_num_threads(saved);
}

void encode(benchmark::State& state, fp4sim::Format format, fp4sim::Rounding rounding, int threads) {
  fp4sim::EncodeOptions options;
  options.rounding = rounding;
  options.saturate = fp4sim::default_saturate(format);
  const fp4sim::Float32Encoder encoder(format, options);
  const std::vector<float>& in = inputs(format.is_signed);
  std::vector<std::uint8_t> out(in.size());
  with_threads(threads, [&] {
    for (auto _ : state) {
      encoder.encode_array(in, out);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
  });
  const auto n = static_cast<std::int64_t>(in.size());
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 5);
  state.counters["threads"] = threads;
}

void copy(benchmark::State& state, int threads) {
  const std::size_t bytes = kElements * sizeof(float);
  static std::vector<char> source(bytes, 1);
  static std::vector<char> destination(bytes, 0);
  with_threads(threads, [&] {
    for (auto _ : state) {
#pragma omp parallel
      {
        const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
        const std::size_t count = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t begin = bytes * t / count, end = bytes * (t + 1) / count;
        std::memcpy(destination.data() + begin, source.data() + begin, end - begin);
      }
      benchmark::DoNotOptimize(destination.data());
      benchmark::ClobberMemory();
    }
  });
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(2 * bytes));
  state.counters["threads"] = threads;
}

// The library call on n elements from one thread (n below the library's threshold stays serial inside),
// against the same n split into one contiguous slice per thread: the library's parallel path.
void threshold(benchmark::State& state, bool parallel) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const fp4sim::Float32Encoder encoder(fp4sim::formats::e2m1, fp4sim::EncodeOptions{});
  const std::vector<float> in(inputs(true).begin(), inputs(true).begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<std::uint8_t> out(n);
  for (auto _ : state) {
    if (parallel) {
#pragma omp parallel
      {
        const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
        const std::size_t count = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t begin = n * t / count, end = n * (t + 1) / count;
        encoder.encode_array(std::span(in).subspan(begin, end - begin), std::span(out).subspan(begin, end - begin));
      }
    } else {
      with_threads(1, [&] { encoder.encode_array(in, out); });
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

void register_all() {
  const int all = omp_get_max_threads();
  std::vector<int> thread_counts{1};
  if (all > 1) thread_counts.push_back(all);
  const struct {
    const char* name;
    fp4sim::Format format;
  } formats[] = {{"e2m1", fp4sim::formats::e2m1}, {"e4m3", fp4sim::formats::e4m3}, {"ue5m3", fp4sim::formats::ue5m3}};
  for (const auto& f : formats) {
    for (int t : thread_counts) {
      const std::string name = std::string("encode/") + f.name + "/rne/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), encode, f.format, fp4sim::Rounding::rne, t)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (int t : thread_counts) {
    const std::string name = "copy/threads:" + std::to_string(t);
    benchmark::RegisterBenchmark(name.c_str(), copy, t)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  for (bool parallel : {false, true}) {
    benchmark::RegisterBenchmark(parallel ? "threshold/parallel" : "threshold/serial", threshold, parallel)
        ->RangeMultiplier(2)
        ->Range(1 << 10, 1 << 22)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("elements", std::to_string(kElements));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
