// TE 2.17's quantizer variants on the GPU (emu/quantize.cu) judged by the golden model bit for bit: 4over6
// (BlockScaleChoice::four_over_six_mae/_mse, input and fast-math error, E4M3 bound 256 and 448, 1-D blocks
// and 16 x 16 tiles) and row-scaled NVFP4 (AmaxScope::row), through the host API and through the device
// API with the tensor scalars in device memory (fp4sim.torch's path), and a row-scaled A's per-row alpha in
// every GEMM kernel's epilogue. Without a usable CUDA device every
// test here GTEST_SKIPs; `fp4sim crosscheck` is the large-scale version.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/quantize_trace.hpp"
#include "fp4sim/core/recipe.hpp"
#include "fp4sim/emu/device.hpp"
#include "fp4sim/emu/device_buffer.hpp"
#include "fp4sim/emu/gemm_kernels.hpp"
#include "fp4sim/emu/gpu.hpp"

namespace fp4sim {
namespace {

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// Blocks of 16 that split the 4over6 choice both ways: normal values; values on the E2M1 grid of amax / 4
// (map-to-4 reconstructs them exactly) or of amax / 6 (map-to-6 does); a zero row (both errors 0: the tie
// keeps map-to-6); rows of their own binades (row-scaled amax sees them, a tensor amax does not); scattered
// NaN, binary32 subnormals, -0 and, when `extreme`, +-Inf and values near FLT_MAX (which make a current
// tensor amax flush every ordinary block's scale to zero, so they come with a held amax or a row amax).
std::vector<float> adversarial(std::size_t rows, std::size_t cols, std::uint64_t seed, bool extreme) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float grid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> x(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(rng() % 24) - 12);
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t block = (r / 16) * 131 + c / 16;
      float v = 0.0f;
      switch (block % 3) {
        case 0: v = normal(rng); break;
        case 1: v = grid[rng() % 7] * 0.25f; break;  // amax 1 (at most): the grid of map-to-4
        default: v = grid[rng() % 8] / 6.0f; break;  // the grid of map-to-6
      }
      x[r * cols + c] = (rng() & 1 ? -v : v) * row_scale;
    }
  }
  if (rows > 2) std::fill(x.begin() + 2 * cols, x.begin() + 3 * cols, 0.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), 0x1p-149f, 0x1.8p-140f, -0.0f,
                            INFINITY, -INFINITY, std::numeric_limits<float>::max(), -0x1.8p+120f};
  for (std::size_t i = 0; i < x.size() / 97 + 1; ++i) x[rng() % x.size()] = specials[rng() % (extreme ? 8 : 4)];
  return x;
}

// The BF16 input of x (RNE), and x widened back, which is what the golden model quantizes.
std::vector<std::uint16_t> to_bf16(std::vector<float>& x) {
  std::vector<std::uint16_t> h(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t b = fp32_to_bf16_rne(bits(x[i]));
    x[i] = std::bit_cast<float>(b);
    h[i] = static_cast<std::uint16_t>(b >> 16);
  }
  return h;
}

void expect_same_tensor(const QuantizedTensor& got, const QuantizedTensor& golden, const std::string& what) {
  EXPECT_EQ(got.codes, golden.codes) << what;
  EXPECT_EQ(got.scales, golden.scales) << what;
  EXPECT_EQ(bits(got.tensor_amax), bits(golden.tensor_amax)) << what;
  EXPECT_EQ(bits(got.global_encode_scale), bits(golden.global_encode_scale)) << what;
  EXPECT_EQ(bits(got.global_decode_scale), bits(golden.global_decode_scale)) << what;
  ASSERT_EQ(got.row_amax.size(), golden.row_amax.size()) << what;
  for (std::size_t r = 0; r < golden.row_amax.size(); ++r) {
    EXPECT_EQ(bits(got.row_amax[r]), bits(golden.row_amax[r])) << what << " row " << r;
  }
}

// The GPU's dequantization of the golden tensor against the golden one (any NaN equals any NaN).
void expect_same_dequantized(const QuantizedTensor& golden, const std::string& what) {
  std::vector<float> got(golden.rows * golden.cols);
  ASSERT_EQ(gpu::dequantize(golden, got), gpu::Status::success) << what;
  const std::vector<float> want = dequantize(golden);
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    ASSERT_EQ(bits(got[i]), bits(want[i])) << what << " element " << i;
  }
}

