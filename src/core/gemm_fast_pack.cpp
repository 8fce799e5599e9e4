// The fast GEMM's operands prepared for its kernels: each operand's scale data per micro-block and its
// element integers packed into micro-panels.
#include <algorithm>
#include <cmath>

#include "gemm_fast_internal.hpp"

namespace fp4sim::detail {

namespace {

// One row's element codes (unpacked nibbles).
void row_codes(const OperandInfo& op, std::size_t r, std::vector<std::uint8_t>& out) {
  out.resize(2 * op.q->code_cols());
  const std::uint8_t* codes = op.q->codes.data() + r * op.q->code_cols();
  for (std::size_t c2 = 0; c2 < op.q->code_cols(); ++c2) {
    out[2 * c2] = codes[c2] & 0xF;
    out[2 * c2 + 1] = codes[c2] >> 4;
  }
}

// One row's element integers.
void row_values(const OperandInfo& op, std::size_t r, std::vector<std::int8_t>& out) {
  thread_local std::vector<std::uint8_t> codes;
  row_codes(op, r, codes);
  out.resize(codes.size());
  for (std::size_t c = 0; c < codes.size(); ++c) out[c] = op.elem_n[codes[c]];
}

}  // namespace

Side describe(const OperandInfo& op, const EncodedTable* table_full, std::size_t rows_pad, const Grid& grid) {
  const std::size_t nkb = grid.nkb, kb_len = grid.kb_len, k = grid.k;
  // The alignment exponent of every (scale code, element code) pair, compactly.
  std::vector<int> exp_table;
  if (table_full) {
    exp_table.resize(256 * 16);
    for (std::size_t x = 0; x < exp_table.size(); ++x)
      exp_table[x] = table_full->value[x].cls == Unpacked::finite ? table_full->value[x].exp : kNeg;
  }
  const int* table = table_full ? exp_table.data() : nullptr;
  Side s;
  s.sd.assign(rows_pad * nkb, 0.0);
  s.sf.assign(rows_pad * nkb, 0.0f);
  s.l.assign(rows_pad * nkb, kPos);
  s.mx.assign(rows_pad * nkb, kNeg);
  s.special.assign(rows_pad, 0);
  s.lo.assign(rows_pad, kPos);
  s.hi.assign(rows_pad, kNeg);
  int min_l = kPos, max_l = kNeg, max_d = kNeg;
  const auto rows = static_cast<std::int64_t>(op.rows);
#pragma omp parallel for schedule(static) reduction(min : min_l) reduction(max : max_l, max_d)
  for (std::int64_t rr = 0; rr < rows; ++rr) {
    const auto r = static_cast<std::size_t>(rr);
    std::vector<std::uint8_t> codes;
    row_codes(op, r, codes);
    const std::uint8_t* scale_row = op.q->scales.data() + (r / static_cast<std::size_t>(op.q->block_rows)) * op.q->scale_cols;
    for (std::size_t kb = 0; kb < nkb; ++kb) {
      const std::size_t k0 = kb * kb_len, k1 = std::min(k, k0 + kb_len);
      if (k0 >= k) break;  // padding blocks: no elements, no scale
      const std::uint8_t code = scale_row[k0 / op.block];
      const Unpacked& sc = op.scale[code];
      if (sc.cls == Unpacked::nan || sc.cls == Unpacked::inf) {
        s.special[r] = 1;
        continue;
      }
      int maxn = 0, me = kNeg;
      for (std::size_t c = k0; c < k1; ++c) {
        const int v = op.elem_n[codes[c]];
        maxn = std::max(maxn, v < 0 ? -v : v);
      }
      if (table && maxn != 0) {
        const int* row_exp = table + static_cast<std::size_t>(code) * 16;
        for (std::size_t c = k0; c < k1; ++c) me = std::max(me, row_exp[codes[c]]);
      }
      if (sc.cls != Unpacked::finite || maxn == 0) continue;  // no nonzero element: contributes nothing
      const int lsb = sc.exp - sc.frac - op.elem_frac;
      s.sd[r * nkb + kb] = std::ldexp(static_cast<double>(sc.sig), lsb);  // exact (8-bit scale formats)
      // exact when the checks below pass (a scale beyond binary32's range fails them)
      s.sf[r * nkb + kb] = std::fabs(s.sd[r * nkb + kb]) <= 0x1p127 ? static_cast<float>(s.sd[r * nkb + kb]) : INFINITY;
      s.l[r * nkb + kb] = lsb;
      s.mx[r * nkb + kb] = me;
      min_l = std::min(min_l, lsb);
      max_l = std::max(max_l, lsb);
      if (table) max_d = std::max(max_d, me - lsb);
      s.lo[r] = std::min(s.lo[r], lsb);
      s.hi[r] = std::max(s.hi[r], lsb + bit_length(static_cast<std::uint64_t>(maxn) * sc.sig));
    }
  }
  s.min_l = min_l;
  s.max_l = max_l;
  s.max_d = max_d;
  return s;
}

Panels pack(const OperandInfo& a, const OperandInfo& b, const Side& sb, const Grid& grid, bool int8_panels) {
  const std::size_t m = grid.m, n = grid.n, k = grid.k, kb_len = grid.kb_len, nkb = grid.nkb;
  const std::size_t n_ip = grid.n_ip, n_jp = grid.n_jp;
  Panels panels;
  // References, not a structured binding: clang 14 cannot use a binding inside the OpenMP regions below.
  auto& a_pack = panels.a_pack;
  auto& b_pack = panels.b_pack;
  auto& a_pack8 = panels.a_pack8;
  auto& b_pack8 = panels.b_pack8;
  auto& b_colsum = panels.b_colsum;
  auto& b_sd = panels.b_sd;
  auto& b_sf = panels.b_sf;
  auto& b_l = panels.b_l;
  auto& b_m = panels.b_m;
  const std::size_t k_pad = nkb * kb_len;
  const auto ipn = static_cast<std::int64_t>(n_ip), jpn = static_cast<std::int64_t>(n_jp);
  if (int8_panels) {
    a_pack8.assign(n_ip * k_pad * kMR, 128);
    b_pack8.assign(n_jp * k_pad * kNR, 0);
    b_colsum.assign(n_jp * nkb * kNR, 0);
  } else {
    a_pack.assign(n_ip * k_pad * kMR, 0.0f);
    b_pack.assign(n_jp * k_pad * kNR, 0.0f);
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t ip = 0; ip < ipn; ++ip) {
    std::vector<std::int8_t> vals;
    for (int r = 0; r < kMR; ++r) {
      const std::size_t row_i = static_cast<std::size_t>(ip) * kMR + static_cast<std::size_t>(r);
      if (row_i >= m) continue;
      row_values(a, row_i, vals);
      const std::size_t base = static_cast<std::size_t>(ip) * k_pad * kMR;
      if (int8_panels) {
        std::uint8_t* dst = a_pack8.data() + base + 4 * static_cast<std::size_t>(r);
        for (std::size_t c = 0; c < k; ++c)
          dst[(c >> 2) * 4 * kMR + (c & 3)] = static_cast<std::uint8_t>(vals[c] + 128);
      } else {
        float* dst = a_pack.data() + base + static_cast<std::size_t>(r);
        for (std::size_t c = 0; c < k; ++c) dst[c * kMR] = static_cast<float>(vals[c]);  // [kb][t] is c
      }
    }
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t jp = 0; jp < jpn; ++jp) {
    std::vector<std::int8_t> vals;
    for (int cc = 0; cc < kNR; ++cc) {
      const std::size_t row_j = static_cast<std::size_t>(jp) * kNR + static_cast<std::size_t>(cc);
      if (row_j >= n) continue;
      row_values(b, row_j, vals);
      const std::size_t base = static_cast<std::size_t>(jp) * k_pad * kNR;
      if (int8_panels) {
        std::int8_t* dst = b_pack8.data() + base + 4 * static_cast<std::size_t>(cc);
        int* sums = b_colsum.data() + static_cast<std::size_t>(jp) * nkb * kNR + static_cast<std::size_t>(cc);
        for (std::size_t c = 0; c < k; ++c) dst[(c >> 2) * 4 * kNR + (c & 3)] = vals[c];
        for (std::size_t kb = 0; kb < nkb; ++kb) {
          int sum = 0;
          for (std::size_t c = kb * kb_len; c < std::min(k, (kb + 1) * kb_len); ++c) sum += vals[c];
          sums[kb * kNR] = sum;
        }
      } else {
        float* dst = b_pack.data() + base + static_cast<std::size_t>(cc);
        for (std::size_t c = 0; c < k; ++c) dst[c * kNR] = static_cast<float>(vals[c]);
      }
    }
  }
  // B-side scale data packed like the panels: [jp][kb][kNR].
  b_sd.resize(n_jp * nkb * kNR);
  b_sf.resize(n_jp * nkb * kNR);
  b_l.resize(n_jp * nkb * kNR);
  b_m.resize(n_jp * nkb * kNR);
  for (std::size_t jp = 0; jp < n_jp; ++jp)
    for (std::size_t kb = 0; kb < nkb; ++kb)
      for (int cc = 0; cc < kNR; ++cc) {
        const std::size_t row_j = jp * kNR + static_cast<std::size_t>(cc);
        const std::size_t dst = (jp * nkb + kb) * kNR + static_cast<std::size_t>(cc);
        b_sd[dst] = sb.sd[row_j * nkb + kb];
        b_sf[dst] = sb.sf[row_j * nkb + kb];
        b_l[dst] = sb.l[row_j * nkb + kb];
        b_m[dst] = sb.mx[row_j * nkb + kb];
      }
  return panels;
}

}  // namespace fp4sim::detail
