#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace {

std::string bare_keys(const std::string& keyed) {
  return render_keys(keyed, [](std::string_view key, std::string_view value) {
    std::string bare(key);
    if (!value.empty()) bare.append("=").append(value);
    return bare;
  });
}

}  // namespace

KeyedError::KeyedError(const std::string& keyed_message)
    : std::runtime_error(bare_keys(keyed_message)), keyed_(keyed_message) {}

}  // namespace fp4sim