Recipe four_over_six(bool mse, bool fast_math, float bound) {
  Recipe r = *find_recipe("nvfp4-4over6");
  r.block_choice = mse ? BlockScaleChoice::four_over_six_mse : BlockScaleChoice::four_over_six_mae;
  r.four_over_six_error = fast_math ? FourOverSixErrorDomain::fast_math : FourOverSixErrorDomain::input;
  r.target = r.wgrad_grad_target = bound;
  return r;
}

// Every 4over6 setting TE offers x 1-D and 2-D x shapes with ragged blocks and tiles (37 x 97: a last tile of
// 5 rows, whose block sum pads to 8) x binary32 and BF16 input x current and held amax. Each setting must
// choose map-to-4 for some blocks and map-to-6 for others, or the comparison would not show the choice.
TEST(Device, FourOverSixEveryErrorDomainBoundAndTile) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  int case_id = 0;
  for (bool mse : {false, true}) {
    for (bool fast_math : {false, true}) {
      for (float bound : {256.0f, 448.0f}) {
        const Recipe recipe = four_over_six(mse, fast_math, bound);
        std::size_t map4 = 0, map6 = 0;
        for (bool two_d : {false, true}) {
          for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{64, 128}, {37, 97}, {48, 33}}) {
            ++case_id;
            const bool held = case_id % 3 == 0;
            std::vector<float> x = adversarial(rows, cols, 1000 + case_id, held);
            const bool bf16_in = case_id % 2 == 0;
            const std::vector<std::uint16_t> x_bf16 = bf16_in ? to_bf16(x) : std::vector<std::uint16_t>{};
            QuantizeRequest req;
            req.spec = operands_for(recipe, Gemm::fprop).a;
            req.spec.two_d = two_d;
            req.spec.target = bound;
            if (held) req.amax_ref = 0x1.4p+3f;
            QuantizeTrace trace;
            const QuantizedTensor golden = quantize(recipe, req, x, rows, cols, &trace);
            for (const BlockTrace& b : trace.blocks) (b.four_over_six->map4_chosen ? map4 : map6) += 1;
            QuantizedTensor got;
            const gpu::Status st = bf16_in ? gpu::quantize(recipe, req, std::span<const std::uint16_t>(x_bf16), rows, cols, got)
                                           : gpu::quantize(recipe, req, std::span<const float>(x), rows, cols, got);
            const std::string what = std::string(mse ? "MSE" : "MAE") + (fast_math ? " fast-math" : " input") +
                                     " bound " + std::to_string(static_cast<int>(bound)) + (two_d ? " 2-D " : " 1-D ") +
                                     std::to_string(rows) + "x" + std::to_string(cols) + (bf16_in ? " bf16" : "");
            ASSERT_EQ(st, gpu::Status::success) << what;
            expect_same_tensor(got, golden, what);
            expect_same_dequantized(golden, what);
          }
        }
        EXPECT_GT(map4, 0u) << recipe.name;
        EXPECT_GT(map6, 0u) << recipe.name;
      }
    }
  }
}

// Row-scaled NVFP4 and row-scaled 4over6 under every 1-D operand spec of their presets (RNE activations,
// stochastic dY, the RHT of the wgrad operands): each row's amax, its G and Gd, codes, scales, and the
// dequantization with each row's Gd.
TEST(Device, RowScaledEverySpec) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  int case_id = 0;
  for (const char* name : {"nvfp4", "nvfp4-4over6", "nvfp4-4over6-fast"}) {
    Recipe recipe = *find_recipe(name);
    recipe.amax_scope = AmaxScope::row;
    for (Gemm g : {Gemm::fprop, Gemm::dgrad, Gemm::wgrad}) {
      const GemmOperands ops = operands_for(recipe, g);
      for (OperandSpec spec : {ops.a, ops.b}) {
        if (spec.two_d) continue;  // row scope takes 1-D blocks only
        spec.takes_row_amax = true;  // each spec's rounding and RHT under the row-scaled quantizer (quantize --role)
        for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{40, 128}, {9, 97}}) {
          ++case_id;
          std::vector<float> x = adversarial(rows, cols, 2000 + case_id, true);
          const bool bf16_in = case_id % 2 == 0;
          const std::vector<std::uint16_t> x_bf16 = bf16_in ? to_bf16(x) : std::vector<std::uint16_t>{};
          QuantizeRequest req;
          req.spec = spec;
          req.random.seed = 77 + case_id;
          const QuantizedTensor golden = quantize(recipe, req, x, rows, cols);
          QuantizedTensor got;
          const gpu::Status st = bf16_in ? gpu::quantize(recipe, req, std::span<const std::uint16_t>(x_bf16), rows, cols, got)
                                         : gpu::quantize(recipe, req, std::span<const float>(x), rows, cols, got);
          const std::string what = std::string(name) + " row-scaled " + std::string(name_of(spec.rounding)) +
                                   (spec.rht ? " rht " : " ") + std::to_string(rows) + "x" + std::to_string(cols);
          ASSERT_EQ(st, gpu::Status::success) << what;
          ASSERT_EQ(golden.row_amax.size(), rows);
          expect_same_tensor(got, golden, what);
          expect_same_dequantized(golden, what);
        }
      }
    }
  }
}

