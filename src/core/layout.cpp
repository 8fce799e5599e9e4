#include "fp4sim/core/layout.hpp"

#include "fp4sim/core/error.hpp"

namespace fp4sim {

namespace {

constexpr NameRow<ScaleLayout> kLayouts[] = {
    {"rowmajor", ScaleLayout::rowmajor, "one byte per block, [ceil(R/Br), ceil(C/B)] (fp4sim's own)"},
    {"te-rowrep", ScaleLayout::te_rowrep, "one byte per row and block column, [R, ceil(C/B)] (TransformerEngine)"},
    {"swizzled-128x4", ScaleLayout::swizzled_128x4, "128 x 4 tiles of 512 bytes (cuBLASLt, CUTLASS block-scaled)"}};
constexpr NameRow<NibbleOrder> kOrders[] = {
    {"low-first", NibbleOrder::low_first, "two codes per byte, element 2j in the low nibble (CUTLASS, PyTorch, TE)"},
    {"high-first", NibbleOrder::high_first, "two codes per byte, element 2j in the high nibble"},
    {"unpacked", NibbleOrder::unpacked, "one code per byte (the only order of 8-bit codes)"}};

constexpr std::size_t kTileRows = 128, kTileCols = 4, kTileBytes = kTileRows * kTileCols;

}  // namespace

std::span<const NameRow<ScaleLayout>> names(ScaleLayout) { return kLayouts; }
std::span<const NameRow<NibbleOrder>> names(NibbleOrder) { return kOrders; }


std::vector<std::size_t> ScaleStorage::canonical_shape(ScaleLayout layout, const ScaleGrid& g) {
  switch (layout) {
    case ScaleLayout::rowmajor: return {g.scale_rows(), g.scale_cols()};
    case ScaleLayout::te_rowrep: return {g.rows, g.scale_cols()};
    case ScaleLayout::swizzled_128x4: return {round_up(g.rows, kTileRows), round_up(g.scale_cols(), kTileCols)};
  }
  return {};
}

ScaleGrid scale_grid(std::size_t rows, std::size_t cols, int block_rows, int block_cols) {
  if (block_rows < 1 || block_cols < 1) throw UsageError("block_rows and block_cols must be positive");
  return ScaleGrid{rows, cols, block_rows, block_cols};
}

ScaleStorage::ScaleStorage(ScaleLayout layout, const ScaleGrid& grid, const std::vector<std::size_t>& shape,
                           std::string_view what)
    : layout_(layout), grid_(grid) {
  const std::size_t n = element_count(shape);
  const std::size_t sr = grid.scale_rows(), sc = grid.scale_cols();
  const std::size_t r128 = round_up(grid.rows, kTileRows), sc4 = round_up(sc, kTileCols);
  const std::string prefix = std::string(what) + ": shape " + shape_text(shape) + " does not fit layout " +
                             std::string(name_of(layout)) + " of a [" + std::to_string(grid.rows) + ", " +
                             std::to_string(grid.cols) + "] tensor in " + std::to_string(grid.block_rows) + "x" +
                             std::to_string(grid.block_cols) + " blocks: expected ";
  if (shape.empty() || shape.size() > 2) throw DataError(prefix + "a 1-D or 2-D array");
  switch (layout) {
    case ScaleLayout::rowmajor:
      if (n != sr * sc || (shape.size() == 2 && shape[1] != sc)) {
        throw DataError(prefix + shape_text({sr, sc}));
      }
      ld_ = sc;
      break;
    case ScaleLayout::te_rowrep:
      if (n == grid.rows * sc && (shape.size() == 1 || shape[1] == sc)) {
        ld_ = sc;
      } else if (n == r128 * sc4 && (shape.size() == 1 || shape[1] == sc4)) {
        ld_ = sc4;
      } else {
        throw DataError(prefix + shape_text({grid.rows, sc}) + " or TE's padded " + shape_text({r128, sc4}));
      }
      break;
    case ScaleLayout::swizzled_128x4:
      if (n != r128 * sc4) {
        throw DataError(prefix + std::to_string(r128 * sc4) + " bytes (" + shape_text({r128, sc4}) +
                        " in 128x4 tiles, any 1-D or 2-D shape)");
      }
      col_tiles_ = sc4 / kTileCols;
      break;
  }
  size_ = n;
}

std::size_t ScaleStorage::offset(std::size_t row, std::size_t j) const {
  switch (layout_) {
    case ScaleLayout::rowmajor: return (row / grid_.block_rows) * ld_ + j;
    case ScaleLayout::te_rowrep: return row * ld_ + j;
    case ScaleLayout::swizzled_128x4:
      // tile (row / 128, j / 4), tiles row-major; inside, (r % 32) * 16 + ((r % 128) / 32) * 4 + j % 4.
      return ((row / kTileRows) * col_tiles_ + j / kTileCols) * kTileBytes + (row % 32) * 16 +
             ((row % kTileRows) / 32) * 4 + (j % kTileCols);
  }
  return 0;
}

std::vector<std::uint8_t> scales_to_layout(std::span<const std::uint8_t> rowmajor, const ScaleGrid& grid,
                                           ScaleLayout layout) {
  const std::size_t sc = grid.scale_cols();
  if (rowmajor.size() != grid.scale_rows() * sc) {
    throw DataError("scales: " + std::to_string(rowmajor.size()) + " bytes for a block grid of " +
                    shape_text({grid.scale_rows(), sc}));
  }
  const auto shape = ScaleStorage::canonical_shape(layout, grid);
  const ScaleStorage storage(layout, grid, shape);
  std::vector<std::uint8_t> out(storage.size(), 0);
  for (std::size_t r = 0; r < grid.rows; ++r) {
    for (std::size_t j = 0; j < sc; ++j) out[storage.offset(r, j)] = rowmajor[(r / grid.block_rows) * sc + j];
  }
  return out;
}

std::vector<std::uint8_t> scales_from_layout(std::span<const std::uint8_t> stored,
                                             const std::vector<std::size_t>& shape, const ScaleGrid& grid,
                                             ScaleLayout layout) {
  const ScaleStorage storage(layout, grid, shape);
  if (stored.size() != storage.size()) {
    throw DataError("scales: " + std::to_string(stored.size()) + " bytes, shape says " + shape_text(shape));
  }
  const std::size_t sr = grid.scale_rows(), sc = grid.scale_cols();
  std::vector<std::uint8_t> out(sr * sc, 0);
  for (std::size_t r = 0; r < grid.rows; ++r) {
    for (std::size_t j = 0; j < sc; ++j) {
      const std::uint8_t v = stored[storage.offset(r, j)];
      std::uint8_t& slot = out[(r / grid.block_rows) * sc + j];
      if (r % grid.block_rows == 0) {
        slot = v;
      } else if (slot != v) {
        throw DataError("scales: the copies of tile [" + std::to_string(r / grid.block_rows) + ", " +
                        std::to_string(j) + "] disagree: row " + std::to_string(r) + " holds " + std::to_string(v) +
                        ", the tile's first row " + std::to_string(slot));
      }
    }
  }
  return out;
}

std::vector<std::size_t> codes_shape(NibbleOrder order, std::size_t rows, std::size_t cols) {
  return {rows, order == NibbleOrder::unpacked ? cols : (cols + 1) / 2};
}

void check_codes_shape(NibbleOrder order, std::size_t rows, std::size_t cols, const std::vector<std::size_t>& shape,
                       std::string_view what) {
  const auto want = codes_shape(order, rows, cols);
  const bool ok = shape == want || (rows == 1 && shape.size() == 1 && shape[0] == want[1]);
  if (!ok) {
    throw DataError(std::string(what) + ": shape " + shape_text(shape) + " does not hold " +
                    std::string(name_of(order)) + " codes of a [" + std::to_string(rows) + ", " +
                    std::to_string(cols) + "] tensor: expected " + shape_text(want));
  }
}

std::vector<std::uint8_t> codes_to_order(std::span<const std::uint8_t> low_first, std::size_t rows, std::size_t cols,
                                         NibbleOrder order) {
  const std::size_t cc = (cols + 1) / 2;
  if (low_first.size() != rows * cc) throw DataError("codes: size differs from [rows, ceil(cols/2)]");
  if (order == NibbleOrder::low_first) return {low_first.begin(), low_first.end()};
  if (order == NibbleOrder::high_first) {
    std::vector<std::uint8_t> out(low_first.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<std::uint8_t>((low_first[i] << 4) | (low_first[i] >> 4));
    }
    return out;
  }
  std::vector<std::uint8_t> out(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) out[r * cols + c] = stored_code(low_first, NibbleOrder::low_first, cols, r, c);
  }
  return out;
}

std::vector<std::uint8_t> codes_from_order(std::span<const std::uint8_t> stored, std::size_t rows, std::size_t cols,
                                           NibbleOrder order) {
  const std::size_t cc = (cols + 1) / 2;
  const std::size_t want = order == NibbleOrder::unpacked ? rows * cols : rows * cc;
  if (stored.size() != want) throw DataError("codes: size differs from the shape of " + std::string(name_of(order)) + " codes");
  std::vector<std::uint8_t> out(rows * cc, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const std::uint8_t code = stored_code(stored, order, cols, r, c);
      out[r * cc + c / 2] |= static_cast<std::uint8_t>((c & 1) ? code << 4 : code);
    }
  }
  return out;
}

}  // namespace fp4sim
