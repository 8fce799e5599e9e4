// Where real kernels store the bytes of a block-quantized tensor (docs/layouts.md has the pictures).
//
// Block scales: fp4sim's own layout is plain row-major over the block grid, [ceil(R/Br), ceil(C/B)]
// (Br = 1 for 1 x B blocks, B for B x B tiles). Kernels store them differently:
//  * te-rowrep: TransformerEngine keeps one scale per *row* and block column, [R, ceil(C/B)], so a
//    B x B tile's scale is repeated on each of its B rows; TE allocates the array padded to
//    [roundup(R, 128), roundup(ceil(C/B), 4)] (nvte_swizzle_scaling_factors' requirement), and
//    either shape is accepted.
//  * swizzled-128x4: the block-scale-factor layout that cuBLASLt's VEC16/VEC32 scale modes and
//    CUTLASS's Sm1xxBlockScaledConfig consume. The per-row matrix [R, ceil(C/B)] is padded to
//    [roundup(R, 128), roundup(ceil(C/B), 4)] and cut into 128 x 4 tiles of 512 bytes each, tiles in
//    row-major order (block columns fastest), and within a tile row r, column k sits at
//        (r % 32) * 16 + ((r % 128) / 32) * 4 + (k % 4)
//    (CUTLASS include/cutlass/detail/sm100_blockscaled_layout.hpp, Sm1xxBlockScaledBasicChunk::SfKMajorAtom
//    = Layout<Shape<Shape<_32,_4>, Shape<SFVecSize,_4>>, Stride<Stride<_16,_4>, Stride<_0,_1>>>, tiled by
//    tile_to_shape(SfAtom, (M, K, L), Step<_2,_1,_3>)). Padding bytes are written as 0 and never read.
//
// Packed E2M1 codes: two per byte, [R, ceil(C/2)]. fp4sim (and CUTLASS array_subbyte, PyTorch
// float4_e2m1fn_x2, TE) put element 2j in the low nibble (low-first); some kernels put it in the high
// nibble (high-first); `unpacked` is one code per byte, [R, C] (the only order of 8-bit codes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4sim/core/arrays.hpp"
#include "fp4sim/core/names.hpp"
#include "fp4sim/core/primitives.hpp"

namespace fp4sim {

enum class ScaleLayout : std::uint8_t { rowmajor, te_rowrep, swizzled_128x4 };
enum class NibbleOrder : std::uint8_t { low_first, high_first, unpacked };

std::span<const NameRow<ScaleLayout>> names(ScaleLayout);
std::span<const NameRow<NibbleOrder>> names(NibbleOrder);

// The block grid of a [rows, cols] tensor quantized in block_rows x block_cols blocks.
struct ScaleGrid {
  std::size_t rows = 0, cols = 0;
  int block_rows = 1, block_cols = 16;

  std::size_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
  std::size_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
};
// A grid from a user's numbers (UsageError unless both block sides are positive).
ScaleGrid scale_grid(std::size_t rows, std::size_t cols, int block_rows, int block_cols);

// A user's scale array resolved against a layout: where the scale of (row, block column) lives.
class ScaleStorage {
 public:
  // Checks the stored shape against the layout (DataError naming `what` and the shapes accepted).
  ScaleStorage(ScaleLayout layout, const ScaleGrid& grid, const std::vector<std::size_t>& shape,
               std::string_view what = "scales");
  // The shape fp4sim writes for a layout (te-rowrep unpadded; swizzled as 2-D [R128, Sc4]).
  static std::vector<std::size_t> canonical_shape(ScaleLayout layout, const ScaleGrid& grid);
  std::size_t size() const { return size_; }
  // Offset of the scale byte that element row `row` uses for block column `block_col`.
  std::size_t offset(std::size_t row, std::size_t block_col) const;
  // The element rows whose stored copy must be checked for one block row of the grid: the first row of
  // the block for rowmajor (one copy per block), every row of the block otherwise.
  bool one_copy_per_block() const { return layout_ == ScaleLayout::rowmajor; }

 private:
  ScaleLayout layout_;
  ScaleGrid grid_;
  std::size_t size_ = 0;
  std::size_t ld_ = 0;        // te-rowrep: stored row length
  std::size_t col_tiles_ = 0;  // swizzled: 128x4 tiles per tile row
};

// Row-major block-grid scales [scale_rows, scale_cols] -> a layout's bytes (canonical shape).
std::vector<std::uint8_t> scales_to_layout(std::span<const std::uint8_t> rowmajor, const ScaleGrid& grid,
                                           ScaleLayout layout);
// A layout's bytes -> row-major block-grid scales. For a tile repeated over rows, every copy must agree
// (DataError naming the first disagreeing row otherwise).
std::vector<std::uint8_t> scales_from_layout(std::span<const std::uint8_t> stored,
                                             const std::vector<std::size_t>& shape, const ScaleGrid& grid,
                                             ScaleLayout layout);

// Packed codes: the shape a nibble order stores for [rows, cols] elements.
std::vector<std::size_t> codes_shape(NibbleOrder order, std::size_t rows, std::size_t cols);
// Checks a stored code array's shape (DataError naming `what`): [rows, n] or, for one row, [n].
void check_codes_shape(NibbleOrder order, std::size_t rows, std::size_t cols, const std::vector<std::size_t>& shape,
                       std::string_view what = "codes");

// The code of element (r, c) in a stored array: a nibble, or under `unpacked` the whole byte (a 4-bit code
// with a high bit set is no code of its format; 8-bit codes are stored only this way).
inline std::uint8_t stored_code(std::span<const std::uint8_t> stored, NibbleOrder order, std::size_t cols,
                                std::size_t r, std::size_t c) {
  if (order == NibbleOrder::unpacked) return stored[r * cols + c];
  const std::uint8_t byte = stored[r * ((cols + 1) / 2) + c / 2];
  const bool high = ((c & 1) != 0) == (order == NibbleOrder::low_first);
  return high ? byte >> 4 : byte & 0xF;
}

// fp4sim's low-first packed codes [rows, ceil(cols/2)] -> another order, and back.
std::vector<std::uint8_t> codes_to_order(std::span<const std::uint8_t> low_first, std::size_t rows, std::size_t cols,
                                         NibbleOrder order);
std::vector<std::uint8_t> codes_from_order(std::span<const std::uint8_t> stored, std::size_t rows, std::size_t cols,
                                           NibbleOrder order);

}  // namespace fp4sim