// fp4sim.torch's path: the amax measured on the device, G and Gd formed there (launch_tensor_scalars), the
// row amaxes by launch_row_amax, and the quantize kernel reading the scalars from device memory, for a
// row-scaled MSE 4over6 recipe and a tensor-scaled fast-math one with 2-D tiles.
TEST(Device, DeviceScalarsPathTakesFourOverSixAndRowScale) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  Recipe row_mse = four_over_six(true, false, 256.0f);
  row_mse.amax_scope = AmaxScope::row;
  const Recipe tile_fast = four_over_six(false, true, 448.0f);
  for (const Recipe* recipe : {static_cast<const Recipe*>(&row_mse), &tile_fast}) {
    const std::size_t rows = 50, cols = 160;
    const std::vector<float> x = adversarial(rows, cols, 31, recipe == &row_mse);
    QuantizeRequest req;
    req.spec = operands_for(*recipe, Gemm::fprop).a;
    req.spec.two_d = recipe == &tile_fast;
    req.spec.target = recipe->target;
    const QuantizedTensor golden = quantize(*recipe, req, x, rows, cols);
    gpu::QuantizePlan plan;
    ASSERT_EQ(gpu::make_plan(*recipe, req, rows, cols, plan), gpu::Status::success);
    QuantizedTensor got = blank_quantized(*recipe, req, rows, cols);
    gpu::DeviceBuffer dx, damax, dscalars, drow, dcodes, dscales;
    ASSERT_TRUE(gpu::upload(dx, std::span<const float>(x)));
    ASSERT_TRUE(damax.allocate(sizeof(float)) && dscalars.allocate(gpu::kDeviceScalars * sizeof(float)) &&
                drow.allocate(rows * sizeof(float)) && dcodes.allocate(got.codes.size()) &&
                dscales.allocate(got.scales.size()));
    const float* row_amax = plan.row_scaled ? drow.as<float>() : nullptr;
    ASSERT_EQ(gpu::launch_amax(plan, dx.as<const float>(), damax.as<float>(), nullptr), gpu::Status::success);
    ASSERT_EQ(gpu::launch_tensor_scalars(plan, damax.as<float>(), nullptr, dscalars.as<float>(), nullptr),
              gpu::Status::success);
    if (plan.row_scaled) {
      ASSERT_EQ(gpu::launch_row_amax(plan, dx.as<const float>(), drow.as<float>(), nullptr), gpu::Status::success);
    }
    ASSERT_EQ(gpu::launch_quantize(plan, dscalars.as<const float>(), dx.as<const float>(), nullptr,
                                   dcodes.as<std::uint8_t>(), dscales.as<std::uint8_t>(), nullptr, row_amax),
              gpu::Status::success);
    ASSERT_EQ(cudaMemcpy(got.codes.data(), dcodes.as<void>(), got.codes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.scales.data(), dscales.as<void>(), got.scales.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got.codes, golden.codes) << recipe->name;
    EXPECT_EQ(got.scales, golden.scales) << recipe->name;
    if (plan.row_scaled) {
      std::vector<float> rows_got(rows);
      ASSERT_EQ(cudaMemcpy(rows_got.data(), drow.as<void>(), rows * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(bits(rows_got[r]), bits(golden.row_amax[r])) << "row " << r;
    }
    // A row-scaled tensor's device dequantization needs its row amaxes; without them it is refused.
    if (plan.row_scaled) {
      std::vector<float> out(rows * cols);
      gpu::DeviceBuffer dout;
      ASSERT_TRUE(dout.allocate(out.size() * sizeof(float)));
      EXPECT_EQ(gpu::launch_dequantize(golden, dcodes.as<std::uint8_t>(), dscales.as<std::uint8_t>(),
                                       dout.as<float>(), nullptr),
                gpu::Status::invalid_argument);
    }
  }
}

// A row-scaled A through every GEMM kernel of the table: each output row's alpha (gemm_row_alpha) in the
// kernel's epilogue against the golden GEMM with GemmOptions::row_alpha, B (the 2-D weight) with its tensor
// amax, f32 outputs bit for bit. Row 2 of A holds zeros and one NaN: amax 0, so alpha 0, and under UE5M3's
// zero-scale repair (scale 1.0) the NaN's code 6 makes its sums nonzero: the exact row's signed zeros.
TEST(Device, EveryGemmKernelTakesARowAlpha) {
  if (!gpu::device_available()) GTEST_SKIP() << "no CUDA device that can run sm_90 kernels";
  for (const char* name : {"nvfp4-4over6", "ue5m3-te"}) {
    Recipe row = *find_recipe(name);
    row.amax_scope = AmaxScope::row;
    Recipe tensor = row;
    tensor.amax_scope = AmaxScope::tensor;
    for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{40, 72, 128}, {130, 33, 256}}) {
      QuantizeRequest ra, rb;
      ra.spec = operands_for(row, Gemm::fprop).a;
      rb.spec = operands_for(row, Gemm::fprop).b;
      std::vector<float> xa = adversarial(m, k, 51, true);
      std::fill(xa.begin() + 2 * k, xa.begin() + 3 * k, 0.0f);
      xa[2 * k + 5] = std::numeric_limits<float>::quiet_NaN();
      const QuantizedTensor qa = quantize(row, ra, xa, m, k);
      const QuantizedTensor qb = quantize(tensor, rb, adversarial(n, k, 52, false), n, k);
      for (const gpu::GemmKernel& kernel : gpu::gemm_kernels()) {
        if (!kernel.takes_k(k)) continue;
        GemmOptions golden;
        golden.datapath = kernel.golden;
        const AlphaRule rule = alpha_rule_for(*kernel.golden, row);
        golden.alpha = gemm_alpha(rule, qa.tensor_amax, qa.target, qb.tensor_amax, qb.target, 6.0f);
        golden.row_alpha = gemm_row_alpha(rule, qa, qb, 6.0f);
        const std::vector<float> want = gemm(qa, qb, golden);
        gpu::GemmOptions options;
        options.path = kernel.path;
        options.alpha = golden.alpha;
        options.row_alpha = golden.row_alpha;
        options.snap = golden.snap;
        std::vector<float> got(m * n);
        ASSERT_EQ(gpu::gemm(qa, qb, options, got), gpu::Status::success) << kernel.name;
        std::size_t bad = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
          bad += !(std::isnan(want[i]) && std::isnan(got[i])) && bits(want[i]) != bits(got[i]);
        }
        EXPECT_EQ(bad, 0u) << name << " " << kernel.name << " " << m << "x" << n << "x" << k;
      }
    }
  }
}

// The GEMM host API's refusals, before any device is looked for: a row-scaled A without one alpha per row,
// and a row-scaled B (which would need one per column).
TEST(Api, GemmRefusesRowScalingItCannotApply) {
  Recipe row = *find_recipe("nvfp4");
  row.amax_scope = AmaxScope::row;
  QuantizeRequest req;
  req.spec = operands_for(row, Gemm::fprop).a;
  const QuantizedTensor q = quantize(row, req, adversarial(16, 64, 5, false), 16, 64);
  std::vector<float> c(16 * 16);
  gpu::GemmOptions options;
  EXPECT_EQ(gpu::gemm(q, q, options, c), gpu::Status::unsupported_options);  // B row-scaled
  Recipe tensor = row;
  tensor.amax_scope = AmaxScope::tensor;
  const QuantizedTensor b = quantize(tensor, req, adversarial(16, 64, 6, false), 16, 64);
  EXPECT_EQ(gpu::gemm(q, b, options, c), gpu::Status::invalid_argument);  // no row alphas
  options.row_alpha.assign(15, 1.0f);
  EXPECT_EQ(gpu::gemm(q, b, options, c), gpu::Status::invalid_argument);  // one short
}

}  // namespace
}  // namespace fp4sim
