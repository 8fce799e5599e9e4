#include "cuda_ops.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include "fp4sim/core/error.hpp"
#include "fp4sim/emu/device.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"
#include "fp4sim/emu/gpu.hpp"
#include "plans.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp4sim::python {
namespace {

using gpu::Status;

template <class T>
T* ptr(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}
void* stream_of(std::uintptr_t stream) { return reinterpret_cast<void*>(stream); }

// A failed launch as an exception: what the GPU lacks is a usage error, a CUDA failure a RuntimeError.
void check(Status s, const std::string& what) {
  if (s == Status::success) return;
  const std::string text = what + ": " + std::string(gpu::status_name(s));
  if (s == Status::unsupported_format || s == Status::unsupported_options) {
    throw UsageError(text + " (the GPU kernels have no path for this recipe or operand)");
  }
  if (s == Status::invalid_argument) throw DataError(text);
  throw std::runtime_error(text);
}

// codes [rows, ceil(cols/2)] uint8, scales (the block grid) uint8 and scalars float[4] (tensor amax, G, Gd,
// the block multiplier; a row-scaled operand's rows' amaxes follow them: float[4 + rows]) of x [rows, cols],
// float32 or (bf16) bfloat16, 16-byte aligned, as operand `plan` (python/plans.hpp). held: a device float with the held tensor amax, or 0 for the current amax; rbits: one
// uint32 (or int32 >= 0) per element, or 0 for the Philox stream of `seed`.
void quantize(PlanHandle plan, std::uintptr_t x, bool bf16, std::size_t rows, std::size_t cols, std::uint64_t seed,
              std::uintptr_t held, std::uintptr_t rbits, std::uintptr_t codes, std::uintptr_t scales,
              std::uintptr_t scalars, std::uintptr_t stream) {
  const QuantizePlan& p = quantize_plan_of(plan);
  gpu::QuantizePlan launch;
  check(gpu::make_plan(p.recipe, p.request_for(seed, std::nullopt, rbits != 0), rows, cols, launch), "quantize");
  float* s = ptr<float>(scalars);
  float* row_amax = launch.row_scaled ? s + gpu::kDeviceScalars : nullptr;
  const bool held_used = launch.tensor_scaled && held != 0;
  const gpu::QuantizeInput input =
      bf16 ? gpu::QuantizeInput(ptr<const std::uint16_t>(x)) : gpu::QuantizeInput(ptr<const float>(x));
  if (!held_used) check(gpu::launch_amax(launch, input, s, stream_of(stream)), "quantize (amax)");
  if (row_amax) check(gpu::launch_row_amax(launch, input, row_amax, stream_of(stream)), "quantize (row amax)");
  check(gpu::launch_tensor_scalars(launch, s, held_used ? ptr<const float>(held) : nullptr, s, stream_of(stream)),
        "quantize (tensor scalars)");
  check(gpu::launch_quantize(launch, static_cast<const float*>(s), input, ptr<const std::uint32_t>(rbits),
                             ptr<std::uint8_t>(codes), ptr<std::uint8_t>(scales), stream_of(stream), row_amax),
        "quantize");
}

// out [rows, cols] float32: operand `plan`'s reconstruction of (codes, scales, scalars).
void dequantize(PlanHandle plan, std::uintptr_t codes, std::uintptr_t scales, std::uintptr_t scalars, std::size_t rows,
                std::size_t cols, std::uintptr_t out, std::uintptr_t stream) {
  const QuantizedTensor q = quantize_plan_of(plan).described(rows, cols);
  const float* row_amax = q.row_amax.empty() ? nullptr : ptr<const float>(scalars) + gpu::kDeviceScalars;
  check(gpu::launch_dequantize(q, ptr<const std::uint8_t>(codes), ptr<const std::uint8_t>(scales),
                               ptr<const float>(scalars), ptr<float>(out), stream_of(stream), row_amax),
        "dequantize");
}

// The GPU kernel of a GEMM plan, or a UsageError listing the datapaths the GPU has kernels for.
const gpu::GemmKernel& kernel_of(const GemmPlan& plan) {
  if (plan.kernel != nullptr) return *plan.kernel;
  std::string served;
  for (const gpu::GemmKernel& kernel : gpu::gemm_kernels()) {
    served += (served.empty() ? "" : ", ") + std::string(kernel.golden->name);
    if (kernel.name != kernel.golden->name) served += " (" + std::string(kernel.name) + ")";
  }
  throw UsageError("datapath " + std::string(plan.options.datapath->name) + ": the GPU has kernels for " + served +
                   " only");
}

// C [M, N] = A·Bᵀ of quantized operands A [M, K] (the plan's operand a) and B [N, K] (b) through the plan's
// GPU kernel, then + bias [N] (float32, or 0 for none) in binary32; C float32, or BF16 (RNE) when
// bf16_out. alpha: a device float (workspace, set here), float[M] when A is row-scaled (one alpha a row); ea, eb: the kernel's BF16 workspaces [M, Kp] and
// [N, Kp], Kp = GemmKernel::workspace_cols(K) (0 when it needs none: pass 0). Every kernel reads alpha from
// the device and adds the bias in its epilogue.
void gemm(PlanHandle plan, std::uintptr_t a_codes, std::uintptr_t a_scales, std::uintptr_t a_scalars, std::size_t m,
          std::uintptr_t b_codes, std::uintptr_t b_scales, std::uintptr_t b_scalars, std::size_t n, std::size_t k,
          std::uintptr_t alpha, std::uintptr_t ea, std::uintptr_t eb, std::uintptr_t bias, bool bf16_out,
          std::uintptr_t c, std::uintptr_t stream) {
  const GemmPlan& g = gemm_plan_of(plan);
  const gpu::GemmKernel& kernel = kernel_of(g);
  if (!kernel.takes_k(k)) {
    throw DataError("gemm: " + std::string(kernel.name) + " needs K % " + std::to_string(kernel.k_multiple) +
                    " == 0, K is " + std::to_string(k));
  }
  const QuantizedTensor qa = quantize_plan_of(g.a).described(m, k), qb = quantize_plan_of(g.b).described(n, k);
  auto* d_alpha = ptr<float>(alpha);
  const bool row_alpha = !qa.row_amax.empty();
  const gpu::Epilogue epilogue{1.0f, d_alpha, ptr<const float>(bias), bf16_out, row_alpha ? d_alpha : nullptr};
  void* s = stream_of(stream);
  if (row_alpha) {
    check(gpu::launch_gemm_row_alpha(g.alpha_rule, ptr<const float>(a_scalars) + gpu::kDeviceScalars, m, qa.target,
                                     ptr<const float>(b_scalars), qb.target, g.element_max, d_alpha, s),
          "gemm (row alpha)");
  } else {
    check(gpu::launch_gemm_alpha(g.alpha_rule, ptr<const float>(a_scalars), qa.target, ptr<const float>(b_scalars),
                                 qb.target, g.element_max, d_alpha, s),
          "gemm (alpha)");
  }
  if (kernel.path == gpu::GemmPath::exact) {
    check(gpu::launch_gemm_exact(qa, ptr<const std::uint8_t>(a_codes), ptr<const std::uint8_t>(a_scales), qb,
                                 ptr<const std::uint8_t>(b_codes), ptr<const std::uint8_t>(b_scales), ptr<void>(c),
                                 epilogue, s),
          "gemm (exact)");
  } else {
    const std::size_t kp = kernel.workspace_cols(k);
    check(gpu::launch_encode_bf16(qa, ptr<const std::uint8_t>(a_codes), ptr<const std::uint8_t>(a_scales),
                                  ptr<std::uint16_t>(ea), kp, s),
          "gemm (encode A)");
    check(gpu::launch_encode_bf16(qb, ptr<const std::uint8_t>(b_codes), ptr<const std::uint8_t>(b_scales),
                                  ptr<std::uint16_t>(eb), kp, s),
          "gemm (encode B)");
    check(gpu::launch_gemm_bf16(ptr<const std::uint16_t>(ea), ptr<const std::uint16_t>(eb), ptr<void>(c), m, n, kp,
                                kernel.group_k, g.options.snap, epilogue, s),
          "gemm");
  }
}

// out [cols, rows] = the transpose of x [rows, cols] (2- or 4-byte elements).
void transpose(std::uintptr_t x, std::size_t rows, std::size_t cols, int element_bytes, std::uintptr_t out,
               std::uintptr_t stream) {
  check(gpu::launch_transpose(ptr<const void>(x), ptr<void>(out), rows, cols, element_bytes, stream_of(stream)),
        "transpose");
}

}  // namespace

