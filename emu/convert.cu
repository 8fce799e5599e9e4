// GPU element conversion binary32 -> small-format codes: kernels and the fp4sim::gpu host API.
//
// The per-element arithmetic is fp4sim/emu/element_convert.hpp (independent of the golden encoder); this file
// launches it.
// Each thread converts four consecutive elements: one 16-byte load, one 4-byte store, coalesced across
// the warp, in a grid-stride loop. The rounding mode and the format's shape are template arguments.
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "fp4sim/emu/device_buffer.hpp"
#include "fp4sim/emu/element_convert.hpp"
#include "fp4sim/emu/gpu.hpp"

namespace fp4sim::gpu {

namespace {

enum class Kind : std::uint8_t { e2m1, small, e8m0 };

template <Kind K, emu::Round R>
__device__ __forceinline__ std::uint32_t convert_one(const emu::SmallFormat& f, std::uint32_t bits) {
  if constexpr (K == Kind::e2m1) return emu::f32_to_e2m1<R>(bits);
  if constexpr (K == Kind::e8m0) return emu::f32_to_e8m0<R>(bits);
  if constexpr (K == Kind::small) return emu::f32_to_small<R>(f, bits);
  return 0;
}

// in, out from cudaMalloc (256-byte aligned), so the vector accesses are aligned.
template <Kind K, emu::Round R>
__global__ void convert_kernel(emu::SmallFormat f, const float* __restrict__ in, std::uint8_t* __restrict__ out,
                               std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t quads = n / 4;
  const auto* in4 = reinterpret_cast<const uint4*>(in);
  auto* out4 = reinterpret_cast<std::uint32_t*>(out);
  for (std::size_t q = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < quads; q += stride) {
    const uint4 v = in4[q];
    // Element 4q + j goes to byte j of the little-endian word.
    out4[q] = convert_one<K, R>(f, v.x) | (convert_one<K, R>(f, v.y) << 8) | (convert_one<K, R>(f, v.z) << 16) |
              (convert_one<K, R>(f, v.w) << 24);
  }
  const std::size_t tail = quads * 4 + static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) out[tail] = static_cast<std::uint8_t>(convert_one<K, R>(f, __float_as_uint(in[tail])));
}

std::optional<emu::Round> round_of(Rounding r) {
  switch (r) {
    case Rounding::rne: return emu::Round::rne;
    case Rounding::rna: return emu::Round::rna;
    case Rounding::rtz: return emu::Round::rtz;
    case Rounding::rup: return emu::Round::rup;
    case Rounding::rdown: return emu::Round::rdown;
    default: return std::nullopt;
  }
}

// Which kernel shape serves a format, or nullopt. e2m1 is matched by value (its threshold table is
// written for exactly that format); the bit-pattern path takes any format it can hold.
std::optional<Kind> kind_of(const Format& f) {
  if (f == formats::e2m1) return Kind::e2m1;
  if (f == formats::e8m0) return Kind::e8m0;
  if (f.specials != Specials::pow2_nan && f.bits() <= 8 && f.mantissa_bits >= 1 && f.bias <= 126) {
    return Kind::small;
  }
  return std::nullopt;
}

template <Kind K>
void launch_kind(emu::Round r, const emu::SmallFormat& f, const float* in, std::uint8_t* out, std::size_t n,
                 int blocks, int threads) {
  switch (r) {
    case emu::Round::rne: convert_kernel<K, emu::Round::rne><<<blocks, threads>>>(f, in, out, n); break;
    case emu::Round::rna: convert_kernel<K, emu::Round::rna><<<blocks, threads>>>(f, in, out, n); break;
    case emu::Round::rtz: convert_kernel<K, emu::Round::rtz><<<blocks, threads>>>(f, in, out, n); break;
    case emu::Round::rup: convert_kernel<K, emu::Round::rup><<<blocks, threads>>>(f, in, out, n); break;
    case emu::Round::rdown: convert_kernel<K, emu::Round::rdown><<<blocks, threads>>>(f, in, out, n); break;
  }
}

}  // namespace

std::string_view status_name(Status status) {
  switch (status) {
    case Status::success: return "success";
    case Status::no_device: return "no_device";
    case Status::unsupported_format: return "unsupported_format";
    case Status::unsupported_options: return "unsupported_options";
    case Status::invalid_argument: return "invalid_argument";
    case Status::cuda_error: return "cuda_error";
  }
  return "?";
}

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // reset the runtime's last error so later calls do not report it
    return false;
  }
  // A kernel image for this device exists only on sm_90 (no PTX is embedded): ask for one kernel's
  // attributes, which fails with cudaErrorNoKernelImageForDevice elsewhere.
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, convert_kernel<Kind::e2m1, emu::Round::rne>);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return true;
}

Status supports(const Format& format, const EncodeOptions& options) {
  const std::optional<Kind> kind = kind_of(format);
  if (!kind) return Status::unsupported_format;
  if (!round_of(options.rounding) || options.convention != SpecialConvention::hardware) {
    return Status::unsupported_options;
  }
  // Without saturation, overflow needs an Inf or NaN code to go to (else it is a data error, which a
  // kernel cannot report); the e2m1 and e8m0 kernels saturate only.
  if (!options.saturate && (*kind != Kind::small || !(format.has_inf() || format.has_nan()))) {
    return Status::unsupported_options;
  }
  return Status::success;
}

Status convert(const Format& format, const EncodeOptions& options, std::span<const float> in,
               std::span<std::uint8_t> out) {
  if (const Status s = supports(format, options); s != Status::success) return s;
  if (out.size() < in.size()) return Status::invalid_argument;
  if (!device_available()) return Status::no_device;
  const std::size_t n = in.size();
  if (n == 0) return Status::success;

  DeviceBuffer d_in, d_out;
  if (!upload(d_in, in) || !d_out.allocate(n)) return cuda_failed();
  auto* din = d_in.as<float>();
  auto* dout = d_out.as<std::uint8_t>();

  constexpr int kThreads = 256;
  int device = 0, sms = 1;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::size_t quads = (n + 3) / 4;
  const std::size_t wanted = (quads + kThreads - 1) / kThreads;
  const std::size_t cap = static_cast<std::size_t>(sms) * 8;  // a few resident blocks per SM, grid-stride beyond
  const int blocks = static_cast<int>(wanted < cap ? wanted : cap);

  const emu::Round r = *round_of(options.rounding);
  const emu::SmallFormat f = emu::small_format_of(format, options.saturate);
  switch (*kind_of(format)) {
    case Kind::e2m1: launch_kind<Kind::e2m1>(r, f, din, dout, n, blocks, kThreads); break;
    case Kind::small: launch_kind<Kind::small>(r, f, din, dout, n, blocks, kThreads); break;
    case Kind::e8m0: launch_kind<Kind::e8m0>(r, f, din, dout, n, blocks, kThreads); break;
  }
  if (cudaGetLastError() != cudaSuccess) return Status::cuda_error;
  if (cudaMemcpy(out.data(), dout, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
    cudaGetLastError();
    return Status::cuda_error;
  }
  return Status::success;
}

}  // namespace fp4sim::gpu
