// `fp4sim vectors --discriminate`: GEMM inputs on which named datapath rows give different bits, found by
// drawing inputs where the rows part ways and keeping those on which running every row shows it. The
// shapes are the ones the block-scaled probe kit draws for one instruction (tools/probes/
// blockscale_cases.cpp: scales spread over binades, sub-blocks that cancel), here as whole GEMM operands
// that go through the recipe's quantizer.
#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>

#include "fp4sim/analysis/vectors.hpp"
#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm.hpp"
#include "vectors_internal.hpp"

namespace fp4sim::vectors {

using namespace detail;

namespace {

// M = N = 16 and K = 128: a multiple of every block, of probe-matched's group and of the block-scaled
// instruction's K (64), so every row can run them.
constexpr std::size_t kRows = 16, kK = 128;
// Inputs drawn per case before giving up. Measured over 24 cases (seeds 0-2) each: the first input that
// tells the rows apart was at most the 14th for sets among exact, fp32-seq, sm70, sm80, sm90-bf16,
// sm90-tf32, sm100-mxf4nvf4, probe-matched and ue5m3-native, and at most the 96th for sm90-fp8 under MXFP4
// (only narrow draws fit E4M3); rows that tie on a thousand are reported as not told apart.
constexpr std::size_t kAttempts = 1000;
constexpr std::size_t kMoreAttempts = 16;  // after the first input that tells them apart
constexpr std::size_t kMaxCases = 1000;

// How one GEMM's operands are drawn (both alike, so that a narrow draw is narrow in both).
struct Shape {
  int spread;     // block magnitudes spread over this many binades
  bool far_rows;  // some rows 1 to 20 binades below the rest
  bool cancel;    // sub-block pairs whose exact sum is zero
};

// Blocks whose magnitudes spread over up to 30 binades, in one GEMM of four with some rows far below the
// rest: the small terms fall partly or wholly below an alignment window beside the large ones, and
// windows of different widths or groupings (F, G, the instruction or group K) keep different bits of
// them. Narrow spreads keep q·s within FP8's range, for the rows that take E4M3 operands. With `cancel`,
// each odd block of A is the negated block before it and B repeats its block, so the pair's exact sum is
// zero: it stays in the alignment exponent on one row and not on another, and the small terms are left.
Input spread_blocks(Context& c, std::size_t rows, const Shape& shape, bool negate) {
  Input in(rows, kK);
  const std::size_t B = c.block();
  const int spread = shape.spread;
  const bool far_rows = shape.far_rows, cancel = shape.cancel;
  for (std::size_t r = 0; r < rows; ++r) {
    const int row_shift = far_rows && c.draw.below(4) == 0 ? -c.draw.between(1, 20) : 0;
    for (std::size_t b0 = 0; b0 < kK; b0 += B) {
      const int top = row_shift - c.draw.between(0, spread);
      for (std::size_t i = b0; i < b0 + B; ++i) in.at(r, i) = c.draw.value(top - 3, top);
    }
    if (!cancel) continue;
    for (std::size_t b0 = B; b0 < kK; b0 += 2 * B) {
      for (std::size_t i = b0; i < b0 + B; ++i) in.at(r, i) = negate ? -in.at(r, i - B) : in.at(r, i - B);
    }
  }
  return in;
}

std::size_t differing_outputs(const std::vector<float>& x, const std::vector<float>& y) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    n += std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i]);
  }
  return n;
}

std::string row_list(const std::vector<const Datapath*>& rows) {
  std::string s;
  for (const Datapath* dp : rows) s += (s.empty() ? "" : ", ") + std::string(dp->name);
  return s;
}

}  // namespace

void detail::check_discriminate(const Recipe& recipe, const std::vector<const Datapath*>& rows, std::size_t cases) {
  if (rows.size() < 2) throw UsageError("{discriminate}: name two or more datapaths, separated by commas");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (rows[i] == rows[j]) throw UsageError("{discriminate}: " + std::string(rows[i]->name) + " is named twice");
    }
  }
  if (cases < 1 || cases > kMaxCases) {
    throw UsageError("{cases}: with {discriminate}, 1 to " + std::to_string(kMaxCases) + " (got " +
                     std::to_string(cases) + ")");
  }
  if (recipe.element != formats::e2m1) throw UsageError("vectors: only E2M1 element formats are supported");
}

