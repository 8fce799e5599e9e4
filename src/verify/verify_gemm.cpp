// verify gemm: the user's GEMM output against a golden datapath (or every datapath, --datapath auto),
// with the worst outputs traced through the datapath's own steps, as the golden reference reports them
// (GemmTrace): block terms and running sums (fp32-seq), fused steps with their alignment exponent E_max
// and the bits cut below the F-bit window (T-FDPA, the groups of probe-matched, GST-FDPA instructions),
// the epilogue's alpha.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/primitives.hpp"
#include "fp4sim/core/random.hpp"
#include "fp4sim/verify/verify.hpp"
#include "report.hpp"

namespace fp4sim {

namespace {

using report::with_bits;

std::string ld_text(long double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6Lg", v);
  return buf;
}

// ---------------------------------------------------------------------------------------------------
// The golden reference's trace of one output, as lines for people.

std::string step_text(const FusedStepTrace& s, const char* what) {
  std::string t = std::string(what) + " k " + std::to_string(s.k0) + ".." + std::to_string(s.k1 - 1) + ": C in " +
                  float_text(std::bit_cast<float>(s.c_in));
  if (s.special) return t + "; NaN/Inf operands; out " + float_text(std::bit_cast<float>(s.out));
  if (!s.any) return t + "; all addends zero; out " + float_text(std::bit_cast<float>(s.out));
  return t + "; E_max " + std::to_string(s.e_max) + "; " + std::to_string(s.lost) + " of " + std::to_string(s.addends) +
         " addends lost bits below the window (total cut " + ld_text(s.truncated) + "); out " +
         with_bits(std::bit_cast<float>(s.out));
}

// The steps of a chain worth showing: the first, the last, and the ones that cut the most.
void summarize_chain(const std::vector<FusedStepTrace>& steps, const char* what, std::size_t show,
                     std::vector<std::string>& out) {
  if (steps.empty()) return;
  int lo = std::numeric_limits<int>::max(), hi = std::numeric_limits<int>::min();
  std::size_t cutting = 0;
  long double total = 0;
  for (const auto& s : steps) {
    if (s.any && !s.special) {
      lo = std::min(lo, s.e_max);
      hi = std::max(hi, s.e_max);
    }
    cutting += s.lost > 0;
    total += s.truncated;
  }
  out.push_back(std::to_string(steps.size()) + " " + what + "(s) in ascending k from +0" +
                (lo <= hi ? "; alignment exponent E_max " + std::to_string(lo) + (hi > lo ? ".." + std::to_string(hi) : "")
                          : std::string()) +
                "; " + std::to_string(cutting) + " step(s) cut bits below the window (total cut " + ld_text(total) + ")");
  std::vector<std::size_t> order(steps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return std::fabs(steps[x].truncated) > std::fabs(steps[y].truncated);
  });
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < order.size() && chosen.size() < show; ++i) {
    if (steps[order[i]].lost > 0) chosen.push_back(order[i]);
  }
  if (chosen.empty()) chosen.push_back(steps.size() - 1);
  std::sort(chosen.begin(), chosen.end());
  for (auto idx : chosen) out.push_back("  " + step_text(steps[idx], what));
}

