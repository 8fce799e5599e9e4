#include "fp4sim/core/four_over_six.hpp"

#include <bit>
#include <cmath>
#include <vector>

#include "fp4sim/core/codec.hpp"
#include "fp4sim/core/fp32.hpp"

namespace fp4sim {

FourOverSixError::FourOverSixError(const Recipe& recipe, float target)
    : squared_(recipe.block_choice == BlockScaleChoice::four_over_six_mse),
      domain_(recipe.four_over_six_error) {
  const Format& element = recipe.element;
  for (std::uint32_t code = 0; code < element.code_count() && code < values_.size(); ++code) {
    values_[code] = decode_to_float(element, code);
  }
  denominator_ = fp32::mul_rn(decode_to_float(element, element.max_finite_code()), target);
}

float FourOverSixError::operator()(std::span<const float> x, std::span<const std::uint8_t> codes, float scale,
                                   float amax, float encode) const {
  float err = 0.0f;
  for (std::size_t j = 0; j < x.size(); ++j) {
    const float product = fp32::mul_rn(values_[codes[j]], scale);
    float diff = 0.0f;
    switch (domain_) {
      case FourOverSixErrorDomain::input:
        diff = fp32::sub_rn(fp32::div_rn(fp32::mul_rn(product, amax), denominator_), x[j]);
        break;
      case FourOverSixErrorDomain::fast_math: diff = fp32::sub_rn(product, fp32::mul_rn(x[j], encode)); break;
      case FourOverSixErrorDomain::decode_scale:
        diff = fp32::sub_rn(fp32::mul_rn(product, fp32::div_rn(1.0f, encode)), x[j]);
        break;
    }
    err = fp32::add_rn(err, squared_ ? fp32::mul_rn(diff, diff) : std::fabs(diff));
  }
  return err;
}

float FourOverSixError::block_sum(std::span<const float> row_errors) {
  std::size_t width = 1;
  while (width < row_errors.size()) width *= 2;
  std::vector<float> v(width, 0.0f);
  for (std::size_t i = 0; i < row_errors.size(); ++i) v[i] = row_errors[i];
  for (std::size_t offset = width / 2; offset >= 1; offset /= 2) {
    for (std::size_t i = 0; i < offset; ++i) v[i] = fp32::add_rn(v[i], v[i + offset]);
  }
  return v[0];
}

}  // namespace fp4sim
