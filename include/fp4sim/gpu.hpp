// The host API of the CUDA kernels in emu/ (built when FP4SIM_CUDA is ON; link fp4sim_emu).
//
// Every call returns a Status, as cutlass::Status does: nothing here exits, throws or prints. The
// kernels are independent GPU code (emu/emu.hpp), judged against the golden encoder by
// tests/gpu_convert_test.cpp. This header needs no CUDA headers.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "fp4sim/codec.hpp"
#include "fp4sim/format.hpp"

namespace fp4sim::gpu {

enum class Status : std::uint8_t {
  success,
  no_device,            // no CUDA device, or none that can run this build's sm_90 kernels
  unsupported_format,   // the GPU path has no kernel for this format
  unsupported_options,  // a rounding mode or special-value policy the GPU path does not implement
  invalid_argument,     // e.g. output shorter than input
  cuda_error,           // a CUDA runtime call failed (allocation, copy, launch)
};

std::string_view status_name(Status status);

// True when a CUDA device is present and this build's kernels can be launched on it.
bool device_available();

// Whether `convert` implements (format, options): formats of at most 8 bits with a mantissa and no
// Inf (e2m1, e2m3, e3m2, e4m3, ue4m3, ue5m3, ue5m3fn, and descriptors like them) and e8m0; rounding
// rne, rna, rtz, rup or rdown; saturation on; the hardware convention for -0 and NaN. Needs no device.
Status supports(const Format& format, const EncodeOptions& options);

// out[i] = the code of in[i] (binary32) in `format` under `options`, computed on the GPU; equal to
// encode(format, in[i], options).code. `in` and `out` are host memory; out.size() >= in.size().
Status convert(const Format& format, const EncodeOptions& options, std::span<const float> in,
               std::span<std::uint8_t> out);

}  // namespace fp4sim::gpu