// One output through the golden datapath: its own trace, in the datapath's terms.
std::vector<std::string> trace_output(const QuantizedTensor& qa, std::size_t i, const QuantizedTensor& qb,
                                      std::size_t j, const GemmOptions& o, float golden) {
  GemmTrace t;
  gemm_reference_element(qa, i, qb, j, o, &t);
  std::vector<std::string> lines;
  const Datapath& dp = *o.datapath;
  const std::string acc = with_bits(std::bit_cast<float>(t.accumulator));
  switch (dp.kind) {
    case DatapathKind::exact:
      lines.push_back("exact datapath: the sum of all " + std::to_string(t.blocks) +
                      " block terms s_a*s_b*sum(q_a*q_b) is " + ld_text(t.exact_sum) +
                      " (exact), multiplied by alpha and rounded once (RNE)");
      lines.push_back("alpha = " + with_bits(o.alpha) + "; output = RN32(sum * alpha) = " + with_bits(golden));
      break;
    case DatapathKind::fp32_seq:
      lines.push_back("fp32-seq: y = +0; y = RN32(y + s_a*s_b*sum(q_a*q_b)) over " + std::to_string(t.blocks) +
                      " K blocks in order (each block term exact); " + std::to_string(t.rounded_additions) +
                      " of the additions rounded" +
                      (t.rounded_additions ? "; largest rounding error " + ld_text(t.largest_rounding) + " at block " +
                                                 std::to_string(t.largest_rounding_block)
                                           : std::string()));
      lines.push_back("accumulated y = " + acc + "; alpha = " + with_bits(o.alpha) + "; output = RN32(y * alpha)");
      break;
    case DatapathKind::tfdpa:
      lines.push_back(std::string(dp.name) + " (" + describe_parameters(dp) + ") over the encoded operands q*s in " +
                      std::string(dp.inputs.front().name) + ":");
      summarize_chain(t.steps, "step", 3, lines);
      lines.push_back("accumulator = " + acc + "; alpha = " + with_bits(o.alpha) + "; output = RN32(acc * alpha)");
      break;
    case DatapathKind::probe_matched: {
      const Datapath& inner = o.inner ? *o.inner : *dp.inner;
      lines.push_back("probe-matched: per 64-group an inner " + std::string(inner.name) + " chain from +0 (" +
                      describe_parameters(inner) + "), partials combined by add.rz.f32 from +0");
      summarize_chain(t.steps, "inner step", 3, lines);
      std::string groups;
      constexpr std::size_t kShown = 4;
      for (std::size_t g = 0; g < t.partials.size() && g < kShown; ++g) {
        groups += (g ? "; " : "") + std::string("group ") + std::to_string(g) + ": partial " + float_text(t.partials[g]) +
                  ", C = add.rz(" + float_text(g ? t.sums[g - 1] : 0.0f) + ", partial) = " + float_text(t.sums[g]);
      }
      lines.push_back(groups + (t.partials.size() > kShown ? "; ..." : ""));
      if (t.snapped) {
        lines.push_back("snap RNE(C*1024)/1024: " + float_text(t.before_snap) + " -> " +
                        float_text(std::bit_cast<float>(t.accumulator)));
      }
      lines.push_back("alpha = " + with_bits(o.alpha) + "; output = RN32(C * alpha)");
      break;
    }
    case DatapathKind::gst_fdpa:
      lines.push_back(std::string(dp.name) + " (" + describe_parameters(dp) + "): per K=" +
                      std::to_string(dp.instruction_k) + " instruction, exact sub-block sums scaled exactly, one fused sum");
      summarize_chain(t.steps, "instruction", 3, lines);
      lines.push_back("accumulator = " + acc + "; alpha = " + with_bits(o.alpha) + "; output = RN32(acc * alpha)");
      break;
  }
  return lines;
}

// ---------------------------------------------------------------------------------------------------

struct Config {
  std::string label;
  GemmRequest request;
};

std::vector<Config> auto_configs(const Recipe& recipe, bool bf16_too) {
  std::vector<Config> out;
  for (const Datapath* dp : datapath_presets()) {
    for (const GemmRequest& request : row_settings(*dp)) {
      out.push_back({std::string(dp->name) + (request.inner ? " (inner " + std::string(request.inner->name) +
                                                                  (request.snap ? ", snap" : ", no snap") + ")"
                                                            : std::string()),
                     request});
    }
  }
  if (bf16_too) {
    const std::size_t n = out.size();
    for (std::size_t i = 0; i < n; ++i) {
      Config c = out[i];
      c.label += ", bf16 output";
      c.request.bf16_output = true;
      out.push_back(c);
    }
  }
  (void)recipe;
  return out;
}

std::uint64_t count_exact(std::span<const float> golden, std::span<const float> theirs) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < golden.size(); ++i) {
    n += std::bit_cast<std::uint32_t>(golden[i]) == std::bit_cast<std::uint32_t>(theirs[i]);
  }
  return n;
}

// Outputs that tie are found by a digest of their bits, and each digest match is confirmed bit for bit:
// outputs that both equal the user's equal each other; otherwise against the group's first member,
// computed again (holding every configuration's output would take about 40 times the output's memory).
std::uint64_t bits_digest(std::span<const float> c) {
  return fnv1a(std::string_view(reinterpret_cast<const char*>(c.data()), c.size_bytes()));
}

struct TieGroup {
  std::uint64_t digest;
  bool equals_theirs;                 // the outputs are the user's, bit for bit
  GemmOptions first;                  // the first member's run, computed again to confirm a digest match
  std::vector<std::size_t> members;   // candidate indices, in table order
};

void place_in_ties(std::vector<TieGroup>& groups, std::size_t candidate, const GemmOptions& o, std::span<const float> c,
                   bool equals_theirs, const QuantizedTensor& qa, const QuantizedTensor& qb) {
  const std::uint64_t digest = bits_digest(c);
  for (TieGroup& g : groups) {
    if (g.digest != digest || g.equals_theirs != equals_theirs) continue;
    if (equals_theirs || count_exact(gemm(qa, qb, g.first), c) == c.size()) {
      g.members.push_back(candidate);
      return;
    }
  }
  groups.push_back({digest, equals_theirs, o, {candidate}});
}

