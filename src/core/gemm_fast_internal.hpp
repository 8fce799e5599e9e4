// Internals of the fast GEMM shared by gemm_fast.cpp (dispatch, loop nest, epilogues), gemm_fast_pack.cpp
// (operand description and packing) and the kernels of gemm_kernels.inc (not public).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gemm_internal.hpp"

namespace fp4sim::detail {

constexpr int kMR = 4;   // rows of A per micro-tile
constexpr int kNV = 2;   // 16-lane vectors of B columns per micro-tile
constexpr int kNR = 16 * kNV;
constexpr std::size_t kGstMaxSub = 4;
constexpr int kNeg = -100000;  // "no nonzero element": below every exponent
constexpr int kPos = 100000;   // LSB of a block without nonzero products: nothing can be cut

struct KernelArgs {
  std::size_t n_pad = 0, nkb = 0, kb_len = 0;
  const float* a_pack = nullptr;  // [ip][kb][t][kMR]
  const float* b_pack = nullptr;  // [jp][kb][t][kNR]
  const std::uint8_t* a_pack8 = nullptr;  // int8 panels: [ip][k/4][kMR][4] of n + 128
  const std::int8_t* b_pack8 = nullptr;   // [jp][k/4][kNR][4] of n
  const int* b_colsum = nullptr;          // [jp][kb][kNR]: sum over the block of n_b
  const double* a_scale_d = nullptr;  // [row][kb]
  const double* b_scale_d = nullptr;  // [jp][kb][kNR]
  const float* a_scale_f = nullptr;
  const float* b_scale_f = nullptr;
  const int* a_l = nullptr;  // LSB exponent of the block's encoded elements (kPos: no nonzero)
  const int* a_m = nullptr;  // max alignment exponent of the block's nonzero encoded elements (kNeg)
  const int* b_l = nullptr;
  const int* b_m = nullptr;
  const int* a_lo = nullptr;  // per row: smallest LSB exponent of a nonzero element (kPos: none)
  const int* b_lo = nullptr;
  int frac_bits = 0;
  bool may_overflow = true;  // a running sum can reach 2^128 (else the kernels skip that test)
  std::size_t group_blocks = 0;  // probe-matched: blocks per 64-group; GST: sub-blocks per instruction
  double* state_d = nullptr;
  float* state_f = nullptr;
  float* state2_f = nullptr;
  std::uint32_t* state_u = nullptr;
  std::uint32_t (*fix)(const void* ctx, std::size_t i, std::size_t j, std::size_t kb, std::uint32_t c) = nullptr;
  float (*add_rz)(float, float) = nullptr;
  std::uint32_t (*gst_step)(const void* ctx, std::size_t i, std::size_t j, std::size_t kb, const float* sums,
                            std::uint32_t c) = nullptr;
  const void* fix_ctx = nullptr;
};

using TileFn = void (*)(const KernelArgs&, std::size_t ip, std::size_t jp, std::size_t kb0, std::size_t kb1);
struct TileSet {
  TileFn exact, fp32_seq, tfdpa, gst;
  const char* isa;
  bool int8_panels;  // the block products read the int8 panels (VNNI), else the binary32 panels
};

// The micro-block grid of one GEMM: M x N outputs padded to whole micro-tiles, K in nkb micro-blocks of
// kb_len elements (padded to whole GST-FDPA instructions of group_blocks micro-blocks).
struct Grid {
  std::size_t m = 0, n = 0, k = 0;
  std::size_t kb_len = 0, nkb = 0, group_blocks = 0;
  std::size_t m_pad = 0, n_pad = 0, n_ip = 0, n_jp = 0;
};

// Per (row, micro-block) scale data; rows with a NaN/Inf scale are recomputed by the reference.
struct Side {
  std::vector<double> sd;
  std::vector<float> sf;
  std::vector<int> l, mx;
  std::vector<char> special;    // per row
  std::vector<int> lo, hi;      // per row: min LSB and bound exponent of nonzero elements (exact)
  int min_l = kPos, max_l = kNeg, max_d = kNeg;
};

// The element integers packed micro-panel by micro-panel (binary32, exact, or int8 for VNNI), and B's
// scale data packed like its panels.
struct Panels {
  std::vector<float> a_pack, b_pack;
  std::vector<std::uint8_t> a_pack8;
  std::vector<std::int8_t> b_pack8;
  std::vector<int> b_colsum;
  std::vector<double> b_sd;
  std::vector<float> b_sf;
  std::vector<int> b_l, b_m;
};

// One operand's scale data per (row, micro-block), and per row its special scales and exponent range.
Side describe(const OperandInfo& op, const EncodedTable* table_full, std::size_t rows_pad, const Grid& grid);

Panels pack(const OperandInfo& a, const OperandInfo& b, const Side& sb, const Grid& grid, bool int8_panels);

}  // namespace fp4sim::detail
