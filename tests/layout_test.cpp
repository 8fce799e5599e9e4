// Scale layouts and nibble orders (docs/layouts.md): round trips, and the swizzled 128x4 layout checked
// against an independent construction, the tensor reshapes of torchao's `to_blocked` / cuDNN's 128x4
// layout (view(n_row_blocks, 128, n_col_blocks, 4).permute(0, 2, 1, 3).reshape(-1, 4, 32, 4)
// .transpose(1, 2).reshape(-1, 32, 16)), walked element by element rather than by the closed formula.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/layout.hpp"

namespace fp4sim {
namespace {

// Builds the blocked layout by literally performing the reshapes on index arrays.
std::vector<std::uint8_t> to_blocked_reference(const std::vector<std::uint8_t>& rowmajor_per_row, std::size_t rows,
                                               std::size_t cols) {
  const std::size_t nrb = (rows + 127) / 128, ncb = (cols + 3) / 4;
  const std::size_t pr = nrb * 128, pc = ncb * 4;
  std::vector<std::uint8_t> padded(pr * pc, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) padded[r * pc + c] = rowmajor_per_row[r * cols + c];
  }
  // blocks[i][j][a][b] = padded[(i*128 + a) * pc + j*4 + b], after permute(0, 2, 1, 3): order (i, j, a, b).
  std::vector<std::uint8_t> permuted;
  for (std::size_t i = 0; i < nrb; ++i)
    for (std::size_t j = 0; j < ncb; ++j)
      for (std::size_t a = 0; a < 128; ++a)
        for (std::size_t b = 0; b < 4; ++b) permuted.push_back(padded[(i * 128 + a) * pc + j * 4 + b]);
  // reshape(-1, 4, 32, 4) then transpose(1, 2): element (t, p, q, b) -> (t, q, p, b).
  std::vector<std::uint8_t> out(permuted.size());
  const std::size_t tiles = nrb * ncb;
  for (std::size_t t = 0; t < tiles; ++t)
    for (std::size_t p = 0; p < 4; ++p)
      for (std::size_t q = 0; q < 32; ++q)
        for (std::size_t b = 0; b < 4; ++b) out[t * 512 + q * 16 + p * 4 + b] = permuted[t * 512 + p * 128 + q * 4 + b];
  return out;
}

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(1 + gen() % 255);  // nonzero, so padding shows
  return v;
}

struct Case {
  std::size_t rows, cols;
  int block_rows, block_cols;
};

const Case kCases[] = {{1, 16, 1, 16},    {5, 48, 1, 16},    {128, 64, 1, 16},  {130, 272, 1, 16},
                       {300, 100, 1, 32}, {64, 64, 16, 16},  {129, 80, 16, 16}, {257, 520, 16, 16},
                       {33, 31, 32, 32},  {1000, 1000, 1, 16}};

class Layouts : public ::testing::TestWithParam<Case> {};

TEST_P(Layouts, SwizzledEqualsTheReshapeConstruction) {
  const Case& k = GetParam();
  const ScaleGrid g{k.rows, k.cols, k.block_rows, k.block_cols};
  const auto scales = random_bytes(g.scale_rows() * g.scale_cols(), 7);
  std::vector<std::uint8_t> per_row(g.rows * g.scale_cols());
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t j = 0; j < g.scale_cols(); ++j) per_row[r * g.scale_cols() + j] = scales[(r / k.block_rows) * g.scale_cols() + j];
  const auto expected = to_blocked_reference(per_row, g.rows, g.scale_cols());
  const auto got = scales_to_layout(scales, g, ScaleLayout::swizzled_128x4);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "byte " << i << " of the swizzled scales of " << k.rows << "x" << k.cols;
  }
}

TEST_P(Layouts, EveryLayoutRoundTrips) {
  const Case& k = GetParam();
  const ScaleGrid g{k.rows, k.cols, k.block_rows, k.block_cols};
  const auto scales = random_bytes(g.scale_rows() * g.scale_cols(), 11);
  for (auto layout : {ScaleLayout::rowmajor, ScaleLayout::te_rowrep, ScaleLayout::swizzled_128x4}) {
    const auto stored = scales_to_layout(scales, g, layout);
    const auto shape = ScaleStorage::canonical_shape(layout, g);
    EXPECT_EQ(scales_from_layout(stored, shape, g, layout), scales) << name_of(layout);
  }
}

TEST_P(Layouts, TeRowRepetitionHoldsEachTileOnEachOfItsRows) {
  const Case& k = GetParam();
  const ScaleGrid g{k.rows, k.cols, k.block_rows, k.block_cols};
  const auto scales = random_bytes(g.scale_rows() * g.scale_cols(), 13);
  const auto stored = scales_to_layout(scales, g, ScaleLayout::te_rowrep);
  ASSERT_EQ(stored.size(), g.rows * g.scale_cols());
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t j = 0; j < g.scale_cols(); ++j)
      EXPECT_EQ(stored[r * g.scale_cols() + j], scales[(r / k.block_rows) * g.scale_cols() + j]);
  // TE's padded allocation [roundup(R,128), roundup(Sc,4)] reads the same.
  const std::size_t pr = round_up(g.rows, 128), pc = round_up(g.scale_cols(), 4);
  std::vector<std::uint8_t> padded(pr * pc, 0xEE);
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t j = 0; j < g.scale_cols(); ++j) padded[r * pc + j] = stored[r * g.scale_cols() + j];
  EXPECT_EQ(scales_from_layout(padded, {pr, pc}, g, ScaleLayout::te_rowrep), scales);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Layouts, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& k = info.param;
  return std::to_string(k.rows) + "x" + std::to_string(k.cols) + "_b" + std::to_string(k.block_rows) + "x" +
         std::to_string(k.block_cols);
});