std::string bin_label(int key) {
  const int b = std::abs(key) - 1;  // |d| in (2^(b-1), 2^b]
  const std::int64_t hi = std::int64_t{1} << b;
  const std::int64_t lo = b == 0 ? 1 : (std::int64_t{1} << (b - 1)) + 1;
  const char* sign = key < 0 ? "-" : "+";
  return lo == hi ? sign + std::to_string(hi) : sign + std::to_string(lo) + ".." + sign + std::to_string(hi);
}

}  // namespace

GemmVerifyReport verify_gemm(const Recipe& recipe, const VerifyGemmRequest& request, std::span<const float> a,
                             std::span<const float> b, std::size_t m, std::size_t n, std::size_t k,
                             std::span<const float> theirs) {
  if (a.size() != m * k || b.size() != n * k) throw DataError("verify gemm: operand sizes do not match their shapes");
  if (theirs.size() != m * n) {
    throw DataError("verify gemm: your C holds " + std::to_string(theirs.size()) + " values; C = A·Bᵀ is [" +
                    std::to_string(m) + ", " + std::to_string(n) + "]");
  }
  const QuantizedTensor qa = quantize(recipe, request.a, a, m, k);
  const QuantizedTensor qb = quantize(recipe, request.b, b, n, k);

  GemmVerifyReport rep;
  rep.recipe = recipe.name;
  rep.gemm = std::string(name_of(request.gemm));
  rep.m = m;
  rep.n = n;
  rep.k = k;
  rep.outputs = m * n;
  rep.auto_mode = request.auto_datapath;

  GemmOptions options;
  std::vector<float> golden;
  if (request.auto_datapath) {
    std::uint64_t best = 0;
    bool have = false, best_is_own = false;
    const std::vector<Config> configs = auto_configs(recipe, bf16_values_only(theirs));
    std::vector<TieGroup> groups;
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const Config& cfg = configs[i];
      if (request.progress) request.progress(i, configs.size(), cfg.label);
      GemmCandidate cand;
      cand.name = cfg.label;
      try {
        const GemmOptions o = resolve_gemm(recipe, qa, qb, cfg.request);
        std::vector<float> c = gemm(qa, qb, o);
        cand.exact_matches = count_exact(c, theirs);
        place_in_ties(groups, rep.candidates.size(), o, c, cand.exact_matches == rep.outputs, qa, qb);
        // The best count wins; among equals, the recipe's own datapath.
        const bool own = cfg.request.datapath == recipe.default_datapath && !cfg.request.bf16_output &&
                         cfg.request.snap && (!cfg.request.inner || cfg.request.inner == o.datapath->inner);
        if (!have || cand.exact_matches > best || (cand.exact_matches == best && own && !best_is_own)) {
          best_is_own = own;
          best = cand.exact_matches;
          have = true;
          options = o;
          golden = std::move(c);
        }
        if (cand.exact_matches == rep.outputs) rep.explained_by.push_back(cand.name);
      } catch (const std::exception& e) {  // DataError / UsageError: this row cannot take these operands
        cand.error = e.what();
      }
      rep.candidates.push_back(std::move(cand));
    }
    for (const TieGroup& g : groups) {
      if (g.members.size() < 2) continue;
      rep.ties.emplace_back();
      for (std::size_t member : g.members) {
        rep.candidates[member].tie_group = rep.ties.size() - 1;
        rep.ties.back().push_back(rep.candidates[member].name);
      }
    }
    std::stable_sort(rep.candidates.begin(), rep.candidates.end(), [](const GemmCandidate& x, const GemmCandidate& y) {
      if (x.error.empty() != y.error.empty()) return x.error.empty();
      return x.exact_matches > y.exact_matches;
    });
    if (request.progress) request.progress(configs.size(), configs.size(), "done");
    if (!have) throw DataError("verify gemm: no datapath preset can run these operands");
  } else {
    options = resolve_gemm(recipe, qa, qb, request.datapath);
    options.progress = request.progress;
    golden = gemm(qa, qb, options);
    options.progress = nullptr;
  }
  rep.datapath = std::string(options.datapath->name);
  if (options.datapath->kind == DatapathKind::probe_matched) {
    rep.inner = std::string(options.inner ? options.inner->name : options.datapath->inner->name);
  }
  rep.snap = options.snap;
  rep.bf16_output = options.bf16_output;
  rep.alpha = options.alpha;

  std::map<int, std::uint64_t> bins;
  std::vector<std::pair<std::int64_t, std::size_t>> bad;  // (severity, index)
  std::uint64_t zero_bin = 0, nonfinite_bin = 0;
  for (std::size_t idx = 0; idx < golden.size(); ++idx) {
    const std::uint32_t g = std::bit_cast<std::uint32_t>(golden[idx]), t = std::bit_cast<std::uint32_t>(theirs[idx]);
    if (g == t) {
      ++rep.exact_matches;
      continue;
    }
    ++rep.mismatches;
    if (!std::isfinite(golden[idx]) || !std::isfinite(theirs[idx])) {
      ++rep.nonfinite_mismatches;
      ++nonfinite_bin;
      bad.emplace_back(std::numeric_limits<std::int64_t>::max(), idx);
      continue;
    }
    const std::int64_t d = ulp_distance(golden[idx], theirs[idx]);
    if (d == 0) {
      ++zero_bin;
      bad.emplace_back(0, idx);
      continue;
    }
    (d > 0 ? rep.theirs_above : rep.theirs_below) += 1;
    const std::uint64_t ad = static_cast<std::uint64_t>(d < 0 ? -d : d);
    rep.max_abs_ulps = std::max<std::int64_t>(rep.max_abs_ulps, static_cast<std::int64_t>(ad));
    const int key = (64 - std::countl_zero(ad - 1)) + 1;  // ceil(log2 |d|) + 1
    bins[d < 0 ? -key : key] += 1;
    bad.emplace_back(static_cast<std::int64_t>(ad), idx);
  }
  for (const auto& [key, count] : bins) rep.histogram.emplace_back(bin_label(key), count);
  if (zero_bin) rep.histogram.emplace_back("0 (sign of zero)", zero_bin);
  if (nonfinite_bin) rep.histogram.emplace_back("non-finite", nonfinite_bin);

  const std::size_t take = std::min(request.worst, bad.size());
  std::partial_sort(bad.begin(), bad.begin() + static_cast<std::ptrdiff_t>(take), bad.end(),
                    [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });

  // Alternatives for the worst outputs, one element at a time.
  std::vector<std::pair<std::string, GemmOptions>> alternatives;
  if (take > 0) {
    for (const Config& cfg : auto_configs(recipe, true)) {
      try {
        const GemmOptions o = resolve_gemm(recipe, qa, qb, cfg.request);
        check_gemm_operands(qa, qb, o);
        alternatives.emplace_back(cfg.label, o);
      } catch (const std::exception&) {
      }
    }
  }
  GemmOptions exact_options = options;
  exact_options.datapath = &datapaths::exact;
  exact_options.alpha = options.alpha;
  exact_options.bf16_output = false;

  for (std::size_t w = 0; w < take; ++w) {
    const std::size_t idx = bad[w].second;
    const std::size_t i = idx / n, j = idx % n;
    GemmOutputNote note;
    note.row = i;
    note.col = j;
    note.golden = golden[idx];
    note.theirs = theirs[idx];
    const bool finite = std::isfinite(golden[idx]) && std::isfinite(theirs[idx]);
    note.ulps = finite ? ulp_distance(golden[idx], theirs[idx]) : 0;
    char diff[48];
    std::snprintf(diff, sizeof diff, "%+lld ulp(s)", static_cast<long long>(note.ulps));
    note.summary = "C[" + std::to_string(i) + ", " + std::to_string(j) + "]: golden " + with_bits(golden[idx]) +
                   ", yours " + with_bits(theirs[idx]) + ", " + (finite ? std::string(diff) : std::string("non-finite"));
    note.details = trace_output(qa, i, qb, j, options, golden[idx]);
    try {
      const float ex = gemm_reference_element(qa, i, qb, j, exact_options);
      note.details.push_back("exact result rounded once: " + with_bits(ex) + " (golden " +
                             std::to_string(ulp_distance(ex, golden[idx])) + " ulps from it, yours " +
                             (std::isfinite(theirs[idx]) && std::isfinite(ex) ? std::to_string(ulp_distance(ex, theirs[idx]))
                                                                              : std::string("?")) +
                             ")");
    } catch (const std::exception&) {
    }
    std::string same;
    for (const auto& [label, o] : alternatives) {
      if (std::bit_cast<std::uint32_t>(gemm_reference_element(qa, i, qb, j, o)) == std::bit_cast<std::uint32_t>(theirs[idx])) {
        same += (same.empty() ? "" : ", ") + label;
      }
    }
    note.details.push_back(same.empty() ? "no modelled datapath gives yours for this output"
                                        : "datapaths that give yours for this output: " + same);
    note.fields = {report::integer("row", static_cast<long long>(i)), report::integer("col", static_cast<long long>(j)),
                   report::number("golden", golden[idx]), report::text("golden_bits", hex_bits(golden[idx])),
                   report::number("theirs", theirs[idx]), report::text("theirs_bits", hex_bits(theirs[idx])),
                   report::integer("ulps", note.ulps), report::boolean("finite", finite)};
    note.fields.push_back(report::text("explanation", report::joined(note.details)));
    rep.worst.push_back(std::move(note));
  }
  return rep;
}

}  // namespace fp4sim
