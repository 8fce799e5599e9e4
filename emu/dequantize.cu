// Dequantization on the GPU (launch_dequantize, fp4sim/emu/device.hpp; fp4sim::gpu::dequantize): each element
// decoded in the tensor's dequantize order, with the tensor's Gd and amax or, row-scaled, its row's.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/emu/device_buffer.hpp"
#include "fp4sim/emu/gpu.hpp"
#include "kernels.hpp"
#include "quantize_common.cuh"

namespace fp4sim::gpu {
namespace {

struct DequantArgs {
  PackedOperand in;
  float* out;
  std::int32_t order;  // 0 portable, 1 kernel, 2 te_kernel, 3 single-level q*s
  float gd, amax, te_factor;
  const float* device_scalars;  // non-null: gd and amax are read from here (DeviceScalar order)
  const float* row_amax;        // non-null (AmaxScope::row): row r's amax and its Gd (global_scalars) instead
  float six_target;             // RN(6 * T)
};

__device__ __forceinline__ float dequant_one(const DequantArgs& a, float gd, float amax, std::uint32_t code,
                                             std::uint32_t scode) {
  const float e = a.in.element[code];
  const float s = a.in.scale[scode];
  switch (a.order) {
    case 0: return __fmul_rn(e, __fmul_rn(s, gd));
    case 1: return __fmul_rn(__fmul_rn(e, s), gd);
    case 2: return __fmul_rn(e, __fmul_rn(__fmul_rn(s, amax), a.te_factor));
    default: return __fmul_rn(e, s);
  }
}

// One thread per 8 elements (one 32-bit code word) when cols % 8 == 0; per element otherwise.
__global__ void dequantize_kernel(DequantArgs a, std::uint64_t units) {
  const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= units) return;
  const PackedOperand& q = a.in;
  float gd = a.device_scalars ? a.device_scalars[kDecode] : a.gd;
  float amax = a.device_scalars ? a.device_scalars[kTensorAmax] : a.amax;
  auto use_row = [&](std::uint64_t r) {
    if (a.row_amax == nullptr) return;
    amax = a.row_amax[r];
    gd = global_scalars(amax, a.six_target).decode;
  };
  if (q.cols % 8 == 0) {
    const std::uint64_t per_row = q.cols / 8;
    const std::uint64_t r = t / per_row, c0 = (t % per_row) * 8;
    use_row(r);
    const std::uint32_t word = *reinterpret_cast<const std::uint32_t*>(q.codes + r * q.code_cols + c0 / 2);
    const std::uint8_t* srow = q.scales + (r / q.block_rows) * q.scale_cols;
    float o[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = dequant_one(a, gd, amax, (word >> (4 * j)) & 0xFu, srow[(c0 + j) / q.block_cols]);
    float4* dst = reinterpret_cast<float4*>(a.out + r * q.cols + c0);
    __stcs(dst, make_float4(o[0], o[1], o[2], o[3]));
    __stcs(dst + 1, make_float4(o[4], o[5], o[6], o[7]));
  } else {
    const std::uint64_t r = t / q.cols, c = t % q.cols;
    use_row(r);
    const std::uint8_t byte = q.codes[r * q.code_cols + c / 2];
    const std::uint32_t code = (c & 1) ? byte >> 4 : byte & 0xFu;
    a.out[t] = dequant_one(a, gd, amax, code, q.scales[(r / q.block_rows) * q.scale_cols + c / q.block_cols]);
  }
}

}  // namespace

Status launch_dequantize(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales,
                         float* d_out, void* stream, const float* d_row_amax) {
  return launch_dequantize(q, d_codes, d_scales, nullptr, d_out, stream, d_row_amax);
}

Status launch_dequantize(const QuantizedTensor& q, const std::uint8_t* d_codes, const std::uint8_t* d_scales,
                         const float* d_scalars, float* d_out, void* stream, const float* d_row_amax) {
  if (q.element != formats::e2m1) return Status::unsupported_format;
  if (q.row_amax.empty() != (d_row_amax == nullptr)) return Status::invalid_argument;
  DequantArgs a{};
  a.device_scalars = d_scalars;
  a.row_amax = d_row_amax;
  a.six_target = six_times(q.target);
  a.in = packed_operand(q, d_codes, d_scales);
  a.out = d_out;
  a.gd = q.global_decode_scale;
  a.amax = q.tensor_amax;
  {
    volatile float ft = 6.0f * q.target;
    a.te_factor = 1.0f / ft;
  }
  if (q.scale.specials == Specials::pow2_nan) {
    a.order = 3;
  } else {
    switch (q.dequantize_order) {
      case DequantizeOrder::portable: a.order = 0; break;
      case DequantizeOrder::kernel: a.order = 1; break;
      case DequantizeOrder::te_kernel: a.order = q.tensor_scaled ? 2 : 3; break;
    }
  }
  const std::uint64_t units = q.cols % 8 == 0 ? q.rows * (q.cols / 8) : q.rows * q.cols;
  if (units == 0) return Status::success;
  dequantize_kernel<<<static_cast<unsigned>((units + 255) / 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(
      a, units);
  return cudaGetLastError() == cudaSuccess ? Status::success : Status::cuda_error;
}

Status dequantize(const QuantizedTensor& q, std::span<float> out) {
  if (out.size() < q.rows * q.cols) return Status::invalid_argument;
  if (q.element != formats::e2m1) return Status::unsupported_format;
  if (!device_available()) return Status::no_device;
  DeviceBuffer dcodes, dscales, dout, drow;
  if (!upload<std::uint8_t>(dcodes, q.codes) || !upload<std::uint8_t>(dscales, q.scales) ||
      !dout.allocate(q.rows * q.cols * 4) || (!q.row_amax.empty() && !upload<float>(drow, q.row_amax)))
    return cuda_failed();
  if (const Status s = launch_dequantize(q, dcodes.as<std::uint8_t>(), dscales.as<std::uint8_t>(), dout.as<float>(),
                                         nullptr, q.row_amax.empty() ? nullptr : drow.as<float>());
      s != Status::success)
    return s;
  if (cudaMemcpy(out.data(), dout.as<float>(), q.rows * q.cols * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return cuda_failed();
  return Status::success;
}

}  // namespace fp4sim::gpu
