// What an entry records about where its random bits come from and how its tensor was quantized: the
// stream of an operand, and the fields a recipe (or the bf16 column of recipe maps) decides.
#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/random.hpp"
#include "replay_policy.hpp"

namespace fp4sim::replay {

std::uint64_t stream_id(std::int64_t step, std::string_view layer, std::string_view tensor, Gemm gemm) {
  return stream_of(std::to_string(step) + "/" + std::string(layer) + "/" + std::string(tensor) + "/" +
                   std::string(name_of(gemm)));
}

TensorEntry tensor_entry(const Recipe& r, Role role, Gemm view, std::size_t rows, std::size_t cols) {
  const OperandSpec spec = operand_for_role(r, role);
  TensorEntry e;
  e.role = role;
  e.view = view;
  e.recipe = r.name;
  e.rows = rows;
  e.cols = cols;
  e.block_rows = spec.two_d ? r.block : 1;
  e.block_cols = r.block;
  e.element_format = format_name(r.element);
  e.scale_format = format_name(r.scale);
  e.rounding = std::string(name_of(spec.rounding));
  e.tensor_scale = tensor_scale_text(r.tensor_scale, r.period);
  return e;
}

namespace detail {

TensorEntry bf16_entry(Role role, Gemm view, std::size_t rows, std::size_t cols) {
  TensorEntry e;
  e.role = role;
  e.view = view;
  e.recipe = kBf16;
  e.rows = rows;
  e.cols = cols;
  e.block_rows = e.block_cols = 0;
  e.element_format = format_name(formats::bf16);
  e.rounding = std::string(name_of(Rounding::rne));
  e.tensor_scale = tensor_scale_text(TensorScalePolicy::none, 0);
  return e;
}

}  // namespace detail

}  // namespace fp4sim::replay