void register_cuda_ops(nb::module_& m) {
  m.def(
      "cuda_available",
      [] {
        // Also settles, outside any stream capture, the one-time probe of the wgmma kernels.
        const bool ok = gpu::device_available();
        if (ok) (void)gpu::wgmma_available();
        return ok;
      },
      "Whether a CUDA device can run this build's kernels.");
  m.def("cuda_quantize", &quantize, "plan"_a, "x"_a, "bf16"_a, "rows"_a, "cols"_a, "seed"_a, "held"_a, "rbits"_a,
        "codes"_a, "scales"_a, "scalars"_a, "stream"_a);
  m.def("cuda_transpose", &transpose, "x"_a, "rows"_a, "cols"_a, "element_bytes"_a, "out"_a, "stream"_a);
  m.def("cuda_dequantize", &dequantize, "plan"_a, "codes"_a, "scales"_a, "scalars"_a, "rows"_a, "cols"_a, "out"_a,
        "stream"_a);
  m.def("cuda_gemm", &gemm, "plan"_a, "a_codes"_a, "a_scales"_a, "a_scalars"_a, "m"_a, "b_codes"_a, "b_scales"_a,
        "b_scalars"_a, "n"_a, "k"_a, "alpha"_a, "ea"_a, "eb"_a, "bias"_a, "bf16_out"_a, "c"_a, "stream"_a);
}

}  // namespace fp4sim::python
