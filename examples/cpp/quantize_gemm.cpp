// Quantizes two small matrices to NVFP4 (e2m1 elements, ue4m3 scales per 16, a tensor scale), multiplies
// them as Blackwell's block-scaled tensor-core instruction does (datapath sm100-mxf4nvf4), and prints the
// results beside the float product of the unquantized inputs. Exit 0 when the GEMM ran and stayed near the float one.
#include <cmath>
#include <cstdio>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/datapath.hpp"
#include "fp4sim/core/format.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

int main() {
  // One value into one format: 2.6 in e2m1 is the code 0x5 (value 3), rounding to nearest even.
  const fp4sim::Encoded code = fp4sim::encode(fp4sim::formats::e2m1, 2.6, fp4sim::EncodeOptions{});
  std::printf("2.6 -> e2m1 code 0x%X = %g\n", static_cast<unsigned>(code.code),
              fp4sim::decode_to_double(fp4sim::formats::e2m1, code.code));

  const std::size_t m = 2, n = 3, k = 64;  // C[m, n] = A[m, k] * B[n, k]^T
  std::vector<float> a(m * k), b(n * k);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i));

  const fp4sim::Recipe& recipe = *fp4sim::find_recipe("nvfp4");
  fp4sim::QuantizeRequest activation, weight;
  activation.spec = fp4sim::operand_for_role(recipe, fp4sim::Role::activation);
  weight.spec = fp4sim::operand_for_role(recipe, fp4sim::Role::weight);
  const fp4sim::QuantizedTensor qa = fp4sim::quantize(recipe, activation, a, m, k);
  const fp4sim::QuantizedTensor qb = fp4sim::quantize(recipe, weight, b, n, k);
  fp4sim::GemmRequest request;
  request.datapath = fp4sim::find_datapath("sm100-mxf4nvf4");  // `fp4sim gemm --list-datapaths` lists them
  const std::vector<float> c = fp4sim::gemm(recipe, qa, qb, request);

  std::printf("nvfp4: %s elements, %s scales per %d\n", fp4sim::format_name(qa.element).c_str(),
              fp4sim::format_name(qa.scale).c_str(), qa.block_cols);
  double worst = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double exact = 0.0;
      for (std::size_t t = 0; t < k; ++t) exact += static_cast<double>(a[i * k + t]) * b[j * k + t];
      std::printf("C[%zu,%zu] = %-12.7g float: %.7g\n", i, j, static_cast<double>(c[i * n + j]), exact);
      worst = std::fmax(worst, std::fabs(c[i * n + j] - exact));
    }
  }
  // A sanity bound, not an accuracy claim: these inputs give a worst error of 0.75 (FP4 on 64 terms in [-1, 1]).
  return c.size() == m * n && worst < 2.0 ? 0 : 1;
}
