// Quantizes a tensor under a recipe preset and multiplies it through the exact datapath (whose
// reference uses Boost.Multiprecision inside the library): the core layer's whole path, from outside.
#include <cstdio>
#include <vector>

#include "fp4sim/core/format.hpp"
#include "fp4sim/core/gemm.hpp"
#include "fp4sim/core/quantize.hpp"
#include "fp4sim/core/recipe.hpp"

int main() {
  const fp4sim::Recipe& recipe = *fp4sim::find_recipe("nvfp4");
  std::vector<float> x(4 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  fp4sim::QuantizeRequest request;
  request.spec = fp4sim::operand_for_role(recipe, fp4sim::Role::activation);
  const fp4sim::QuantizedTensor q = fp4sim::quantize(recipe, request, x, 4, 64);
  fp4sim::GemmRequest gemm;
  gemm.datapath = &fp4sim::datapaths::exact;
  const std::vector<float> c = fp4sim::gemm(recipe, q, q, gemm);
  std::printf("%s elements, %s scales; C[0,0] = %.9g\n", fp4sim::format_name(q.element).c_str(),
              fp4sim::format_name(q.scale).c_str(), static_cast<double>(c[0]));
  return c.size() == 16 ? 0 : 1;
}
