// replay's terminal summary: per recipe (or per policy, with recipe maps) overall figures, best per tensor
// role, worst layers, GEMM errors, headroom.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fp4sim/analysis/replay.hpp"
#include "fp4sim/core/names.hpp"

namespace fp4sim::replay {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(std::string s, std::size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

struct Mean {
  double sum = 0;
  std::size_t n = 0;
  void add(const stats::Figure& f) {
    if (f.value) {
      sum += *f.value;
      ++n;
    }
  }
  std::optional<double> get() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
};

std::string opt(const std::optional<double>& v, const char* format) { return v ? fmt(format, *v) : "-"; }

// The summary's columns: the recipes, or the policies (recipe maps) when the run had them.
struct Columns {
  bool policies = false;
  const std::vector<std::string>* names = nullptr;
  std::size_t width = 12;
  template <class Entry>
  const std::string& of(const Entry& e) const { return policies ? e.policy : e.recipe; }
};

// The SQNR of a column over some of its entries. Recipes: the mean of the entries' SQNR dB, exact
// entries left out. Policies: −10·log10 of the mean rel_mse, an exact (BF16) entry counting 0, so that
// policies keeping different tensors in BF16 are compared over the same tensors.
struct SqnrOf {
  bool policies = false;
  Mean sqnr, rel_mse;
  void add(const TensorEntry& e) {
    sqnr.add(e.stats.error.sqnr_db());
    rel_mse.add(e.stats.error.rel_mse());
  }
  std::optional<double> get() const {
    if (!policies) return sqnr.get();
    const auto m = rel_mse.get();
    return m && *m > 0 ? std::optional<double>(-10.0 * std::log10(*m)) : std::nullopt;
  }
};

}  // namespace

std::string summary(const Result& r) {
  std::ostringstream out;
  out << "fp4sim replay: " << r.trace.path;
  if (!r.trace.model.empty()) out << "\n  model: " << r.trace.model;
  std::set<std::string> layers;
  for (const auto& e : r.tensors) layers.insert(e.layer);
  out << "\n  " << r.steps.size() << " step(s) (";
  for (std::size_t i = 0; i < r.steps.size(); ++i) out << (i ? ", " : "") << r.steps[i];
  out << ") x " << layers.size() << " layer(s) x 3 tensors; recipes ";
  for (std::size_t i = 0; i < r.recipe_names.size(); ++i) out << (i ? ", " : "") << r.recipe_names[i];
  out << "; hold " << name_of(r.hold) << "; seed " << r.seed << "\n";
  Columns columns{!r.policies.empty(), r.policies.empty() ? &r.recipe_names : &r.policies};
  for (const auto& n : *columns.names) columns.width = std::max(columns.width, n.size() + 2);
  const std::size_t w = columns.width;

  if (columns.policies) {
    out << "\nPer policy (a policy is one recipe map; the first rule matching a layer and step decides its recipe;\n"
           "bf16: not quantized, rounded RNE to BF16, GEMM in float64). SQNR = -10 log10 of the mean rel_mse over\n"
           "the policy's tensor entries, an exact BF16 tensor counting 0; BF16 = tensor entries kept in BF16\n";
  } else {
    out << "\nPer recipe (mean over tensor entries; SQNR in dB, higher is better)\n";
  }
  out << "  " << pad(columns.policies ? "policy" : "recipe", w);
  if (columns.policies) out << pad("BF16", 9, true);
  out << pad(columns.policies ? "SQNR" : "SQNR mean", 10, true) << pad("min", 8, true) << pad("underflow", 11, true)
      << pad("saturated", 11, true) << pad("scale sat", 11, true) << pad("scale unf", 11, true);
  if (!r.gemms.empty()) out << "   GEMM rel err fprop / dgrad / wgrad";
  out << "\n";
  std::vector<std::string> rounding_notes;  // "recipe N of M" saturated scales, by rounding
  for (const std::string& name : *columns.names) {
    SqnrOf sqnr{columns.policies, {}, {}};
    double min_sqnr = INFINITY;
    std::uint64_t under = 0, nonzero = 0, sat = 0, elements = 0, ssat = 0, sunf = 0, blocks = 0, entries = 0, bf16 = 0;
    std::uint64_t ssat_rounding = 0;
    for (const auto& e : r.tensors) {
      if (columns.of(e) != name) continue;
      ++entries;
      bf16 += e.recipe == "bf16";
      const auto s = e.stats.error.sqnr_db();
      sqnr.add(e);
      if (s.value) min_sqnr = std::min(min_sqnr, *s.value);
      under += e.stats.error.underflow;
      nonzero += e.stats.error.nonzero;
      sat += e.stats.counts.saturated;
      elements += e.stats.error.elements;
      ssat += e.stats.counts.scale_saturated;
      ssat_rounding += e.stats.counts.scale_saturated_rounding;
      sunf += e.stats.counts.scale_underflow;
      blocks += e.stats.blocks.blocks;
    }
    out << "  " << pad(name, w);
    if (columns.policies) out << pad(std::to_string(bf16) + "/" + std::to_string(entries), 9, true);
    out << pad(opt(sqnr.get(), "%.2f"), 10, true)
        << pad(std::isfinite(min_sqnr) ? fmt("%.2f", min_sqnr) : "-", 8, true)
        << pad(nonzero ? fmt("%.3g%%", 100.0 * under / nonzero) : "-", 11, true)
        << pad(elements ? fmt("%.3g%%", 100.0 * sat / elements) : "-", 11, true)
        << pad(blocks ? fmt("%.3g%%", 100.0 * ssat / blocks) : "-", 11, true)
        << pad(blocks ? fmt("%.3g%%", 100.0 * sunf / blocks) : "-", 11, true);
    if (!r.gemms.empty()) {
      out << "   ";
      for (const auto& [gemm_name, g, description] : names(Gemm{})) {
        Mean m;
        for (const auto& e : r.gemms) {
          if (columns.of(e) == name && e.gemm == g) m.add(e.rel_fro_err);
        }
        out << (g == Gemm::fprop ? "" : " / ") << opt(m.get(), "%.4f");
      }
    }
    out << "\n";
    if (ssat_rounding) {
      rounding_notes.push_back(name + " " + std::to_string(ssat_rounding) + " of " + std::to_string(ssat));
    }
  }
  out << "  underflow: nonzero inputs flushed to 0; saturated: elements scaled above the element max (% of elements;\n"
         "  clipped, or flushed where the block's scale underflowed to 0); scale sat / scale unf: blocks whose ideal\n"
         "  scale exceeded the scale format's max / was nonzero and rounded to 0 (% of blocks); GEMM rel err:\n"
         "  ||C^ - C||F / ||C||F against the float64 product\n";
  if (!rounding_notes.empty()) {
    out << "  scale sat by FP32 rounding alone (ideal scale within 2^-22 above the max, not clipping), blocks: ";
    for (std::size_t i = 0; i < rounding_notes.size(); ++i) out << (i ? "; " : "") << rounding_notes[i];
    out << "\n";
  }

  // Best recipe (policy) per tensor role.
  out << (columns.policies ? "\nBest policy per tensor role (SQNR dB as above)\n" : "\nBest recipe per tensor role (mean SQNR dB)\n");
  out << "  " << pad("role", 18);
  for (const auto& n : *columns.names) out << pad(n, w, true);
  out << "   best\n";
  for (const Role role : {Role::activation, Role::weight, Role::grad_output}) {
    const char* tensor = role == Role::activation ? " (x)" : role == Role::weight ? " (w)" : " (dy)";
    out << "  " << pad(std::string(name_of(role)) + tensor, 18);
    std::vector<std::optional<double>> means;
    std::optional<double> best;
    for (const auto& n : *columns.names) {
      SqnrOf m{columns.policies, {}, {}};
      for (const auto& e : r.tensors) {
        if (columns.of(e) == n && e.role == role) m.add(e);
      }
      means.push_back(m.get());
      out << pad(opt(m.get(), "%.2f"), w, true);
      if (m.get() && (!best || *m.get() > *best)) best = m.get();
    }
    // Recipes within 0.05 dB of the best are a tie.
    std::string best_names;
    for (std::size_t i = 0; i < means.size(); ++i) {
      if (best && means[i] && *means[i] >= *best - 0.05) {
        best_names += (best_names.empty() ? "" : " = ") + (*columns.names)[i];
      }
    }
    out << "   " << (best_names.empty() ? "-" : best_names) << "\n";
  }
  out << "  best: the highest; several names when they lie within 0.05 dB of it (a tie)\n";

  // Worst layers.
  out << (columns.policies ? "\nWorst tensors per policy (lowest SQNR dB)\n" : "\nWorst tensors per recipe (lowest SQNR dB)\n");
  for (const auto& n : *columns.names) {
    std::vector<const TensorEntry*> v;
    for (const auto& e : r.tensors) {
      if (columns.of(e) == n && e.stats.error.sqnr_db().value) v.push_back(&e);
    }
    std::sort(v.begin(), v.end(), [](auto* a, auto* b) {
      return *a->stats.error.sqnr_db().value < *b->stats.error.sqnr_db().value;
    });
    out << "  " << n << ":\n";
    for (std::size_t i = 0; i < std::min<std::size_t>(3, v.size()); ++i) {
      const auto& e = *v[i];
      out << "    " << pad(fmt("%.2f dB", *e.stats.error.sqnr_db().value), 10, true) << "  step " << e.step << "  "
          << e.layer << " " << e.tensor << (columns.policies ? " " + e.recipe : "") << "  (underflow "
          << opt(e.stats.error.underflow_fraction().value, "%.3g") << ", block SQNR p01 "
          << opt(e.stats.blocks.block_sqnr_db_quantile(0.01).value, "%.0f") << " dB)\n";
    }
  }
  out << "  underflow: share of the nonzero inputs flushed to 0; block SQNR p01: the 1st percentile of the\n"
         "  per-block SQNR (1 dB bins)\n";

  // Proposition 1.
  if (!r.headroom.empty()) {
    const auto& h0 = r.headroom.front();
    out << "\nPeriodic scaling, Proposition 1 (D = " << h0.period << ", T = " << fmt("%g", h0.target) << ", hold "
        << name_of(r.hold) << "; rho = current amax / held amax)\n";
    std::size_t exact = 0;
    const HeadroomEntry* worst = nullptr;
    for (const auto& h : r.headroom) {
      if (h.hold.held_exact.value_or(false)) ++exact;
      if (h.hold.rho.value && (!worst || *h.hold.rho.value > *worst->hold.rho.value)) worst = &h;
    }
    out << "  held amax exact (refresh step captured) for " << exact << " of " << r.headroom.size() << " tensors";
    if (exact < r.headroom.size() && r.hold == HoldRule::window) {
      out << "; others use their own amax (rho = 1): try {hold} previous to stress staleness";
    }
    out << "\n";
    const bool rho_one = std::all_of(r.headroom.begin(), r.headroom.end(),
                                     [](const HeadroomEntry& h) { return h.hold.rho.value == 1.0; });
    if (worst && rho_one) {
      out << "  rho = 1 for every tensor: each holds the amax of its own step, so no scale is stale here\n";
    } else if (worst) {
      out << "  largest rho " << fmt("%.3g", *worst->hold.rho.value) << " at step " << worst->step << " "
          << worst->layer << " " << worst->tensor << " (held from step " << worst->hold.held_from_step.value_or(0)
          << ")\n";
    }
    out << "  " << pad("scale format", 14) << pad("U/T", 8, true) << pad("tensors sat.", 14, true)
        << pad("blocks saturated", 18, true) << pad("by rounding", 15, true) << pad("blocks underflow", 18, true)
        << "\n";
    for (std::size_t f = 0; f < h0.formats.size(); ++f) {
      std::uint64_t blocks = 0, sat = 0, sat_rounding = 0, unf = 0, tensors = 0;
      for (const auto& h : r.headroom) {
        blocks += h.formats[f].blocks;
        sat += h.formats[f].saturated;
        sat_rounding += h.formats[f].saturated_rounding;
        unf += h.formats[f].underflow;
        tensors += h.formats[f].saturated > 0;
      }
      out << "  " << pad(h0.formats[f].scale_name, 14) << pad(fmt("%.3g", h0.formats[f].max_scale / h0.target), 8, true)
          << pad(std::to_string(tensors) + "/" + std::to_string(r.headroom.size()), 14, true)
          << pad(std::to_string(sat) + fmt(" (%.2g%%)", blocks ? 100.0 * sat / blocks : 0.0), 18, true)
          << pad(std::to_string(sat_rounding), 15, true)
          << pad(std::to_string(unf) + fmt(" (%.2g%%)", blocks ? 100.0 * unf / blocks : 0.0), 18, true) << "\n";
    }
    out << "  U = the scale format's largest scale: no block saturates while rho <= U/T (Proposition 1); "
           "tensors sat.:\n"
           "  tensors with a saturated block; by rounding: ideal scale within 2^-22 above U (FP32 rounding, not "
           "clipping);\n"
           "  blocks underflow: nonzero ideal scale rounded to 0 (% of all blocks of all tensors)\n";
  }
  out << "\n"
      << fmt("%.2f", r.tensor_bytes / 1e6) << " MB of float32 tensor data per recipe in " << fmt("%.2f", r.seconds)
      << " s";
  if (r.shares > 1) out << " on " << r.shares << " processes";
  if (!r.gemms.empty()) {
    out << "; GEMM datapaths:";
    for (const auto& name : r.recipe_names) {
      for (const auto& g : r.gemms) {
        if (g.recipe == name) {
          out << " " << name << "=" << g.datapath;
          break;
        }
      }
    }
  }
  out << "\n";
  return out.str();
}

}  // namespace fp4sim::replay