TEST(Swizzled, KnownOffsets) {
  // 256 rows, 8 block columns: 2 x 2 tiles of 512 bytes.
  const ScaleGrid g{256, 128, 1, 16};
  const ScaleStorage s(ScaleLayout::swizzled_128x4, g, {256, 8});
  EXPECT_EQ(s.offset(0, 0), 0u);
  EXPECT_EQ(s.offset(0, 1), 1u);
  EXPECT_EQ(s.offset(0, 3), 3u);
  EXPECT_EQ(s.offset(32, 0), 4u);
  EXPECT_EQ(s.offset(96, 3), 15u);
  EXPECT_EQ(s.offset(1, 0), 16u);
  EXPECT_EQ(s.offset(31, 0), 496u);
  EXPECT_EQ(s.offset(127, 3), 511u);
  EXPECT_EQ(s.offset(0, 4), 512u);   // next tile along K
  EXPECT_EQ(s.offset(128, 0), 1024u);  // next tile row
  EXPECT_EQ(s.offset(255, 7), 2047u);
}

TEST(Swizzled, RejectsWrongSizes) {
  const ScaleGrid g{100, 64, 1, 16};  // needs 128 * 4 bytes
  EXPECT_NO_THROW(ScaleStorage(ScaleLayout::swizzled_128x4, g, {512}));
  EXPECT_NO_THROW(ScaleStorage(ScaleLayout::swizzled_128x4, g, {128, 4}));
  EXPECT_THROW(ScaleStorage(ScaleLayout::swizzled_128x4, g, {100, 4}), DataError);
  EXPECT_THROW(ScaleStorage(ScaleLayout::rowmajor, g, {100, 5}), DataError);
  EXPECT_THROW(ScaleStorage(ScaleLayout::te_rowrep, g, {100, 5}), DataError);
  EXPECT_NO_THROW(ScaleStorage(ScaleLayout::te_rowrep, g, {128, 4}));
}

TEST(TeRowRep, DisagreeingCopiesAreADataError) {
  const ScaleGrid g{32, 32, 16, 16};
  auto stored = scales_to_layout(std::vector<std::uint8_t>{1, 2, 3, 4}, g, ScaleLayout::te_rowrep);
  stored[5 * 2 + 1] = 9;  // row 5, block column 1
  try {
    scales_from_layout(stored, {32, 2}, g, ScaleLayout::te_rowrep);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("row 5"), std::string::npos) << e.what();
  }
}

TEST(Nibbles, OrdersRoundTripAndPlaceElementsWhereTheySay) {
  for (std::size_t cols : {1u, 2u, 7u, 16u, 33u}) {
    const std::size_t rows = 3, cc = (cols + 1) / 2;
    std::vector<std::uint8_t> codes(rows * cc, 0);
    std::mt19937 gen(static_cast<std::uint32_t>(cols));
    std::vector<std::uint8_t> element(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        element[r * cols + c] = static_cast<std::uint8_t>(gen() & 0xF);
        codes[r * cc + c / 2] |= static_cast<std::uint8_t>((c & 1) ? element[r * cols + c] << 4 : element[r * cols + c]);
      }
    for (auto order : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::unpacked}) {
      const auto stored = codes_to_order(codes, rows, cols, order);
      EXPECT_EQ(stored.size(), codes_shape(order, rows, cols)[0] * codes_shape(order, rows, cols)[1]);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
          ASSERT_EQ(stored_code(stored, order, cols, r, c), element[r * cols + c]) << name_of(order);
      EXPECT_EQ(codes_from_order(stored, rows, cols, order), codes) << name_of(order);
    }
    // high-first puts element 2j in the high nibble: byte 0 of row 0 is (e0 << 4) | e1.
    const auto high = codes_to_order(codes, rows, cols, NibbleOrder::high_first);
    const std::uint8_t e1 = cols > 1 ? element[1] : 0;
    EXPECT_EQ(high[0], static_cast<std::uint8_t>((element[0] << 4) | e1));
  }
}

TEST(Names, ParseWhatTheyPrint) {
  for (auto l : {ScaleLayout::rowmajor, ScaleLayout::te_rowrep, ScaleLayout::swizzled_128x4})
    EXPECT_EQ(parse_name<ScaleLayout>(name_of(l)), l);
  for (auto o : {NibbleOrder::low_first, NibbleOrder::high_first, NibbleOrder::unpacked})
    EXPECT_EQ(parse_name<NibbleOrder>(name_of(o)), o);
  EXPECT_FALSE(parse_name<ScaleLayout>("colmajor"));
}

}  // namespace
}  // namespace fp4sim