void discriminate(const Recipe& recipe, const std::vector<const Datapath*>& rows, std::uint64_t seed, std::size_t cases,
                  const std::function<void(Case&&)>& sink) {
  check_discriminate(recipe, rows, cases);
  const GemmOperands ops = operands_for(recipe, Gemm::fprop);
  for (std::size_t index = 0; index < cases; ++index) {
    std::vector<std::string> refusals(rows.size());  // each row's first reason for not running an input
    std::vector<std::size_t> refused(rows.size(), 0);
    std::optional<GemmCase> best;
    std::size_t best_fewest = 0;  // the fewest outputs in which two of the rows differ, on `best`
    std::size_t stop = kAttempts;
    for (std::size_t attempt = 0; attempt < stop; ++attempt) {
      Draw draw(seed, kInputStreams | index << 32 | attempt);
      Context ca{recipe, ops.a, draw}, cb{recipe, ops.b, draw};
      const Shape shape{draw.between(0, 30), draw.below(4) == 0, draw.coin()};
      GemmCase g;
      g.name = case_name(index, "gemm_fprop_discriminating");
      g.gemm = Gemm::fprop;
      g.a = quantize_case(recipe, g.name + ".a", ops.a, spread_blocks(ca, kRows, shape, true), seed, 2 * index);
      g.b = quantize_case(recipe, g.name + ".b", ops.b, spread_blocks(cb, kRows, shape, false), seed, 2 * index + 1);
      bool ran = true;
      for (std::size_t r = 0; r < rows.size() && ran; ++r) {
        GemmRequest request;
        request.datapath = rows[r];
        GemmOutput out;
        out.datapath = rows[r]->name;
        try {
          out.alpha = resolve_gemm(recipe, g.a.q, g.b.q, request).alpha;
          out.c = gemm(recipe, g.a.q, g.b.q, request);
        } catch (const DataError& e) {  // this input (or every input of the recipe) does not fit the row
          if (refused[r]++ == 0) refusals[r] = e.what();
          ran = false;
        }
        g.outputs.push_back(std::move(out));
      }
      if (!ran) continue;
      std::size_t fewest = g.a.rows * g.b.rows;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        for (std::size_t j = i + 1; j < rows.size(); ++j) {
          const std::size_t n = differing_outputs(g.outputs[i].c, g.outputs[j].c);
          fewest = std::min(fewest, n);
          g.differences.push_back({std::string(rows[i]->name), std::string(rows[j]->name), n});
        }
      }
      // verify gemm --datapath auto also tries the other settings of each row (probe-matched's inner rows,
      // its snap off) and, on a C of BF16 values, BF16 outputs: none of them may give another row's C.
      std::vector<bool> bf16_c(rows.size());
      for (std::size_t i = 0; i < rows.size(); ++i) bf16_c[i] = bf16_values_only(g.outputs[i].c);
      for (std::size_t j = 0; j < rows.size() && fewest > 0; ++j) {
        for (const GemmRequest& setting : row_settings(*rows[j])) {
          for (bool bf16 : {false, true}) {
            GemmRequest request = setting;
            request.bf16_output = bf16;
            std::vector<float> c;
            for (std::size_t i = 0; i < rows.size() && fewest > 0; ++i) {
              if (i == j || (bf16 && !bf16_c[i]) || (!bf16 && !setting.inner)) continue;  // !inner: compared above
              try {
                if (c.empty()) c = gemm(recipe, g.a.q, g.b.q, request);
              } catch (const DataError&) {  // a setting that cannot run these operands gives no C
                break;
              }
              fewest = std::min(fewest, differing_outputs(g.outputs[i].c, c));
            }
          }
        }
      }
      if (fewest == 0 || fewest <= best_fewest) continue;
      // Found: a few more draws may tell the rows apart in more outputs (more robust against a kernel
      // that also differs elsewhere); the one with the most in its closest pair is kept.
      if (!best) stop = std::min(kAttempts, attempt + 1 + kMoreAttempts);
      best = std::move(g);
      best_fewest = fewest;
    }
    if (!best) {
      std::string why;
      for (std::size_t r = 0; r < rows.size(); ++r) {
        if (refused[r]) {
          why += "; " + std::string(rows[r]->name) + " could not run " + std::to_string(refused[r]) + " of them (" +
                 refusals[r] + ")";
        }
      }
      throw DataError("vectors: no input found on which " + row_list(rows) + " all differ under recipe " + recipe.name +
                      " (" + std::to_string(kAttempts) + " inputs tried for case " + std::to_string(index) +
                      "; the rows may agree on every input this recipe gives them)" + why);
    }
    Case c;
    c.gemm = std::move(*best);
    sink(std::move(c));
  }
}

}  // namespace fp4sim::vectors
